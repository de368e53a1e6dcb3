"""Is the node up? Down when bypassed, not Ready, or (when berth tracks node Leases) its Lease is
missing or older than the threshold; a test node is up unless bypassed. A node filter with
``includes`` or ``all`` turns the check off (docs/behaviour.md#liveness)."""

from __future__ import annotations

from berth.core.decision import Refusal
from berth.core.liveness import ALIVE, ASK_LEASE, lease_down_reason, node_liveness
from berth.core.model import NodeInfo
from berth.core.plugins import Depends, PodContext

DEPENDS = Depends.NODE | Depends.LEASES


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
