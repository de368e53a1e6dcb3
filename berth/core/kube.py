"""Turn Kubernetes objects (as JSON dicts) into the core's plain data.

Pure functions: the extender feeds them watch events, the CLI feeds them a snapshot.
A malformed object raises :class:`ObjectError` naming the object and the field.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Hashable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

from berth.core.labels import go_int, label_key_problem, label_value_problem
from berth.core.model import (
    BYPASS_ANNOTATION,
    MIRROR_ANNOTATION,
    SLEEPY_ANNOTATION,
    LabelSelector,
    NodeAffinity,
    NodeInfo,
    NodeSelectorTerm,
    Owner,
    PodInfo,
    Requirement,
    Taint,
    Toleration,
)
from berth.core.podshape import effective_requests
from berth.core.quantity import QuantityError, to_base_units

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
LEASE_NAMESPACE = "kube-node-lease"
"""Where the kubelets keep their nodes' Leases (a node's liveness)."""

T = TypeVar("T")


class ObjectError(ValueError):
    """A Kubernetes object the core cannot read; the message names the object and field."""


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str) or not meta["name"]:
        raise ObjectError(f"{obj.get('kind', 'object')}: metadata.name is missing")
    return meta


def _str_map(value: object, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ObjectError(f"{where}: must be a map of strings")
    return {str(k): str(v) for k, v in value.items()}


def node_from_object(obj: Mapping[str, Any]) -> NodeInfo:
    meta = _meta(obj)
    name = meta["name"]
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    allocatable: dict[str, int] = {}
    for resource, value in (status.get("allocatable") or {}).items():
        try:
            allocatable[resource] = to_base_units(resource, value)
        except QuantityError as exc:
            raise ObjectError(f"node {name}: status.allocatable.{resource}: {exc}") from None
    taints = tuple(
        Taint(str(t.get("key", "")), str(t.get("value", "") or ""), str(t.get("effect", "")))
        for t in spec.get("taints") or ()
        if isinstance(t, Mapping)
    )
    ready: bool | None = None
    for condition in status.get("conditions") or ():
        if isinstance(condition, Mapping) and condition.get("type") == "Ready":
            ready = condition.get("status") == "True"
    annotations = _str_map(meta.get("annotations"), f"node {name}: metadata.annotations")
    return NodeInfo(
        name=name,
        labels=_str_map(meta.get("labels"), f"node {name}: metadata.labels"),
        allocatable=allocatable,
        taints=taints,
        unschedulable=bool(spec.get("unschedulable", False)),
        ready=ready,
        bypassed=annotations.get(BYPASS_ANNOTATION) == "true",
    )


def is_terminal(obj: Mapping[str, Any]) -> bool:
    return (obj.get("status") or {}).get("phase") in TERMINAL_PHASES


def pod_from_object(obj: Mapping[str, Any]) -> PodInfo:
    """The pod as the core sees it. What many pods have alike (their namespace, node, labels,
    requests, tolerations, controller) is kept once (:class:`_Shared`): a view of 150,000 pods
    holds a few thousand such values, not 150,000 copies of each."""
    meta = _meta(obj)
    name = meta["name"]
    namespace = str(meta.get("namespace") or "default")
    spec = obj.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise ObjectError(f"pod {namespace}/{name}: spec must be an object")
    try:
        requests = effective_requests(spec)
    except (QuantityError, ValueError) as exc:
        raise ObjectError(f"pod {namespace}/{name}: {exc}") from None
    annotations = _str_map(meta.get("annotations"), f"pod {namespace}/{name}: metadata.annotations")
    node_name = spec.get("nodeName") or None
    return PodInfo(
        uid=str(meta.get("uid") or f"{namespace}/{name}"),
        name=name,
        namespace=_SHARED.string(namespace),
        labels=_SHARED.string_map(_str_map(meta.get("labels"), f"pod {namespace}/{name}: metadata.labels")),
        requests=_SHARED.value(("requests", *requests.items()), lambda: requests),
        node_name=_SHARED.string(node_name) if isinstance(node_name, str) else node_name,
        terminating=meta.get("deletionTimestamp") is not None,
        sleepy=annotations.get(SLEEPY_ANNOTATION) == "true",
        tolerations=_tolerations(spec.get("tolerations")),
        node_affinity=_node_affinity(spec),
        controller=_controller(meta.get("ownerReferences")),
        mirror=MIRROR_ANNOTATION in annotations,
    )


class _Shared:
    """Equal values read from many objects, kept once: strings by :func:`sys.intern`, maps and
    tuples by their items. The core never changes a pod's maps in place, so pods may share them.
    At most :attr:`LIMIT` values are remembered (then the table starts afresh: the values already
    shared stay shared), so objects of values of their own (a StatefulSet pod's name label) cost
    no more than before."""

    LIMIT = 1 << 16

    def __init__(self) -> None:
        self._kept: dict[object, Any] = {}

    def value(self, key: Hashable, make: Callable[[], T]) -> T:
        hit = self._kept.get(key)
        if hit is None:
            if len(self._kept) >= self.LIMIT:
                self._kept.clear()
            hit = self._kept[key] = make()
        return hit

    def string_map(self, value: dict[str, str]) -> dict[str, str]:
        if not value:
            return _NO_STRINGS
        return self.value(("map", *value.items()), lambda: {sys.intern(k): sys.intern(v) for k, v in value.items()})

    @staticmethod
    def string(value: str) -> str:
        return sys.intern(value)


_SHARED = _Shared()
_NO_STRINGS: dict[str, str] = {}
_NO_AFFINITY = NodeAffinity()


def _controller(refs: object) -> Owner | None:
    """The ownerReference marked ``controller: true``, as kubectl drain reads it."""
    if not isinstance(refs, list):
        return None
    for ref in refs:
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return _owner(str(ref.get("kind") or ""), str(ref.get("name") or ""))
    return None


def _owner(kind: str, name: str) -> Owner:
    return _SHARED.value(("owner", kind, name), lambda: Owner(kind, name))


def _tolerations(raw: object) -> tuple[Toleration, ...]:
    """A pod's tolerations (most pods have the two the API server adds: one tuple for all)."""
    if not raw or not isinstance(raw, list):
        return ()
    made = tuple(_toleration(t) for t in raw if isinstance(t, Mapping))
    return _SHARED.value(("tolerations", *made), lambda: made)


def _toleration(t: Mapping[str, Any]) -> Toleration:
    return Toleration(
        key=str(t.get("key") or ""),
        operator=str(t.get("operator") or "Equal"),
        value=str(t.get("value") or ""),
        effect=str(t.get("effect") or ""),
    )


def _requirements(items: object) -> tuple[Requirement, ...]:
    out = []
    for item in items or ():  # type: ignore[attr-defined]
        if isinstance(item, Mapping):
            out.append(Requirement(str(item.get("key", "")), str(item.get("operator", "")),
                                   tuple(str(v) for v in item.get("values") or ())))
    return tuple(out)


_NODE_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})


def _parsable_label_requirement(req: Requirement) -> bool:
    """Whether kube-scheduler can parse a node label requirement (else its term matches nothing)."""
    if req.operator not in _NODE_OPERATORS or label_key_problem(req.key) is not None:
        return False
    n = len(req.values)
    if req.operator in ("In", "NotIn") and n == 0:
        return False
    if req.operator in ("Exists", "DoesNotExist") and n:
        return False
    if req.operator in ("Gt", "Lt") and (n != 1 or go_int(req.values[0]) is None):
        return False
    return all(label_value_problem(v) is None for v in req.values)


def _parsable_field_requirement(req: Requirement) -> bool:
    """Whether kube-scheduler can parse a node field requirement: In or NotIn with one value."""
    return req.operator in ("In", "NotIn") and len(req.values) == 1


def _term(term: Mapping[str, Any]) -> NodeSelectorTerm | None:
    """A term kube-scheduler can use, or None for one that matches no node (empty, unparsable)."""
    expressions = _requirements(term.get("matchExpressions"))
    fields = _requirements(term.get("matchFields"))
    if not expressions and not fields:
        return None
    if not (all(map(_parsable_label_requirement, expressions)) and all(map(_parsable_field_requirement, fields))):
        return None
    return NodeSelectorTerm(expressions, fields)


def _node_affinity(spec: Mapping[str, Any]) -> NodeAffinity:
    node_selector = _str_map(spec.get("nodeSelector"), "spec.nodeSelector")
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        if not node_selector:
            return _NO_AFFINITY
        return _SHARED.value(("affinity", None, *node_selector.items()), lambda: NodeAffinity(node_selector))
    if not isinstance(required, Mapping):
        raise ObjectError("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution: "
                          "must be an object")
    terms = (_term(t) for t in (required.get("nodeSelectorTerms") or ()) if isinstance(t, Mapping))
    made = NodeAffinity(node_selector=node_selector, required_terms=tuple(t for t in terms if t is not None))
    return _SHARED.value(("affinity", made.required_terms, *node_selector.items()), lambda: made)


def label_selector(obj: Mapping[str, Any] | None) -> LabelSelector:
    if not obj:
        return LabelSelector()
    return LabelSelector(dict(obj.get("matchLabels") or {}), _requirements(obj.get("matchExpressions")))


def parse_label_selector(text: str) -> LabelSelector:
    """A label selector as kubectl writes it (``app=web,tier!=db,env in (a,b),!legacy``), with
    Kubernetes' meanings: ``!=`` and ``notin`` also match pods without the key. Raises ValueError
    naming the requirement it cannot read."""
    parts: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(text):
        if ch in "()":
            depth += 1 if ch == "(" else -1
            if depth not in (0, 1):
                raise ValueError(f"unbalanced parentheses in {text!r}")
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise ValueError(f"unbalanced parentheses in {text!r}")
    parts.append(text[start:])
    labels: dict[str, str] = {}
    requirements: list[Requirement] = []
    for raw in parts:
        part = raw.strip()
        if not part:
            raise ValueError(f"empty requirement in {text!r}")
        words = part.split(None, 1)
        if len(words) == 2 and words[1].split(None, 1)[0] in ("in", "notin"):
            op, _, rest = words[1].partition(" ")
            rest = rest.strip()
            if not (rest.startswith("(") and rest.endswith(")")):
                raise ValueError(f"{part!r}: {op} needs a list of values in parentheses")
            values = tuple(v.strip() for v in rest[1:-1].split(","))
            if not all(values):
                raise ValueError(f"{part!r}: empty value in the list")
            requirements.append(Requirement(_label_key(words[0], part), "In" if op == "in" else "NotIn", values))
        elif "!=" in part:
            key, _, value = part.partition("!=")
            requirements.append(Requirement(_label_key(key, part), "NotIn", (value.strip(),)))
        elif "=" in part:
            key, _, value = part.replace("==", "=", 1).partition("=")
            labels[_label_key(key, part)] = value.strip()
        elif part.startswith("!"):
            requirements.append(Requirement(_label_key(part[1:], part), "DoesNotExist"))
        else:
            requirements.append(Requirement(_label_key(part, part), "Exists"))
    return LabelSelector(labels, tuple(requirements))


def _label_key(key: str, part: str) -> str:
    key = key.strip()
    if not key or any(c.isspace() or c in "=!()," for c in key):
        raise ValueError(f"{part!r}: not a label key: {key!r}")
    return key


def lease_renew_seconds(obj: Mapping[str, Any]) -> tuple[str, float | None]:
    """A kube-node-lease Lease: the node it belongs to and its renewTime as epoch seconds."""
    meta = _meta(obj)
    renew = (obj.get("spec") or {}).get("renewTime")
    return meta["name"], parse_time(renew) if renew else None


def parse_time(text: str) -> float:
    """An RFC 3339 time (``2026-05-01T12:00:00Z``, fractional seconds allowed) as epoch seconds.
    A time without an offset is taken as UTC, as Kubernetes writes every time in UTC: the
    machine's own time zone never changes what a snapshot or an annotation says."""
    try:
        stamp = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ObjectError(f"not an RFC 3339 time: {text!r}") from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    return stamp.timestamp()


def format_time(seconds: float, *, digits: int = 0) -> str:
    """Epoch ``seconds`` as RFC 3339 in UTC, the way Kubernetes writes times: whole seconds (a
    ``metav1.Time``: conditions, Events), or with ``digits`` (1 to 6) of a second (6: a
    ``MicroTime``, such as a Lease's renewTime)."""
    if not 0 <= digits <= 6:
        raise ValueError(f"digits must be 0 to 6, not {digits}")
    stamp = datetime.fromtimestamp(seconds, UTC)
    fraction = f".{stamp.microsecond:06d}"[:digits + 1] if digits else ""
    return stamp.strftime("%Y-%m-%dT%H:%M:%S") + fraction + "Z"
