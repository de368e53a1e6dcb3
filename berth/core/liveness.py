"""Is a node up? Seed 000's liveness, in Kubernetes terms.

A node is down when it is bypassed (annotation ``berth.dev/bypass: "true"``), not Ready, or
when berth tracks node Leases and its Lease in ``kube-node-lease`` is missing or older than
the threshold (seed 002: a sample older than 2 minutes drops the host). Test nodes
(label ``berth.dev/test-node: "true"``) skip the liveness check unless they are bypassed.

The verdict has a part that depends only on the node object (memoised with it) and a part
that depends on the Lease and the clock (:func:`lease_refusals`, which finds the stale
Leases without reading every one on every evaluation).
"""

from __future__ import annotations

import heapq
from collections.abc import Collection
from typing import Literal

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
        return "node is down: no Lease in kube-node-lease"
    age = now - renewed
    if age > settings.liveness_threshold_seconds:
        return (f"node is down: Lease not renewed for {age:.0f}s "
                f"(threshold {settings.liveness_threshold_seconds:.0f}s)")
    return None


def down_reason(node: NodeInfo, state: ClusterState, settings: Settings, now: float) -> str | None:
    """Why ``node`` counts as down, or None when it is up."""
    verdict = node_liveness(node)
    if verdict is ALIVE:
        return None
    if verdict is ASK_LEASE:
        return lease_down_reason(node.name, state, settings, now)
    return verdict


def lease_refusals(state: ClusterState, asking: Collection[str], settings: Settings, now: float) -> dict[str, str]:
    """The down reason of every node of ``asking`` (nodes whose liveness rests on their Lease)
    whose Lease is missing or stale at ``now``."""
    if not state.leases_tracked or not asking:
        return {}
    leases = state.leases
    threshold = settings.liveness_threshold_seconds
    stale = state.base.table(("stale-leases", threshold), lambda: _StaleLeases(threshold)).at(state.base, now)
    if not isinstance(asking, set | frozenset):
        asking = set(asking)
    down = (asking - leases.keys()) | (asking & stale)
    return {name: reason for name in down if (reason := lease_down_reason(name, state, settings, now))}


class _StaleLeases:
    """Nodes whose Lease may be stale, kept in step with the view's lease log: a min-heap of
    renew times yields the Leases that went stale since last asked. A superset (a clock moved
    back leaves nodes in it): the caller re-checks each one."""

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold
        self.heap: list[tuple[float, str]] = []
        self.stale: set[str] = set()
        self.token: int | None = None

    def at(self, view: ClusterView, now: float) -> set[str]:
        leases = view.leases
        changed = view.lease_log.since(self.token) if self.token is not None else None
        if changed is None or len(self.heap) > 4 * len(leases) + 1024:
            self.heap = [(t, n) for n, t in leases.items() if t is not None]
            heapq.heapify(self.heap)
            self.stale = {n for n, t in leases.items() if t is None}
        else:
            for name in changed:
                self.stale.discard(name)
                if name not in leases:
                    continue  # no Lease at all: the caller finds it missing
                renewed = leases[name]
                if renewed is None:
                    self.stale.add(name)
                else:
                    heapq.heappush(self.heap, (renewed, name))
        self.token = view.lease_log.token
        heap, threshold = self.heap, self.threshold
        while heap and now - heap[0][0] > threshold:
            renewed, name = heapq.heappop(heap)
            if leases.get(name) == renewed:
                self.stale.add(name)
        return self.stale
