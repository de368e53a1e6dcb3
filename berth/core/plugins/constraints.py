"""The pod's own constraints, as kube-scheduler's filters judge them: a cordoned node, a taint the
pod does not tolerate, a node selector or required node affinity the node does not match.
Preemption cannot change these, so the refusal is unresolvable (docs/behaviour.md#pod-constraints)."""

from __future__ import annotations

from berth.core.decision import Refusal
from berth.core.model import NodeInfo
from berth.core.node_filter import pod_constraint_refusal
from berth.core.plugins import Depends, PodContext

DEPENDS = Depends.NODE


def filter(ctx: PodContext, node: NodeInfo) -> Refusal | None:
    reason = pod_constraint_refusal(ctx.pod, node)
    return None if reason is None else Refusal(reason, False)
