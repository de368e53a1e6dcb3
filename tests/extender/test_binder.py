"""KubeBinder and its asyncio client (berth.extender.kube_http) against a small local HTTP server
standing in for the API server: what reaches the wire, the connection pool, the credentials asked
of the kubernetes client's configuration on every request, and the API server's refusals worded
as kube-scheduler shows them."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson
import pytest

from berth.core.model import PodInfo
from berth.extender.app import create_app
from berth.extender.binder import BindError, BindingNotSent, KubeBinder
from berth.extender.kube_http import CALL_TIMINGS, ApiSession, ApiUnreachable, proxy_of
from berth.extender.settings import ExtenderSettings
from tests.builders import make_node, make_pod, make_policy
from tests.extender.helpers import Clock, bind_args, make_store

Reply = tuple[int, dict[str, Any] | bytes]


class _ApiServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.connections = 0
        self.requests: list[tuple[str, str, dict[str, Any]]] = []
        self.authorizations: list[str | None] = []
        self.replies: dict[tuple[str, str], Reply] = {}  # (method, path) -> (status, body)
        self.delay = 0.0
        self.in_flight = 0
        self.peak = 0
        self.guard = threading.Lock()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that stopped waiting (the timeout test) leaves a broken pipe: not an error here."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the API server
    server: _ApiServer

    def setup(self) -> None:
        super().setup()
        with self.server.guard:
            self.server.connections += 1

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _answer(self, method: str, default: Reply) -> None:
        server = self.server
        length = int(self.headers.get("Content-Length") or 0)
        body = orjson.loads(self.rfile.read(length)) if length else {}
        with server.guard:
            server.requests.append((method, self.path, body))
            server.authorizations.append(self.headers.get("Authorization"))
            server.in_flight += 1
            server.peak = max(server.peak, server.in_flight)
        try:
            if server.delay:
                time.sleep(server.delay)
            status, reply = server.replies.get((method, self.path), default)
            data = reply if isinstance(reply, bytes) else orjson.dumps(reply)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        finally:
            with server.guard:
                server.in_flight -= 1

    def do_POST(self) -> None:
        self._answer("POST", (201, {"kind": "Status", "apiVersion": "v1", "status": "Success"}))

    def do_GET(self) -> None:
        self._answer("GET", (200, {"kind": "Pod", "apiVersion": "v1",
                                   "metadata": {"name": "web-0", "namespace": "shop", "uid": "u0"}}))


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


def _configuration(url: str, token: str | None = None) -> Any:
    from kubernetes import client

    config = client.Configuration()
    config.host = url
    if token is not None:
        config.api_key["BearerToken"] = token
    return config


def _binder(server: _ApiServer, token: str | None = None) -> KubeBinder:
    from kubernetes import client

    return KubeBinder(client.ApiClient(_configuration(server.url, token)), record_events=True)


def _run(binder: KubeBinder, calls: Callable[[], Any]) -> Any:
    """``calls()`` awaited on a new event loop, the binder's connections closed after."""
    async def run() -> Any:
        try:
            return await calls()
        finally:
            await binder.close()

    return asyncio.run(run())


POD = PodInfo(uid="u0", name="web-0", namespace="shop")
STATUS_CONFLICT = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Conflict", "code": 409,
                   "message": 'Operation cannot be fulfilled on pods/binding "web-0": pod web-0 is already '
                              'assigned to node "b"'}


def test_bindings_reuse_one_kept_alive_connection_and_events_and_reads_another(api_server: _ApiServer) -> None:
    """Every call in turn goes over the one connection its pool's first call opened (the Bindings
    have a pool of their own): no connection (and, against a real API server, no TLS handshake)
    per call."""
    binder = _binder(api_server)

    async def calls() -> None:
        for i in range(20):
            pod = PodInfo(uid=f"u{i}", name=f"web-{i}", namespace="shop")
            await binder.bind(pod, "node-a", {"berth.dev/decision": "{}"})
            await binder.record_event(pod, "node-a", "placed by berth")
        assert await binder.fetch_pod("shop", "web-0") is not None

    _run(binder, calls)
    posts = [path for method, path, _ in api_server.requests if method == "POST"]
    assert len(posts) == 40  # a Binding and an Event per pod
    assert posts[0] == "/api/v1/namespaces/shop/pods/web-0/binding"
    assert posts[1] == "/api/v1/namespaces/shop/events"
    assert api_server.connections == 2


def test_a_binding_never_waits_for_a_connection_the_other_calls_hold(api_server: _ApiServer) -> None:
    """Nominations, Events and reads may fill their pool while the API server is slow: a Binding
    goes out at once on its own, so that kube-scheduler's bind waits for the API server alone."""
    binder = _binder(api_server)
    binder.api = ApiSession(binder.api.configuration, connections=1)
    api_server.delay = 0.3
    done: list[str] = []

    async def event(i: int) -> None:
        await binder.record_event(PodInfo(uid=f"u{i}", name=f"web-{i}", namespace="shop"), "node-a", "placed")
        done.append("event")

    async def bind() -> None:
        await asyncio.sleep(0.05)  # the Events hold the one connection of their pool, and wait for it
        await binder.bind(POD, "node-a", {})
        done.append("binding")

    async def calls() -> None:
        try:
            await asyncio.gather(*(event(i) for i in range(3)), bind())
        finally:
            await binder.api.close()

    _run(binder, calls)
    # one Event at a time (0.3 s each); the Binding beside them, not after the three
    assert done.index("binding") <= 1 and done.count("event") == 3


def test_the_binding_carries_the_pods_uid_the_annotations_and_the_node(api_server: _ApiServer) -> None:
    binder = _binder(api_server)
    _run(binder, lambda: binder.bind(POD, "node-a", {"berth.dev/decision": '{"v":1}', "berth.dev/round": "r1"}))
    [(method, path, body)] = api_server.requests
    assert (method, path) == ("POST", "/api/v1/namespaces/shop/pods/web-0/binding")
    assert body == {"apiVersion": "v1", "kind": "Binding",
                    "metadata": {"name": "web-0", "namespace": "shop", "uid": "u0",
                                 "annotations": {"berth.dev/decision": '{"v":1}', "berth.dev/round": "r1"}},
                    "target": {"apiVersion": "v1", "kind": "Node", "name": "node-a"}}


def test_a_refusal_is_a_warning_event_named_berth_refused(api_server: _ApiServer) -> None:
    binder = _binder(api_server)
    pod = PodInfo(uid="u1", name="web-1", namespace="shop")
    _run(binder, lambda: binder.record_refused(pod, "berth found no node for the pod: a: insufficient capacity: cpu"))
    [(method, path, event)] = api_server.requests
    assert (method, path) == ("POST", "/api/v1/namespaces/shop/events")
    assert (event["reason"], event["type"]) == ("BerthRefused", "Warning")
    assert event["involvedObject"]["uid"] == "u1"
    assert event["message"] == "berth found no node for the pod: a: insufficient capacity: cpu"


@pytest.mark.parametrize(("status", "reply", "error"), [
    (409, STATUS_CONFLICT, 'cannot bind pod shop/web-0 to node-a: Conflict: Operation cannot be fulfilled on '
                           'pods/binding "web-0": pod web-0 is already assigned to node "b"'),
    (404, {"kind": "Status", "reason": "NotFound", "code": 404, "message": 'pods "web-0" not found'},
     'cannot bind pod shop/web-0 to node-a: NotFound: pods "web-0" not found'),
    (500, b"upstream broke", "cannot bind pod shop/web-0 to node-a: 500 Internal Server Error"),
], ids=["conflict", "not_found", "no_status_body"])
def test_a_refused_binding_is_a_bind_error_with_the_api_servers_reason(
        api_server: _ApiServer, status: int, reply: dict[str, Any] | bytes, error: str) -> None:
    api_server.replies[("POST", "/api/v1/namespaces/shop/pods/web-0/binding")] = (status, reply)
    binder = _binder(api_server)
    with pytest.raises(BindError) as raised:
        _run(binder, lambda: binder.bind(POD, "node-a", {}))
    assert str(raised.value) == error


def test_reads_answer_none_for_a_missing_object_and_name_the_reason_otherwise(api_server: _ApiServer) -> None:
    api_server.replies[("GET", "/api/v1/namespaces/shop/pods/gone")] = (404, {"reason": "NotFound", "message": "x"})
    api_server.replies[("GET", "/apis/berth.dev/v1alpha1/nodedrains/gone")] = (404, {"reason": "NotFound"})
    api_server.replies[("GET", "/api/v1/namespaces/shop/pods/secret")] = (
        403, {"reason": "Forbidden", "message": 'pods "secret" is forbidden'})
    binder = _binder(api_server)

    async def calls() -> tuple[Any, Any, str]:
        missing_pod = await binder.fetch_pod("shop", "gone")
        missing_drain = await binder.fetch_drain("gone")
        try:
            await binder.fetch_pod("shop", "secret")
        except BindError as exc:
            return missing_pod, missing_drain, str(exc)
        raise AssertionError("a forbidden read must fail")

    assert _run(binder, calls) == (None, None, 'cannot read pod shop/secret: Forbidden: pods "secret" is forbidden')


def test_a_failed_event_write_is_logged_and_does_not_raise(api_server: _ApiServer,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    api_server.replies[("POST", "/api/v1/namespaces/shop/events")] = (
        403, {"reason": "Forbidden", "message": "events is forbidden"})
    binder = _binder(api_server)
    _run(binder, lambda: binder.record_event(POD, "node-a", "placed"))
    assert "cannot record an Event on pod shop/web-0: Forbidden: events is forbidden" in caplog.text


def test_the_bearer_token_is_asked_of_the_configuration_on_every_request(api_server: _ApiServer) -> None:
    """A rotated token (the in-cluster loader's refresh hook reads the token file again) is used from
    the next request on, without a new client."""
    from kubernetes import client

    config = _configuration(api_server.url, "bearer first")
    tokens = iter(["bearer first", "bearer second"])
    config.refresh_api_key_hook = lambda c: c.api_key.__setitem__("BearerToken", next(tokens))
    binder = KubeBinder(client.ApiClient(config))

    async def calls() -> None:
        await binder.bind(POD, "a", {})
        await binder.bind(POD, "a", {})

    _run(binder, calls)
    assert api_server.authorizations == ["bearer first", "bearer second"]


def test_concurrent_calls_share_a_bounded_pool(api_server: _ApiServer) -> None:
    """Binds arrive together (kube-scheduler binds in parallel): they run concurrently, over at
    most the pool's connections, kept for the next calls."""
    api_server.delay = 0.05
    api = ApiSession(_configuration(api_server.url), connections=4)

    async def calls() -> None:
        try:
            for _ in range(2):
                await asyncio.gather(*(api.request("POST", "/api/v1/namespaces/shop/events", {"n": i})
                                       for i in range(12)))
        finally:
            await api.close()

    asyncio.run(calls())
    assert len(api_server.requests) == 24
    assert api_server.peak == 4  # concurrent, up to the pool's size
    assert api_server.connections == 4  # opened once, reused by the second round


def test_a_calls_waits_for_a_connection_are_noted_where_its_caller_asked(api_server: _ApiServer) -> None:
    """The bind tells its own time from the API server's: a call notes how long it waited for a
    free connection of the pool, how long opening one took and how long its answer took (the
    server's 0.1 s), in the caller's dict, and nothing when the caller set none."""
    api_server.delay = 0.1
    api = ApiSession(_configuration(api_server.url), connections=1)

    async def calls() -> tuple[dict[str, float], dict[str, float]]:
        first: dict[str, float] = {}
        second: dict[str, float] = {}

        async def noted(waits: dict[str, float] | None) -> None:
            CALL_TIMINGS.set(waits)  # a task's own context: the caller's setting
            await api.request("POST", "/api/v1/namespaces/shop/events", {})

        try:
            await noted(first)  # the first call opens the connection
            await asyncio.gather(noted(None), noted(second))  # one connection: the second waits for it
        finally:
            await api.close()
        return first, second

    first, second = asyncio.run(calls())
    assert set(first) == {"connect", "answer"} and first["connect"] > 0 and first["answer"] >= 0.09
    assert set(second) == {"connection_wait", "answer"} and second["connection_wait"] >= 0.09
    assert CALL_TIMINGS.get() is None


def test_a_warm_pool_opens_its_connections_ahead_and_a_burst_of_calls_pays_no_connect(
        api_server: _ApiServer) -> None:
    """A burst's calls would each open a connection (TLS included) when they need it, at the API
    server's busiest; warmed, the pool has them open already: none of the burst notes a connect."""
    api_server.delay = 0.05
    api = ApiSession(_configuration(api_server.url), connections=8)

    async def calls() -> tuple[int, list[dict[str, float]]]:
        noted: list[dict[str, float]] = [{} for _ in range(6)]

        async def call(waits: dict[str, float]) -> None:
            CALL_TIMINGS.set(waits)
            await api.request("POST", "/api/v1/namespaces/shop/pods/web-0/binding", {})

        try:
            made = await api.warm(6)
            opened = api_server.connections
            await asyncio.gather(*(call(waits) for waits in noted))
        finally:
            await api.close()
        assert opened == 6
        return made, noted

    made, noted = asyncio.run(calls())
    assert made == 6
    assert [path for method, path, _ in api_server.requests[:6]] == ["/version"] * 6
    assert all("connect" not in waits and waits["answer"] >= 0.04 for waits in noted)
    assert api_server.connections == 6  # the burst went over the warm ones


def test_a_warm_waits_for_an_idle_pool_and_never_goes_beyond_it(api_server: _ApiServer) -> None:
    """A pool in use is kept open by its calls: a warm then makes none (it would only take
    connections from them); on an idle pool it asks no more than the pool holds."""
    api_server.delay = 0.2
    api = ApiSession(_configuration(api_server.url), connections=4)

    async def calls() -> tuple[int, int]:
        try:
            busy = [asyncio.ensure_future(api.request("POST", "/api/v1/namespaces/shop/events", {}))
                    for _ in range(3)]
            await asyncio.sleep(0.05)  # the three hold their connections
            beside = await api.warm(4)
            await asyncio.gather(*busy)
            return beside, await api.warm(10)
        finally:
            await api.close()

    beside, alone = asyncio.run(calls())
    assert beside == 0
    assert alone == 4
    assert api_server.connections == 4
    assert sum(1 for method, path, _ in api_server.requests if (method, path) == ("GET", "/version")) == 4


def test_the_binder_keeps_the_bindings_connections_warm_from_the_apps_start(api_server: _ApiServer) -> None:
    """From the app's start the Bindings' pool holds its warm connections, and uses them again
    every interval (so that keep-alive never closes them), without opening new ones; a bind then
    notes no connect; the shutdown stops it."""
    from fastapi.testclient import TestClient
    from kubernetes import client

    store = make_store([make_node("a").cpu("2").obj()])
    binder = KubeBinder(client.ApiClient(_configuration(api_server.url)), warm=3, warm_interval=0.1)
    app = create_app(store, ExtenderSettings(), binder=binder, clock=Clock())
    p = make_pod("web-1").labels({"app": "other"}).cpu("1").obj()
    store.remember_pod(PodInfo(uid=p["metadata"]["uid"], name="web-1", namespace="shop"))

    def warms() -> int:
        return sum(1 for method, path, _ in list(api_server.requests) if (method, path) == ("GET", "/version"))

    with TestClient(app) as http:
        deadline = time.monotonic() + 5
        while warms() < 6 and time.monotonic() < deadline:  # the start's warm and the next
            time.sleep(0.02)
        assert warms() >= 6
        assert api_server.connections == 3
        assert http.post("/bind", content=orjson.dumps(bind_args(p, "a"))).json()["Error"] == ""
        text = http.get("/metrics").text
    assert 'berth_bind_step_seconds_sum{step="connect"} 0.0' in text
    assert api_server.connections == 3
    stopped = warms()
    time.sleep(0.3)
    assert warms() == stopped


def test_no_answer_is_api_unreachable_naming_the_call(api_server: _ApiServer) -> None:
    api_server.delay = 1.0
    slow = ApiSession(_configuration(api_server.url), timeout=0.2)
    gone = ApiSession(_configuration("http://127.0.0.1:1"))

    async def calls() -> list[str]:
        errors = []
        for api in (slow, gone):
            try:
                await api.request("GET", "/api/v1/namespaces/shop/pods/web-0")
            except ApiUnreachable as exc:
                errors.append(str(exc))
            finally:
                await api.close()
        return errors

    timed_out, refused = asyncio.run(calls())
    assert timed_out == "the API server did not answer GET /api/v1/namespaces/shop/pods/web-0 within 0.2s"
    assert refused.startswith("cannot reach the API server for GET /api/v1/namespaces/shop/pods/web-0: ")


def test_a_binding_that_finds_no_free_connection_in_time_is_never_sent(api_server: _ApiServer) -> None:
    """kube-scheduler stops waiting for a bind after its httpTimeout: a Binding still waiting for a
    connection by ``queue_seconds`` is not sent (the API server gets no work for a bind nobody
    waits for), and the bind fails saying so."""
    from kubernetes import client

    binder = KubeBinder(client.ApiClient(_configuration(api_server.url)), warm=0, queue_seconds=0.2)
    binder.bindings_api.connections = 1  # the first Binding holds the pool's one connection
    api_server.delay = 0.6
    pods = [PodInfo(uid=f"u{i}", name=f"web-{i}", namespace="shop") for i in range(2)]

    async def calls() -> list[BaseException | None]:
        return await asyncio.gather(*(binder.bind(pod, "node-a", {}) for pod in pods), return_exceptions=True)

    first, second = _run(binder, calls)
    assert first is None
    assert isinstance(second, BindingNotSent)
    assert str(second).startswith("cannot bind pod shop/web-1 to node-a now: no connection to the API server for "
                                  "POST /api/v1/namespaces/shop/pods/web-1/binding within 0.2s")
    assert [path for _, path, _ in api_server.requests] == ["/api/v1/namespaces/shop/pods/web-0/binding"]


def test_a_binding_the_api_server_never_answered_releases_the_room_and_says_why() -> None:
    """Through the app: kube-scheduler is told the bind failed and why, and the node's room is free."""
    from fastapi.testclient import TestClient
    from kubernetes import client

    store = make_store([make_node("a").cpu("2").obj(), make_policy("web").obj()])
    binder = KubeBinder(client.ApiClient(_configuration("http://127.0.0.1:1")))
    app = create_app(store, ExtenderSettings(), binder=binder, clock=Clock())
    p = make_pod("web-1").labels({"app": "web"}).cpu("1").obj()
    with TestClient(app) as http:
        http.post("/filter", content=orjson.dumps({"Pod": p, "NodeNames": ["a"]}))
        error = http.post("/bind", content=orjson.dumps(bind_args(p, "a"))).json()["Error"]
    assert error.startswith("berth: bind of shop/web-1 to a failed: cannot reach the API server for POST "
                            "/api/v1/namespaces/shop/pods/web-1/binding: ")
    assert store.view.pod(p["metadata"]["uid"]) is None
    assert store.assumed == {}


@pytest.mark.parametrize(("proxy", "no_proxy", "used"), [
    (None, None, None),
    ("http://proxy.example:3128", None, "http://proxy.example:3128"),
    ("http://proxy.example:3128", "127.0.0.1", None),
    ("http://proxy.example:3128", "example.org,127.0.0.0/8", None),
], ids=["none", "proxy", "no_proxy_names_the_server", "no_proxy_range_holds_the_server"])
def test_the_proxy_is_the_one_the_kubernetes_client_would_use(proxy: str | None, no_proxy: str | None,
                                                               used: str | None) -> None:
    config = _configuration("https://127.0.0.1:6443")
    config.proxy, config.no_proxy = proxy, no_proxy
    assert proxy_of(config)[0] == used


def test_a_socks_proxy_is_refused_naming_it() -> None:
    config = _configuration("https://10.0.0.1:6443")
    config.proxy = "socks5://proxy.example:1080"
    with pytest.raises(ValueError, match=re.escape("socks5://proxy.example:1080 is a SOCKS proxy")):
        ApiSession(config)


def test_calls_go_through_the_proxy_unless_no_proxy_names_the_server(api_server: _ApiServer) -> None:
    """An unreachable proxy makes the call fail; with the server in no_proxy it goes straight there."""
    proxied = _configuration(api_server.url)
    proxied.proxy = "http://127.0.0.1:1"
    direct = _configuration(api_server.url)
    direct.proxy, direct.no_proxy = "http://127.0.0.1:1", "127.0.0.1"

    async def calls() -> tuple[str, bytes]:
        through, straight = ApiSession(proxied), ApiSession(direct)
        try:
            try:
                await through.request("GET", "/api/v1/namespaces/shop/pods/web-0")
            except ApiUnreachable as exc:
                failed = str(exc)
            else:
                raise AssertionError("the call went around the configured proxy")
            return failed, await straight.request("GET", "/api/v1/namespaces/shop/pods/web-0")
        finally:
            await through.close()
            await straight.close()

    failed, body = asyncio.run(calls())
    assert failed.startswith("cannot reach the API server for GET")
    assert orjson.loads(body)["metadata"]["name"] == "web-0"
    assert len(api_server.requests) == 1


def test_the_apps_shutdown_closes_the_connections_to_the_api_server(api_server: _ApiServer) -> None:
    from fastapi.testclient import TestClient

    store = make_store([make_node("a").cpu("2").obj()])
    binder = _binder(api_server)
    app = create_app(store, ExtenderSettings(), binder=binder, clock=Clock())
    p = make_pod("web-1").labels({"app": "other"}).cpu("1").obj()
    store.remember_pod(PodInfo(uid=p["metadata"]["uid"], name="web-1", namespace="shop"))
    with TestClient(app) as http:
        assert http.post("/bind", content=orjson.dumps(bind_args(p, "a"))).json()["Error"] == ""
        sessions = [session for session in (binder.api._session, binder.bindings_api._session) if session]
        assert binder.bindings_api._session in sessions  # the Binding's pool
        assert all(not session.closed for session in sessions)
    assert all(session.closed for session in sessions)
