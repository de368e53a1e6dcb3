"""What the routes are given: FastAPI dependencies over the services the app was made with
(:func:`berth.extender.app.create_app` puts them in ``app.state``).

A test replaces any of them with ``app.dependency_overrides[deps.engine] = lambda: fake``. The
scheduler verbs' fast path (:class:`berth.extender.app.ExtenderApp`) solves no dependency, so
while any dependency is overridden the verbs go through their FastAPI routes, which do.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from berth.extender.authz import ApiGate
from berth.extender.engine import Extender
from berth.extender.metrics import Metrics
from berth.extender.questions import Questions
from berth.extender.settings import ExtenderSettings
from berth.extender.store import ClusterStore


def engine(request: Request) -> Extender:
    """The engine: the verbs and the explain API's questions over the cluster store."""
    found: Extender = request.app.state.engine
    return found


def questions(request: Request) -> Questions:
    """The explain API's questions over the store (they count nothing)."""
    found: Questions = request.app.state.questions
    return found


def store(request: Request) -> ClusterStore:
    """The cluster store (the view the watches keep current)."""
    found: ClusterStore = request.app.state.store
    return found


def settings(request: Request) -> ExtenderSettings:
    """The extender's settings in force."""
    found: ExtenderSettings = request.app.state.settings
    return found


def metrics(request: Request) -> Metrics:
    """The Prometheus metrics the engine counts in."""
    found: Metrics = request.app.state.metrics
    return found


def gate(request: Request) -> ApiGate:
    """Who may read the explain API and the page (:mod:`berth.extender.authz`)."""
    found: ApiGate = request.app.state.gate
    return found


EngineDep = Annotated[Extender, Depends(engine)]
QuestionsDep = Annotated[Questions, Depends(questions)]
StoreDep = Annotated[ClusterStore, Depends(store)]
SettingsDep = Annotated[ExtenderSettings, Depends(settings)]
MetricsDep = Annotated[Metrics, Depends(metrics)]
GateDep = Annotated[ApiGate, Depends(gate)]
