"""The HTTP face of the extender (FastAPI): :func:`create_app` makes the engine over a cluster
store and serves the routers of :mod:`berth.extender.routes` and the page.

kube-scheduler's verbs are under the server root (``urlPrefix: http://<service>:<port>`` with
``filterVerb: filter``, ``prioritizeVerb: prioritize``, ``bindVerb: bind``, ``preemptVerb:
preempt``), the explain / preview / allocations / capacity API under ``/api/v1``, the page under
``/ui``, and ``/healthz``, ``/readyz``, ``/metrics``.

Bodies are read raw and decoded with orjson (:mod:`berth.extender.wire`); replies are encoded
with orjson. Bad input gets HTTP 400 with a message naming the field; a Pod the core cannot
read gets the protocol's ``Error`` (which kube-scheduler shows in the pod's FailedScheduling
event); nothing a client sends makes a 500.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Protocol, runtime_checkable

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel
from starlette.types import Receive, Scope, Send

from berth.extender.authz import ApiGate, Denied, Reviewer
from berth.extender.binder import Binder, MemoryBinder
from berth.extender.engine import Extender
from berth.extender.leader import LeaseElector
from berth.extender.loop_lag import LoopLag
from berth.extender.metrics import Metrics
from berth.extender.nominator import Nominator
from berth.extender.questions import Questions
from berth.extender.routes import explain, operations, page, scheduler
from berth.extender.settings import ExtenderSettings
from berth.extender.store import ClusterStore
from berth.extender.wire import ExtenderArgs, ExtenderBindingArgs, ExtenderPreemptionArgs


class ViewSource(Protocol):
    """What keeps the store up to date: the watches, or nothing (a snapshot is loaded once)."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


@runtime_checkable
class Closing(Protocol):
    """A binder holding connections to close at shutdown (:class:`berth.extender.binder.KubeBinder`)."""

    async def close(self) -> None: ...


@runtime_checkable
class Starting(Protocol):
    """A binder with work of its own from the app's start (:class:`berth.extender.binder.KubeBinder`
    opens its connections ahead)."""

    def start(self) -> None: ...


class ExtenderApp(FastAPI):
    """FastAPI, with kube-scheduler's verbs answered first: a ``POST`` to exactly one of the verbs'
    paths (:data:`berth.extender.routes.scheduler.VERBS`) goes straight to the verb's answer (no
    routing, middleware, request object or dependency solving); anything else, including the
    lifespan, is FastAPI's. While a test overrides a dependency, the verbs are FastAPI's too."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and not self.dependency_overrides:
            verb = scheduler.VERB_AT.get(scope["path"])
            if verb is not None:
                await scheduler.answer_fast(verb, self.state.engine, receive, send)
                return
        await super().__call__(scope, receive, send)


_REQUEST_MODELS: tuple[type[BaseModel], ...] = (ExtenderArgs, ExtenderBindingArgs, ExtenderPreemptionArgs,
                                                explain.ShapeRequest)
"""The bodies the routes read raw, published in the OpenAPI schema's components."""


def create_app(store: ClusterStore, settings: ExtenderSettings | None = None, *, binder: Binder | None = None,
               source: ViewSource | None = None, metrics: Metrics | None = None,
               clock: Callable[[], float] | None = None,
               eval_clock: Callable[[], float] | None = None, reviewer: Reviewer | None = None,
               elector: LeaseElector | None = None) -> ExtenderApp:
    """The extender app on ``store``. Without ``binder`` binds are recorded in memory (offline
    mode); ``source`` is started and stopped with the app. ``reviewer`` authenticates and
    authorizes the explain API's callers (without one, only ``BERTH_API_ANONYMOUS`` opens it).
    ``elector``: with ``BERTH_NOMINATE``, this replica nominates only while it holds the elector's
    Lease (:func:`berth.extender.leader.nominator_elector`); without one it always nominates."""
    settings = settings or ExtenderSettings()
    gate = ApiGate(reviewer, anonymous=settings.api_anonymous, cache_seconds=settings.api_auth_cache_seconds,
                   cache_entries=settings.api_auth_cache_entries)
    metrics = metrics or Metrics(store)
    engine = Extender(store, settings, binder or MemoryBinder(store), metrics, clock=clock,
                      eval_clock=eval_clock)

    nominator = None
    if settings.nominate:
        nominator = Nominator(engine, engine.binder.nominate, schedulers=settings.nominated_schedulers(),
                              queue_size=settings.nominate_queue, per_second=settings.nominate_per_second,
                              withdraw=engine.binder.withdraw_nomination,
                              after_seconds=settings.nominate_after_seconds)
        store.on_pending = nominator.offer
        engine.on_stale_nomination = nominator.withdraw
        if elector is not None:
            nominator.lead(False)
            elector.on_change = nominator.lead
    else:
        elector = None

    loop_lag = LoopLag(metrics.loop_lag.observe)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        loop_lag.start()
        if isinstance(engine.binder, Starting):
            engine.binder.start()
        if nominator is not None:
            nominator.start()
        if elector is not None:
            elector.start()
        if source is not None:
            source.start()
        try:
            yield
        finally:
            await loop_lag.stop()
            if source is not None:
                source.stop()
            if elector is not None:
                await elector.stop()  # no nomination planned from here on; the Lease released
            if nominator is not None:
                await nominator.stop()
            if isinstance(engine.binder, Closing):
                await engine.binder.close()

    app = ExtenderApp(title="berth extender", version="0.1.0", lifespan=lifespan,
                      docs_url="/docs" if settings.docs else None, redoc_url="/redoc" if settings.docs else None,
                      description="kube-scheduler extender (k8s.io/kube-scheduler/extender/v1) and berth's "
                                  "explain API")
    # what the dependencies of berth.extender.routes.deps give the routes
    app.state.engine = engine
    app.state.nominator = nominator
    app.state.elector = elector
    app.state.questions = Questions(store, engine.core_settings, engine.binder,
                                    round_timeout_seconds=settings.round_timeout_seconds, clock=engine.clock,
                                    eval_clock=engine.eval_clock)
    app.state.store = store
    app.state.settings = settings
    app.state.metrics = metrics
    app.state.gate = gate
    app.add_exception_handler(Denied, explain.denied)
    app.include_router(scheduler.router)
    app.include_router(explain.router)
    app.include_router(page.router)
    app.include_router(operations.router)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's schema, with the models of the bodies the routes read raw."""
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


__all__ = ["ExtenderApp", "ViewSource", "create_app"]
