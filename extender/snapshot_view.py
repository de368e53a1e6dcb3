"""Offline mode: the cluster view from a snapshot file instead of an API server.

A snapshot is what ``kubectl get nodes,pods,leases -A -o json`` (or ``-o yaml``) prints: a
``List`` of Nodes, Pods, optionally kube-node-lease Leases and PlacementPolicies. Several YAML
documents, each a List or a single object, are read too.

A snapshot is a moment: when it holds Leases, liveness is judged at the time of its latest
Lease renewal (otherwise every node of an old snapshot would look down).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson
import yaml

from berth.core.kube import ObjectError, lease_renew_seconds
from berth.extender.store import LEASE_NAMESPACE, ClusterStore

POLICY_GROUP = "berth.dev/"


class SnapshotError(ValueError):
    """A snapshot file berth cannot read; the message names the file and the problem."""


def read_objects(path: str | Path) -> list[dict[str, Any]]:
    """Every object in the file, Lists flattened."""
    p = Path(path)
    try:
        text = sys.stdin.buffer.read() if str(path) == "-" else p.read_bytes()
    except OSError as exc:
        raise SnapshotError(f"{p}: cannot read: {exc.strerror or exc}") from None
    docs: list[object]
    stripped = text.lstrip()
    if stripped[:1] in (b"{", b"["):
        try:
            docs = [orjson.loads(text)]
        except orjson.JSONDecodeError as exc:
            raise SnapshotError(f"{p}: not valid JSON: {exc}") from None
    else:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        try:
            docs = [d for d in yaml.load_all(text, Loader=loader) if d is not None]
        except yaml.YAMLError as exc:
            raise SnapshotError(f"{p}: not valid YAML: {exc}") from None
    out: list[dict[str, Any]] = []
    for doc in docs:
        out.extend(_flatten(doc, p))
    return out


def _flatten(doc: object, path: Path) -> Iterator[dict[str, Any]]:
    if isinstance(doc, list):
        for item in doc:
            yield from _flatten(item, path)
        return
    if not isinstance(doc, dict):
        raise SnapshotError(f"{path}: expected a Kubernetes List or object, found {type(doc).__name__}")
    if isinstance(doc.get("items"), list) and (str(doc.get("kind", "")).endswith("List") or "kind" not in doc):
        item_kind = str(doc.get("kind", ""))[: -len("List")] if str(doc.get("kind", "")).endswith("List") else ""
        for item in doc["items"]:
            if isinstance(item, dict):
                if item_kind and "kind" not in item:
                    item = {**item, "kind": item_kind}
                yield item
        return
    yield doc


def load_snapshot(path: str | Path, *, store: ClusterStore | None = None,
                  decisions_kept: int = 5000, track_leases: bool = True,
                  ) -> tuple[ClusterStore, Callable[[], float]]:
    """A store filled from the snapshot, and the clock liveness is judged by (see the module doc)."""
    objects = read_objects(path)
    kinds: dict[str, list[dict[str, Any]]] = {"nodes": [], "pods": [], "leases": [], "policies": []}
    for obj in objects:
        kind = obj.get("kind")
        if kind == "Node":
            kinds["nodes"].append(obj)
        elif kind == "Pod":
            kinds["pods"].append(obj)
        elif kind == "Lease":
            kinds["leases"].append(obj)
        elif kind == "PlacementPolicy" and str(obj.get("apiVersion", "")).startswith(POLICY_GROUP):
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


def _snapshot_moment(leases: list[dict[str, Any]]) -> float | None:
    latest: float | None = None
    for lease in leases:
        try:
            _, renewed = lease_renew_seconds(lease)
        except ObjectError:
            continue
        if renewed is not None and (latest is None or renewed > latest):
            latest = renewed
    return latest
