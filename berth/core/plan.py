"""The plan of a round: N pods of one workload, a node -> count map and the decision behind it.

Greedy strategies place pod after pod, each on the node :func:`evaluate_pod` ranks first with
the earlier pods of the round counted (an overlay on the view): the plan is by construction
what the extender does pod by pod. When no spread constraint or pod-reading rule is in force,
placing a pod changes only its own node, so only that node is judged again.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from berth.core.candidates import CONTROLLER_LABELS, Candidate, CandidateSet, collect_candidates
from berth.core.decision import Decision, Refused
from berth.core.errors import PlacementError
from berth.core.evaluate import effective_strategy, rank
from berth.core.model import PodInfo
from berth.core.policy import ROUND_STRATEGIES, PlacementPolicy, Strategy
from berth.core.round_plan import plan_fixed_round
from berth.core.rule_matching import reads_pods
from berth.core.settings import Settings
from berth.core.strategies import rank_key
from berth.core.view import ClusterView, Overlay


@dataclass
class PlanResult:
    plan: dict[str, int]
    decision: Decision
    error: PlacementError | None
    placed: dict[str, int] = field(default_factory=dict)
    """The pods placed before the round stopped (the plan itself when it did not)."""
    stop: PlacementError | None = None
    """Why the pod after ``placed`` found no node: ``error`` as its own pod said it."""

    def to_dict(self) -> dict[str, object]:
        decision = self.decision.to_dict()
        return {
            "plan": dict(self.plan),
            "decision": {k: decision[k] for k in ("considered", "refused", "warnings", "strategy")},
            "error": self.error.to_dict() if self.error else None,
        }


def plan_round(state: ClusterView, pod: PodInfo, policy: PlacementPolicy | None, settings: Settings, now: float,
               count: int | None = None) -> PlanResult:
    """Plan ``count`` pods shaped like ``pod`` (None: Fill and Each plan their own round; the
    others plan one pod)."""
    settings = settings.for_policy(policy)
    strategy = effective_strategy(policy, settings)
    if count is not None and count < 0:
        raise ValueError("count must be 0 or more")
    if strategy in ROUND_STRATEGIES and policy is not None:
        fixed = plan_fixed_round(state, pod, policy, strategy, settings, now, count)
        decision = _decision(pod, policy, strategy, fixed.candidates.considered, fixed.candidates)
        decision.plan, decision.error = dict(fixed.plan), fixed.error
        return PlanResult(dict(fixed.plan), decision, fixed.error, dict(fixed.plan), fixed.error)
    return _greedy(state, pod, policy, strategy, settings, now, 1 if count is None else count)


def _decision(pod: PodInfo, policy: PlacementPolicy | None, strategy: Strategy | None, considered: list[str],
              first: CandidateSet) -> Decision:
    return Decision(pod=pod.key, policy=policy.key if policy else None,
                    strategy=strategy.value if strategy else "Default", considered=considered,
                    refused=Refused(first.refused), warnings=list(first.warnings), trigger="plan")


def _greedy(view: ClusterView, pod: PodInfo, policy: PlacementPolicy | None, strategy: Strategy | None,
            settings: Settings, now: float, count: int) -> PlanResult:
    pods = [_nth(pod, i) for i in range(count)]
    placed = place_in_turn(view.overlay(), pods or [pod], policy, strategy, settings, now, stop_at_failure=True,
                           try_pods=count)
    first = placed.first
    decision = _decision(pod, policy, strategy, first.considered, first)
    decision.ranking = rank(first, pod, strategy)
    plan: dict[str, int] = {}
    for node in placed.nodes:
        if node is not None:
            plan[node] = plan.get(node, 0) + 1
    failed = placed.failure
    stop = failed.error if failed is not None else None
    error = stop
    done = len(placed.nodes) - 1
    if error is not None and done:
        error = PlacementError(error.code, f"placed {done} of {count}: {error.message}")
    decision.warnings = placed.warnings
    decision.plan = plan if error is None else None
    decision.error = error
    return PlanResult(plan if error is None else {}, decision, error, plan, stop)


@dataclass
class Placed:
    """Pods placed one after another on an overlay (:func:`place_in_turn`)."""

    nodes: list[str | None]
    """Each pod's node, in the pods' order; None where no node could take it. Shorter than the
    pods when placing stopped at the first failure."""
    first: CandidateSet
    """The first pod's judgement (before any pod of the turn was placed)."""
    refusals: dict[int, CandidateSet]
    """The judgement of each pod that no node could take, by its index: its refusals and error."""
    warnings: list[str]
    """Every step's warnings, each once, in the order they came."""

    @property
    def failure(self) -> CandidateSet | None:
        return self.refusals[min(self.refusals)] if self.refusals else None


def place_in_turn(overlay: Overlay, pods: Sequence[PodInfo], policy: PlacementPolicy | None,
                  strategy: Strategy | None, settings: Settings, now: float, *, nodes: Sequence[str] | None = None,
                  stop_at_failure: bool = False, try_pods: int | None = None) -> Placed:
    """Place ``pods`` (at least one; all governed by ``policy``, whose overrides ``settings`` carries)
    one after another on ``overlay``, each on the node :func:`rank` puts first with the earlier
    ones counted: a greedy strategy's round. ``nodes`` limits where they may go (default: every
    node). A pod no node can take is left out (or ends the turn with ``stop_at_failure``) with its
    judgement kept. ``try_pods``: how many pods to place (default: all; 0 judges the first only).
    When no spread constraint or pod-reading rule is in force and the pods share one shape,
    placing a pod changes only its own node, so only that node is judged again."""
    count = len(pods) if try_pods is None else try_pods
    local_only = (policy is None or not (policy.spec.topology_spread_constraints or reads_pods(policy.rules))) \
        and len({_shape(p) for p in pods}) == 1
    first = collect_candidates(overlay, pods[0], policy, settings, now, nodes=nodes, strategy=strategy)
    out = Placed(nodes=[], first=first, refusals={}, warnings=[])
    warnings = dict.fromkeys(first.warnings)
    placed = 0
    if local_only and first.error is None and count:
        placed = _greedy_local(overlay, pods, policy, strategy, settings, now, count, first.candidates, out.nodes)
    step: CandidateSet | None = first if placed == 0 else None
    while placed < count:
        if step is None:
            step = collect_candidates(overlay, pods[placed], policy, settings, now, nodes=nodes, strategy=strategy)
            warnings.update(dict.fromkeys(step.warnings))
        if step.error is not None:
            out.refusals[placed] = step
            out.nodes.append(None)
            if stop_at_failure:
                break
        else:
            winner = rank(step, pods[placed], strategy)[0]
            overlay.place(pods[placed], winner)
            out.nodes.append(winner)
        placed += 1
        step = None
    out.warnings = list(warnings)
    return out


def _greedy_local(overlay: Overlay, pods: Sequence[PodInfo], policy: PlacementPolicy | None,
                  strategy: Strategy | None, settings: Settings, now: float, count: int,
                  candidates: list[Candidate], into: list[str | None]) -> int:
    """Place pods with a heap while each placement changes only its own node's verdict. Stops
    (returning how many it placed) when the heap runs dry, leaving the rest to the full path."""
    key = rank_key(strategy, pods[0])
    heap = [(key(c), c.name) for c in candidates]
    heapq.heapify(heap)
    placed = 0
    while placed < count and heap:
        _, name = heapq.heappop(heap)
        overlay.place(pods[placed], name)
        into.append(name)
        placed += 1
        if placed == count:
            break
        again = collect_candidates(overlay, pods[placed], policy, settings, now, nodes=[name], strategy=strategy)
        if again.candidates:
            heapq.heappush(heap, (key(again.candidates[0]), name))
    return placed


def _shape(pod: PodInfo) -> tuple[object, ...]:
    """What a pod's judgement depends on besides the cluster: pods alike here are judged alike."""
    return (tuple(sorted(pod.requests.items())), pod.sleepy, pod.constraint_signature(), pod.namespace,
            tuple(sorted((k, v) for k, v in pod.labels.items() if k not in CONTROLLER_LABELS)))


def _nth(pod: PodInfo, i: int) -> PodInfo:
    """The i-th pod of the round: same shape and labels, its own identity."""
    return pod if i == 0 else replace(pod, uid=f"{pod.uid}~{i}", name=f"{pod.name}~{i}")
