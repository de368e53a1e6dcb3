"""The nodes whose Lease may be stale, kept in step with the view's changes in what liveness
reads (its ``DEPENDS``: the node, its Lease), so that liveness does not read every Lease on every
evaluation. The plain path asks each node's Lease (:mod:`berth.core.plugins.liveness`); this one
asks only the suspects."""

from __future__ import annotations

import heapq

from berth.core.index.cluster import Token, ViewIndex, index_of
from berth.core.plugins import liveness
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
    """Kept in step with the view's changes: a min-heap of renew times yields the Leases that went
    stale since last asked; nodes seen without a readable Lease join at once. A node leaves when
    it or its Lease changes and joins again if its Lease is stale by then; a clock moved back
    leaves some in: a superset."""

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold
        self.heap: list[tuple[float, str]] = []
        self.suspects: set[str] = set()
        self.token: Token | None = None

    def at(self, view: ClusterState, kept: ViewIndex, now: float) -> set[str]:
        leases, nodes = view.leases, view.nodes
        changed = kept.changes.since(self.token, liveness.DEPENDS)
        if changed is None or len(self.heap) > 4 * len(leases) + 1024:
            self.heap = [(t, n) for n, t in leases.items() if t is not None]
            heapq.heapify(self.heap)
            self.suspects = {n for n, t in leases.items() if t is None} | (nodes.keys() - leases.keys())
        else:
            for name in changed:
                renewed = leases.get(name)
                if renewed is None:
                    self.suspects.add(name)  # no Lease, or an unreadable one
                else:
                    self.suspects.discard(name)
                    heapq.heappush(self.heap, (renewed, name))
        self.token = kept.changes.token
        heap, threshold = self.heap, self.threshold
        while heap and now - heap[0][0] > threshold:
            renewed, name = heapq.heappop(heap)
            if leases.get(name) == renewed:
                self.suspects.add(name)
        return self.suspects
