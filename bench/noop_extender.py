"""A kube-scheduler extender that decides nothing: the floor any extender pays on berth's stack.

``filter`` passes every node it is sent, ``prioritize`` scores every node 0, and there is no
``bind`` verb (kube-scheduler binds). It runs on what berth's extender runs on (uvicorn with
httptools and uvloop, orjson), as a bare ASGI app: what is left is the two HTTP round trips a pod
costs kube-scheduler, and the JSON of the node names sent both ways (``nodeCacheCapable: true``).

    python bench/noop_extender.py --port 8900          # listens on 127.0.0.1 only

:func:`noop_scheduler_config` is the KubeSchedulerConfiguration that calls it the way berth's
README configures berth (weight 30, ``nodeCacheCapable: true``, ``percentageOfNodesToScore: 100``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import uvicorn

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


async def _body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


def reply(path: str, body: bytes) -> tuple[int, bytes]:
    """(status, JSON body) for one request: the whole extender."""
    if path == "/healthz":
        return 200, b"ok"
    if path not in ("/filter", "/prioritize"):
        return 404, orjson.dumps({"Error": f"no verb {path}"})
    try:
        args = orjson.loads(body)
        names = args.get("NodeNames")
        if names is None:  # nodeCacheCapable: false sends whole Node objects
            names = [n["metadata"]["name"] for n in (args.get("Nodes") or {}).get("items") or ()]
    except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError) as exc:
        return 400, orjson.dumps({"Error": f"bad extender arguments: {exc}"})
    if path == "/filter":
        return 200, orjson.dumps({"NodeNames": names, "FailedNodes": {}, "FailedAndUnresolvableNodes": {},
                                  "Error": ""})
    return 200, orjson.dumps([{"Host": n, "Score": 0} for n in names])


async def app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    status, out = reply(scope["path"], await _body(receive))
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(out)).encode())]})
    await send({"type": "http.response.body", "body": out})


def noop_scheduler_config(url: str, scheduler_name: str) -> dict[str, Any]:
    """berth's recommended configuration's shape, pointed at the no-op extender, without bind."""
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "percentageOfNodesToScore": 100,
        "extenders": [{"urlPrefix": url, "filterVerb": "filter", "prioritizeVerb": "prioritize", "weight": 30,
                       "enableHTTPS": False, "nodeCacheCapable": True, "ignorable": False, "httpTimeout": "5s"}],
        "profiles": [{"schedulerName": scheduler_name}],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    loop = "asyncio" if sys.platform == "win32" else "uvloop"
    uvicorn.run(app, host="127.0.0.1", port=args.port, http="httptools", loop=loop, log_level="warning",
                access_log=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
