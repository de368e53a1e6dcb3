"""The operator's NodeDrain: its admission check and its Plan mode (Execute mode builds on it:
:mod:`berth.operator.drain_execute`).

A NodeDrain in mode ``Plan`` is planned with the core's one planning function
(:func:`berth.core.drain.plan_drain`) on the operator's view of the cluster, and the plan is
written to its status: each affected pod's source, planned destination and state, a blocked pod's
refusals, the counts the printer columns show, and two conditions:

- ``Valid``: the spec can be planned (``Validated``), or why not (``InvalidSpec``, naming the field:
  a node the cluster does not have, a drained node as a destination).
- ``Planned``: every affected pod has a destination (``AllPodsPlanned``), or not (``PodsBlocked``,
  naming them).

In Plan mode nothing is evicted. A drain is planned again when its
spec changes and, since a blocked pod may find room when the cluster changes, on a timer tick
when the cluster view or the policies changed (and every :data:`REPLAN_SECONDS` regardless).

The reconcile function is plain data in, status out; :func:`register` wires it into a Kopf
registry, with the cluster view and the policy lookup handed in by the caller.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import kopf

from berth.core import (
    API_GROUP,
    API_VERSION,
    CRD_VERSION,
    NODEDRAIN_KIND,
    NODEDRAIN_PLURAL,
    POLICY_PLURAL,
    ClusterView,
    DrainMode,
    DrainPlan,
    InvalidDrain,
    PlacementPolicy,
    PodPlan,
    PodState,
    PolicyLookup,
    Settings,
    format_time,
    nodedrain_spec,
    plan_drain,
)
from berth.operator import conditions as cond
from berth.operator.admission import REFUSAL_CODE
from berth.operator.drain_execute import DrainApi, execute, latest_status, written_after
from berth.operator.drain_status import (
    CONDITION_PLANNED,
    CONDITION_VALID,
    PODS_LIMIT,
    REFUSED_LIMIT,
    validated,
)
from berth.operator.patches import merge_patch
from berth.operator.reconcile import Event, parsed_policy, transition_events

log = logging.getLogger("berth.operator")

NODEDRAIN = (API_GROUP, CRD_VERSION, NODEDRAIN_PLURAL)
WEBHOOK_ID = "validate-nodedrain"
TIMER_ID = "nodedrain-replan"
POLICIES_INDEX = "berth_drain_policies"
DRAINS_INDEX = "berth_policy_drains"
"""The index of what each NodeDrain does to each policy's pods (:func:`policy_drains`), by policy
key: the policies' statuses show it."""
REPLAN_SECONDS = 30
"""A drain whose inputs did not change is planned again this often all the same."""
BLOCKED_NAMED = 5
"""Blocked pods named in the Planned condition's message (the status lists them all)."""


# -- admission --------------------------------------------------------------------------------------


def admission_problem(new: Mapping[str, Any] | None, old: Mapping[str, Any] | None, operation: str) -> str | None:
    """Why the API server must refuse this NodeDrain CREATE or UPDATE (the core's message, naming
    the field), or None. An UPDATE that keeps the spec is allowed, as for PlacementPolicies."""
    if operation not in ("CREATE", "UPDATE") or new is None:
        return None
    if operation == "UPDATE" and old is not None and old.get("spec") == new.get("spec"):
        return None
    if new.get("apiVersion") not in (None, API_VERSION) or new.get("kind") not in (None, NODEDRAIN_KIND):
        return None
    try:
        nodedrain_spec(new.get("spec"))
    except InvalidDrain as exc:
        return str(exc)
    return None


# -- Plan mode ----------------------------------------------------------------------------------------


@dataclass
class DrainOutcome:
    status: dict[str, Any]
    events: list[Event] = field(default_factory=list)
    plan: DrainPlan | None = None


def compute_drain_status(body: Mapping[str, Any], view: ClusterView, policy_for: PolicyLookup, settings: Settings,
                         now: float, held: Mapping[str, str] | None = None) -> DrainOutcome:
    """The status of the NodeDrain ``body`` planned on ``view``, and the Events its changes deserve.
    ``held``: the destinations an executing drain keeps (pod uid to node)."""
    meta = body.get("metadata") or {}
    generation = int(meta.get("generation") or 0)
    previous = body.get("status") or {}
    stamp = format_time(now)
    try:
        spec = nodedrain_spec(body.get("spec"))
        plan = plan_drain(view, spec.to_request(), policy_for, settings, now, held)
    except InvalidDrain as exc:
        field_path = exc.field if exc.field.startswith("spec") else f"spec.{exc.field}"
        message = f"{field_path}: {exc.problem}"
        updates = [cond.ConditionUpdate(CONDITION_VALID, "False", "InvalidSpec", message),
                   cond.ConditionUpdate(CONDITION_PLANNED, "Unknown", "InvalidSpec",
                                        "the drain cannot be planned: " + message)]
        status: dict[str, Any] = {"observedGeneration": generation, "phase": "Invalid",
                                  "conditions": cond.apply(previous.get("conditions"), updates, generation, stamp)}
        return DrainOutcome(validated(status), drain_events(previous.get("conditions"), status["conditions"]))
    blocked = [p for p in plan.pods if p.state is PodState.BLOCKED]
    updates = [cond.ConditionUpdate(CONDITION_VALID, "True", "Validated", "the spec is valid"),
               _planned(plan, blocked, spec.mode)]
    status = {
        "observedGeneration": generation,
        "phase": "Blocked" if blocked else "Planned",
        "conditions": cond.apply(previous.get("conditions"), updates, generation, stamp),
        "nodes": plan.nodes,
        "destinations": len(plan.destinations),
        "planned": plan.count(PodState.PLANNED),
        "blocked": len(blocked),
        "moved": 0,
        "left": plan.count(PodState.LEFT),
        "pods": [pod_status(p) for p in plan.pods[:PODS_LIMIT]],
    }
    return DrainOutcome(validated(status), drain_events(previous.get("conditions"), status["conditions"]), plan)


def _planned(plan: DrainPlan, blocked: list[PodPlan], mode: DrainMode) -> cond.ConditionUpdate:
    if not blocked:
        moving = plan.count(PodState.PLANNED)
        tail = "; nothing is evicted in Plan mode" if mode is DrainMode.PLAN else ""
        return cond.ConditionUpdate(CONDITION_PLANNED, "True", "AllPodsPlanned",
                                    f"every pod has a destination ({moving} to move, {plan.count(PodState.LEFT)} "
                                    f"left where they are){tail}")
    names = ", ".join(p.pod for p in blocked[:BLOCKED_NAMED])
    more = f" and {len(blocked) - BLOCKED_NAMED} more" if len(blocked) > BLOCKED_NAMED else ""
    return cond.ConditionUpdate(CONDITION_PLANNED, "False", "PodsBlocked",
                                f"{len(blocked)} pod(s) have no destination and stay where they are: {names}{more}")


def drain_events(before: Iterable[Mapping[str, Any]] | None, after: Iterable[Mapping[str, Any]]) -> list[Event]:
    """The policy's events for the Valid condition, and for Planned: a Warning when pods become
    blocked, a Normal event when every pod has a destination again."""
    after = list(after)
    events = transition_events(before, after)
    now = cond.find(after, CONDITION_PLANNED)
    old = cond.find(before, CONDITION_PLANNED)
    if now is not None and not (old is not None and (old.get("status"), old.get("reason")) ==
                                (now.get("status"), now.get("reason"))):
        if now.get("status") == "False":
            events.append(Event("Warning", "PodsBlocked", str(now.get("message", ""))))
        elif now.get("status") == "True" and old is not None and old.get("status") == "False":
            events.append(Event("Normal", "AllPodsPlanned", str(now.get("message", ""))))
    return events


def pod_status(p: PodPlan) -> dict[str, Any]:
    """One pod of the plan as the status lists it (at most :data:`REFUSED_LIMIT` refusals)."""
    out: dict[str, Any] = {"pod": p.pod, "source": p.source, "state": p.state.value}
    optional = {"workload": p.workload, "policy": p.policy, "destination": p.destination, "reason": p.reason,
                "code": p.code.value if p.code else None}
    out.update({k: v for k, v in optional.items() if v is not None})
    if p.refused:
        out["refused"] = dict(list(p.refused.items())[:REFUSED_LIMIT])
        out["refusedCount"] = len(p.refused)
    if p.warnings:
        out["warnings"] = list(p.warnings)
    return out


def policy_drains(body: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """What the NodeDrain ``body`` does to each PlacementPolicy's pods, by policy key
    (``namespace/name``), from its status: its pods moved and planned per destination, and its
    pods blocked (the policy status's ``drains`` entries)."""
    status = body.get("status")
    entries = status.get("pods") if isinstance(status, Mapping) else None
    if not isinstance(entries, list):
        return {}
    name = str((body.get("metadata") or {}).get("name") or "")
    mode = _mode(body)
    phase = status.get("phase") if isinstance(status, Mapping) else None
    out: dict[str, dict[str, Any]] = {}
    for entry in entries:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("policy"), str):
            continue
        summary = out.setdefault(entry["policy"], {
            "name": name, "mode": mode if mode in (DrainMode.PLAN.value, DrainMode.EXECUTE.value)
            else DrainMode.PLAN.value, **({"phase": phase} if isinstance(phase, str) else {}),
            "moved": {}, "planned": {}, "blocked": 0})
        state, destination = entry.get("state"), entry.get("destination")
        if state == PodState.BLOCKED.value:
            summary["blocked"] += 1
        elif isinstance(destination, str) and state in (PodState.MOVED.value, PodState.PLANNED.value,
                                                         PodState.EVICTING.value):
            where = summary["moved" if state == PodState.MOVED.value else "planned"]
            where[destination] = where.get(destination, 0) + 1
    for summary in out.values():
        summary["moved"] = dict(sorted(summary["moved"].items()))
        summary["planned"] = dict(sorted(summary["planned"].items()))
    return {key: summary for key, summary in out.items()
            if summary["moved"] or summary["planned"] or summary["blocked"]}


def _mode(raw: Mapping[str, Any]) -> object:
    spec = raw.get("spec")
    return spec.get("mode") if isinstance(spec, Mapping) else None


def _policies_key(policies: Mapping[str, Any]) -> tuple[tuple[str, int], ...]:
    """What of the policy index a plan reads: each policy's identity and generation."""
    return tuple(sorted((p.key, p.generation) for found in policies.values() for p in found))


# -- Kopf wiring --------------------------------------------------------------------------------------

ViewOf = Callable[[Mapping[str, Any]], ClusterView]
"""The cluster view, from a handler's keyword arguments (where Kopf passes its indexes)."""


def register(registry: kopf.OperatorRegistry, *, settings: Settings, resync_seconds: float, view_of: ViewOf,
             webhook: bool, fail_closed: bool, api: Callable[[], DrainApi] | None = None,
             guard: AbstractContextManager[Any] | None = None,
             listed: Callable[[], Awaitable[None]] | None = None) -> None:
    """NodeDrain handlers on ``registry``: plan on create, spec update and resume, plan again every
    ``resync_seconds``, and (with ``webhook``) the validating admission handler. PlacementPolicies
    are indexed by namespace so each pod is planned under its own. ``api`` gives what an executing
    drain cordons and evicts with (made on first use); without it Execute mode reports that it
    cannot run. ``guard`` is held while a plan reads the view (the lock of a view that watch
    threads change). ``listed`` returns once the view holds the cluster's first full list: a
    drain met while the operator starts is not planned on a view still empty (its nodes unknown,
    its pods unseen: Invalid, or Drained with nothing moved)."""

    @kopf.index(API_GROUP, CRD_VERSION, POLICY_PLURAL, id=POLICIES_INDEX, registry=registry)
    async def index_policy(body: kopf.Body, namespace: str | None, **_: Any) -> dict[str, Any]:
        try:
            policy = parsed_policy({k: body[k] for k in body}, default_namespace=namespace or "default")
        except ValueError:
            return {}  # an invalid policy is ignored, as the extender ignores it
        return {policy.namespace: policy}

    @kopf.index(*NODEDRAIN, id=DRAINS_INDEX, registry=registry)
    async def index_drain(body: kopf.Body, **_: Any) -> dict[str, Any]:
        return policy_drains({k: body[k] for k in body})

    memo: dict[str, tuple[ClusterView, tuple[object, ...], dict[str, Any]]] = {}
    # an executing drain's ticks, one at a time, and the statuses they wrote (latest_status)
    ticking: dict[str, asyncio.Lock] = {}
    written: dict[str, list[Mapping[str, Any]]] = {}

    @kopf.on.event(*NODEDRAIN, registry=registry)
    async def drain_event(type: str | None, uid: str | None, **_: Any) -> None:
        if type == "DELETED" and uid:
            memo.pop(uid, None)
            ticking.pop(uid, None)
            written.pop(uid, None)

    async def plan(body: kopf.Body, patch: kopf.Patch, **kwargs: Any) -> None:
        if listed is not None:
            await listed()
        policies: Mapping[str, Any] = kwargs.get(POLICIES_INDEX) or {}
        raw = {key: body[key] for key in body}
        meta = raw.get("metadata") or {}
        uid = str(meta.get("uid") or meta.get("name") or "")
        view, now = view_of(kwargs), time.time()
        # planned again only when what it reads changed (its spec, the cluster, the policies) or
        # REPLAN_SECONDS passed (node liveness ages without events); otherwise a tick is a comparison
        inputs = (meta.get("generation"), view.version, _policies_key(policies), int(now // REPLAN_SECONDS))
        last = memo.get(uid)
        if last is not None and last[0] is view and last[1] == inputs and last[2] == (raw.get("status") or {}):
            return

        def policy_for(pod: Any) -> PlacementPolicy | None:
            found = [p for p in policies.get(pod.namespace, ()) if p.governs(pod.namespace, pod.labels)]
            return min(found, key=lambda p: p.name) if found else None

        if _mode(raw) == DrainMode.EXECUTE.value:
            if api is None:
                raise kopf.PermanentError("Execute mode needs the Kubernetes API: none was configured")
            memo.pop(uid, None)  # an executing drain acts on every tick (evictions, retries)
            async with ticking.setdefault(uid, asyncio.Lock()):
                read = raw.get("status") or {}
                start = latest_status(written.get(uid, ()), read)
                outcome = await execute({**raw, "status": start}, view, policy_for, settings, time.time(), api(),
                                        guard)
                written[uid] = written_after(written.get(uid, ()), read, outcome.status)
        else:
            with guard if guard is not None else nullcontext():
                outcome = compute_drain_status(raw, view, policy_for, settings, now)
            memo[uid] = (view, inputs, outcome.status)
        diff = merge_patch(raw.get("status") or {}, outcome.status)
        if diff:
            patch.status.update(diff)
        for event in outcome.events:
            kopf.event(body, type=event.type, reason=event.reason, message=event.message)

    kopf.on.resume(*NODEDRAIN, id="nodedrain-on-resume", registry=registry)(plan)
    kopf.on.create(*NODEDRAIN, id="nodedrain-on-create", registry=registry)(plan)
    kopf.on.update(*NODEDRAIN, id="nodedrain-on-update", field="spec", registry=registry)(plan)
    # the caller lifts the timer's finalizer (a NodeDrain must be deletable while the operator is down)
    kopf.timer(*NODEDRAIN, id=TIMER_ID, interval=resync_seconds, initial_delay=resync_seconds,
               registry=registry)(plan)

    if webhook:
        @kopf.on.validate(*NODEDRAIN, id=WEBHOOK_ID, operations=["CREATE", "UPDATE"],
                          ignore_failures=not fail_closed, registry=registry)
        async def validate(body: kopf.Body, old: kopf.Body | None = None, operation: str | None = None,
                           **_: Any) -> None:
            problem = admission_problem({k: body[k] for k in body}, {k: old[k] for k in old} if old is not None
                                        else None, operation or "")
            if problem is not None:
                raise kopf.AdmissionError(problem, code=REFUSAL_CODE)
