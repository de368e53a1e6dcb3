"""Is a node up? (docs/behaviour.md#liveness)

A node is down when it is bypassed (annotation ``berth.dev/bypass: "true"``), not Ready, or
when berth tracks node Leases and its Lease in ``kube-node-lease`` is missing or older than
the threshold. Test nodes (label ``berth.dev/test-node: "true"``) skip the liveness check
unless they are bypassed.

The verdict has a part that depends only on the node object and a part that depends on the
Lease and the clock (the index finds the nodes whose Lease may be stale without reading every
Lease on every evaluation: :mod:`berth.core.index.leases`).
"""

from __future__ import annotations

from typing import Literal

from berth.core.kube import LEASE_NAMESPACE
from berth.core.model import BYPASS_ANNOTATION, NodeInfo
from berth.core.settings import Settings
from berth.core.view import ClusterState

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
