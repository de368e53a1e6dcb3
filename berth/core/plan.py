"""The plan of a round: N pods of one workload, a node -> count map and the decision behind it.

Greedy strategies place pod after pod, each on the node :func:`evaluate_pod` ranks first with
the earlier pods of the round counted (an overlay on the view): the plan is by construction
what the extender does pod by pod. When no spread constraint or pod-reading rule is in force,
placing a pod changes only its own node, so only that node is judged again.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field, replace

from berth.core.candidates import Candidate, CandidateSet, collect_candidates
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
    overlay = view.overlay()
    local_only = policy is None or not (policy.spec.topology_spread_constraints or reads_pods(policy.rules))
    first = collect_candidates(overlay, _nth(pod, 0), policy, settings, now, strategy=strategy)
    decision = _decision(pod, policy, strategy, first.considered, first)
    decision.ranking = rank(first, pod, strategy)
    plan: dict[str, int] = {}
    warnings = dict.fromkeys(first.warnings)
    if count == 0:
        decision.plan = plan
        return PlanResult(plan, decision, None, {})
    placed = 0
    if local_only and first.error is None:
        placed = _greedy_local(overlay, pod, policy, strategy, settings, now, count, first.candidates, plan)
    error: PlacementError | None = first.error if placed == 0 and first.error else None
    while placed < count and error is None:
        step = collect_candidates(overlay, _nth(pod, placed), policy, settings, now, strategy=strategy)
        warnings.update(dict.fromkeys(step.warnings))
        if step.error is not None:
            error = step.error
            break
        winner = rank(step, pod, strategy)[0]
        overlay.place(_nth(pod, placed), winner)
        plan[winner] = plan.get(winner, 0) + 1
        placed += 1
    stop = error
    if error is not None and placed:
        error = PlacementError(error.code, f"placed {placed} of {count}: {error.message}")
    decision.warnings = list(warnings)
    decision.plan = plan if error is None else None
    decision.error = error
    return PlanResult(plan if error is None else {}, decision, error, plan, stop)


def _greedy_local(overlay: Overlay, pod: PodInfo, policy: PlacementPolicy | None, strategy: Strategy | None,
                  settings: Settings, now: float, count: int, candidates: list[Candidate],
                  plan: dict[str, int]) -> int:
    """Place pods with a heap while each placement changes only its own node's verdict. Stops
    (returning how many it placed) when the heap runs dry, leaving the rest to the full path."""
    key = rank_key(strategy, pod)
    heap = [(key(c), c.name) for c in candidates]
    heapq.heapify(heap)
    placed = 0
    while placed < count and heap:
        _, name = heapq.heappop(heap)
        overlay.place(_nth(pod, placed), name)
        plan[name] = plan.get(name, 0) + 1
        placed += 1
        again = collect_candidates(overlay, _nth(pod, placed), policy, settings, now, nodes=[name],
                                   strategy=strategy)
        if again.candidates:
            heapq.heappush(heap, (key(again.candidates[0]), name))
    return placed


def _nth(pod: PodInfo, i: int) -> PodInfo:
    """The i-th pod of the round: same shape and labels, its own identity."""
    return pod if i == 0 else replace(pod, uid=f"{pod.uid}~{i}", name=f"{pod.name}~{i}")
