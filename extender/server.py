"""``berth extender [--host H] [--port P] [--snapshot FILE]``: run the extender under uvicorn.

One worker (the view lives in the process), one event loop: filter and prioritize are answered
on the loop itself (no thread hop), the API server calls of bind run in worker threads. The
loop is uvloop's and HTTP/1.1 is parsed by httptools (:data:`UVICORN_IO`): uvicorn's pure-Python
h11 and the standard library's loop cost about 0.2 ms more CPU per request, on every one of
kube-scheduler's calls.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import sys
from typing import Any

from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from berth.extender.app import create_app
from berth.extender.binder import KubeBinder, MemoryBinder
from berth.extender.heap import collector_paused, settle
from berth.extender.live_view import KubeSource, LiveView, kube_api_client
from berth.extender.metrics import Metrics
from berth.extender.settings import ExtenderSettings, load_settings
from berth.extender.snapshot_view import load_snapshot
from berth.extender.store import ClusterStore

log = logging.getLogger("berth.extender.server")

DEFAULT_HOST = "0.0.0.0"
DEFAULT_PORT = 8888

UVICORN_IO: dict[str, Any] = {"http": "httptools", "loop": "asyncio" if sys.platform == "win32" else "uvloop"}
"""uvicorn's compiled HTTP parser and event loop (pinned dependencies; uvloop has no Windows
build), named rather than left to ``"auto"``, which would fall back to the slow pure-Python ones
silently when they are missing. The benchmark (bench/bench_extender.py) serves with the same
options."""


def build_app(snapshot: str | None = None, settings: ExtenderSettings | None = None, *,
              settle_heap: bool = True) -> FastAPI:
    """The app against the cluster (in-cluster config or KUBECONFIG), or against a snapshot file.
    ``settle_heap``: freeze the first full view out of the garbage collector's sight (see
    :mod:`berth.extender.heap`; tests that share a process turn it off)."""
    settings = settings or load_settings()
    if snapshot is not None:
        with collector_paused():
            store, eval_clock = load_snapshot(snapshot, decisions_kept=settings.decisions_kept,
                                              track_leases=settings.track_leases)
        if settle_heap:
            settle()
        log.info("serving the snapshot %s: %d nodes, %d pods, %d policies", snapshot, len(store.view.nodes),
                 store.sizes()["pods"], len(store.policies))
        return create_app(store, settings, binder=MemoryBinder(store), eval_clock=eval_clock)
    store = ClusterStore(leases_tracked=settings.track_leases, decisions_kept=settings.decisions_kept)
    metrics = Metrics(store)
    api_client = kube_api_client()
    live = LiveView(store, KubeSource(api_client), metrics=metrics, track_leases=settings.track_leases,
                    watch_timeout_seconds=settings.watch_timeout_seconds,
                    backoff_max_seconds=settings.relist_backoff_max_seconds, settle_heap=settle_heap)
    return create_app(store, settings, binder=KubeBinder(api_client, record_events=settings.record_events),
                      source=live, metrics=metrics)


SCHEDULER_PATHS = frozenset({"/filter", "/prioritize", "/bind", "/preempt"})


def read_only(app: ASGIApp) -> ASGIApp:
    """``app`` without kube-scheduler's verbs: the explain API, health and metrics only."""

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].rstrip("/") in SCHEDULER_PATHS:
            body = b'{"error":"the scheduler verbs are served on the extender port only"}'
            await send({"type": "http.response.start", "status": 404,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        await app(scope, receive, send)

    return wrapped


def tls_options(settings: ExtenderSettings) -> dict[str, Any]:
    """uvicorn's TLS options: a certificate, and client certificates required when a CA is given."""
    if not settings.tls_cert_file:
        return {}
    options: dict[str, Any] = {"ssl_certfile": settings.tls_cert_file, "ssl_keyfile": settings.tls_key_file}
    if settings.tls_client_ca_file:
        options["ssl_ca_certs"] = settings.tls_client_ca_file
        options["ssl_cert_reqs"] = ssl.CERT_REQUIRED
    return options


def serve(host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, snapshot: str | None = None,
          **uvicorn_options: Any) -> None:
    """Serve the extender until interrupted (the ``berth extender`` command).

    With ``BERTH_TLS_CERT_FILE`` / ``BERTH_TLS_KEY_FILE`` it serves HTTPS, and with
    ``BERTH_TLS_CLIENT_CA_FILE`` it accepts only clients with a certificate from that CA
    (kube-scheduler's ``tlsConfig``). ``BERTH_API_PORT`` adds a plain-HTTP listener on the same
    host for the explain API, ``/healthz``, ``/readyz`` and ``/metrics`` (never the verbs)."""
    import uvicorn

    settings = load_settings()
    logging.basicConfig(level=getattr(logging, settings.log_level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app = build_app(snapshot, settings)
    options: dict[str, Any] = {"host": host, "port": port, "access_log": False,
                               "log_level": settings.log_level.lower(), "timeout_keep_alive": 75,
                               **UVICORN_IO, **tls_options(settings)}
    options.update(uvicorn_options)
    main = uvicorn.Server(uvicorn.Config(app, **options))
    servers = [main]
    if settings.api_port is not None and settings.api_port != port:
        api = uvicorn.Config(read_only(app), host=host, port=settings.api_port, access_log=False,
                             log_level=settings.log_level.lower(), lifespan="off", http=main.config.http)
        servers.append(uvicorn.Server(api))

    async def run_all() -> None:
        await asyncio.gather(*(server.serve() for server in servers))

    # Both servers share one loop, made as uvicorn.run would make it for the main server's options
    # (asyncio.run would always make the standard library's loop).
    with asyncio.Runner(loop_factory=main.config.get_loop_factory()) as runner:
        runner.run(run_all())
