"""Drain and move: where every pod of the drained nodes would land, planned before anything is
evicted. The one planning function (:func:`plan_drain`) serves ``berth drain`` and the
operator's NodeDrain in Plan and Execute mode (:mod:`berth.operator.drain`).

How a drain is planned:

* The pods on the drained nodes are affected; with a pod selector (a *move*) only those it
  matches. Left where they are, as ``kubectl drain`` leaves them: DaemonSet pods (their
  controller ignores cordons), mirror pods (the kubelet owns them), pods already terminating,
  and pods with no controller to recreate them unless the drain includes them.
* Every pod that moves is taken off its node first (an overlay of the view: nothing changes),
  so the spread counts, the workload counts and the placement rules read the cluster as it is
  once they are gone.
* The pods are planned one round per workload (the pods of one controller, under one
  PlacementPolicy), workload after workload, on one overlay: a later workload sees the room the
  earlier ones took, and the plan for many pods is consistent. A round goes through the same
  plan code as any round (:func:`berth.core.plan.place_in_turn`, or Fill and Each's fixed round),
  limited to the destinations: the drain's named or selected nodes, or every node when the
  drain allows any destination, and never a drained node.
* A pod no destination can take is *blocked*: it stays where it is, and its entry carries
  every destination's refusal (the per-resource shortfall of the fit check, or the spread,
  rule or node check that refused it).
* A move of selected pods to one named node is an explicit target: it is honoured even where
  berth's own checks would refuse it, with a warning saying why they would; only what
  kube-scheduler itself would still refuse (the pod's own node constraints and taints, or
  requests beyond the node's allocatable) blocks it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from berth.core.candidates import CandidateSet
from berth.core.errors import ErrorCode, PlacementError
from berth.core.evaluate import effective_strategy
from berth.core.fit import check_fit, demand
from berth.core.framework import collect_candidates
from berth.core.model import LabelSelector, PodInfo
from berth.core.plan import place_in_turn
from berth.core.plugins.constraints import pod_constraint_refusal
from berth.core.policy import ROUND_STRATEGIES, PlacementPolicy
from berth.core.round import plan_fixed_round
from berth.core.settings import Settings
from berth.core.view import ClusterView, Overlay

SCHEDULER_FIT = Settings(min_free_disk_percent=0)
"""kube-scheduler's own resource check: requests within allocatable, no overcommit, no disk floor."""


class InvalidDrain(ValueError):
    """A drain that cannot be planned. ``field`` names the request's field (``nodes``,
    ``destinations``, ``anyDestination``...)."""

    def __init__(self, field_name: str, problem: str) -> None:
        super().__init__(f"{field_name}: {problem}")
        self.field = field_name
        self.problem = problem


class PodState(StrEnum):
    PLANNED = "Planned"  # a destination holds room for it
    BLOCKED = "Blocked"  # no destination can take it: it stays where it is
    LEFT = "Left"  # not moved by a drain (DaemonSet, mirror, terminating, no controller)
    # an executed drain's further states (the operator's Execute mode; a plan never holds them)
    EVICTING = "Evicting"  # its eviction was asked for: accepted (terminating) or refused and retried
    MOVED = "Moved"  # evicted and gone from its node: its controller recreates it at the destination


@dataclass(frozen=True, slots=True)
class DrainRequest:
    """What to drain and where the pods may go."""

    nodes: tuple[str, ...] = ()
    node_selector: LabelSelector | None = None  # more nodes to drain: those it matches
    pods: LabelSelector | None = None  # a move: only these pods of the drained nodes
    destinations: tuple[str, ...] = ()
    destination_selector: LabelSelector | None = None
    any_destination: bool = False
    include_unmanaged: bool = False  # also move pods no controller would recreate (kubectl drain --force)

    @property
    def explicit_target(self) -> str | None:
        """The one named node a move sends its pods to, honoured even where berth would refuse it."""
        if self.pods is not None and len(self.destinations) == 1 and self.destination_selector is None \
                and not self.any_destination:
            return self.destinations[0]
        return None


@dataclass(frozen=True, slots=True)
class PodPlan:
    """One pod of the drain: where it is, where it goes or why it cannot."""

    pod: str  # namespace/name
    uid: str
    source: str
    workload: str | None  # its controller, Kind/name; None when it has none
    policy: str | None  # the PlacementPolicy that governs it, namespace/name
    state: PodState
    destination: str | None = None
    reason: str | None = None  # Left: why; Blocked: the placement error's message
    code: ErrorCode | None = None  # Blocked: the placement error's code
    refused: Mapping[str, str] = field(default_factory=dict)  # Blocked: every destination's refusal
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "pod": self.pod,
            "source": self.source,
            "workload": self.workload,
            "policy": self.policy,
            "state": self.state.value,
            "destination": self.destination,
            "reason": self.reason,
            "code": self.code.value if self.code else None,
            "refused": dict(self.refused),
            "warnings": list(self.warnings),
        }


@dataclass
class DrainPlan:
    nodes: list[str]  # the drained nodes
    destinations: list[str]  # where pods may go
    pods: list[PodPlan]  # by source node, then pod

    def count(self, state: PodState) -> int:
        return sum(1 for p in self.pods if p.state is state)

    @property
    def blocked(self) -> bool:
        return any(p.state is PodState.BLOCKED for p in self.pods)

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": list(self.nodes),
            "destinations": list(self.destinations),
            "planned": self.count(PodState.PLANNED),
            "blocked": self.count(PodState.BLOCKED),
            "left": self.count(PodState.LEFT),
            "pods": [p.to_dict() for p in self.pods],
        }


PolicyLookup = Callable[[PodInfo], PlacementPolicy | None]


def plan_drain(view: ClusterView, request: DrainRequest, policy_for: PolicyLookup, settings: Settings,
               now: float, held: Mapping[str, str] | None = None) -> DrainPlan:
    """Plan every affected pod of ``request`` on ``view`` (never changed). ``policy_for`` gives the
    PlacementPolicy that governs a pod. ``held`` (pod uid to destination) keeps the destinations an
    executing drain already chose: such a pod (terminating once evicted) keeps its destination,
    where its room is counted before the others are planned, as long as that node is still a
    destination. Raises :class:`InvalidDrain` for a request naming nodes the view does not know,
    or no destination at all."""
    drained = _drained(view, request)
    destinations = _destinations(view, request, drained)
    overlay = view.overlay()
    entries: dict[str, PodPlan] = {}
    moving: list[PodInfo] = []
    keeping: list[tuple[PodInfo, str]] = []
    allowed = set(destinations)
    for source in sorted(drained):
        for pod in sorted(view.pods_on(source), key=lambda p: p.key):
            if request.pods is not None and not request.pods.matches(pod.labels):
                continue
            kept = (held or {}).get(pod.uid)
            if kept is not None and kept in allowed:
                keeping.append((pod, kept))
                continue
            why = left_alone(pod, request.include_unmanaged)
            if why is not None:
                entries[pod.uid] = _entry(pod, None, PodState.LEFT, reason=why)
            else:
                moving.append(pod)
    for pod, _ in keeping:
        overlay.remove(pod)
    for pod, kept in keeping:  # already on their way: their room is taken first
        overlay.place(pod, kept)
        entries[pod.uid] = _entry(pod, policy_for(pod), PodState.PLANNED, destination=kept)
    for pod in moving:
        overlay.remove(pod)  # gone from its node before any destination is judged
    rounds: dict[tuple[str, str, str], list[PodInfo]] = {}
    policies: dict[tuple[str, str, str], PlacementPolicy | None] = {}
    for pod in moving:
        policy = policy_for(pod)
        key = (pod.namespace, str(pod.controller) if pod.controller else f"Pod/{pod.name}",
               policy.key if policy else "")
        rounds.setdefault(key, []).append(pod)
        policies[key] = policy
    target = request.explicit_target
    for key in sorted(rounds):
        pods, policy = rounds[key], policies[key]
        if target is not None:
            planned = _move_to(overlay, pods, policy, target, settings, now)
        else:
            planned = _round(overlay, pods, policy, destinations, settings, now)
        entries.update((p.uid, p) for p in planned)
    ordered = [entries[p.uid] for source in sorted(drained) for p in sorted(view.pods_on(source), key=lambda p: p.key)
               if p.uid in entries]
    return DrainPlan(sorted(drained), destinations, ordered)


def left_alone(pod: PodInfo, include_unmanaged: bool) -> str | None:
    """Why a drain leaves ``pod`` where it is (``kubectl drain``'s own filters), or None."""
    if pod.mirror:
        return "mirror pod: the kubelet owns it (a static pod)"
    if pod.controller is not None and pod.controller.kind == "DaemonSet":
        return f"DaemonSet pod ({pod.controller}): its controller ignores cordons"
    if pod.terminating:
        return "already terminating"
    if pod.controller is None and not include_unmanaged:
        return "no controller would recreate it (include pods without a controller to move it)"
    return None


def _drained(view: ClusterView, request: DrainRequest) -> set[str]:
    unknown = [n for n in request.nodes if n not in view.nodes]
    if unknown:
        raise InvalidDrain("nodes", f"unknown node {unknown[0]!r}")
    drained = set(request.nodes)
    if request.node_selector is not None:
        drained.update(n for n, node in view.nodes.items() if request.node_selector.matches(node.labels))
    if not drained:
        raise InvalidDrain("nodes", "no node to drain" if request.node_selector is None and not request.nodes
                           else "the node selector matches no node")
    return drained


def _destinations(view: ClusterView, request: DrainRequest, drained: set[str]) -> list[str]:
    if request.any_destination and (request.destinations or request.destination_selector is not None):
        raise InvalidDrain("anyDestination", "allows every node: it cannot be combined with destinations")
    if not request.any_destination and not request.destinations and request.destination_selector is None:
        raise InvalidDrain("destinations", "no destination: name the destinations or allow any destination")
    for name in request.destinations:
        if name not in view.nodes:
            raise InvalidDrain("destinations", f"unknown node {name!r}")
        if name in drained:
            raise InvalidDrain("destinations", f"{name} is drained: a drained node is never a destination")
    if request.any_destination:
        return sorted(set(view.nodes) - drained)
    chosen = set(request.destinations)
    if request.destination_selector is not None:
        chosen.update(n for n, node in view.nodes.items() if request.destination_selector.matches(node.labels))
    return sorted(chosen - drained)


def _entry(pod: PodInfo, policy: PlacementPolicy | None, state: PodState, **kw: Any) -> PodPlan:
    return PodPlan(pod=pod.key, uid=pod.uid, source=pod.node_name or "",
                   workload=str(pod.controller) if pod.controller else None,
                   policy=policy.key if policy else None, state=state, **kw)


def _blocked(pod: PodInfo, policy: PlacementPolicy | None, judged: CandidateSet, error: PlacementError | None,
             warnings: Sequence[str]) -> PodPlan:
    error = error or judged.error or PlacementError(ErrorCode.INSUFFICIENT_RESOURCE, "no destination can take it")
    return _entry(pod, policy, PodState.BLOCKED, reason=error.message, code=error.code,
                  refused={node: r.reason for node, r in judged.refused.by_node()}, warnings=tuple(warnings))


def _round(overlay: Overlay, pods: list[PodInfo], policy: PlacementPolicy | None, destinations: list[str],
           settings: Settings, now: float) -> Iterable[PodPlan]:
    """One workload's pods, planned together on the destinations under their policy."""
    settings = settings.for_policy(policy)
    strategy = effective_strategy(policy, settings)
    if strategy in ROUND_STRATEGIES and policy is not None:
        fixed = plan_fixed_round(overlay, pods[0], policy, strategy, settings, now, None, nodes=destinations)
        slots = [node for node, n in fixed.plan.items() for _ in range(n)]
        error = fixed.error or PlacementError(
            ErrorCode.INSUFFICIENT_RESOURCE,
            f"{strategy.value}: the round's plan places {len(slots)} of the workload's {len(pods)} pods on the "
            "destinations")
        out = []
        for i, pod in enumerate(pods):
            if i < len(slots):
                overlay.place(pod, slots[i])
                out.append(_entry(pod, policy, PodState.PLANNED, destination=slots[i],
                                  warnings=tuple(fixed.candidates.warnings)))
            else:
                out.append(_blocked(pod, policy, fixed.candidates, error, fixed.candidates.warnings))
        return out
    placed = place_in_turn(overlay, pods, policy, settings, now, put=overlay.place, nodes=destinations)
    return [
        _entry(pod, policy, PodState.PLANNED, destination=node, warnings=tuple(placed.warnings)) if node is not None
        else _blocked(pod, policy, placed.refusals[i], None, placed.warnings)
        for i, (pod, node) in enumerate(zip(pods, placed.nodes, strict=True))
    ]


def _move_to(overlay: Overlay, pods: list[PodInfo], policy: PlacementPolicy | None, target: str,
             settings: Settings, now: float) -> Iterable[PodPlan]:
    """A move's pods to its one named node: berth's refusal becomes a warning; kube-scheduler's
    own refusal (which berth cannot overrule) blocks the pod."""
    settings = settings.for_policy(policy)
    strategy = effective_strategy(policy, settings)
    out = []
    for pod in pods:
        judged = collect_candidates(overlay, pod, policy, settings, now, nodes=[target], strategy=strategy)
        warnings = list(judged.warnings)
        if not judged.candidates:
            hard = scheduler_refusal(overlay, pod, target)
            berth_says = judged.refused[target].reason if target in judged.refused else \
                (judged.error.message if judged.error else "refused")
            if hard is not None:
                out.append(_entry(pod, policy, PodState.BLOCKED, code=ErrorCode.INSUFFICIENT_RESOURCE,
                                  reason=f"kube-scheduler would refuse the move target {target}: {hard}",
                                  refused={target: hard}, warnings=tuple(warnings)))
                continue
            warnings.append(f"{target}: berth's checks refuse it ({berth_says}); honoured as the move's explicit "
                            "target")
        overlay.place(pod, target)
        out.append(_entry(pod, policy, PodState.PLANNED, destination=target, warnings=tuple(warnings)))
    return out


def scheduler_refusal(overlay: Overlay, pod: PodInfo, node_name: str) -> str | None:
    """What kube-scheduler itself would refuse ``node_name`` for, whatever berth says: the pod's own
    node constraints and taints, and requests beyond the node's allocatable."""
    node = overlay.nodes[node_name]
    hard = pod_constraint_refusal(pod, node)
    if hard is None:
        hard = check_fit(node.allocatable, overlay.requested(node_name), demand(pod), SCHEDULER_FIT).refusal
    return hard
