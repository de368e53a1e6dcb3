"""A NodeDrain in mode ``Execute``: cordon the drained nodes, then evict the planned pods.

Each tick (the NodeDrain's create, spec update and timer), :func:`execute`:

1. plans the drain with the core's one planning function, keeping the destinations already chosen
   (a pod ``Planned`` or ``Evicting`` in the status keeps its destination, whose room is counted
   first, as long as that node is still a destination): the plan does not shift under pods on
   their way, and a blocked pod is planned again on the cluster as it is now (a node added, pods
   removed) with that room taken;
2. cordons the drained nodes that are not cordoned yet (``spec.unschedulable``; they stay
   cordoned when the NodeDrain is deleted, as after ``kubectl drain``);
3. evicts planned pods through the Eviction API (``policy/v1`` Eviction, which the API server
   refuses with 429 while a PodDisruptionBudget allows no disruption), at most
   ``spec.maxEvictionsInFlight`` pods ``Evicting`` at once; a refused eviction stays ``Evicting``
   and is asked for again after a backoff (:func:`backoff`);
4. marks ``Moved`` an evicted pod that is gone (its entry keeps the pod's requests and labels,
   written while it was on its way: an extender restarted after the eviction holds the
   destination's room for the replacement from them), and writes the states, the counts, the phase
   (``Draining``, then ``Drained`` or ``Blocked``) and the ``Drained`` condition, with Events.

The ticks of one drain run one at a time, each from the latest status the operator wrote for it
when the body it is handed is older (:func:`latest_status`). The drain finishes when every pod is
moved or blocked. Deleting the NodeDrain stops it: no finalizer, so the next tick never comes;
nodes stay cordoned.

The API calls go through :class:`DrainApi` (:class:`KubeDrainApi` with the kubernetes client; the
tests hand in a fake).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from berth.core import (
    ClusterView,
    PodPlan,
    PodState,
    PolicyLookup,
    Settings,
    format_time,
    nodedrain_spec,
    parse_time,
    shape_of,
)
from berth.operator import conditions as cond
from berth.operator.drain_status import CONDITION_DRAINED, PODS_LIMIT, validated
from berth.operator.reconcile import Event

if TYPE_CHECKING:
    from berth.operator.drain import DrainOutcome

log = logging.getLogger("berth.operator")

BACKOFF_SECONDS = 5.0
"""The first wait before a refused eviction is asked for again (kubectl drain waits 5 s)."""
BACKOFF_MAX_SECONDS = 60.0
"""The longest wait between two requests for one pod's eviction."""

_ON_THE_WAY = (PodState.PLANNED.value, PodState.EVICTING.value)


def backoff(attempts: int) -> float:
    """Seconds to wait after the ``attempts``-th refused eviction: 5, 10, 20, 40, then 60."""
    return min(BACKOFF_SECONDS * float(2 ** max(attempts - 1, 0)), BACKOFF_MAX_SECONDS)


class Evicted(StrEnum):
    ACCEPTED = "Accepted"  # the pod is being deleted
    REFUSED = "Refused"  # 429: a PodDisruptionBudget allows no disruption now
    GONE = "Gone"  # 404: the pod is gone already
    FAILED = "Failed"  # any other error: asked for again after the backoff


@dataclass(frozen=True)
class EvictionResult:
    outcome: Evicted
    message: str = ""


class DrainApi(Protocol):
    async def cordon(self, node: str) -> None:
        """Set the node's ``spec.unschedulable`` (raises on failure)."""

    async def evict(self, namespace: str, name: str, uid: str) -> EvictionResult:
        """Ask the Eviction API to evict the pod (``uid`` as a precondition)."""


def held_destinations(previous_pods: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """The destinations an executing drain keeps: its pods planned or on their way."""
    return {str(e["uid"]): str(e["destination"]) for e in previous_pods
            if e.get("uid") and e.get("destination") and e.get("state") in _ON_THE_WAY}


def _retry_due(entry: Mapping[str, Any], now: float) -> bool:
    retry = entry.get("retryAt")
    return retry is None or parse_time(str(retry)) <= now


@dataclass
class Step:
    """The pods' entries after a tick's bookkeeping, and which of them to evict now."""

    pods: list[dict[str, Any]]
    evict: list[dict[str, Any]]  # entries of ``pods`` (changed in place by the results)


def plan_step(planned: Iterable[Mapping[str, Any]], previous_pods: Iterable[Mapping[str, Any]], view: ClusterView,
              limit: int, now: float) -> Step:
    """Merge this tick's plan entries (``planned``, with uids) with the previous status: evictions
    in flight stay ``Evicting``; an evicted pod that is gone is ``Moved``; a pod keeping its
    destination keeps the warnings its plan gave it (such as an explicit target berth's checks
    refuse); then choose the pods to
    evict: refused evictions whose backoff passed, and planned pods while fewer than ``limit`` are
    in flight. A planned pod is evicted only once the previous status published it with the same
    destination: the extender reads the status to hold that room for the pod's replacement, which
    its controller creates at once."""
    previous = {str(e["uid"]): e for e in previous_pods if e.get("uid")}
    pods: list[dict[str, Any]] = []
    seen: set[str] = set()
    for entry in planned:
        out = dict(entry)
        seen.add(str(out["uid"]))
        before = previous.get(str(out["uid"]))
        if before is not None and "warnings" not in out and before.get("warnings") \
                and before.get("destination") == out.get("destination"):
            out["warnings"] = before["warnings"]  # a pod on its way is not judged again: its plan's warnings stay
        if out["state"] == PodState.PLANNED.value and before is not None \
                and before.get("state") == PodState.EVICTING.value:
            out["state"] = PodState.EVICTING.value
            out.update({k: before[k] for k in ("evictedAt", "attempts", "retryAt", "refusal") if k in before})
        pods.append(out)
    for uid, before in previous.items():
        if uid in seen or before.get("state") not in (PodState.EVICTING.value, PodState.MOVED.value):
            continue
        if view.pod(uid) is None:  # evicted and gone: its controller recreates it
            moved = {k: v for k, v in before.items() if k not in ("retryAt", "refusal")}
            moved["state"] = PodState.MOVED.value
            pods.append(moved)
        # else: no longer planned (its destination left the drain): the plan has the pod again
    in_flight = sum(1 for e in pods if e["state"] == PodState.EVICTING.value and "evictedAt" in e)
    evict = [e for e in pods if e["state"] == PodState.EVICTING.value and "evictedAt" not in e
             and _retry_due(e, now)]
    waiting = sum(1 for e in pods if e["state"] == PodState.EVICTING.value and "evictedAt" not in e)
    room = limit - in_flight - waiting
    for entry in pods:
        if room <= 0:
            break
        published = previous.get(str(entry["uid"])) or {}
        if entry["state"] == PodState.PLANNED.value and _retry_due(entry, now) \
                and published.get("state") == PodState.PLANNED.value \
                and published.get("destination") == entry.get("destination"):
            evict.append(entry)
            room -= 1
    return Step(pods, evict)


def record_eviction(entry: dict[str, Any], result: EvictionResult, now: float) -> Event | None:
    """Write one eviction request's result on its entry; the Event it deserves, if any."""
    where = f"{entry['pod']} from {entry['source']} (planned destination {entry.get('destination')})"
    if result.outcome is Evicted.ACCEPTED:
        entry.update(state=PodState.EVICTING.value, evictedAt=format_time(now))
        entry.pop("retryAt", None)
        entry.pop("refusal", None)
        return Event("Normal", "Evicting", f"evicting {where}")
    if result.outcome is Evicted.GONE:
        entry["state"] = PodState.MOVED.value
        entry.pop("retryAt", None)
        return None
    attempts = int(entry.get("attempts") or 0) + 1
    entry.update(attempts=attempts, retryAt=format_time(now + backoff(attempts)), refusal=result.message[:512])
    if result.outcome is Evicted.REFUSED:
        entry["state"] = PodState.EVICTING.value
        if attempts == 1:
            return Event("Warning", "EvictionRefused", f"{where}: {result.message}; retried with backoff")
    return None


def latest_status(written: Sequence[Mapping[str, Any]], read: Mapping[str, Any]) -> Mapping[str, Any]:
    """The status a tick of an executing drain starts from: ``read``, the body's, unless it is one
    of ``written`` (the status this operator's ticks started from, then each one they wrote, the
    latest last) before the latest: the watch has not brought the latest back yet (a timer's next
    tick does not wait for its patch to; the update and timer handlers of one drain each write),
    and a tick started from it would evict again what was evicted, ask again before the backoff,
    and lose the pods moved since. A status of anyone else's is the body's."""
    if written and read != written[-1] and any(read == s for s in written[:-1]):
        return written[-1]
    return read


def written_after(written: Sequence[Mapping[str, Any]], read: Mapping[str, Any],
                  status: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """``written`` after a tick that read ``read`` and wrote ``status``: from the status it started
    from (a watch brings a drain's statuses in order: the older ones will not come back)."""
    start = next((i for i, s in enumerate(written) if read == s), None)
    out = list(written[start:]) if start is not None else [read]
    if status != out[-1]:
        out.append(status)
    return out


def listed(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The entries the status lists, by source node then pod: at most :data:`PODS_LIMIT`, those
    being evicted or moved first (the status is the drain's only memory of them)."""
    keep = sorted(pods, key=lambda e: (e["state"] not in (PodState.EVICTING.value, PodState.MOVED.value),
                                       e["source"], e["pod"]))[:PODS_LIMIT]
    return sorted(keep, key=lambda e: (e["source"], e["pod"]))


def _drained_condition(pods: list[dict[str, Any]]) -> tuple[str, cond.ConditionUpdate]:
    count = {s: sum(1 for e in pods if e["state"] == s.value) for s in PodState}
    moving = count[PodState.PLANNED] + count[PodState.EVICTING]
    if moving:
        return "Draining", cond.ConditionUpdate(
            CONDITION_DRAINED, "False", "Evicting",
            f"{count[PodState.EVICTING]} pod(s) being evicted, {count[PodState.PLANNED]} to evict, "
            f"{count[PodState.MOVED]} moved")
    if count[PodState.BLOCKED]:
        return "Blocked", cond.ConditionUpdate(
            CONDITION_DRAINED, "False", "PodsBlocked",
            f"{count[PodState.MOVED]} pod(s) moved; {count[PodState.BLOCKED]} blocked stay where they are and are "
            "planned again when the cluster changes")
    return "Drained", cond.ConditionUpdate(CONDITION_DRAINED, "True", "AllPodsMoved",
                                           f"every pod moved ({count[PodState.MOVED]})")


async def execute(body: Mapping[str, Any], view: ClusterView, policy_for: PolicyLookup, settings: Settings,
                  now: float, api: DrainApi, guard: AbstractContextManager[Any] | None = None) -> DrainOutcome:
    """One tick of an executing drain: its new status and the Events it deserves. ``guard`` is
    held while the tick reads ``view`` (the lock of a view that watch threads change), not while
    it waits for the API: the plan and the step are made on one state of the cluster."""
    from berth.operator.drain import compute_drain_status, pod_status

    previous = body.get("status") or {}
    previous_pods = list(previous.get("pods") or [])
    with guard if guard is not None else nullcontext():
        outcome = compute_drain_status(body, view, policy_for, settings, now, held_destinations(previous_pods))
        if outcome.plan is None:
            return outcome  # invalid: nothing is cordoned or evicted
        spec = nodedrain_spec(body.get("spec"))
        to_cordon = [node for node in outcome.plan.nodes
                     if (info := view.nodes.get(node)) is not None and not info.unschedulable]
        planned = [{**pod_status(p), "uid": p.uid, **_shape(view, p)} for p in outcome.plan.pods]
        step = plan_step(planned, previous_pods, view, spec.max_evictions_in_flight, now)
    for node in to_cordon:
        try:
            await api.cordon(node)
        except Exception as exc:  # the API's error: reported, tried again on the next tick
            outcome.events.append(Event("Warning", "CordonFailed", f"cannot cordon {node}: {exc}"))
            return outcome  # nothing is evicted from a node that stays schedulable
        outcome.events.append(Event("Normal", "Cordoned", f"cordoned {node}"))
    for entry in step.evict:
        namespace, name = str(entry["pod"]).split("/", 1)
        result = await api.evict(namespace, name, str(entry["uid"]))
        event = record_eviction(entry, result, now)
        if event is not None:
            outcome.events.append(event)
    status = dict(outcome.status)
    phase, drained = _drained_condition(step.pods)
    stamp = format_time(now)
    generation = int(status.get("observedGeneration") or 0)
    status["conditions"] = cond.apply(status.get("conditions"), [drained], generation, stamp)
    counts = {s: sum(1 for e in step.pods if e["state"] == s.value) for s in PodState}
    status.update(phase=phase, planned=counts[PodState.PLANNED], blocked=counts[PodState.BLOCKED],
                  evicting=counts[PodState.EVICTING], moved=counts[PodState.MOVED], left=counts[PodState.LEFT],
                  pods=listed(step.pods))
    outcome.status = validated(status)
    before = cond.find(previous.get("conditions"), CONDITION_DRAINED)
    changed = before is None or (before.get("status"), before.get("reason")) != (drained.status, drained.reason)
    if changed and drained.reason != "Evicting":
        outcome.events.append(Event("Normal" if drained.status == "True" else "Warning",
                                    "Drained" if drained.status == "True" else "PodsBlocked", drained.message))
    return outcome


def _shape(view: ClusterView, p: PodPlan) -> dict[str, Any]:
    """A pod on its way keeps its shape in the status: an extender that never saw the pod (one
    restarted after the eviction) holds its destination's room from it."""
    pod = view.pod(p.uid) if p.destination else None
    return shape_of(pod) if pod is not None else {}


class KubeDrainApi:
    """Cordon and evict through the kubernetes client (in a thread: the client is synchronous)."""

    def __init__(self, api_client: Any) -> None:
        from kubernetes import client

        self.core: Any = client.CoreV1Api(api_client)

    async def cordon(self, node: str) -> None:
        await asyncio.to_thread(self.core.patch_node, node, {"spec": {"unschedulable": True}},
                                _preload_content=False)

    async def evict(self, namespace: str, name: str, uid: str) -> EvictionResult:
        return await asyncio.to_thread(self._evict, namespace, name, uid)

    def _evict(self, namespace: str, name: str, uid: str) -> EvictionResult:
        from kubernetes.client.exceptions import ApiException

        body = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": name, "namespace": namespace},
                "deleteOptions": {"preconditions": {"uid": uid}}}
        try:
            self.core.create_namespaced_pod_eviction(name, namespace, body, _preload_content=False)
        except ApiException as exc:
            message = _reason(exc)
            if exc.status == 429:
                return EvictionResult(Evicted.REFUSED, message)
            if exc.status == 404:
                return EvictionResult(Evicted.GONE, message)
            if exc.status == 409 and "uid" in message.lower():  # the precondition: another pod of that name
                return EvictionResult(Evicted.GONE, message)
            return EvictionResult(Evicted.FAILED, message)
        return EvictionResult(Evicted.ACCEPTED)


def _reason(exc: Any) -> str:
    import json

    try:
        return str(json.loads(exc.body).get("message") or exc.reason)
    except (TypeError, ValueError, AttributeError):
        return str(exc.reason)
