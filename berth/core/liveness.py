"""Is a node up? (docs/behaviour.md#liveness)

A node is down when it is bypassed (annotation ``berth.dev/bypass: "true"``), not Ready, or
when berth tracks node Leases and its Lease in ``kube-node-lease`` is missing or older than
the threshold. Test nodes (label ``berth.dev/test-node: "true"``) skip the liveness check
unless they are bypassed.

The verdict has a part that depends only on the node object (memoised with it) and a part
that depends on the Lease and the clock (:func:`lease_suspects` finds the nodes whose Lease
may be stale without reading every Lease on every evaluation).
"""

from __future__ import annotations

import heapq
from typing import Literal

from berth.core.kube import LEASE_NAMESPACE
from berth.core.model import BYPASS_ANNOTATION, NodeInfo
from berth.core.settings import Settings
from berth.core.view import ClusterState, ClusterView

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


def lease_suspects(state: ClusterState, settings: Settings, now: float) -> set[str]:
    """Every node whose Lease may be missing, unreadable or stale at ``now`` (a superset: ask
    :func:`lease_down_reason` of each), without reading every Lease on every evaluation."""
    if not state.leases_tracked:
        return set()
    threshold = settings.liveness_threshold_seconds
    return state.base.table(("lease-suspects", threshold), lambda: _LeaseSuspects(threshold)).at(state.base, now)


class _LeaseSuspects:
    """Kept in step with the view's lease and node logs: a min-heap of renew times yields the
    Leases that went stale since last asked; nodes seen without a readable Lease join at once.
    Nodes leave only when their Lease changes, so a clock moved back leaves some in: a superset."""

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold
        self.heap: list[tuple[float, str]] = []
        self.suspects: set[str] = set()
        self.tokens: tuple[int, int] | None = None

    def at(self, view: ClusterView, now: float) -> set[str]:
        leases, nodes = view.leases, view.nodes
        lease_changes = view.lease_log.since(self.tokens[0]) if self.tokens is not None else None
        node_changes = view.node_log.since(self.tokens[1]) if self.tokens is not None else None
        if lease_changes is None or node_changes is None or len(self.heap) > 4 * len(leases) + 1024:
            self.heap = [(t, n) for n, t in leases.items() if t is not None]
            heapq.heapify(self.heap)
            self.suspects = {n for n, t in leases.items() if t is None} | (nodes.keys() - leases.keys())
        else:
            for name in lease_changes:
                renewed = leases.get(name)
                if renewed is None:
                    self.suspects.add(name)  # removed or unreadable
                else:
                    self.suspects.discard(name)
                    heapq.heappush(self.heap, (renewed, name))
            self.suspects.update(n for n in node_changes if n in nodes and leases.get(n) is None)
        self.tokens = (view.lease_log.token, view.node_log.token)
        heap, threshold = self.heap, self.threshold
        while heap and now - heap[0][0] > threshold:
            renewed, name = heapq.heappop(heap)
            if leases.get(name) == renewed:
                self.suspects.add(name)
        return self.suspects
