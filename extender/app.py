"""The HTTP face of the extender (FastAPI).

kube-scheduler's verbs under the server root (``urlPrefix: http://<service>:<port>`` with
``filterVerb: filter``, ``prioritizeVerb: prioritize``, ``bindVerb: bind``, ``preemptVerb:
preempt``), the explain / preview / allocations / capacity API under ``/api/v1``, and
``/healthz``, ``/readyz``, ``/metrics``.

Bodies are read raw and decoded with orjson (:mod:`berth.extender.wire`); replies are encoded
with orjson. Bad input gets HTTP 400 with a message naming the field; a Pod the core cannot
read gets the protocol's ``Error`` (which kube-scheduler shows in the pod's FailedScheduling
event); nothing a client sends makes a 500.

The verbs are on kube-scheduler's critical path, so ``POST /filter``, ``/prioritize``, ``/bind``
and ``/preempt`` are answered before FastAPI's routing, middleware, request object and
dependency solving: :class:`ExtenderApp` reads the body from the ASGI ``receive`` and calls the
same handler as the FastAPI routes, which stay for the OpenAPI schema and answer whatever the
fast path leaves to FastAPI.
"""

from __future__ import annotations

import inspect
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, NamedTuple, Protocol

import orjson
from fastapi import FastAPI, Query, Request
from fastapi.openapi.utils import get_openapi
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import ClientDisconnect
from starlette.types import Receive, Scope, Send

from berth.core import API_GROUP, ERROR_CODES, NODEDRAIN_PLURAL, POLICY_PLURAL, ObjectError, PodInfo, pod_from_object
from berth.extender.authz import Access, ApiGate, Caller, Denied, Reviewer
from berth.extender.binder import Binder, MemoryBinder
from berth.extender.engine import Extender, PodUnreadable
from berth.extender.heap import collector_paused
from berth.extender.metrics import CONTENT_TYPE, Metrics
from berth.extender.page import page_router
from berth.extender.settings import ExtenderSettings
from berth.extender.store import ClusterStore
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
    validate,
)

log = logging.getLogger("berth.extender.app")

JSON = "application/json"
DRAIN_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
"""A NodeDrain's name: a DNS subdomain (the length is checked by the API server)."""


class ViewSource(Protocol):
    """What keeps the store up to date: the watches, or nothing (a snapshot is loaded once)."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


class ProtocolError(BaseModel):
    Error: str


class ApiError(BaseModel):
    error: str


class ShapeRequest(BaseModel):
    """A pod, or a pod shape, for the preview and capacity API."""

    model_config = ConfigDict(extra="forbid")

    pod: dict[str, Any] | None = Field(default=None, description="a Pod manifest; the shape fields are ignored")
    namespace: str = Field(default="default", min_length=1, max_length=253)
    name: str = Field(default="preview", min_length=1, max_length=253)
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    requests: dict[str, str | int | float] = Field(default_factory=dict,
                                                   description='e.g. {"cpu": "500m", "memory": "1Gi"}')
    policy: str | None = Field(default=None, description="a PlacementPolicy of the namespace; default: the one "
                                                         "that selects the pod")
    nodes: list[str] | None = Field(default=None, description="judge only these nodes (preview)")

    def to_pod(self) -> PodInfo:
        if self.pod is not None:
            raw = self.pod
        else:
            container: dict[str, Any] = {"name": "shape"}
            if self.requests:
                container["resources"] = {"requests": dict(self.requests)}
            raw = {"metadata": {"name": self.name, "namespace": self.namespace, "uid": f"preview/{self.name}",
                                "labels": dict(self.labels), "annotations": dict(self.annotations)},
                   "spec": {"containers": [container]}}
        try:
            return pod_from_object(raw)
        except (ObjectError, TypeError, ValueError, AttributeError) as exc:
            raise BadRequest(f"cannot read the pod: {exc}") from None


def _bounded_pod(shape: ShapeRequest, settings: ExtenderSettings) -> PodInfo:
    """The pod of a preview or capacity question, refused (:class:`BadRequest`, naming the limit and
    its setting) when it would ask for more work than one question may: containers, labels and
    distinct resources, node constraints, node names."""
    if shape.nodes is not None and len(shape.nodes) > settings.api_max_node_names:
        raise BadRequest(f"nodes: {len(shape.nodes)} names, at most {settings.api_max_node_names} "
                         "(BERTH_API_MAX_NODE_NAMES)")
    raw: dict[str, Any] = shape.pod or {}
    spec = raw.get("spec")
    containers = sum(len(spec[k]) for k in ("containers", "initContainers", "ephemeralContainers")
                     if isinstance(spec.get(k), list)) if isinstance(spec, dict) else 0
    if containers > settings.api_max_containers:
        raise BadRequest(f"pod.spec: {containers} containers, at most {settings.api_max_containers} "
                         "(BERTH_API_MAX_CONTAINERS)")
    meta = raw.get("metadata")
    labels = (meta.get("labels") if isinstance(meta, dict) else None) if shape.pod is not None else shape.labels
    if isinstance(labels, dict) and len(labels) > settings.api_max_labels:
        raise BadRequest(f"labels: {len(labels)}, at most {settings.api_max_labels} (BERTH_API_MAX_LABELS)")
    if len(shape.requests) > settings.api_max_resources:
        raise BadRequest(f"requests: {len(shape.requests)} resources, at most {settings.api_max_resources} "
                         "(BERTH_API_MAX_RESOURCES)")
    pod = shape.to_pod()
    if len(pod.requests) > settings.api_max_resources:
        raise BadRequest(f"pod: requests {len(pod.requests)} distinct resources, at most "
                         f"{settings.api_max_resources} (BERTH_API_MAX_RESOURCES)")
    affinity = pod.node_affinity
    required = affinity.required_terms or ()
    terms = len(affinity.node_selector) + len(pod.tolerations) + len(required) + sum(
        1 + len(req.values) for term in required for req in (*term.match_expressions, *term.match_fields))
    if terms > settings.api_max_affinity_terms:
        raise BadRequest(f"pod.spec: {terms} node selector entries, affinity terms, requirements, values and "
                         f"tolerations, at most {settings.api_max_affinity_terms} (BERTH_API_MAX_AFFINITY_TERMS)")
    return pod


def _json(data: object, status: int = 200) -> Response:
    return Response(content=orjson.dumps(data), status_code=status, media_type=JSON)


def _denied(exc: Denied) -> Response:
    headers = {"WWW-Authenticate": 'Bearer realm="berth"'} if exc.status == 401 else None
    return Response(content=orjson.dumps({"error": exc.message}), status_code=exc.status, media_type=JSON,
                    headers=headers)


class VerbReply(NamedTuple):
    status: int
    body: bytes
    request: object = None
    """The decoded request, to be dropped only once the reply is sent: freeing the objects of a large
    one (500 Node objects with ``nodeCacheCapable: false``) takes milliseconds."""


VerbHandler = Callable[[bytes, float], Awaitable[VerbReply]]
"""A scheduler verb: (the request body, when the request started) -> its reply."""


class ExtenderApp(FastAPI):
    """FastAPI, with kube-scheduler's verbs answered first: a ``POST`` to exactly one of the paths
    in :attr:`verbs` goes straight to its handler (no routing, middleware, request object or
    dependency solving); anything else, including the lifespan, is FastAPI's."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.verbs: dict[str, VerbHandler] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            handler = self.verbs.get(scope["path"])
            if handler is not None:
                await _answer_verb(handler, receive, send)
                return
        await super().__call__(scope, receive, send)


_REPLY_HEADERS = b"content-type", JSON.encode()


async def _answer_verb(handler: VerbHandler, receive: Receive, send: Send) -> None:
    started = time.perf_counter()  # as the FastAPI route does: reading the body counts in the latency
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
    reply = await handler(body, started)
    await send({"type": "http.response.start", "status": reply.status,
                "headers": [(b"content-length", str(len(reply.body)).encode()), _REPLY_HEADERS]})
    await send({"type": "http.response.body", "body": reply.body})
    # the decoded request (reply.request) is freed here, after the reply went out


def _body_schema(model: type[BaseModel]) -> dict[str, Any]:
    return {"requestBody": {"required": True, "content": {JSON: {"schema": {
        "$ref": f"#/components/schemas/{model.__name__}"}}}}}


_REQUEST_MODELS: tuple[type[BaseModel], ...] = (ExtenderArgs, ExtenderBindingArgs, ExtenderPreemptionArgs,
                                                ShapeRequest)


def create_app(store: ClusterStore, settings: ExtenderSettings | None = None, *, binder: Binder | None = None,
               source: ViewSource | None = None, metrics: Metrics | None = None,
               clock: Callable[[], float] | None = None,
               eval_clock: Callable[[], float] | None = None, reviewer: Reviewer | None = None) -> ExtenderApp:
    """The extender app on ``store``. Without ``binder`` binds are recorded in memory (offline
    mode); ``source`` is started and stopped with the app. ``reviewer`` authenticates and
    authorizes the explain API's callers (without one, only ``BERTH_API_ANONYMOUS`` opens it)."""
    settings = settings or ExtenderSettings()
    gate = ApiGate(reviewer, anonymous=settings.api_anonymous, cache_seconds=settings.api_auth_cache_seconds,
                   cache_entries=settings.api_auth_cache_entries)
    metrics = metrics or Metrics(store)
    engine = Extender(store, settings, binder or MemoryBinder(store), metrics, clock=clock,
                      eval_clock=eval_clock)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if source is not None:
            source.start()
        try:
            yield
        finally:
            if source is not None:
                source.stop()

    app = ExtenderApp(title="berth extender", version="0.1.0", lifespan=lifespan,
                      docs_url="/docs" if settings.docs else None, redoc_url="/redoc" if settings.docs else None,
                      description="kube-scheduler extender (k8s.io/kube-scheduler/extender/v1) and berth's "
                                  "explain API")
    app.state.engine = engine
    app.state.store = store
    app.state.metrics = metrics
    app.state.gate = gate

    bad = {400: {"model": ProtocolError, "description": "the body is not the JSON the verb expects"}}

    # -- kube-scheduler's verbs ----------------------------------------------------------

    async def scheduler_verb(verb: str, body: bytes, started: float, model: type[Any],
                             handle: Callable[[Any, float], Any], *, failure: dict[str, Any],
                             failure_status: int = 200,
                             client_errors: tuple[type[Exception], ...] = (BadRequest,)) -> VerbReply:
        """One shape for every verb kube-scheduler calls: decode fast, answer, time it, and turn bad
        input into a 400 and an unexpected failure into the verb's own error reply (never a 500).
        filter and bind carry the failure in the protocol's ``Error``, which kube-scheduler reports
        on the pod; prioritize and preempt failures are only logged by the scheduler."""
        args = None
        try:
            # The cyclic collector waits while a verb runs synchronously: the request's thousands of
            # short-lived containers would otherwise trigger collections that scan them (and the
            # view's newer objects) in the middle of the answer; freed by reference counting, they
            # are gone before the collector runs again. Never held across an await (bind).
            with collector_paused():
                args = decode(body, model)
                result = handle(args, started)
            if inspect.isawaitable(result):
                result = await result
            return VerbReply(200, orjson.dumps(result), args)
        except client_errors as exc:
            metrics.observe(verb, time.perf_counter() - started, "bad_request")
            return VerbReply(400, orjson.dumps({"Error": str(exc)}), args)
        except Exception as exc:
            log.exception("%s failed", verb)
            metrics.observe(verb, time.perf_counter() - started, "internal_error")
            return VerbReply(failure_status, orjson.dumps({**failure, "Error": f"berth internal error: {exc}"}), args)

    async def filter_verb(body: bytes, started: float) -> VerbReply:
        return await scheduler_verb("filter", body, started, ExtenderArgs, engine.filter,
                                    failure={"NodeNames": None, "FailedNodes": {}, "FailedAndUnresolvableNodes": {}})

    async def prioritize_verb(body: bytes, started: float) -> VerbReply:
        return await scheduler_verb("prioritize", body, started, ExtenderArgs, engine.prioritize, failure={},
                                    failure_status=503, client_errors=(BadRequest, PodUnreadable))

    async def bind_verb(body: bytes, started: float) -> VerbReply:
        return await scheduler_verb("bind", body, started, ExtenderBindingArgs, engine.bind, failure={})

    async def preempt_verb(body: bytes, started: float) -> VerbReply:
        return await scheduler_verb("preempt", body, started, ExtenderPreemptionArgs, engine.preempt, failure={},
                                    failure_status=503, client_errors=(BadRequest, PodUnreadable))

    app.verbs = {"/filter": filter_verb, "/prioritize": prioritize_verb, "/bind": bind_verb,
                 "/preempt": preempt_verb}

    # The same verbs as FastAPI routes: they document the verbs in the OpenAPI schema, and answer
    # what the fast path above leaves to FastAPI.
    async def routed(handler: VerbHandler, request: Request) -> Response:
        started = time.perf_counter()
        try:
            body = await request.body()
        except ClientDisconnect:
            return _json({"Error": "the client went away before its request body came"}, 400)  # read by nobody
        reply = await handler(body, started)
        return Response(content=reply.body, status_code=reply.status, media_type=JSON)

    @app.post("/filter", response_model=ExtenderFilterResult, responses=bad,  # type: ignore[arg-type]
              openapi_extra=_body_schema(ExtenderArgs), tags=["scheduler"])
    async def filter_(request: Request) -> Response:
        return await routed(filter_verb, request)

    @app.post("/prioritize", response_model=list[HostPriority], responses=bad,  # type: ignore[arg-type]
              openapi_extra=_body_schema(ExtenderArgs), tags=["scheduler"])
    async def prioritize(request: Request) -> Response:
        return await routed(prioritize_verb, request)

    @app.post("/bind", response_model=ExtenderBindingResult, responses=bad,  # type: ignore[arg-type]
              openapi_extra=_body_schema(ExtenderBindingArgs), tags=["scheduler"])
    async def bind(request: Request) -> Response:
        return await routed(bind_verb, request)

    @app.post("/preempt", response_model=ExtenderPreemptionResult, responses=bad,  # type: ignore[arg-type]
              openapi_extra=_body_schema(ExtenderPreemptionArgs), tags=["scheduler"])
    async def preempt(request: Request) -> Response:
        return await routed(preempt_verb, request)

    # -- explain API ----------------------------------------------------------------------

    # Every answer is authorized first, with the caller's own rights (berth.extender.authz): nothing
    # is computed, and nothing read from the API server, for a caller who may not read it.
    api_bad: dict[int | str, dict[str, Any]] = {
        400: {"model": ApiError, "description": "bad input"},
        401: {"model": ApiError, "description": "no bearer token, or one the API server does not authenticate"},
        403: {"model": ApiError, "description": "the caller may not read what this answer holds"}}

    async def allowed(request: Request, accesses: Sequence[Access]) -> Response | None:
        """None when the caller may read what ``accesses`` name, else the refusal to answer."""
        try:
            await gate.require(await gate.caller(request.headers.get("authorization")), accesses)
        except Denied as exc:
            return _denied(exc)
        return None

    async def caller_of(request: Request) -> Caller | Response | None:
        try:
            return await gate.caller(request.headers.get("authorization"))
        except Denied as exc:
            return _denied(exc)

    async def shape_allowed(caller: Caller | None, pod: PodInfo) -> Response | None:
        """A preview or a capacity table shows the policies of the pod's namespace and every node."""
        try:
            await gate.require(caller, (Access("list", POLICY_PLURAL, API_GROUP, pod.namespace),
                                        Access("list", "nodes")))
        except Denied as exc:
            return _denied(exc)
        return None

    @app.get("/api/v1/decisions/{namespace}/{pod}", tags=["explain"],
             responses={**api_bad, 200: {"description": f"the recorded decision (Decision.to_dict()); error.code is "
                                                        f"one of {ERROR_CODES}"},
                        404: {"model": ApiError, "description": "no decision recorded for this pod"}})
    async def decision(namespace: str, pod: str, request: Request) -> Response:
        started = time.perf_counter()
        refusal = await allowed(request, (Access("get", "pods", namespace=namespace),))
        if refusal is not None:
            return refusal  # before the decision is looked up, or the pod read with berth's rights
        try:
            found = await engine.decision_of(namespace, pod)
        except Exception as exc:
            log.warning("cannot read the decision of %s/%s: %s", namespace, pod, exc)
            return _json({"error": f"cannot read the decision of {namespace}/{pod}: {exc}"}, 503)
        metrics.observe("decision", time.perf_counter() - started)
        if found is None:
            return _json({"error": f"no decision recorded for pod {namespace}/{pod}"}, 404)
        return Response(content=found, media_type=JSON)

    @app.get("/api/v1/drains/{name}", tags=["explain"],
             responses={**api_bad, 200: {"description": "the NodeDrain's live plan: its spec and its status (each "
                                                        "pod's source, destination and state, the counts, phase "
                                                        "and conditions)"},
                        404: {"model": ApiError, "description": "no NodeDrain of this name"}})
    async def drain_plan(name: str, request: Request) -> Response:
        if len(name) > 253 or not DRAIN_NAME.fullmatch(name):
            return _json({"error": f"name: {name[:64]!r} is not a NodeDrain name (a DNS subdomain)"}, 400)
        refusal = await allowed(request, (Access("get", NODEDRAIN_PLURAL, API_GROUP),))
        if refusal is not None:
            return refusal  # before the NodeDrain is read with berth's rights
        try:
            found = await engine.binder.fetch_drain(name)
        except Exception as exc:
            log.warning("cannot read NodeDrain %s: %s", name, exc)
            return _json({"error": f"cannot read NodeDrain {name}: {exc}"}, 503)
        if found is None:
            return _json({"error": f"no NodeDrain {name}"}, 404)
        return _json({"name": name, "spec": found.get("spec") or {}, "status": found.get("status") or {}})

    @app.post("/api/v1/preview", tags=["explain"], openapi_extra=_body_schema(ShapeRequest),
              responses={**api_bad, 200: {"description": "a fresh evaluation of every node: decision and scores; "
                                                         f"decision.error.code is one of {ERROR_CODES}"},
                         404: {"model": ApiError, "description": "the named policy does not exist"}})
    async def preview(request: Request) -> Response:
        started = time.perf_counter()
        caller = await caller_of(request)
        if isinstance(caller, Response):
            return caller
        try:
            shape = decode(await request.body(), ShapeRequest)
            shape_pod = _bounded_pod(shape, settings)
            refusal = await shape_allowed(caller, shape_pod)
            if refusal is not None:
                return refusal
            result = engine.preview(shape_pod, shape.policy, shape.nodes)
        except BadRequest as exc:
            return _json({"error": str(exc)}, 400)
        except LookupError as exc:
            return _json({"error": str(exc).strip("'\"")}, 404)
        metrics.observe("preview", time.perf_counter() - started)
        return _json(result)

    capacity_responses: dict[int | str, dict[str, Any]] = {
        **api_bad, 200: {"description": "each node's room for the shape, the total, and placeable: how many one "
                                    "round could place under the whole policy and why not one more"},
        404: {"model": ApiError, "description": "the named policy does not exist"}}

    @app.get("/api/v1/capacity", tags=["explain"], responses=capacity_responses)
    async def capacity_get(
        request: Request,
        namespace: str = Query("default", min_length=1, max_length=253),
        labels: str = Query("", description="k=v,k2=v2: the pod's labels (selects the policy)"),
        cpu: str | None = Query(None, description="e.g. 500m"),
        memory: str | None = Query(None, description="e.g. 1Gi"),
        ephemeral_storage: str | None = Query(None, alias="ephemeral-storage"),
        policy: str | None = Query(None),
    ) -> Response:
        caller = await caller_of(request)
        if isinstance(caller, Response):
            return caller
        try:
            given = (("cpu", cpu), ("memory", memory), ("ephemeral-storage", ephemeral_storage))
            requests: dict[str, str | int | float] = {k: v for k, v in given if v}
            shape = ShapeRequest(namespace=namespace, labels=_parse_labels(labels), requests=requests,
                                 policy=policy or None)
        except (BadRequest, ValueError) as exc:
            return _json({"error": str(exc)}, 400)
        return await _capacity(caller, shape)

    @app.post("/api/v1/capacity", tags=["explain"], responses=capacity_responses,
              openapi_extra=_body_schema(ShapeRequest))
    async def capacity_post(request: Request) -> Response:
        caller = await caller_of(request)
        if isinstance(caller, Response):
            return caller
        try:
            shape = decode(await request.body(), ShapeRequest)
        except BadRequest as exc:
            return _json({"error": str(exc)}, 400)
        return await _capacity(caller, shape)

    async def _capacity(caller: Caller | None, shape: ShapeRequest) -> Response:
        started = time.perf_counter()
        try:
            shape_pod = _bounded_pod(shape, settings)
            refusal = await shape_allowed(caller, shape_pod)
            if refusal is not None:
                return refusal
            result = engine.capacity(shape_pod, shape.policy)
        except BadRequest as exc:
            return _json({"error": str(exc)}, 400)
        except LookupError as exc:
            return _json({"error": str(exc).strip("'\"")}, 404)
        metrics.observe("capacity", time.perf_counter() - started)
        return _json(result)

    @app.get("/api/v1/policies/{namespace}/{name}/decision", tags=["explain"],
             responses={**api_bad, 200: {"description": "the latest decision of a pod the policy governs "
                                                        "(decision, decisionSource) and a fresh preview"},
                        404: {"model": ApiError, "description": "no valid PlacementPolicy of that name"}})
    async def policy_decision(namespace: str, name: str, request: Request) -> Response:
        started = time.perf_counter()
        # a decision of a pod of the namespace, and a preview: what both of those answers need
        refusal = await allowed(request, (Access("get", "pods", namespace=namespace),
                                          Access("list", POLICY_PLURAL, API_GROUP, namespace),
                                          Access("list", "nodes")))
        if refusal is not None:
            return refusal
        try:
            result = engine.policy_decision(namespace, name)
        except LookupError as exc:
            return _json({"error": str(exc).strip("'\"")}, 404)
        metrics.observe("policy_decision", time.perf_counter() - started)
        return _json(result)

    @app.get("/api/v1/nodes/allocations", tags=["explain"],
             responses={**api_bad, 200: {"description": "every node's allocatable, requested, free and unknown "
                                                        "dimensions, and the settings in force"}})
    async def allocations(request: Request) -> Response:
        started = time.perf_counter()
        refusal = await allowed(request, (Access("list", "nodes"),
                                          Access("list", POLICY_PLURAL, API_GROUP)))  # every namespace's
        if refusal is not None:
            return refusal
        result = engine.allocations()
        metrics.observe("allocations", time.perf_counter() - started)
        return _json(result)

    # -- the page (server-rendered, same authorization) ------------------------------------

    app.include_router(page_router(engine, store, gate, api_anonymous=settings.api_anonymous))

    # -- operations -----------------------------------------------------------------------

    @app.get("/healthz", tags=["operations"])
    async def healthz() -> Response:
        return Response(content=b"ok", media_type="text/plain")

    @app.get("/readyz", tags=["operations"], responses={503: {"description": "the first full list is not done"}})
    async def readyz() -> Response:
        if store.ready:
            return Response(content=b"ok", media_type="text/plain")
        missing = sorted({"nodes", "pods", "leases", "policies"} - store.listed)
        return Response(content=f"not ready: waiting for the first list of {', '.join(missing)}".encode(),
                        status_code=503, media_type="text/plain")

    @app.get("/metrics", tags=["operations"])
    async def metrics_() -> Response:
        return Response(content=metrics.render(), media_type=CONTENT_TYPE)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        for model in _REQUEST_MODELS:
            body = model.model_json_schema(ref_template="#/components/schemas/{model}")
            for name, definition in body.pop("$defs", {}).items():
                components.setdefault(name, definition)
            components[model.__name__] = body
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


def _parse_labels(text: str) -> dict[str, str]:
    labels: dict[str, str] = {}
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise BadRequest(f"labels: {part!r} is not key=value")
        labels[key.strip()] = value.strip()
    return labels


__all__ = ["ExtenderApp", "ViewSource", "create_app", "validate"]
