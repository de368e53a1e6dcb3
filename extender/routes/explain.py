"""The explain API under ``/api/v1``: a pod's recorded decision, a NodeDrain's live plan, a fresh
preview of a pod or a shape, the capacity for a shape, a policy's latest decision and every node's
allocations.

Every answer is authorized first, with the caller's own rights (:mod:`berth.extender.authz`):
nothing is computed, and nothing read from the API server, for a caller who may not read it. A
refusal is raised as :class:`~berth.extender.authz.Denied` and answered by :func:`denied`, the
app's handler for it.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence
from typing import Any

import orjson
from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from berth.core import API_GROUP, ERROR_CODES, NODEDRAIN_PLURAL, POLICY_PLURAL, ObjectError, PodInfo, pod_from_object
from berth.extender.authz import Access, ApiGate, Caller, Denied
from berth.extender.metrics import Metrics
from berth.extender.questions import Questions
from berth.extender.routes.deps import GateDep, MetricsDep, QuestionsDep, SettingsDep
from berth.extender.routes.scheduler import body_schema
from berth.extender.settings import ExtenderSettings
from berth.extender.wire import BadRequest, decode

log = logging.getLogger("berth.extender.routes.explain")

JSON = "application/json"

DRAIN_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
"""A NodeDrain's name: a DNS subdomain (the length is checked by the API server)."""


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


def bounded_pod(shape: ShapeRequest, settings: ExtenderSettings) -> PodInfo:
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


def parse_labels(text: str) -> dict[str, str]:
    """``k=v,k2=v2`` -> the labels; :class:`BadRequest` naming a part that is not ``key=value``."""
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


def _json(data: object, status: int = 200) -> Response:
    return Response(content=orjson.dumps(data), status_code=status, media_type=JSON)


def denied(_: Request, exc: Exception) -> Response:
    """The app's answer to :class:`Denied`: 401 (with the bearer challenge) or 403, naming why."""
    assert isinstance(exc, Denied)
    headers = {"WWW-Authenticate": 'Bearer realm="berth"'} if exc.status == 401 else None
    return Response(content=orjson.dumps({"error": exc.message}), status_code=exc.status, media_type=JSON,
                    headers=headers)


async def caller_of(request: Request, gate: ApiGate) -> Caller | None:
    """The authenticated caller (None when anonymous access is on); :class:`Denied` 401 else."""
    return await gate.caller(request.headers.get("authorization"))


async def authorize(request: Request, gate: ApiGate, accesses: Sequence[Access]) -> None:
    """Returns when the caller may read what ``accesses`` name; :class:`Denied` otherwise."""
    await gate.require(await caller_of(request, gate), accesses)


def shape_accesses(pod: PodInfo) -> tuple[Access, ...]:
    """A preview or a capacity table shows the policies of the pod's namespace and every node."""
    return Access("list", POLICY_PLURAL, API_GROUP, pod.namespace), Access("list", "nodes")


API_BAD: dict[int | str, dict[str, Any]] = {
    400: {"model": ApiError, "description": "bad input"},
    401: {"model": ApiError, "description": "no bearer token, or one the API server does not authenticate"},
    403: {"model": ApiError, "description": "the caller may not read what this answer holds"}}

router = APIRouter(prefix="/api/v1", tags=["explain"])


@router.get("/decisions/{namespace}/{pod}",
            responses={**API_BAD, 200: {"description": "the recorded decision: a DecisionRecord (its schema is "
                                                       "docs/decision-record.schema.json); error.code is one of "
                                                       f"{ERROR_CODES}"},
                       404: {"model": ApiError, "description": "no decision recorded for this pod"}})
async def decision(namespace: str, pod: str, request: Request, questions: QuestionsDep, gate: GateDep,
                   metrics: MetricsDep) -> Response:
    started = time.perf_counter()
    # before the decision is looked up, or the pod read with berth's rights
    await authorize(request, gate, (Access("get", "pods", namespace=namespace),))
    try:
        found = await questions.decision_of(namespace, pod)
    except Exception as exc:
        log.warning("cannot read the decision of %s/%s: %s", namespace, pod, exc)
        return _json({"error": f"cannot read the decision of {namespace}/{pod}: {exc}"}, 503)
    metrics.observe("decision", time.perf_counter() - started)
    if found is None:
        return _json({"error": f"no decision recorded for pod {namespace}/{pod}"}, 404)
    return Response(content=found, media_type=JSON)


@router.get("/drains/{name}",
            responses={**API_BAD, 200: {"description": "the NodeDrain's live plan: its spec and its status (each "
                                                       "pod's source, destination and state, the counts, phase "
                                                       "and conditions)"},
                       404: {"model": ApiError, "description": "no NodeDrain of this name"}})
async def drain_plan(name: str, request: Request, questions: QuestionsDep, gate: GateDep) -> Response:
    if len(name) > 253 or not DRAIN_NAME.fullmatch(name):
        return _json({"error": f"name: {name[:64]!r} is not a NodeDrain name (a DNS subdomain)"}, 400)
    # before the NodeDrain is read with berth's rights
    await authorize(request, gate, (Access("get", NODEDRAIN_PLURAL, API_GROUP),))
    try:
        found = await questions.drain(name)
    except Exception as exc:
        log.warning("cannot read NodeDrain %s: %s", name, exc)
        return _json({"error": f"cannot read NodeDrain {name}: {exc}"}, 503)
    if found is None:
        return _json({"error": f"no NodeDrain {name}"}, 404)
    return _json({"name": name, "spec": found.get("spec") or {}, "status": found.get("status") or {}})


@router.post("/preview", openapi_extra=body_schema(ShapeRequest),
             responses={**API_BAD, 200: {"description": "a fresh evaluation of every node: decision and scores; "
                                                        f"decision.error.code is one of {ERROR_CODES}"},
                        404: {"model": ApiError, "description": "the named policy does not exist"}})
async def preview(request: Request, questions: QuestionsDep, gate: GateDep, settings: SettingsDep,
                  metrics: MetricsDep) -> Response:
    started = time.perf_counter()
    caller = await caller_of(request, gate)
    try:
        shape = decode(await request.body(), ShapeRequest)
        shape_pod = bounded_pod(shape, settings)
        await gate.require(caller, shape_accesses(shape_pod))
        result = questions.preview(shape_pod, shape.policy, shape.nodes)
    except BadRequest as exc:
        return _json({"error": str(exc)}, 400)
    except LookupError as exc:
        return _json({"error": str(exc).strip("'\"")}, 404)
    metrics.observe("preview", time.perf_counter() - started)
    return _json(result)


CAPACITY_RESPONSES: dict[int | str, dict[str, Any]] = {
    **API_BAD, 200: {"description": "each node's room for the shape, the total, and placeable: how many one "
                                    "round could place under the whole policy and why not one more"},
    404: {"model": ApiError, "description": "the named policy does not exist"}}


@router.get("/capacity", responses=CAPACITY_RESPONSES)
async def capacity_get(
    request: Request,
    questions: QuestionsDep,
    metrics: MetricsDep,
    gate: GateDep,
    settings: SettingsDep,
    namespace: str = Query("default", min_length=1, max_length=253),
    labels: str = Query("", description="k=v,k2=v2: the pod's labels (selects the policy)"),
    cpu: str | None = Query(None, description="e.g. 500m"),
    memory: str | None = Query(None, description="e.g. 1Gi"),
    ephemeral_storage: str | None = Query(None, alias="ephemeral-storage"),
    policy: str | None = Query(None),
) -> Response:
    caller = await caller_of(request, gate)
    try:
        given = (("cpu", cpu), ("memory", memory), ("ephemeral-storage", ephemeral_storage))
        requests: dict[str, str | int | float] = {k: v for k, v in given if v}
        shape = ShapeRequest(namespace=namespace, labels=parse_labels(labels), requests=requests,
                             policy=policy or None)
    except (BadRequest, ValueError) as exc:
        return _json({"error": str(exc)}, 400)
    return await _capacity(questions, metrics, gate, settings, caller, shape)


@router.post("/capacity", responses=CAPACITY_RESPONSES, openapi_extra=body_schema(ShapeRequest))
async def capacity_post(request: Request, questions: QuestionsDep, metrics: MetricsDep, gate: GateDep,
                        settings: SettingsDep) -> Response:
    caller = await caller_of(request, gate)
    try:
        shape = decode(await request.body(), ShapeRequest)
    except BadRequest as exc:
        return _json({"error": str(exc)}, 400)
    return await _capacity(questions, metrics, gate, settings, caller, shape)


async def _capacity(questions: Questions, metrics: Metrics, gate: ApiGate, settings: ExtenderSettings,
                    caller: Caller | None, shape: ShapeRequest) -> Response:
    started = time.perf_counter()
    try:
        shape_pod = bounded_pod(shape, settings)
        await gate.require(caller, shape_accesses(shape_pod))
        result = questions.capacity(shape_pod, shape.policy)
    except BadRequest as exc:
        return _json({"error": str(exc)}, 400)
    except LookupError as exc:
        return _json({"error": str(exc).strip("'\"")}, 404)
    metrics.observe("capacity", time.perf_counter() - started)
    return _json(result)


@router.get("/policies/{namespace}/{name}/decision",
            responses={**API_BAD, 200: {"description": "the latest decision of a pod the policy governs "
                                                       "(decision, decisionSource) and a fresh preview"},
                       404: {"model": ApiError, "description": "no valid PlacementPolicy of that name"}})
async def policy_decision(namespace: str, name: str, request: Request, questions: QuestionsDep,
                          gate: GateDep, metrics: MetricsDep) -> Response:
    started = time.perf_counter()
    # a decision of a pod of the namespace, and a preview: what both of those answers need
    await authorize(request, gate, (Access("get", "pods", namespace=namespace),
                                    Access("list", POLICY_PLURAL, API_GROUP, namespace),
                                    Access("list", "nodes")))
    try:
        result = questions.policy_decision(namespace, name)
    except LookupError as exc:
        return _json({"error": str(exc).strip("'\"")}, 404)
    metrics.observe("policy_decision", time.perf_counter() - started)
    return _json(result)


@router.get("/nodes/allocations",
            responses={**API_BAD, 200: {"description": "every node's allocatable, requested, free and unknown "
                                                       "dimensions, and the settings in force"}})
async def allocations(request: Request, questions: QuestionsDep, gate: GateDep, metrics: MetricsDep) -> Response:
    started = time.perf_counter()
    await authorize(request, gate, (Access("list", "nodes"),
                                    Access("list", POLICY_PLURAL, API_GROUP)))  # every namespace's
    result = questions.allocations()
    metrics.observe("allocations", time.perf_counter() - started)
    return _json(result)
