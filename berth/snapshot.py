"""Cluster snapshots and manifests read from files: the CLI's input, and the extender's offline mode.

A snapshot is what ``kubectl get nodes,pods -A -o json`` prints (a ``List`` with ``items``), or
the same as YAML (``-o yaml``, or hand-written, one or many documents). Its items are Nodes,
Pods, Leases (only those in ``kube-node-lease`` are node leases; others are ignored) and,
optionally, PlacementPolicies. Bound pods that are not terminal count on their node; pending
pods are ignored. When the snapshot holds any node Lease, the view tracks leases: a node
without a fresh Lease is down, as in a live cluster.

**The moment a snapshot is judged at** (:meth:`Snapshot.now`): the newest Lease ``renewTime``
in the snapshot when it holds any, else the current time; an explicit time overrides both.
A snapshot taken an hour ago is thus judged at its own moment, and its nodes do not all look
down because their Leases are an hour old. Without Leases, liveness reads only the Ready
condition, and the moment does not matter.

Every problem raises :class:`SnapshotError` with one line naming the file, the object and the
field, e.g. ``snap.json: items[3] (Node node-a): status.allocatable.cpu: not a quantity: 'lots'``.

Reading a file is the only I/O here; :func:`snapshot_from_objects` builds a snapshot from
objects already in memory. Both the CLI's :class:`Snapshot` and the extender's offline store
start from :class:`SnapshotObjects` (:func:`read_snapshot_objects`): one reading of the file,
the same kinds accepted, the same node Leases, the same moment.
"""

from __future__ import annotations

import functools
import json
import sys
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import yaml

from berth.core.errors import InvalidPolicy
from berth.core.kube import (
    LEASE_NAMESPACE,
    ObjectError,
    is_terminal,
    lease_renew_seconds,
    node_from_object,
    pod_from_object,
)
from berth.core.model import NodeInfo, PodInfo
from berth.core.policy import PlacementPolicy, policy_from_manifest
from berth.core.quantity import QuantityError, to_base_units
from berth.core.view import ClusterView

SNAPSHOT_KINDS = ("Node", "Pod", "Lease", "PlacementPolicy")
STDIN = "-"

T = TypeVar("T")
_YAML_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_json_loads: Callable[[str], Any] = json.loads
try:  # several times faster on the large Lists kubectl prints; its errors are json.JSONDecodeError
    import orjson

    _json_loads = orjson.loads
except ImportError:  # pragma: no cover - orjson is a dependency, but the loader does not need it
    pass


class SnapshotError(ValueError):
    """Input berth cannot use. The message is one line: ``<file>: <where>: <field>: <problem>``."""


# -- reading files ------------------------------------------------------------------------


def read_text(path: str) -> str:
    """The text of ``path`` (``-``: standard input)."""
    try:
        if path == STDIN:
            return sys.stdin.read()
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise SnapshotError(f"{path}: cannot read: not UTF-8 text") from None
    except OSError as exc:
        raise SnapshotError(f"{path}: cannot read: {exc.strerror or exc}") from None


def parse_documents(text: str, source: str) -> list[Any]:
    """The documents of a JSON or YAML text (YAML may hold several); empty documents are dropped."""
    stripped = text.lstrip()
    if not stripped:
        raise SnapshotError(f"{source}: empty file")
    if stripped[0] in "{[" or source.endswith(".json"):
        try:
            return [_json_loads(text)]
        except json.JSONDecodeError as exc:
            if source.endswith(".json"):
                raise SnapshotError(f"{source}: not valid JSON: {exc.msg} at line {exc.lineno} "
                                    f"column {exc.colno}") from None
    try:
        docs = [doc for doc in yaml.load_all(text, Loader=_YAML_LOADER) if doc is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        raise SnapshotError(f"{source}: not valid YAML or JSON: {problem}{where}") from None
    if not docs:
        raise SnapshotError(f"{source}: empty file")
    return docs


def read_documents(path: str) -> list[Any]:
    return parse_documents(read_text(path), path)


def read_manifest(path: str, kinds: Collection[str], what: str) -> Mapping[str, Any]:
    """The single object ``path`` holds, of one of ``kinds`` (``what`` names them in errors)."""
    docs = read_documents(path)
    if len(docs) != 1:
        raise SnapshotError(f"{path}: expected one {what} manifest, found {len(docs)} documents")
    obj = docs[0]
    if not isinstance(obj, Mapping):
        raise SnapshotError(f"{path}: expected a {what} manifest (an object), found {_type_name(obj)}")
    found = obj.get("kind")
    if found not in kinds:
        raise SnapshotError(f"{path}: kind: expected {what}, found {found!r}")
    return obj


# -- manifests ----------------------------------------------------------------------------


def load_policy(path: str) -> PlacementPolicy:
    """A PlacementPolicy manifest; an invalid one raises ``<file>: <path>: <problem>``."""
    obj = read_manifest(path, ("PlacementPolicy",), "PlacementPolicy")
    try:
        return policy_from_manifest(obj)
    except InvalidPolicy as exc:
        raise SnapshotError(f"{path}: {exc.path}: {exc.problem}") from None


WORKLOAD_TEMPLATES: dict[str, tuple[str, ...]] = {
    "Deployment": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "ReplicationController": ("spec", "template"),
    "Job": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
}
"""Where each workload kind keeps the pod template ``berth plan`` / ``capacity`` read as the pod."""


def load_pod(path: str, default_namespace: str = "default") -> PodInfo:
    """A Pod manifest, or a workload's pod template (:data:`WORKLOAD_TEMPLATES`), as the pod to
    place: its namespace defaults to ``default_namespace``, a missing name to its ``generateName``
    (or ``pod``; a workload's pods are named after the workload), and any ``spec.nodeName`` is
    dropped. An error names the field as the file spells it (``spec.template.spec...``)."""
    doc = read_manifest(path, ("Pod", *WORKLOAD_TEMPLATES), f"Pod or a workload ({', '.join(WORKLOAD_TEMPLATES)})")
    kind = doc["kind"]
    if kind == "Pod":
        obj, label = dict(doc), None
    else:
        obj, label = _template_pod(doc, WORKLOAD_TEMPLATES[kind], path), ".".join(WORKLOAD_TEMPLATES[kind])
    meta = obj.get("metadata")
    if meta is None:
        meta = {}
    if not isinstance(meta, Mapping):
        raise _fail(path, label, "metadata", "must be an object")
    meta = dict(meta)
    if not meta.get("name"):
        meta["name"] = str(meta.get("generateName") or "pod").rstrip("-") or "pod"
    meta.setdefault("namespace", default_namespace)
    if not meta.get("namespace"):
        meta["namespace"] = default_namespace
    obj["metadata"] = meta
    pod = _pod(obj, path, label)
    return replace(pod, node_name=None)


def _template_pod(workload: Mapping[str, Any], where: tuple[str, ...], path: str) -> dict[str, Any]:
    """The Pod a workload's controller would make: the template, named after the workload, in its
    namespace."""
    meta = workload.get("metadata")
    if meta is not None and not isinstance(meta, Mapping):
        raise SnapshotError(f"{path}: metadata: must be an object")
    meta = meta or {}
    node: Any = workload
    for depth, key in enumerate(where):
        node = node.get(key) if isinstance(node, Mapping) else None
        if not isinstance(node, Mapping):
            raise SnapshotError(f"{path}: {'.'.join(where[:depth + 1])}: must be an object (the pod template)")
    template_meta = node.get("metadata")
    if template_meta is not None and not isinstance(template_meta, Mapping):
        raise SnapshotError(f"{path}: {'.'.join(where)}.metadata: must be an object")
    pod_meta = {**(template_meta or {})}
    if meta.get("name") and not pod_meta.get("name"):
        pod_meta["name"] = str(meta["name"])
    if meta.get("namespace") and not pod_meta.get("namespace"):
        pod_meta["namespace"] = str(meta["namespace"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": node.get("spec")}


def pod_from_manifest(obj: Mapping[str, Any], source: str = "pod") -> PodInfo:
    """A Pod object (already parsed) as the core's PodInfo, with errors naming the field."""
    return _pod(obj, source, None)


# -- snapshots ----------------------------------------------------------------------------


@dataclass
class Snapshot:
    """A cluster at one moment: what :func:`load_snapshot` read, ready to become a view."""

    source: str
    nodes: list[NodeInfo] = field(default_factory=list)
    pods: list[PodInfo] = field(default_factory=list)  # bound, not terminal
    leases: dict[str, float | None] = field(default_factory=dict)  # node -> renewTime (epoch seconds)
    policies: list[PlacementPolicy] = field(default_factory=list)
    pending_pods: int = 0  # pods with no node yet (ignored)
    terminal_pods: int = 0  # Succeeded or Failed (ignored)

    @property
    def newest_lease(self) -> float | None:
        times = [t for t in self.leases.values() if t is not None]
        return max(times) if times else None

    def now(self, override: float | None = None, clock: Callable[[], float] = time.time) -> float:
        """The moment to judge the snapshot at: ``override``, else the newest Lease renewTime,
        else the current time."""
        if override is not None:
            return override
        newest = self.newest_lease
        return newest if newest is not None else clock()

    def view(self) -> ClusterView:
        """A fresh view of the snapshot; each call gives an independent copy."""
        view = ClusterView(leases_tracked=bool(self.leases))
        for node in self.nodes:
            view.upsert_node(node)
        for pod in self.pods:
            view.upsert_pod(pod)
        for name, renewed in self.leases.items():
            view.set_lease(name, renewed)
        return view

    def policy_for(self, pod: PodInfo) -> PlacementPolicy | None:
        """The snapshot's policy that governs ``pod`` (the first by namespace/name), if any."""
        for policy in sorted(self.policies, key=lambda p: p.key):
            if policy.governs(pod.namespace, pod.labels):
                return policy
        return None


def load_snapshot(path: str, *, require_nodes: bool = True) -> Snapshot:
    return snapshot_from_documents(read_documents(path), path, require_nodes=require_nodes)


def snapshot_from_documents(docs: Sequence[Any], source: str, *, require_nodes: bool = True) -> Snapshot:
    return snapshot_from_objects(_flatten(docs, source, len(docs) > 1), source, require_nodes=require_nodes)


def snapshot_from_objects(objects: Iterable[tuple[str, Mapping[str, Any]]], source: str, *,
                          require_nodes: bool = True) -> Snapshot:
    """Build a snapshot from ``(where, object)`` pairs; ``where`` (e.g. ``items[3]``) names the
    object in error messages."""
    return _build(sort_objects(objects, source), require_nodes=require_nodes)


@dataclass
class SnapshotObjects:
    """A snapshot's objects sorted by kind, still raw (each with its label for error messages),
    its node Leases read: what both the CLI's :class:`Snapshot` and the extender's offline store
    are built from, so that both accept the same files and judge them at the same moment."""

    source: str
    nodes: list[tuple[str, Mapping[str, Any]]] = field(default_factory=list)
    pods: list[tuple[str, Mapping[str, Any]]] = field(default_factory=list)
    leases: list[Mapping[str, Any]] = field(default_factory=list)  # node Leases only (kube-node-lease)
    renewed: dict[str, float | None] = field(default_factory=dict)  # node -> its Lease's renewTime
    policies: list[tuple[str, Mapping[str, Any]]] = field(default_factory=list)

    @property
    def newest_lease(self) -> float | None:
        """The moment the snapshot is judged at when it holds node Leases (see the module doc)."""
        times = [t for t in self.renewed.values() if t is not None]
        return max(times) if times else None


def read_snapshot_objects(path: str) -> SnapshotObjects:
    """The objects of the snapshot file ``path``, sorted by kind; any other kind is refused."""
    docs = read_documents(path)
    return sort_objects(_flatten(docs, path, len(docs) > 1), path)


def sort_objects(objects: Iterable[tuple[str, Mapping[str, Any]]], source: str) -> SnapshotObjects:
    """``(where, object)`` pairs sorted by kind, node Leases read; any other kind is refused."""
    out = SnapshotObjects(source)
    for where, obj in objects:
        kind = obj.get("kind")
        label = f"{where} ({kind} {_name_of(obj)})"
        if kind == "Node":
            out.nodes.append((label, obj))
        elif kind == "Pod":
            out.pods.append((label, obj))
        elif kind == "Lease":
            lease = _lease(obj, source, label)
            if lease is not None:
                out.leases.append(obj)
                out.renewed[lease[0]] = lease[1]
        elif kind == "PlacementPolicy":
            out.policies.append((label, obj))
        else:
            raise SnapshotError(
                f"{source}: {where}: kind: expected {', '.join(SNAPSHOT_KINDS[:-1])} or {SNAPSHOT_KINDS[-1]} "
                f"(the output of kubectl get nodes,pods -A -o json), found {kind!r}")
    return out


def _build(objects: SnapshotObjects, *, require_nodes: bool) -> Snapshot:
    source = objects.source
    snap = Snapshot(source, leases=dict(objects.renewed))
    for label, obj in objects.nodes:
        snap.nodes.append(_node(obj, source, label))
    for label, obj in objects.pods:
        _need_mapping(obj, "status", source, label)
        if is_terminal(obj):
            snap.terminal_pods += 1
            continue
        pod = _pod(obj, source, label)
        if pod.node_name:
            snap.pods.append(pod)
        else:
            snap.pending_pods += 1
    for label, obj in objects.policies:
        try:
            snap.policies.append(policy_from_manifest(obj))
        except InvalidPolicy as exc:
            raise SnapshotError(f"{source}: {label}: {exc.path}: {exc.problem}") from None
    if require_nodes and not snap.nodes:
        raise SnapshotError(f"{source}: no Node objects (expected the output of kubectl get nodes,pods -A -o json)")
    return snap


def _flatten(docs: Sequence[Any], source: str, many: bool) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for i, doc in enumerate(docs):
        prefix = f"document {i + 1}" if many else ""
        if not isinstance(doc, Mapping):
            raise SnapshotError(f"{source}: {prefix or 'document'}: expected an object or a List, "
                                f"found {_type_name(doc)}")
        kind = doc.get("kind")
        if (isinstance(kind, str) and kind.endswith("List")) or (kind is None and "items" in doc):
            items = doc.get("items")
            if items is None:
                items = []
            if not isinstance(items, list):
                raise SnapshotError(f"{source}: {_join(prefix, 'items')}: must be a list")
            item_kind = kind[: -len("List")] if isinstance(kind, str) and kind != "List" else None
            for j, item in enumerate(items):
                where = _join(prefix, f"items[{j}]")
                if not isinstance(item, Mapping):
                    raise SnapshotError(f"{source}: {where}: expected an object, found {_type_name(item)}")
                if item_kind and "kind" not in item:
                    item = {**item, "kind": item_kind}  # a NodeList's items may omit their kind
                yield where, item
        else:
            yield prefix or "document", doc


def _join(prefix: str, where: str) -> str:
    return f"{prefix}, {where}" if prefix else where


def _name_of(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    if isinstance(meta, Mapping):
        name = meta.get("name")
        ns = meta.get("namespace")
        if isinstance(name, str) and name:
            return f"{ns}/{name}" if isinstance(ns, str) and ns and obj.get("kind") != "Node" else name
    return "(no name)"


def _type_name(value: object) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, Mapping):
        return "an object"
    return f"a {type(value).__name__}"


def _fail(source: str, label: str | None, fieldpath: str, problem: str) -> SnapshotError:
    where = f"{label}: " if label else ""
    return SnapshotError(f"{source}: {where}{fieldpath}: {problem}")


def _need_mapping(obj: Mapping[str, Any], key: str, source: str, label: str | None,
                  prefix: str = "") -> Mapping[str, Any]:
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _fail(source, label, prefix + key, f"must be an object, found {_type_name(value)}")
    return value


def _check_meta(obj: Mapping[str, Any], source: str, label: str | None) -> None:
    meta = _need_mapping(obj, "metadata", source, label)
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise _fail(source, label, "metadata.name", "is required")
    for key in ("labels", "annotations"):
        values = _need_mapping(meta, key, source, label, "metadata.")
        for k, v in values.items():
            if not isinstance(v, str):
                raise _fail(source, label, f"metadata.{key}.{k}",
                            f"must be a string, found {_type_name(v)} (quote it in YAML)")


def _check_quantities(values: object, fieldpath: str, source: str, label: str | None) -> None:
    if values is None:
        return
    if not isinstance(values, Mapping):
        raise _fail(source, label, fieldpath, f"must be an object, found {_type_name(values)}")
    for resource, value in values.items():
        problem = _quantity_problem(str(resource), value) if isinstance(value, str | int | float) else \
            f"not a quantity: {value!r}"
        if problem is not None:
            raise _fail(source, label, f"{fieldpath}.{resource}", problem)


@functools.lru_cache(maxsize=4096)
def _quantity_problem(resource: str, value: str | int | float) -> str | None:
    """Why ``value`` is not a quantity, or None; cached, as a snapshot repeats the same few values."""
    try:
        to_base_units(resource, value)
    except QuantityError as exc:
        return str(exc)
    return None


def _check_optional(container: Mapping[str, Any], key: str, kind: type[list[Any]] | type[str], path: str,
                    source: str, label: str | None) -> None:
    """An optional field, when present, must be a list (or a string)."""
    value = container.get(key)
    if value is not None and not isinstance(value, kind):
        what = "a list" if kind is list else "a string"
        raise _fail(source, label, path, f"must be {what}, found {_type_name(value)}")


def _node(obj: Mapping[str, Any], source: str, label: str) -> NodeInfo:
    _check_meta(obj, source, label)
    spec = _need_mapping(obj, "spec", source, label)
    status = _need_mapping(obj, "status", source, label)
    _check_quantities(status.get("allocatable"), "status.allocatable", source, label)
    _check_optional(spec, "taints", list, "spec.taints", source, label)
    _check_optional(status, "conditions", list, "status.conditions", source, label)
    return _core(node_from_object, obj, source, label)


def _pod(obj: Mapping[str, Any], source: str, label: str | None) -> PodInfo:
    _check_meta(obj, source, label)
    spec = _need_mapping(obj, "spec", source, label)
    _need_mapping(obj, "status", source, label)
    _check_optional(spec, "nodeName", str, "spec.nodeName", source, label)
    _check_optional(spec, "tolerations", list, "spec.tolerations", source, label)
    _check_pod_spec(spec, source, label)
    _check_owners(_need_mapping(obj, "metadata", source, label), source, label)
    return _core(pod_from_object, obj, source, label)


def _check_owners(meta: Mapping[str, Any], source: str, label: str | None) -> None:
    """The ownerReferences a drain reads (which controller would recreate the pod)."""
    _check_optional(meta, "ownerReferences", list, "metadata.ownerReferences", source, label)
    for i, ref in enumerate(meta.get("ownerReferences") or ()):
        where = f"metadata.ownerReferences[{i}]"
        if not isinstance(ref, Mapping):
            raise _fail(source, label, where, f"must be an object, found {_type_name(ref)}")
        for key in ("kind", "name"):
            if not isinstance(ref.get(key), str) or not ref[key]:
                raise _fail(source, label, f"{where}.{key}", "is required (a non-empty string)")


def _check_pod_spec(spec: Mapping[str, Any], source: str, label: str | None) -> None:
    """The fields the core reads, so that an error names the exact field."""
    for key in ("containers", "initContainers"):
        containers = spec.get(key)
        if containers is None:
            continue
        if not isinstance(containers, list):
            raise _fail(source, label, f"spec.{key}", f"must be a list, found {_type_name(containers)}")
        for i, container in enumerate(containers):
            where = f"spec.{key}[{i}]"
            if not isinstance(container, Mapping):
                raise _fail(source, label, where, f"must be an object, found {_type_name(container)}")
            resources = _need_mapping(container, "resources", source, label, f"{where}.")
            for part in ("requests", "limits"):
                _check_quantities(resources.get(part), f"{where}.resources.{part}", source, label)
    _check_quantities(spec.get("overhead"), "spec.overhead", source, label)
    pod_level = _need_mapping(spec, "resources", source, label, "spec.")
    for part in ("requests", "limits"):
        _check_quantities(pod_level.get(part), f"spec.resources.{part}", source, label)
    _need_mapping(spec, "nodeSelector", source, label, "spec.")
    affinity = _need_mapping(spec, "affinity", source, label, "spec.")
    node_affinity = _need_mapping(affinity, "nodeAffinity", source, label, "spec.affinity.")
    _need_mapping(node_affinity, "requiredDuringSchedulingIgnoredDuringExecution", source, label,
                  "spec.affinity.nodeAffinity.")


def _lease(obj: Mapping[str, Any], source: str, label: str) -> tuple[str, float | None] | None:
    _check_meta(obj, source, label)
    meta = obj["metadata"]
    if meta.get("namespace") != LEASE_NAMESPACE:
        return None  # leader-election and other leases say nothing about nodes
    spec = _need_mapping(obj, "spec", source, label)
    renew = spec.get("renewTime")
    if isinstance(renew, datetime):  # an unquoted YAML timestamp
        stamp = renew if renew.tzinfo is not None else renew.replace(tzinfo=UTC)
        return str(meta["name"]), stamp.timestamp()
    if renew is not None and not isinstance(renew, str):
        raise _fail(source, label, "spec.renewTime", f"must be an RFC 3339 time, found {_type_name(renew)}")
    try:
        return lease_renew_seconds(obj)
    except ObjectError as exc:
        raise _fail(source, label, "spec.renewTime", str(exc)) from None


def _core(build: Callable[[Mapping[str, Any]], T], obj: Mapping[str, Any], source: str, label: str | None) -> T:
    """Call the core's reader; anything it still refuses is reported on one line."""
    try:
        return build(obj)
    except ObjectError as exc:
        raise SnapshotError(f"{source}: {label + ': ' if label else ''}{exc}") from None
    except (AttributeError, TypeError, ValueError) as exc:
        raise SnapshotError(f"{source}: {label + ': ' if label else ''}malformed object: {exc}") from None
