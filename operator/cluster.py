"""The core's :class:`~berth.core.view.ClusterView`, built from the operator's Kopf indexes.

The indexes are the operator's only copy of the cluster (no listing on events). Building a view
walks every node and bound pod, so :class:`ViewCache` shares one view between every policy
and rebuilds it only after a Node, Pod or Lease changed, and not more often than ``min_age``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from berth.core.model import NodeInfo
from berth.core.view import ClusterView
from berth.operator.records import PodRecord

NodeIndex = Mapping[str, Iterable[NodeInfo]]
PodIndex = Mapping[str, Iterable[PodRecord]]
LeaseIndex = Mapping[str, Iterable[float | None]]


def build_view(nodes: NodeIndex, pods: PodIndex, leases: LeaseIndex | None) -> ClusterView:
    """Nodes, the live bound pods on them and, when ``leases`` is given, the node Leases."""
    view = ClusterView(leases_tracked=leases is not None)
    for infos in nodes.values():
        for node in infos:
            view.upsert_node(node)
    for records in pods.values():
        for record in records:
            if record.placed:
                view.upsert_pod(record.info)
    if leases is not None:
        for name, renewals in leases.items():
            latest = max((r for r in renewals if r is not None), default=None)
            view.set_lease(name, latest)
    return view


@dataclass
class ViewCache:
    min_age: float = 1.0
    clock: Callable[[], float] = time.monotonic
    changes: int = 0  # bumped on every Node, Pod or Lease event
    _view: ClusterView | None = field(default=None, init=False)
    _built_changes: int = field(default=-1, init=False)
    _built_at: float = field(default=0.0, init=False)

    def changed(self) -> None:
        self.changes += 1

    def view(self, nodes: NodeIndex, pods: PodIndex, leases: LeaseIndex | None) -> ClusterView:
        fresh = self._view is not None and (self._built_changes == self.changes
                                            or self.clock() - self._built_at < self.min_age)
        if fresh and self._view is not None:
            return self._view
        self._built_changes = self.changes
        self._built_at = self.clock()
        self._view = build_view(nodes, pods, leases)
        return self._view
