"""The pod's own constraints, as kube-scheduler's filters judge them: a cordoned node, a taint the
pod does not tolerate, a node selector or required node affinity the node does not match.
Preemption cannot change these, so the refusal is unresolvable (docs/behaviour.md#pod-constraints)."""

from __future__ import annotations

from berth.core.decision import Refusal
from berth.core.model import SCHEDULING_EFFECTS, NodeInfo, PodInfo, Taint
from berth.core.plugins import Depends, PodContext

DEPENDS = Depends.NODE

UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")


def pod_constraint_refusal(pod: PodInfo, node: NodeInfo) -> str | None:
    """What kube-scheduler's own filters would say: cordon, untolerated taints, node selector."""
    if node.unschedulable and pod.untolerated_taint((UNSCHEDULABLE_TAINT,), SCHEDULING_EFFECTS) is not None:
        return "node is cordoned (spec.unschedulable)"
    taint = pod.untolerated_taint(node.taints, SCHEDULING_EFFECTS)
    if taint is not None:
        return f"untolerated taint {taint}"
    if not pod.node_affinity.matches(node.name, node.labels):
        return "node does not match the pod's nodeSelector / required node affinity"
    return None


def filter(ctx: PodContext, node: NodeInfo) -> Refusal | None:
    reason = pod_constraint_refusal(ctx.pod, node)
    return None if reason is None else Refusal(reason, False)
