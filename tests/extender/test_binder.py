"""KubeBinder against a small local HTTP server standing in for the API server: the real
kubernetes client and its connection pool, so that what reaches the wire is checked."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson
import pytest

from berth.core.model import PodInfo
from berth.extender.binder import KubeBinder


class _ApiServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.connections = 0
        self.requests: list[tuple[str, str, dict[str, Any]]] = []


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the API server
    server: _ApiServer

    def setup(self) -> None:
        super().setup()
        self.server.connections += 1

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _reply(self, status: int, body: dict[str, Any]) -> None:
        data = orjson.dumps(body)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        body = orjson.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append(("POST", self.path, body))
        self._reply(201, {"kind": "Status", "apiVersion": "v1", "status": "Success"})

    def do_GET(self) -> None:
        self.server.requests.append(("GET", self.path, {}))
        self._reply(200, {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "web-0", "namespace": "shop"}})


@pytest.fixture
def api_server() -> Iterator[_ApiServer]:
    server = _ApiServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _binder(server: _ApiServer) -> KubeBinder:
    from kubernetes import client

    config = client.Configuration()
    config.host = f"http://127.0.0.1:{server.server_address[1]}"
    return KubeBinder(client.ApiClient(config), record_events=True)


def test_binds_events_and_reads_reuse_one_kept_alive_connection(api_server: _ApiServer) -> None:
    """Every reply is read to its end and its connection handed back to the pool: a reply left
    unread would make each call open (and, against a real API server, TLS-handshake) a new one."""
    binder = _binder(api_server)

    async def run() -> None:
        for i in range(20):
            pod = PodInfo(uid=f"u{i}", name=f"web-{i}", namespace="shop")
            await binder.bind(pod, "node-a", {"berth.dev/decision": "{}"})
            await binder.record_event(pod, "node-a", "placed by berth")
        assert await binder.fetch_pod("shop", "web-0") is not None

    asyncio.run(run())
    posts = [path for method, path, _ in api_server.requests if method == "POST"]
    assert len(posts) == 40  # a Binding and an Event per pod
    assert posts[0] == "/api/v1/namespaces/shop/pods/web-0/binding"
    assert posts[1] == "/api/v1/namespaces/shop/events"
    assert api_server.requests[0][2]["target"] == {"apiVersion": "v1", "kind": "Node", "name": "node-a"}
    # asyncio.to_thread may use a few pool threads; each keeps its connection, none is opened per call.
    assert api_server.connections <= 4, api_server.connections


def test_a_refusal_is_a_warning_event_named_berth_refused(api_server: _ApiServer) -> None:
    binder = _binder(api_server)
    pod = PodInfo(uid="u1", name="web-1", namespace="shop")
    asyncio.run(binder.record_refused(pod, "berth found no node for the pod: a: insufficient capacity: cpu"))
    [(method, path, event)] = api_server.requests
    assert (method, path) == ("POST", "/api/v1/namespaces/shop/events")
    assert (event["reason"], event["type"]) == ("BerthRefused", "Warning")
    assert event["involvedObject"]["uid"] == "u1"
    assert event["message"] == "berth found no node for the pod: a: insufficient capacity: cpu"
