"""kube-scheduler's verbs skip FastAPI's routing and middleware (``ExtenderApp``) and answer
exactly as the FastAPI routes do, which stay for the OpenAPI schema and whatever the fast path
leaves to FastAPI."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from berth.extender import wire
from berth.extender.routes import scheduler
from berth.extender.wire import ExtenderArgs
from tests.builders import make_node, make_pod, make_policy
from tests.extender.helpers import BAD_INPUT, Harness, args, bind_args, harness

WEB = {"app": "web"}
VERBS = ("filter", "prioritize", "bind", "preempt")


def _cluster() -> Harness:
    return harness([make_node("a").cpu("2").obj(),
                    make_node("b").cpu("4").obj(),
                    make_policy("web").strategy("Spread").obj(),
                    make_pod("web-0").labels(WEB).cpu("1").on("b").obj()])


def _requests() -> list[tuple[str, bytes]]:
    """A scheduling cycle, a second pod refused by resources, and every bad input of the verbs."""
    web1, big = make_pod("web-1").labels(WEB).cpu("1").obj(), make_pod("web-big").labels(WEB).cpu("3").obj()
    cycle = [
        ("/filter", orjson.dumps(args(web1, ["a", "b", "ghost"]))),
        ("/prioritize", orjson.dumps(args(web1, ["a", "b"]))),
        ("/bind", orjson.dumps(bind_args(web1, "a"))),
        ("/filter", orjson.dumps(args(big, ["a", "b"]))),
        ("/filter", orjson.dumps(args(big, nodes=[make_node("a").cpu("2").obj(), make_node("b").cpu("4").obj()]))),
        ("/preempt", orjson.dumps({"Pod": big, "NodeNameToMetaVictims": {"b": {"Pods": [{"UID": "x"}]}}})),
        ("/bind", orjson.dumps(bind_args(web1, "b"))),  # bound already
    ]
    bad = [(f"/{verb}", body) for verb, body, _, _ in BAD_INPUT if verb in VERBS]
    return cycle + bad


def _through_fastapi(app: FastAPI) -> ASGIApp:
    """The app as plain FastAPI: routing, middleware and the verbs' routes."""

    async def call(scope: Scope, receive: Receive, send: Send) -> None:
        await FastAPI.__call__(app, scope, receive, send)

    return call


def test_the_verbs_answer_as_the_fastapi_routes() -> None:
    fast, routed = _cluster(), _cluster()
    via_routes = TestClient(_through_fastapi(routed.app))
    requests = _requests()
    for path, body in requests:
        mine, theirs = fast.client.post(path, content=body), via_routes.post(path, content=body)
        assert (mine.status_code, dict(mine.headers), mine.content) == (
            theirs.status_code, dict(theirs.headers), theirs.content), (path, body)
    assert _counts(fast) == _counts(routed)
    timed = [line for line in _counts(fast) if line.startswith("berth_extender_request_seconds_count")]
    assert sum(float(line.rsplit(" ", 1)[1]) for line in timed) == len(requests)  # every request is timed


def _counts(h: Harness) -> list[str]:
    """The metrics but the timings: answers by verb and result, requests timed by verb."""
    return [line for line in h.app.state.metrics.render().decode().splitlines()
            if line.startswith(("berth_extender_decisions_total", "berth_extender_request_seconds_count"))]


def test_an_internal_error_is_the_verbs_own_reply_on_both_paths(monkeypatch: pytest.MonkeyPatch,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    fast, routed = _cluster(), _cluster()
    for h in (fast, routed):
        monkeypatch.setattr(h.app.state.engine, "filter", _broken)
    body = orjson.dumps(args(make_pod("web-1").labels(WEB).obj(), ["a"]))
    with caplog.at_level(logging.ERROR, logger="berth.extender.routes.scheduler"):
        mine = fast.client.post("/filter", content=body)
        theirs = TestClient(_through_fastapi(routed.app)).post("/filter", content=body)
    assert mine.status_code == theirs.status_code == 200
    assert mine.json() == theirs.json() == {"NodeNames": None, "FailedNodes": {}, "FailedAndUnresolvableNodes": {},
                                            "Error": "berth internal error: the core broke"}
    assert caplog.text.count("filter failed") == 2


def _broken(*_: Any) -> Any:
    raise RuntimeError("the core broke")


class _Counting:
    """A middleware inside FastAPI's stack: it sees every request that FastAPI handles."""

    seen: list[tuple[str, str]] = []

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            self.seen.append((scope["method"], scope["path"]))
        await self.app(scope, receive, send)


def test_the_verbs_skip_fastapi_and_nothing_else_does() -> None:
    h = _cluster()
    h.app.add_middleware(_Counting)
    _Counting.seen = []
    web1 = make_pod("web-1").labels(WEB).obj()
    for verb in VERBS:
        assert h.client.post(f"/{verb}", content=b"{not json").status_code == 400
    assert h.client.post("/filter", content=orjson.dumps(args(web1, ["a"]))).json()["NodeNames"] == ["a"]
    assert _Counting.seen == []
    assert h.client.get("/healthz").status_code == 200
    assert h.client.get("/filter").status_code == 405  # another method: FastAPI's answer
    redirect = h.client.post("/filter/", content=b"{}", follow_redirects=False)
    assert redirect.status_code == 307 and redirect.headers["location"].endswith("/filter")
    assert _Counting.seen == [("GET", "/healthz"), ("GET", "/filter"), ("POST", "/filter/")]
    assert "/filter" in h.client.get("/openapi.json").json()["paths"]


async def _asgi(app: ASGIApp, path: str, messages: list[Message],
                on_send: Callable[[Message], object] = lambda _: None) -> list[Message]:
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": path, "raw_path": path.encode(), "root_path": "", "query_string": b"",
             "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json")],
             "client": ("127.0.0.1", 40000), "server": ("127.0.0.1", 8888), "state": {}}
    incoming = list(messages)
    sent: list[Message] = []

    async def receive() -> Message:
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)
        on_send(message)

    await app(scope, receive, send)
    return sent


def test_a_body_in_many_pieces_is_read_whole() -> None:
    body = orjson.dumps(args(make_pod("web-1").labels(WEB).obj(), ["a", "b"]))
    pieces = [body[:10], body[10:11], b"", body[11:]]
    split = [{"type": "http.request", "body": p, "more_body": i < len(pieces) - 1} for i, p in enumerate(pieces)]
    whole = [{"type": "http.request", "body": body, "more_body": False}]
    one, many = _cluster(), _cluster()
    sent_whole = asyncio.run(_asgi(one.app, "/prioritize", whole))
    sent_split = asyncio.run(_asgi(many.app, "/prioritize", split))
    assert sent_whole[0]["status"] == 200
    assert sent_split == sent_whole
    assert {h["Host"] for h in orjson.loads(sent_split[1]["body"])} == {"a", "b"}


@pytest.mark.parametrize("after", [0, 1], ids=["before-the-body", "mid-body"])
def test_a_client_gone_before_its_body_gets_no_answer_and_no_error(after: int,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    h = _cluster()
    messages: list[Message] = [{"type": "http.request", "body": b'{"Pod": ', "more_body": True}][:after]
    messages.append({"type": "http.disconnect"})
    with caplog.at_level(logging.WARNING):
        sent = asyncio.run(_asgi(h.app, "/filter", messages))
    assert sent == []
    assert caplog.records == []
    assert "berth_extender_request_seconds_count" not in h.app.state.metrics.render().decode()


def test_the_decoded_request_is_freed_after_the_reply_went_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """Freeing a large request (500 Node objects) takes milliseconds: not on the reply's path."""
    events: list[str] = []

    class Tracked(ExtenderArgs):
        def __del__(self) -> None:
            events.append("request freed")

    def decode(body: bytes, model: type[Any]) -> Any:
        return Tracked.model_validate(orjson.loads(body)) if model is ExtenderArgs else wire.decode(body, model)

    monkeypatch.setattr(scheduler, "decode", decode)
    h = _cluster()
    body = orjson.dumps(args(make_pod("web-1").labels(WEB).obj(), nodes=[make_node("a").obj(), make_node("b").obj()]))
    sent = asyncio.run(_asgi(h.app, "/filter", [{"type": "http.request", "body": body, "more_body": False}],
                             on_send=lambda message: events.append(message["type"])))
    assert [n["metadata"]["name"] for n in orjson.loads(sent[1]["body"])["Nodes"]["items"]] == ["a", "b"]
    assert events == ["http.response.start", "http.response.body", "request freed"]


@pytest.mark.parametrize("verb", scheduler.VERBS, ids=lambda verb: verb.name)
def test_each_verb_answers_its_own_failure_policy_when_berth_errs(verb: scheduler.Verb,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    fast, routed = _cluster(), _cluster()
    for h in (fast, routed):
        monkeypatch.setattr(h.app.state.engine, verb.name, _broken)
    body = next(body for path, body in _requests() if path == verb.path)  # a good request
    mine = fast.client.post(verb.path, content=body)
    theirs = TestClient(_through_fastapi(routed.app)).post(verb.path, content=body)
    assert mine.status_code == theirs.status_code == verb.failure.status
    assert mine.json() == theirs.json() == {**verb.failure.body, "Error": "berth internal error: the core broke"}


def test_every_verb_of_the_table_has_one_route_and_nothing_else_is_a_verb() -> None:
    schema = _cluster().client.get("/openapi.json").json()["paths"]
    posted = sorted(path for path, item in schema.items() if "scheduler" in item.get("post", {}).get("tags", ()))
    assert posted == sorted(verb.path for verb in scheduler.VERBS) == sorted(f"/{verb}" for verb in VERBS)
    for verb in scheduler.VERBS:
        assert schema[verb.path]["post"]["requestBody"]["content"]["application/json"]["schema"] == {
            "$ref": f"#/components/schemas/{verb.request.__name__}"}


class _Engine:
    """An engine that answers every filter with its one node, counting the calls."""

    def __init__(self, metrics: Any) -> None:
        self.metrics = metrics
        self.calls: list[str] = []

    def filter(self, request: ExtenderArgs, _: float) -> dict[str, Any]:
        self.calls.append(request.Pod["metadata"]["name"])
        return {"NodeNames": ["elsewhere"], "FailedNodes": {}, "FailedAndUnresolvableNodes": {}, "Error": ""}


def test_an_overridden_engine_answers_the_verbs() -> None:
    from berth.extender.routes import deps

    h = _cluster()
    fake = _Engine(h.app.state.metrics)
    h.app.dependency_overrides[deps.engine] = lambda: fake
    reply = h.client.post("/filter", content=orjson.dumps(args(make_pod("web-1").labels(WEB).obj(), ["a", "b"])))
    assert reply.json()["NodeNames"] == ["elsewhere"] and fake.calls == ["web-1"]
    h.app.dependency_overrides.clear()
    reply = h.client.post("/filter", content=orjson.dumps(args(make_pod("web-2").labels(WEB).obj(), ["a", "b"])))
    assert reply.json()["NodeNames"] == ["a", "b"] and fake.calls == ["web-1"]
