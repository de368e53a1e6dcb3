"""The extender served by a real uvicorn on 127.0.0.1 from a snapshot file (offline mode), driven
over HTTP like kube-scheduler drives it, with concurrent binds from many threads."""

from __future__ import annotations

import inspect
import json
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import orjson
import pytest
import uvicorn
from berth.extender.server import build_app, serve

from tests.extender.helpers import args, bind_args, node, pod, policy

WEB = {"app": "web"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    snapshot = {"apiVersion": "v1", "kind": "List", "items": [
        node("a", cpu="4"), node("b", cpu="2"), policy("web", strategy="Spread"),
        pod("web-0", labels=WEB, cpu="1", node_name="b")]}
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps(snapshot))
    app = build_app(str(path))
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not srv.started and time.monotonic() < deadline:
        time.sleep(0.01)
    assert srv.started
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(5)


def test_scheduler_round_trip_over_http(server: str) -> None:
    with httpx.Client(base_url=server) as client:
        assert client.get("/readyz").status_code == 200
        p = pod("web-1", labels=WEB, cpu="1")
        r = client.post("/filter", content=orjson.dumps(args(p, ["a", "b"])))
        assert r.json()["NodeNames"] == ["a", "b"]
        scores = {h["Host"]: h["Score"] for h in client.post("/prioritize", content=orjson.dumps(
            args(p, ["a", "b"]))).json()}
        assert scores["a"] == 10  # Spread: the least used node
        assert client.post("/bind", content=orjson.dumps(bind_args(p, "a"))).json() == {"Error": ""}
        decision = client.get("/api/v1/decisions/shop/web-1").json()
        assert decision["winner"] == "a" and decision["trigger"] == "bind"
        assert client.post("/filter", content=b"{not json").status_code == 400


def test_concurrent_binds_from_threads_never_overcommit(server: str) -> None:
    pods = [pod(f"web-{i}", labels=WEB, cpu="1") for i in range(1, 25)]
    with httpx.Client(base_url=server) as client:
        for p in pods:  # the scheduler filtered each one earlier (against a stale view)
            client.post("/filter", content=orjson.dumps(args(p, ["a"])))

    def bind(p: dict[str, object]) -> str:
        with httpx.Client(base_url=server) as c:
            error: str = c.post("/bind", content=orjson.dumps(bind_args(p, "a"))).json()["Error"]
            return error

    with ThreadPoolExecutor(max_workers=12) as pool:
        errors = list(pool.map(bind, pods))
    assert errors.count("") == 4  # a has 4 cores
    with httpx.Client(base_url=server) as client:
        allocations = client.get("/api/v1/nodes/allocations").json()
    assert allocations["nodes"]["a"]["requested"]["cpu"] == 4000


def test_serve_is_the_cli_entry_point() -> None:
    params = inspect.signature(serve).parameters
    assert list(params)[:3] == ["host", "port", "snapshot"]
