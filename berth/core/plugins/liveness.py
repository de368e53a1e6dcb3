"""Is the node up? Down when bypassed (annotation ``berth.dev/bypass: "true"``), not Ready, or,
when berth tracks node Leases, its Lease in the node lease namespace is missing or older than the
threshold. A test node (label ``berth.dev/test-node: "true"``) is up unless bypassed. A node filter
with ``includes`` or ``all`` turns the check off (docs/behaviour.md#liveness).

The verdict has a part read off the node object (:func:`node_liveness`) and a part that reads the
Lease and the clock (:func:`lease_down_reason`); the index asks the second only of the nodes whose
Lease may be stale (:mod:`berth.core.index.leases`).
"""

from __future__ import annotations

from typing import Literal

from berth.core.decision import Refusal
from berth.core.kube import LEASE_NAMESPACE
from berth.core.model import BYPASS_ANNOTATION, NodeInfo
from berth.core.plugins import Depends, PodContext
from berth.core.settings import Settings
from berth.core.view import ClusterState

DEPENDS = Depends.NODE | Depends.LEASES
NODE_DEPENDS = Depends.NODE
"""What :func:`node_liveness`, the part read off the node itself, reads."""

ALIVE: Literal["alive"] = "alive"
ASK_LEASE: Literal["lease"] = "lease"


def node_liveness(node: NodeInfo) -> str:
    """The part read off the node itself: a down reason, ALIVE (test node), or ASK_LEASE."""
    if node.bypassed:
        return f"node is down: bypassed ({BYPASS_ANNOTATION})"
    if node.is_test_node:
        return ALIVE
    if node.ready is None:
        return "node is down: it reports no Ready condition"
    if not node.ready:
        return "node is down: not Ready"
    return ASK_LEASE


def lease_down_reason(name: str, state: ClusterState, settings: Settings, now: float) -> str | None:
    if not state.leases_tracked:
        return None
    renewed = state.leases.get(name)
    if renewed is None:
        return f"node is down: no Lease in {LEASE_NAMESPACE}"
    age = now - renewed
    if age > settings.liveness_threshold_seconds:
        return (f"node is down: Lease not renewed for {age:.0f}s "
                f"(threshold {settings.liveness_threshold_seconds:.0f}s)")
    return None


def applies(ctx: PodContext) -> bool:
    nf = ctx.node_filter
    return nf is None or not (nf.includes or nf.all)


def filter(ctx: PodContext, node: NodeInfo) -> Refusal | None:
    own = node_liveness(node)
    if own is ALIVE:
        return None
    if own is not ASK_LEASE:
        return Refusal(own, False)
    reason = lease_down_reason(node.name, ctx.state, ctx.settings, ctx.now)
    return None if reason is None else Refusal(reason, False)
