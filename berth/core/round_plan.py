"""The plan of a round for Fill and Each, fixed at the round's start (DESIGN: their node set
cannot change pod by pod). The extender enforces it as a per-node quota."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from berth.core.candidates import CandidateSet, collect_candidates
from berth.core.errors import ErrorCode, PlacementError
from berth.core.model import PodInfo
from berth.core.policy import PlacementPolicy, Strategy
from berth.core.settings import Settings
from berth.core.strategies import each, fill
from berth.core.view import ClusterState

SPREAD_WARNING = ("the round's plan is made from capacity; topologySpreadConstraints are checked pod by pod "
                  "and may hold back planned pods")


@dataclass
class RoundPlan:
    plan: dict[str, int]  # node -> pods, in the plan's order
    candidates: CandidateSet
    error: PlacementError | None


def plan_fixed_round(state: ClusterState, pod: PodInfo, policy: PlacementPolicy, strategy: Strategy,
                     settings: Settings, now: float, count: int | None, *,
                     nodes: Sequence[str] | None = None) -> RoundPlan:
    """``count`` pods of the round (None: as many as the strategy defines), taken in plan order;
    ``nodes`` limits where they may go (default: every node)."""
    result = collect_candidates(state, pod, policy, settings, now, nodes=nodes, strategy=strategy,
                                require_fit=False)
    if policy.spec.topology_spread_constraints:
        result.warnings.append(SPREAD_WARNING)
    if result.error is not None:
        return RoundPlan({}, result, result.error)
    make = fill.plan if strategy is Strategy.FILL else each.plan
    planned = make(result.candidates, policy.spec.count, policy.spec.nodes_limit)
    if isinstance(planned, PlacementError):
        return RoundPlan({}, result, planned)
    if count is None:
        return RoundPlan(planned, result, None)
    total = sum(planned.values())
    if count > total:
        return RoundPlan({}, result, PlacementError(
            ErrorCode.INSUFFICIENT_RESOURCE,
            f"{strategy.value}: the plan places {total} pods ({_describe(planned)}); {count} requested"))
    taken: dict[str, int] = {}
    left = count
    for node, n in planned.items():
        if left == 0:
            break
        taken[node] = min(n, left)
        left -= taken[node]
    return RoundPlan(taken, result, None)


def _describe(plan: dict[str, int]) -> str:
    return ", ".join(f"{node}: {n}" for node, n in plan.items())
