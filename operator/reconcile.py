"""The status of one PlacementPolicy, computed from plain data: the policy object, the pods of
its namespace, a cluster view and the time. No Kubernetes client, no clock of its own, so the
handlers stay thin and this is tested table-driven with the core.

Conditions (``metav1.Condition``, reasons in CamelCase):

- ``Valid``: the spec passes every limit of the rule language and the schema's checks
  (``Validated`` / ``InvalidSpec`` with the field path and problem). The extender ignores an
  invalid policy, so its pods are placed as if it did not exist. A valid spec whose
  ``nodeFilter.includes`` names nodes the cluster does not have is ``IncludesUnknownNodes``
  (still True: the nodes may come), naming them.
- ``Satisfied``: the pods waiting for a node can be placed now (``NoPendingPods``, ``Planned``),
  or why not (``InsufficientResource``, ``AlreadyFilled``, ``AffinityUnsatisfied``,
  ``SpreadUnsatisfied``: the core's error codes).
- ``Ready``: every pod the policy selects is placed (``AllPodsPlaced`` / ``PodsPending``).
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Container, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from berth.core import (
    DECISION_ANNOTATION,
    ROUND_ANNOTATION,
    ROUND_STRATEGIES,
    ROUND_TIMEOUT_SECONDS,
    ClusterView,
    DecisionRecord,
    InvalidPolicy,
    ObjectError,
    PlacementError,
    PlacementPolicy,
    PodInfo,
    Round,
    Settings,
    format_time,
    parse_time,
    plan_round,
    policy_from_manifest,
    rounds,
    unknown_includes_warning,
)
from berth.operator import conditions as cond
from berth.operator.records import PodRecord
from berth.operator.status_model import (
    CONDITION_READY,
    CONDITION_SATISFIED,
    CONDITION_VALID,
    LIST_LIMIT,
)

log = logging.getLogger("berth.operator")

INCLUDES_UNKNOWN_NODES = "IncludesUnknownNodes"

EventType = Literal["Normal", "Warning"]


@dataclass(frozen=True, slots=True)
class Event:
    type: EventType
    reason: str
    message: str


@dataclass
class Outcome:
    status: dict[str, Any]
    events: list[Event] = field(default_factory=list)
    policy: PlacementPolicy | None = None
    invalid: InvalidPolicy | None = None
    sequence: list[str] | None = None
    """Fill and Each: the node each pending pod takes, in the order they come (the status's
    ``plan`` counts them per node)."""
    round_expires: float | None = None
    """When the round the plan comes from stops being in force unless a pod is placed in it: the
    status must be computed again then (the next round's plan differs)."""


Planner = Callable[[PodInfo, PlacementPolicy, int], tuple[dict[str, int], PlacementError | None]]
"""Plans the round that would open now for ``count`` waiting pods shaped like the pod, for the
policy (:func:`plan_waiting`): (node -> count in the plan's order, the error); the shell may
reuse a recent plan of the same round instead of planning again."""


def plan_waiting(view: ClusterView, pod: PodInfo, policy: PlacementPolicy, settings: Settings, now: float,
                 waiting: int) -> tuple[dict[str, int], PlacementError | None]:
    """Where ``waiting`` pods shaped like ``pod`` go under the round's count rule
    (:mod:`berth.core.round`): Fill and Each, the places of the round that would open now (at
    most the strategy's own round; the rest wait for the next); the greedy strategies, every
    waiting pod, pod by pod. The plan keeps the order the pods take it."""
    if policy.strategy in ROUND_STRATEGIES:
        opening = rounds.open_round(view, pod, policy, settings, now, waiting)
        return (dict(opening.round.plan) if opening.round is not None else {}), opening.error
    result = plan_round(view, pod, policy, settings, now, waiting)
    return dict(result.plan), result.error


POLICIES_KEPT = 4096
_parsed: OrderedDict[Hashable, PlacementPolicy] = OrderedDict()
_parsed_lock = threading.Lock()


def parsed_policy(body: Mapping[str, Any], default_namespace: str = "default") -> PlacementPolicy:
    """:func:`policy_from_manifest` of ``body``, kept for the same manifest (its identity, generation
    and spec, the only parts it reads): every watch event of a policy and every status computed for it
    would otherwise validate and compile the same spec again, a status written being an event too.
    The :data:`POLICIES_KEPT` most recently used are kept; an invalid manifest is not."""
    meta = body.get("metadata")
    try:
        if not isinstance(meta, Mapping):
            raise TypeError("no metadata")
        key = (body.get("apiVersion"), body.get("kind"), meta.get("name"), meta.get("namespace") or default_namespace,
               meta.get("generation"), orjson.dumps(body.get("spec"), option=orjson.OPT_SORT_KEYS))
        with _parsed_lock:
            kept = _parsed.get(key)
            if kept is not None:
                _parsed.move_to_end(key)
                return kept
    except TypeError:  # not plain JSON or not hashable: parsed, and what is wrong said, every time
        return policy_from_manifest(body, default_namespace=default_namespace)
    policy = policy_from_manifest(body, default_namespace=default_namespace)
    with _parsed_lock:
        _parsed[key] = policy
        while len(_parsed) > POLICIES_KEPT:
            _parsed.popitem(last=False)
    return policy


def round_in_force(pods: Iterable[PodRecord], policy: PlacementPolicy, now: float,
                   timeout: float = ROUND_TIMEOUT_SECONDS) -> Round | None:
    """The policy's round still in force at ``now``, rebuilt from the round and decision its
    placed pods record (as a restarted extender rebuilds it), or None."""
    if policy.strategy not in ROUND_STRATEGIES:
        return None
    recorded = []
    for record in pods:
        if record.round is None or not record.info.node_name:
            continue
        mark = rounds.recorded_mark({ROUND_ANNOTATION: record.round, DECISION_ANNOTATION: record.decision})
        if mark is not None:
            recorded.append((record.info.uid, record.info.node_name, mark))
    rnd = rounds.resume(recorded).get(policy.key)
    return rnd if rnd is not None and rounds.in_force(rnd, now, timeout) else None


def compute_status(body: Mapping[str, Any], pods: Iterable[PodRecord], view: Callable[[], ClusterView],
                   settings: Settings, now: float, nodes: Container[str] | None = None,
                   planner: Planner | None = None, round_timeout: float = ROUND_TIMEOUT_SECONDS,
                   drains: Iterable[Mapping[str, Any]] = ()) -> Outcome:
    """The whole status of the policy ``body`` and the Events its changes deserve.

    ``pods`` are the pods of the policy's namespace (others are ignored); ``view`` is called only
    when a plan is needed (some selected pod is pending), by ``planner`` when one is given;
    ``nodes``, the names of the cluster's nodes (default: the view's, when the policy's node
    filter names any). The plan is the one the extender enforces: for Fill and Each, the places
    left in the round in force (its pods' annotations say which, idle at most ``round_timeout``),
    else those of the round that would open now (:func:`plan_waiting`). ``drains``, what
    NodeDrains do to the policy's pods (:func:`berth.operator.drain.policy_drains`), shown by name."""
    meta = body.get("metadata") or {}
    generation = int(meta.get("generation") or 0)
    previous = body.get("status") or {}
    stamp = format_time(now)
    try:
        policy = parsed_policy(body, default_namespace=str(meta.get("namespace") or "default"))
    except InvalidPolicy as exc:
        return _invalid(previous, exc, generation, stamp)

    selected = [p for p in pods if p.live and policy.governs(p.info.namespace, p.info.labels)]
    placed: dict[str, int] = {}
    pending: list[PodRecord] = []
    for record in selected:
        if record.info.node_name:
            placed[record.info.node_name] = placed.get(record.info.node_name, 0) + 1
        else:
            pending.append(record)

    plan: dict[str, int] | None = None
    error: PlacementError | None = None
    plan_failure: str | None = None
    expires: float | None = None
    if pending:
        shape = min(pending, key=lambda p: (p.created, p.info.name))
        try:
            in_force = round_in_force(selected, policy, now, round_timeout)
            if in_force is not None:
                plan = rounds.take(rounds.quota(in_force), len(pending))
                expires = in_force.active + round_timeout
            elif planner is not None:
                plan, error = planner(shape.info, policy, len(pending))
            else:
                plan, error = plan_waiting(view(), shape.info, policy, settings, now, len(pending))
        except Exception as exc:  # a bug in the core must not stop the status from telling the rest
            log.exception("plan for policy %s failed", policy.key)
            plan_failure = f"the plan failed: {exc}"

    valid = cond.ConditionUpdate(CONDITION_VALID, "True", "Validated", "the spec is valid")
    if policy.node_filter.includes:
        unknown = unknown_includes_warning(policy.node_filter, view().nodes if nodes is None else nodes)
        if unknown is not None:
            valid = cond.ConditionUpdate(CONDITION_VALID, "True", INCLUDES_UNKNOWN_NODES,
                                         f"the spec is valid; {unknown}")
    updates = [
        valid,
        _satisfied(pending, plan, error, plan_failure),
        _ready(len(selected), len(pending), error),
    ]
    status: dict[str, Any] = {
        "observedGeneration": generation,
        "conditions": cond.apply(previous.get("conditions"), updates, generation, stamp),
        "strategy": policy.strategy_name,
        "selected": len(selected),
        "placed": dict(sorted(placed.items())),
        "placedTotal": sum(placed.values()),
        "pending": len(pending),
        "plan": dict(sorted(plan.items())) if plan is not None and error is None else None,
        "planError": error.to_dict() if error else None,
        "latestDecision": latest_decision(selected, policy.key),
        "drains": sorted((dict(d) for d in drains), key=lambda d: str(d.get("name")))[:LIST_LIMIT] or None,
    }
    status = {k: v for k, v in status.items() if v is not None}
    sequence = None
    if plan is not None and error is None and policy.strategy in ROUND_STRATEGIES:
        sequence = [node for node, n in plan.items() for _ in range(n)]
    return Outcome(status, transition_events(previous.get("conditions"), status["conditions"]), policy=policy,
                   sequence=sequence, round_expires=expires)


def _invalid(previous: Mapping[str, Any], exc: InvalidPolicy, generation: int, stamp: str) -> Outcome:
    message = str(exc)
    updates = [
        cond.ConditionUpdate(CONDITION_VALID, "False", "InvalidSpec", message),
        cond.ConditionUpdate(CONDITION_SATISFIED, "Unknown", "InvalidSpec",
                             "the spec is invalid; berth ignores the policy"),
        cond.ConditionUpdate(CONDITION_READY, "False", "InvalidSpec",
                             "the spec is invalid; berth ignores the policy"),
    ]
    status: dict[str, Any] = {
        "observedGeneration": generation,
        "conditions": cond.apply(previous.get("conditions"), updates, generation, stamp),
    }
    return Outcome(status, transition_events(previous.get("conditions"), status["conditions"]), invalid=exc)


def _satisfied(pending: list[PodRecord], plan: dict[str, int] | None, error: PlacementError | None,
               failure: str | None) -> cond.ConditionUpdate:
    if not pending:
        return cond.ConditionUpdate(CONDITION_SATISFIED, "True", "NoPendingPods", "no selected pod is pending")
    if failure is not None:
        return cond.ConditionUpdate(CONDITION_SATISFIED, "Unknown", "PlanFailed", failure)
    if error is not None:
        return cond.ConditionUpdate(CONDITION_SATISFIED, "False", cond.camel(error.code.value), error.message)
    where = ", ".join(f"{node}: {n}" for node, n in sorted((plan or {}).items()))
    placed = sum((plan or {}).values())
    if placed < len(pending):  # a Fill or Each round holds fewer: the rest wait for the next round
        return cond.ConditionUpdate(CONDITION_SATISFIED, "True", "Planned",
                                    f"the round places {placed} of {len(pending)} pending pod(s): {where}; "
                                    "the rest wait for the next round")
    return cond.ConditionUpdate(CONDITION_SATISFIED, "True", "Planned",
                                f"{len(pending)} pending pod(s) fit: {where}")


def _ready(selected: int, pending: int, error: PlacementError | None) -> cond.ConditionUpdate:
    if pending == 0:
        return cond.ConditionUpdate(CONDITION_READY, "True", "AllPodsPlaced",
                                    f"{selected} of {selected} selected pod(s) placed")
    message = f"{pending} of {selected} selected pod(s) pending"
    if error is not None:
        message += f"; they cannot be placed now ({error.code.value})"
    return cond.ConditionUpdate(CONDITION_READY, "False", "PodsPending", message)


# -- the latest decision --------------------------------------------------------------------------

def latest_decision(pods: Iterable[PodRecord], policy_key: str) -> dict[str, Any] | None:
    """The newest decision (by its ``time``) recorded on the pods, as the status holds it
    (:func:`decision_status`). The annotations are read as plain JSON to find the newest; only
    that one is read as a record."""
    dated: list[tuple[float, str, dict[str, Any]]] = []
    for record in pods:
        data = _decision_of(record)
        if data is None or data.get("policy") not in (None, policy_key):
            continue
        try:
            when = parse_time(str(data.get("time") or ""))
        except ObjectError:
            continue
        dated.append((when, record.info.key, data))
    for _, key, data in sorted(dated, key=lambda item: item[:2], reverse=True):
        status = decision_status(data)
        if status is not None:
            return status
        log.warning("pod %s: unreadable %s annotation", key, DECISION_ANNOTATION)
    return None


def _decision_of(record: PodRecord) -> dict[str, Any] | None:
    if not record.decision:
        return None
    try:
        data = json.loads(record.decision)
    except ValueError:
        log.warning("pod %s: unreadable %s annotation", record.info.key, DECISION_ANNOTATION)
        return None
    return data if isinstance(data, dict) else None


def decision_status(data: Mapping[str, Any]) -> dict[str, Any] | None:
    """The status copy of a recorded decision (this version's, or one berth wrote before the
    record had a version): the same record, each list cut to :data:`LIST_LIMIT` nodes (the counts
    stay), and the fields without a value left out, as the API server would drop them. None when
    ``data`` is not a record."""
    record = DecisionRecord.read(data)
    if record is None:
        return None
    return record.cut(LIST_LIMIT).model_dump(mode="json", by_alias=True, exclude_none=True)


# -- events -----------------------------------------------------------------------------------------

def transition_events(before: Iterable[Mapping[str, Any]] | None,
                      after: Iterable[Mapping[str, Any]]) -> list[Event]:
    """Events for what an operator wants to see: a policy turning invalid or valid again, its
    pending pods becoming unplaceable (or placeable again), and all its pods placed."""
    events: list[Event] = []
    for now in after:
        kind, status, reason = now.get("type"), now.get("status"), str(now.get("reason"))
        old = cond.find(before, str(kind))
        same = old is not None and old.get("status") == status and old.get("reason") == reason
        if same:
            continue
        message = str(now.get("message", ""))
        if kind == CONDITION_VALID:
            if status == "False":
                events.append(Event("Warning", "InvalidSpec", message))
            elif reason == INCLUDES_UNKNOWN_NODES:
                events.append(Event("Warning", INCLUDES_UNKNOWN_NODES, message))
            elif old is not None and old.get("status") == "False":
                events.append(Event("Normal", "Validated", "the spec is valid again"))
        elif kind == CONDITION_SATISFIED:
            if status == "False":
                events.append(Event("Warning", reason, message))
            elif status == "True" and old is not None and old.get("status") == "False":
                events.append(Event("Normal", "Satisfiable", message))
        elif kind == CONDITION_READY and status == "True" and old is not None and old.get("status") != "True":
            events.append(Event("Normal", "AllPodsPlaced", message))
    return events
