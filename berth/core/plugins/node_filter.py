"""The policy's node filter: ``includes`` names the only nodes allowed; else ``labels`` must all
match and ``excludes`` names nodes never used. Liveness is the :mod:`.liveness` check's
(docs/behaviour.md#node-filter)."""

from __future__ import annotations

from berth.core.decision import Refusal
from berth.core.model import NodeInfo
from berth.core.node_filter import node_filter_refusal
from berth.core.plugins import Depends, PodContext

DEPENDS = Depends.NODE


def filter(ctx: PodContext, node: NodeInfo) -> Refusal | None:
    nf = ctx.node_filter
    if nf is None:
        return None
    reason = node_filter_refusal(nf, node, lambda: None)
    return None if reason is None else Refusal(reason, False)
