"""Offline mode: the cluster view from a snapshot file instead of an API server.

A snapshot is what ``kubectl get nodes,pods,leases -A -o json`` (or ``-o yaml``) prints: a
``List`` of Nodes, Pods, optionally kube-node-lease Leases and PlacementPolicies. Several YAML
documents, each a List or a single object, are read too.

A snapshot is a moment: when it holds Leases, liveness is judged at the time of its latest
Lease renewal (otherwise every node of an old snapshot would look down).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from berth.core import API_GROUP, LEASE_NAMESPACE, ObjectError, lease_renew_seconds
from berth.extender.store import ClusterStore
from berth.snapshot import SnapshotError, read_objects

__all__ = ["SnapshotError", "load_snapshot"]



def load_snapshot(path: str | Path, *, store: ClusterStore | None = None,
                  decisions_kept: int = 5000, track_leases: bool = True,
                  ) -> tuple[ClusterStore, Callable[[], float]]:
    """A store filled from the snapshot, and the clock liveness is judged by (see the module doc)."""
    objects = read_objects(str(path))
    kinds: dict[str, list[Mapping[str, Any]]] = {"nodes": [], "pods": [], "leases": [], "policies": []}
    for obj in objects:
        kind = obj.get("kind")
        if kind == "Node":
            kinds["nodes"].append(obj)
        elif kind == "Pod":
            kinds["pods"].append(obj)
        elif kind == "Lease":
            kinds["leases"].append(obj)
        elif kind == "PlacementPolicy" and str(obj.get("apiVersion", "")).startswith(f"{API_GROUP}/"):
            kinds["policies"].append(obj)
    has_leases = track_leases and any(_lease_ns(o) == LEASE_NAMESPACE for o in kinds["leases"])
    if store is None:
        store = ClusterStore(leases_tracked=has_leases, decisions_kept=decisions_kept)
    else:
        store.view.leases_tracked = has_leases
    for kind in ("policies", "nodes", "leases", "pods"):
        store.replace(kind, kinds[kind])
    moment = _snapshot_moment(kinds["leases"]) if has_leases else None
    if moment is None:
        return store, time.time
    return store, lambda: moment


def _lease_ns(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("namespace") or "") if isinstance(meta, Mapping) else ""


def _snapshot_moment(leases: list[Mapping[str, Any]]) -> float | None:
    latest: float | None = None
    for lease in leases:
        try:
            _, renewed = lease_renew_seconds(lease)
        except ObjectError:
            continue
        if renewed is not None and (latest is None or renewed > latest):
            latest = renewed
    return latest
