"""``berth extender [--host H] [--port P] [--snapshot FILE]``: run the extender under uvicorn.

One worker (the view lives in the process), one event loop: filter and prioritize are answered
on the loop itself (no thread hop), and so are the API server calls of bind (an asyncio client,
:mod:`berth.extender.kube_http`). The loop is uvloop's and HTTP/1.1 is parsed by httptools
(:data:`UVICORN_IO`): uvicorn's pure-Python h11 and the standard library's loop cost about 0.2 ms
more CPU per request, on every one of kube-scheduler's calls.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import ssl
import sys
from collections.abc import Mapping
from typing import Any

import orjson
from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from berth.extender.app import create_app
from berth.extender.authz import KubeReviewer
from berth.extender.binder import KubeBinder, MemoryBinder
from berth.extender.heap import collector_paused, settle
from berth.extender.leader import nominator_elector
from berth.extender.limits import ApiGate, bounded_bodies, gated, guarded_protocol
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
    store = ClusterStore(leases_tracked=settings.track_leases, decisions_kept=settings.decisions_kept,
                         drain_hold_seconds=settings.drain_hold_seconds)
    metrics = Metrics(store)
    api_client = kube_api_client()
    live = LiveView(store, KubeSource(api_client), metrics=metrics, track_leases=settings.track_leases,
                    watch_timeout_seconds=settings.watch_timeout_seconds,
                    backoff_max_seconds=settings.relist_backoff_max_seconds, settle_heap=settle_heap)
    binder = KubeBinder(api_client, record_events=settings.record_events, warm=settings.bind_connections_warm,
                        queue_seconds=settings.bind_queue_seconds)
    return create_app(store, settings, binder=binder,
                      source=live, metrics=metrics, reviewer=KubeReviewer(api_client),
                      elector=nominator_elector(settings, api_client.configuration))


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


def extender_port_app(app: ASGIApp, settings: ExtenderSettings) -> ASGIApp:
    """What the extender port serves: everything, bodies bounded for kube-scheduler's largest."""
    return bounded_bodies(app, max_bytes=settings.max_body_bytes, timeout=settings.body_timeout_seconds)


def api_port_app(app: ASGIApp, settings: ExtenderSettings) -> ASGIApp:
    """What the API port serves: no verbs, small bodies read whole before an API slot is taken,
    a few requests judged at once (:mod:`berth.extender.limits`)."""
    gate = ApiGate(settings.api_max_concurrency, settings.api_max_queue, settings.api_loop_share)
    return bounded_bodies(gated(read_only(app), gate), max_bytes=settings.api_max_body_bytes,
                          timeout=settings.body_timeout_seconds)


class ServingRefused(ValueError):
    """The extender would serve the scheduler verbs to callers other than kube-scheduler."""


DEV_FLAG = "--dev-insecure"
"""``berth extender``'s development flag: the verbs in plain HTTP, without client certificates, on a
loopback address only."""


def client_names(settings: ExtenderSettings) -> frozenset[str]:
    return frozenset(name.strip() for name in settings.tls_client_names.split(",") if name.strip())


def tls_options(settings: ExtenderSettings, *, dev_insecure: bool = False, host: str = DEFAULT_HOST
                ) -> dict[str, Any]:
    """uvicorn's TLS options: a certificate, and client certificates from the client CA required.

    The scheduler verbs (``bind`` creates Bindings with berth's rights) are served only over HTTPS
    with client certificates, unless ``dev_insecure`` (``--dev-insecure``), which is allowed on a
    loopback address only. A setting given but empty is refused rather than read as "off"."""
    for name, value in (("BERTH_TLS_CERT_FILE", settings.tls_cert_file), ("BERTH_TLS_KEY_FILE", settings.tls_key_file),
                        ("BERTH_TLS_CLIENT_CA_FILE", settings.tls_client_ca_file)):
        if value is not None and not value.strip():
            raise ServingRefused(f"{name} is set but empty: name the file, or unset it")
    if dev_insecure:
        if not _loopback(host):
            raise ServingRefused(f"{DEV_FLAG} serves the scheduler verbs without TLS or client certificates and "
                                 f"listens only on a loopback address (127.0.0.1, ::1, localhost), not {host}")
        if settings.tls_cert_file or settings.tls_client_ca_file:
            raise ServingRefused(f"{DEV_FLAG} and BERTH_TLS_* settings together: use one or the other")
        return {}
    missing = [name for name, value in (("BERTH_TLS_CERT_FILE", settings.tls_cert_file),
                                        ("BERTH_TLS_KEY_FILE", settings.tls_key_file),
                                        ("BERTH_TLS_CLIENT_CA_FILE", settings.tls_client_ca_file)) if not value]
    if missing:
        raise ServingRefused(f"the scheduler verbs (bind creates Bindings with berth's rights) are served only "
                             f"over HTTPS to kube-scheduler's client certificate: set {', '.join(missing)} "
                             f"(or pass {DEV_FLAG} for local development, loopback only)")
    if not client_names(settings):
        raise ServingRefused("BERTH_TLS_CLIENT_NAMES names no client: set kube-scheduler's client certificate name")
    return {"ssl_certfile": settings.tls_cert_file, "ssl_keyfile": settings.tls_key_file,
            "ssl_ca_certs": settings.tls_client_ca_file, "ssl_cert_reqs": ssl.CERT_REQUIRED}


async def reload_certificates(config: Any, settings: ExtenderSettings) -> None:
    """Load the certificate, key and client CA again when their files change (a renewed Secret
    reaches a mounted volume within about a minute): new connections get them, open ones keep
    theirs, and no restart is needed. A failed load keeps the certificates in use and is logged."""
    files = [path for path in (settings.tls_cert_file, settings.tls_key_file, settings.tls_client_ca_file) if path]
    seen = _modified(files)
    while True:
        await asyncio.sleep(settings.tls_reload_seconds)
        current = _modified(files)
        context = getattr(config, "ssl", None)
        if current == seen or context is None:
            continue
        try:
            context.load_cert_chain(settings.tls_cert_file, settings.tls_key_file)
            context.load_verify_locations(settings.tls_client_ca_file)
        except (OSError, ssl.SSLError) as exc:
            log.warning("cannot load the renewed TLS files yet (keeping the ones in use): %s", exc)
            continue
        seen = current
        log.info("loaded the renewed TLS certificate, key and client CA")


def _modified(files: list[str]) -> tuple[float, ...]:
    times = []
    for path in files:
        try:
            times.append(os.stat(path).st_mtime)
        except OSError:
            times.append(-1.0)
    return tuple(times)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def certificate_names(peercert: Mapping[str, Any] | None) -> frozenset[str]:
    """The names a client certificate (``ssl.SSLSocket.getpeercert()``) carries: its subject's
    common names and its DNS subject alternative names."""
    if not peercert:
        return frozenset()
    names = {value for rdn in peercert.get("subject", ()) for key, value in rdn if key == "commonName"}
    names.update(value for kind, value in peercert.get("subjectAltName", ()) if kind == "DNS")
    return frozenset(names)


def client_identity_protocol(base: type[Any], allowed: frozenset[str]) -> type[Any]:
    """uvicorn's HTTP protocol ``base`` admitting only clients whose certificate names one of
    ``allowed``: the client CA's other certificates (the operator's webhook serving certificate,
    any leaf of a shared CA) get 403 on every request of their connection, before any handler."""

    class ClientIdentityProtocol(base):  # type: ignore[misc]
        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(transport)
            names = certificate_names(transport.get_extra_info("peercert"))
            if not names & allowed:
                shown = ", ".join(sorted(names)) or "no name"
                log.warning("refused a client certificate naming %s (allowed: %s)", shown, ", ".join(sorted(allowed)))
                self.app = _forbidden(f"the client certificate ({shown}) is not one the extender serves "
                                      f"(BERTH_TLS_CLIENT_NAMES: {', '.join(sorted(allowed))})")

    return ClientIdentityProtocol


def _forbidden(message: str) -> ASGIApp:
    body = orjson.dumps({"Error": message})

    async def forbidden(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 403,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    return forbidden


def serve(host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, snapshot: str | None = None, *,
          dev_insecure: bool = False, **uvicorn_options: Any) -> None:
    """Serve the extender until interrupted (the ``berth extender`` command).

    With ``BERTH_TLS_CERT_FILE`` / ``BERTH_TLS_KEY_FILE`` it serves HTTPS, and with
    ``BERTH_TLS_CLIENT_CA_FILE`` it accepts only clients with a certificate from that CA
    (kube-scheduler's ``tlsConfig``) whose certificate names one of ``BERTH_TLS_CLIENT_NAMES``.
    Without them it refuses to start, unless ``dev_insecure`` (loopback only; see
    :func:`tls_options`). ``BERTH_API_PORT`` adds a plain-HTTP listener on the same host for the
    explain API, ``/healthz``, ``/readyz`` and ``/metrics`` (never the verbs)."""
    import uvicorn

    settings = load_settings()
    logging.basicConfig(level=getattr(logging, settings.log_level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    tls = tls_options(settings, dev_insecure=dev_insecure, host=host)  # refused before anything starts
    app = build_app(snapshot, settings)
    options: dict[str, Any] = {"host": host, "port": port, "access_log": False,
                               "log_level": settings.log_level.lower(),
                               "timeout_keep_alive": settings.keep_alive_seconds, **UVICORN_IO, **tls,
                               "http": guarded_protocol(header_timeout=settings.header_timeout_seconds,
                                                        max_header_bytes=settings.max_header_bytes)}
    if tls:
        options["http"] = client_identity_protocol(options["http"], client_names(settings))
    options.update(uvicorn_options)
    main = uvicorn.Server(uvicorn.Config(extender_port_app(app, settings), **options))
    servers = [main]
    if settings.api_port is not None and settings.api_port != port:
        api = uvicorn.Config(api_port_app(app, settings), host=host, port=settings.api_port, access_log=False,
                             log_level=settings.log_level.lower(), lifespan="off",
                             timeout_keep_alive=settings.keep_alive_seconds,
                             http=guarded_protocol(header_timeout=settings.header_timeout_seconds,
                                                   max_header_bytes=settings.max_header_bytes,
                                                   max_connections=settings.api_max_connections))
        servers.append(uvicorn.Server(api))

    async def run_all() -> None:
        reloading = asyncio.create_task(reload_certificates(main.config, settings)) if tls else None
        try:
            await asyncio.gather(*(server.serve() for server in servers))
        finally:
            if reloading is not None:
                reloading.cancel()

    # Both servers share one loop, made as uvicorn.run would make it for the main server's options
    # (asyncio.run would always make the standard library's loop).
    with asyncio.Runner(loop_factory=main.config.get_loop_factory()) as runner:
        runner.run(run_all())
