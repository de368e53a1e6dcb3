"""Which nodes a policy's pods may land on at all: the pod's own constraints and the policy's
node filter (docs/behaviour.md#node-filter). Refusals here are unresolvable: preemption cannot
change them."""

from __future__ import annotations

from collections.abc import Callable, Container

from berth.core.compiled import NodeFilter
from berth.core.model import SCHEDULING_EFFECTS, NodeInfo, PodInfo, Taint

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


def node_filter_refusal(nf: NodeFilter, node: NodeInfo, down: Callable[[], str | None]) -> str | None:
    """The policy's node filter. ``includes`` short-circuits labels, liveness (``all``) and excludes;
    ``down`` is asked only when liveness matters."""
    if nf.includes:
        return None if node.name in nf.included else "not in nodeFilter.includes"
    for key, value in nf.labels.items():
        have = node.labels.get(key)
        if have != value:
            found = "absent" if have is None else f"{key}={have}"
            return f"nodeFilter.labels needs {key}={value} ({found})"
    if not nf.all:
        reason = down()
        if reason is not None:
            return reason
    if node.name in nf.excludes:
        return "excluded by nodeFilter.excludes"
    return None


def in_node_filter(nf: NodeFilter, node: NodeInfo) -> bool:
    """The node filter without liveness: the policy's notion of where its pods may go at all."""
    return node_filter_refusal(nf, node, lambda: None) is None


def unknown_includes(nf: NodeFilter, known: Container[str]) -> str | None:
    """What to say when ``includes`` names nodes that are not ``known``: a typo or a node gone
    silently narrows where the policy's pods may go."""
    missing = [name for name in dict.fromkeys(nf.includes) if name not in known]
    if not missing:
        return None
    return (f"nodeFilter.includes names {len(missing)} node{'s' if len(missing) > 1 else ''} berth has not seen: "
            + ", ".join(missing))
