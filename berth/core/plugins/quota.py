"""What a round leaves a node: under a Fill or Each round's plan, only the nodes the plan still
gives pods; under Auto, no node already holding ``nodesLimit`` pods of the workload
(docs/behaviour.md#rounds, docs/behaviour.md#nodes-limit)."""

from __future__ import annotations

from berth.core.decision import Refusal
from berth.core.model import NodeInfo
from berth.core.plugins import Depends, PodContext, count_matching
from berth.core.policy import Strategy

DEPENDS = Depends.ROUND | Depends.NODE_PODS

NO_MORE = Refusal("the round's plan places no more pods here", False)


def ceiling(ctx: PodContext) -> int:
    """Auto's per-node ceiling of the workload's pods (0: none)."""
    return ctx.policy.spec.nodes_limit if ctx.policy is not None and ctx.strategy is Strategy.AUTO else 0


def quota_filter(ctx: PodContext, node: NodeInfo) -> Refusal | None:
    if ctx.quota is not None and ctx.quota.get(node.name, 0) <= 0:
        return NO_MORE
    return None


def limit_filter(ctx: PodContext, node: NodeInfo) -> Refusal | None:
    most = ceiling(ctx)
    if not most:
        return None
    count = count_matching(ctx.state, node.name, ctx.pod.namespace, ctx.workload)
    if count < most:
        return None
    return Refusal(f"nodesLimit: already holds {count} pods of this workload (per-node ceiling {most})", False)
