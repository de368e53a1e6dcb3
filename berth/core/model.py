"""The plain data the core reasons about: nodes, pods and the labels, taints and
requirements that relate them. Built from Kubernetes objects by :mod:`berth.core.kube`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from operator import attrgetter

from berth.core.labels import go_int

Resources = Mapping[str, int]
"""Amounts by resource name, in base units (see :mod:`berth.core.quantity`)."""


SLEEPY_ANNOTATION = "berth.dev/sleepy"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"  # a static pod's mirror, as the kubelet marks it
BYPASS_ANNOTATION = "berth.dev/bypass"
TEST_NODE_LABEL = "berth.dev/test-node"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str  # NoSchedule | PreferNoSchedule | NoExecute

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""  # empty matches every effect

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return bool(self.key) and self.value == taint.value


@dataclass(frozen=True, slots=True)
class Requirement:
    """One label-selector or node-selector requirement (In, NotIn, Exists, DoesNotExist, Gt, Lt)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op == "Exists":
            return self.key in labels
        if op == "DoesNotExist":
            return self.key not in labels
        value = labels.get(self.key)
        if op == "In":
            return value is not None and value in self.values
        if op == "NotIn":
            return value is None or value not in self.values
        if value is None or not self.values:
            return False
        have, want = go_int(value), go_int(self.values[0])
        if have is None or want is None:
            return False
        return have > want if op == "Gt" else have < want


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A metav1.LabelSelector. An empty selector matches everything."""

    match_labels: Mapping[str, str] = field(default_factory=dict)
    match_expressions: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        for key, value in self.match_labels.items():
            if labels.get(key) != value:
                return False
        # (no generator when there is no expression: a selector is matched against every pod of a namespace)
        return not self.match_expressions or all(req.matches(labels) for req in self.match_expressions)

    def matcher(self) -> Callable[[Mapping[str, str]], bool]:
        """:meth:`matches` as a function, one dict lookup for a selector of one label and no
        expression (the common case): for matching one selector against many pods at once."""
        if not self.match_expressions and len(self.match_labels) == 1:
            [(key, value)] = self.match_labels.items()
            return lambda labels: labels.get(key) == value
        return self.matches

    def with_labels(self, extra: Mapping[str, str]) -> LabelSelector:
        merged = dict(self.match_labels)
        merged.update(extra)
        return LabelSelector(merged, self.match_expressions)


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """What the core knows of a node. An absent ``allocatable`` entry means *unknown*, never zero."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    allocatable: Resources = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool | None = None  # None: the node reports no Ready condition
    bypassed: bool = False

    @property
    def is_test_node(self) -> bool:
        return self.labels.get(TEST_NODE_LABEL) == "true"


NODE_NAME_FIELD = "metadata.name"
"""The one node field a node selector term's ``matchFields`` can name."""


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """One required node affinity term: label requirements and ``metadata.name`` field
    requirements, ANDed. Built only from terms kube-scheduler can parse; an empty or unparsable
    term is left out (it matches no node)."""

    match_expressions: tuple[Requirement, ...] = ()
    match_fields: tuple[Requirement, ...] = ()

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        for req in self.match_expressions:
            if not req.matches(labels):
                return False
        for req in self.match_fields:
            # the only node field is metadata.name; any other key reads as the empty string
            have = name if req.key == NODE_NAME_FIELD else ""
            if (have == req.values[0]) != (req.operator == "In"):
                return False
        return True


@dataclass(frozen=True, slots=True)
class NodeAffinity:
    """The pod's own node constraints: spec.nodeSelector and required node affinity terms (ORed).

    ``required_terms`` is None when the pod states no required node affinity; an empty tuple
    when it does but no term can match (every term empty or unparsable): no node then matches,
    as in kube-scheduler.
    """

    node_selector: Mapping[str, str] = field(default_factory=dict)
    required_terms: tuple[NodeSelectorTerm, ...] | None = None

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        for key, value in self.node_selector.items():
            if labels.get(key) != value:
                return False
        if self.required_terms is None:
            return True
        return any(term.matches(name, labels) for term in self.required_terms)


@dataclass(frozen=True, slots=True)
class Owner:
    """The controller that owns a pod (its ownerReference with ``controller: true``)."""

    kind: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind}/{self.name}"


@dataclass(frozen=True, slots=True)
class PodInfo:
    """A pod as the core sees it: identity, labels, effective requests and where it runs."""

    uid: str
    name: str
    namespace: str
    labels: Mapping[str, str] = field(default_factory=dict)
    requests: Resources = field(default_factory=dict)
    node_name: str | None = None
    terminating: bool = False
    sleepy: bool = False
    tolerations: tuple[Toleration, ...] = ()
    node_affinity: NodeAffinity = field(default_factory=NodeAffinity)
    controller: Owner | None = None  # None: no controller would recreate the pod
    mirror: bool = False  # the API server's mirror of a static pod (the kubelet owns it)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def constraint_signature(self) -> tuple[object, ...]:
        """What the pod's own node verdicts depend on (tolerations, node selector, affinity)."""
        affinity = self.node_affinity
        return (self.tolerations, tuple(sorted(affinity.node_selector.items())), affinity.required_terms)

    def untolerated_taint(self, taints: tuple[Taint, ...], effects: frozenset[str]) -> Taint | None:
        """The first taint with one of ``effects`` that this pod does not tolerate, if any."""
        for taint in taints:
            if taint.effect in effects and not any(t.tolerates(taint) for t in self.tolerations):
                return taint
        return None

    def placed_on(self, node: str | None) -> PodInfo:
        """This pod bound or assumed on ``node`` (a copy)."""
        return _pod_with(self, {_NODE_AT: node})

    def with_identity(self, uid: str, name: str) -> PodInfo:
        """This pod under another identity (a copy): one replica of a round's pod."""
        return _pod_with(self, {_UID_AT: uid, _NAME_AT: name})


# A copy of a pod made from its fields' values in order: what dataclasses.replace makes, without
# its scan of the fields at every call (about 40 % fewer instructions). A round makes a replica of
# its pod, and places it, for every pod it places.
_POD_FIELDS = tuple(f.name for f in fields(PodInfo))
_pod_values = attrgetter(*_POD_FIELDS)
_UID_AT, _NAME_AT, _NODE_AT = (_POD_FIELDS.index(name) for name in ("uid", "name", "node_name"))


def _pod_with(pod: PodInfo, changes: Mapping[int, object]) -> PodInfo:
    values = list(_pod_values(pod))
    for at, value in changes.items():
        values[at] = value
    return PodInfo(*values)


SCHEDULING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
