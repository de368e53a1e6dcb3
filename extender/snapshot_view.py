"""Offline mode: the cluster view from a snapshot file instead of an API server.

A snapshot is what ``kubectl get nodes,pods,leases -A -o json`` (or ``-o yaml``) prints: a
``List`` of Nodes, Pods, optionally kube-node-lease Leases and PlacementPolicies. Several YAML
documents, each a List or a single object, are read too.

A snapshot is a moment: when it holds Leases, liveness is judged at the time of its latest
Lease renewal (otherwise every node of an old snapshot would look down).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from berth.extender.store import ClusterStore
from berth.snapshot import SnapshotError, read_snapshot_objects

__all__ = ["SnapshotError", "load_snapshot"]


def load_snapshot(path: str | Path, *, store: ClusterStore | None = None,
                  decisions_kept: int = 5000, track_leases: bool = True,
                  ) -> tuple[ClusterStore, Callable[[], float]]:
    """A store filled from the snapshot, and the clock liveness is judged by (see the module doc).
    The file is read and checked as the CLI reads it (:func:`berth.snapshot.read_snapshot_objects`):
    the same kinds accepted, the same node Leases, the same moment."""
    objects = read_snapshot_objects(str(path))
    has_leases = track_leases and bool(objects.leases)
    if store is None:
        store = ClusterStore(leases_tracked=has_leases, decisions_kept=decisions_kept)
    else:
        store.view.leases_tracked = has_leases
    store.replace("policies", [obj for _, obj in objects.policies])
    store.replace("nodes", [obj for _, obj in objects.nodes])
    store.replace("leases", objects.leases)
    store.replace("pods", [obj for _, obj in objects.pods])
    moment = objects.newest_lease if has_leases else None
    if moment is None:
        return store, time.time
    return store, lambda: moment
