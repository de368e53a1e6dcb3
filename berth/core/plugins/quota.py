"""What a round leaves a node: under a Fill or Each round's plan, only the nodes the plan still
gives pods; under Auto, no node already holding ``nodesLimit`` pods of the workload
(docs/behaviour.md#rounds, docs/behaviour.md#nodes-limit)."""

from __future__ import annotations

from collections.abc import Mapping

from berth.core.decision import Refusal
from berth.core.plugins import Depends, PodContext
from berth.core.policy import Strategy

DEPENDS = Depends.ROUND | Depends.NODE_PODS

NO_MORE = Refusal("the round's plan places no more pods here", False)


def ceiling(ctx: PodContext) -> int:
    """Auto's per-node ceiling of the workload's pods (0: none)."""
    return ctx.policy.nodes_limit if ctx.policy is not None and ctx.strategy is Strategy.AUTO else 0


def planned(quota: Mapping[str, int]) -> set[str]:
    """The nodes a round's plan still gives pods: every other node is refused (:data:`NO_MORE`)."""
    return {name for name, left in quota.items() if left > 0}


def limit_reason(count: int, most: int) -> str:
    """Why Auto refuses a node already holding ``count`` >= ``most`` pods of the workload."""
    return f"nodesLimit: already holds {count} pods of this workload (per-node ceiling {most})"
