"""kube-scheduler's verbs (``k8s.io/kube-scheduler/extender/v1``), each defined once in
:data:`VERBS`: its request and reply types, its handler (the engine's method of the verb's name)
and its failure policy. Both ways a verb is answered are made from that table:

- the routes of :data:`router`, which document the verbs in the OpenAPI schema and answer
  whatever the fast path leaves to FastAPI (another method, a trailing slash, an overridden
  dependency);
- the fast path (:func:`answer_fast`), which :class:`berth.extender.app.ExtenderApp` calls for a
  ``POST`` to a verb's path before FastAPI's routing, middleware, request object and dependency
  solving: the verbs are on kube-scheduler's critical path.

Both call :func:`answer`, so a verb answers the same bytes, status and metrics on either.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel
from starlette.requests import ClientDisconnect
from starlette.types import Receive, Send

from berth.extender.engine import Extender, PodUnreadable
from berth.extender.heap import collector_paused
from berth.extender.routes.deps import EngineDep
from berth.extender.wire import (
    BadRequest,
    ExtenderArgs,
    ExtenderBindingArgs,
    ExtenderBindingResult,
    ExtenderFilterResult,
    ExtenderPreemptionArgs,
    ExtenderPreemptionResult,
    HostPriority,
    decode,
)

log = logging.getLogger("berth.extender.routes.scheduler")

JSON = "application/json"


class ProtocolError(BaseModel):
    Error: str


@dataclass(frozen=True, slots=True)
class FailurePolicy:
    """What a verb answers when it cannot answer: ``client_errors`` are the caller's fault (HTTP
    400 with the protocol's ``Error``); any other exception is berth's, logged, and answered with
    ``status`` and ``body`` plus ``Error`` (never a 500)."""

    status: int
    body: Mapping[str, Any]
    client_errors: tuple[type[Exception], ...]
    why: str


@dataclass(frozen=True, slots=True)
class Verb:
    """One of kube-scheduler's verbs: its name (the path, and the engine's method that answers it),
    what it reads and answers, and what it answers when berth errs."""

    name: str
    request: type[BaseModel]
    reply: Any
    failure: FailurePolicy

    @property
    def path(self) -> str:
        return f"/{self.name}"


VERBS: tuple[Verb, ...] = (
    Verb("filter", ExtenderArgs, ExtenderFilterResult, FailurePolicy(
        200, {"NodeNames": None, "FailedNodes": {}, "FailedAndUnresolvableNodes": {}}, (BadRequest,),
        "no node passes and the Error names the failure: kube-scheduler reports it on the pod and retries it "
        "(an ignorable extender is skipped instead); a Pod berth cannot read is already the filter's own Error")),
    Verb("prioritize", ExtenderArgs, list[HostPriority], FailurePolicy(
        503, {}, (BadRequest, PodUnreadable),
        "kube-scheduler only logs a failed prioritize and scores without berth")),
    Verb("bind", ExtenderBindingArgs, ExtenderBindingResult, FailurePolicy(
        200, {}, (BadRequest,),
        "the Error fails the bind: kube-scheduler forgets the pod's place and retries it")),
    Verb("preempt", ExtenderPreemptionArgs, ExtenderPreemptionResult, FailurePolicy(
        503, {}, (BadRequest, PodUnreadable),
        "kube-scheduler only logs a failed preempt and keeps its own candidates")),
)

VERB_AT: Mapping[str, Verb] = {verb.path: verb for verb in VERBS}


class VerbReply(NamedTuple):
    status: int
    body: bytes
    request: object = None
    """The decoded request, to be dropped only once the reply is sent: freeing the objects of a large
    one (500 Node objects with ``nodeCacheCapable: false``) takes milliseconds."""


async def answer(verb: Verb, engine: Extender, body: bytes, started: float) -> VerbReply:
    """The reply to one call of ``verb``: decode fast, answer, and turn bad input into a 400 and an
    unexpected failure into the verb's failure reply. ``started``: when the request began (reading
    its body counts in the latency)."""
    args = None
    try:
        # The cyclic collector waits while a verb runs synchronously: the request's thousands of
        # short-lived containers would otherwise trigger collections that scan them (and the view's
        # newer objects) in the middle of the answer; freed by reference counting, they are gone
        # before the collector runs again. Never held across an await (bind).
        with collector_paused():
            args = decode(body, verb.request)
            result = getattr(engine, verb.name)(args, started)
        if inspect.isawaitable(result):
            result = await result
        return VerbReply(200, orjson.dumps(result), args)
    except verb.failure.client_errors as exc:
        engine.metrics.observe(verb.name, time.perf_counter() - started, "bad_request")
        return VerbReply(400, orjson.dumps({"Error": str(exc)}), args)
    except Exception as exc:
        log.exception("%s failed", verb.name)
        engine.metrics.observe(verb.name, time.perf_counter() - started, "internal_error")
        failure = verb.failure
        return VerbReply(failure.status, orjson.dumps({**failure.body, "Error": f"berth internal error: {exc}"}),
                         args)


_REPLY_HEADERS = b"content-type", JSON.encode()


async def answer_fast(verb: Verb, engine: Extender, receive: Receive, send: Send) -> None:
    """:func:`answer` straight on ASGI: the body read from ``receive``, the reply sent."""
    started = time.perf_counter()  # as the route does: reading the body counts in the latency
    message = await receive()
    if message["type"] != "http.request":
        return  # the client went away before its body came: nobody to answer
    body: bytes = message.get("body", b"")
    if message.get("more_body", False):
        chunks = [body]
        while message.get("more_body", False):
            message = await receive()
            if message["type"] != "http.request":
                return
            chunks.append(message.get("body", b""))
        body = b"".join(chunks)
    reply = await answer(verb, engine, body, started)
    await send({"type": "http.response.start", "status": reply.status,
                "headers": [(b"content-length", str(len(reply.body)).encode()), _REPLY_HEADERS]})
    await send({"type": "http.response.body", "body": reply.body})
    # the decoded request (reply.request) is freed here, after the reply went out


def body_schema(model: type[BaseModel]) -> dict[str, Any]:
    """``openapi_extra`` for a route that reads its body raw: the model it expects."""
    return {"requestBody": {"required": True, "content": {JSON: {"schema": {
        "$ref": f"#/components/schemas/{model.__name__}"}}}}}


def _route(verb: Verb) -> Any:
    async def route(request: Request, engine: EngineDep) -> Response:
        started = time.perf_counter()
        try:
            body = await request.body()
        except ClientDisconnect:  # read by nobody
            return Response(orjson.dumps({"Error": "the client went away before its request body came"}), 400,
                            media_type=JSON)
        reply = await answer(verb, engine, body, started)
        return Response(content=reply.body, status_code=reply.status, media_type=JSON)

    route.__name__ = verb.name
    route.__doc__ = f"kube-scheduler's {verb.name} verb. When berth errs: {verb.failure.why}."
    return route


router = APIRouter(tags=["scheduler"])
for _verb in VERBS:
    router.add_api_route(
        _verb.path, _route(_verb), methods=["POST"], response_model=_verb.reply,
        responses={400: {"model": ProtocolError, "description": "the body is not the JSON the verb expects"}},
        openapi_extra=body_schema(_verb.request))
