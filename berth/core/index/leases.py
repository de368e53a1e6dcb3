"""The nodes whose Lease may be stale, kept in step with the view's lease and node logs, so that
liveness does not read every Lease on every evaluation. The plain path asks each node's Lease
(:mod:`berth.core.plugins.liveness`); this one asks only the suspects."""

from __future__ import annotations

import heapq

from berth.core.index.cluster import ViewIndex, index_of
from berth.core.settings import Settings
from berth.core.view import ClusterState


def lease_suspects(state: ClusterState, settings: Settings, now: float) -> set[str]:
    """Every node whose Lease may be missing, unreadable or stale at ``now`` (a superset: ask
    :func:`~berth.core.plugins.liveness.lease_down_reason` of each), without reading every Lease on every evaluation."""
    if not state.leases_tracked:
        return set()
    threshold = settings.liveness_threshold_seconds
    kept = index_of(state.base).view
    return kept.table(("lease-suspects", threshold), lambda: _LeaseSuspects(threshold)).at(state.base, kept, now)


class _LeaseSuspects:
    """Kept in step with the view's lease and node logs: a min-heap of renew times yields the
    Leases that went stale since last asked; nodes seen without a readable Lease join at once.
    Nodes leave only when their Lease changes, so a clock moved back leaves some in: a superset."""

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold
        self.heap: list[tuple[float, str]] = []
        self.suspects: set[str] = set()
        self.tokens: tuple[int, int] | None = None

    def at(self, view: ClusterState, logs: ViewIndex, now: float) -> set[str]:
        leases, nodes = view.leases, view.nodes
        lease_changes = logs.lease_log.since(self.tokens[0]) if self.tokens is not None else None
        node_changes = logs.node_log.since(self.tokens[1]) if self.tokens is not None else None
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
        self.tokens = (logs.lease_log.token, logs.node_log.token)
        heap, threshold = self.heap, self.threshold
        while heap and now - heap[0][0] > threshold:
            renewed, name = heapq.heappop(heap)
            if leases.get(name) == renewed:
                self.suspects.add(name)
        return self.suspects
