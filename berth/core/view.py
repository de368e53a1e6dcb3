"""The cluster as the core sees it: nodes, the pods bound or assumed on them, and leases.

One mutable structure, updated by the extender's watches or filled once from a snapshot.
Per-node requested totals are kept incrementally so that a fit check costs a few dict
reads, and every change is logged by node name so that per-node verdict tables
(:mod:`berth.core.index.verdicts`) re-judge only the nodes that changed. Plans simulate pods on
an :class:`Overlay`, which reads through to the view and never changes it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from berth.core.model import LabelSelector, NodeInfo, PodInfo
from berth.core.quantity import PODS


class ClusterState(Protocol):
    """What evaluation reads: the view itself, or an overlay of simulated placements."""

    @property
    def nodes(self) -> Mapping[str, NodeInfo]: ...

    @property
    def leases(self) -> Mapping[str, float | None]: ...

    @property
    def leases_tracked(self) -> bool: ...

    def requested(self, node: str) -> Mapping[str, int]: ...

    def pods_on(self, node: str) -> Iterable[PodInfo]: ...

    def pod_count(self, node: str) -> int: ...

    def sleepy_memory(self, node: str) -> int: ...

    def matching_counts(self, namespace: str, selector: LabelSelector) -> Mapping[str, int]: ...

    def nodes_with_pod(self, namespace: str, labels: Mapping[str, str], exclude_uid: str) -> frozenset[str]: ...

    def nodes_labelled(self, key: str, value: str) -> frozenset[str]: ...

    def nodes_with_label_key(self, key: str) -> frozenset[str]: ...

    def nodes_without_label_key(self, key: str) -> frozenset[str]: ...

    @property
    def nodes_version(self) -> int: ...

    def memo(self, key: Hashable) -> dict[Any, Any]:
        """A scratch table for results that stay valid while ``nodes_version`` holds."""
        ...

    @property
    def base(self) -> ClusterView:
        """The view whose change log keeps per-node verdict tables in step (the view itself, or
        the view under an overlay)."""
        ...

    def local_nodes(self) -> Collection[str]:
        """Nodes shown here differently from ``base`` (an overlay's simulated placements, a
        request's own Node objects): judged afresh, never read from ``base``'s tables."""
        ...


@dataclass
class _NodeTotals:
    requested: dict[str, int] = field(default_factory=dict)
    pods: dict[str, PodInfo] = field(default_factory=dict)
    sleepy_memory: int = 0


def _add_requests(totals: _NodeTotals, pod: PodInfo, sign: int) -> None:
    req = totals.requested
    for name, amount in pod.requests.items():
        req[name] = req.get(name, 0) + sign * amount
    req[PODS] = req.get(PODS, 0) + sign
    if pod.sleepy:
        totals.sleepy_memory += sign * pod.requests.get("memory", 0)


MEMO_TABLES = 128
"""Memo tables kept (least recently used dropped): one per evaluation signature in use, each
holding a verdict per node, so this bounds their memory."""

COUNTED_SELECTORS = 1024
"""Workload selectors whose matching pods are counted per node and kept up to date on every pod
change (least recently asked dropped, counted afresh if asked again). Each pod change looks up
only the selectors that can match it (by one of their matchLabels pairs), so the cost of a pod
change does not grow with this number; the bound holds the memory of a cluster where every Job
brings a workload of its own."""

T = TypeVar("T")


class ChangeLog:
    """Names touched, in order: a table built at one token catches up on what changed since,
    rather than re-judging every node. Old entries are dropped; a token from before them
    gets ``None`` (start over)."""

    LIMIT = 1 << 16

    def __init__(self, limit: int = LIMIT) -> None:
        self._names: list[str] = []
        self._start = 0
        self._limit = limit

    @property
    def token(self) -> int:
        return self._start + len(self._names)

    def append(self, name: str) -> None:
        self._names.append(name)
        if len(self._names) > self._limit:
            half = len(self._names) // 2
            del self._names[:half]
            self._start += half

    def since(self, token: int) -> set[str] | None:
        if token < self._start:
            return None
        return set(self._names[token - self._start:])


class ClusterView:
    """Nodes, pods placed on them (bound or assumed) and node leases."""

    def __init__(self, *, leases_tracked: bool = False) -> None:
        self._nodes: dict[str, NodeInfo] = {}
        self._totals: dict[str, _NodeTotals] = {}
        self._pods: dict[str, PodInfo] = {}
        self._assumed: set[str] = set()
        self._by_namespace: dict[str, dict[str, PodInfo]] = {}
        self._leases: dict[str, float | None] = {}
        self.leases_tracked = leases_tracked
        self.version = 0
        # Per (namespace, selector): matching live pods per node, kept up to date on every pod change
        # so that a scheduling cycle never rescans a namespace (COUNTED_SELECTORS at most); indexed by
        # (namespace, one matchLabels pair), or (namespace,) for selectors without one, so that a pod
        # change visits only the selectors that can match the pod.
        self._counts: OrderedDict[tuple[str, object], tuple[LabelSelector, dict[str, int]]] = OrderedDict()
        self._counts_by_label: dict[tuple[str, ...], set[tuple[str, object]]] = {}
        self._adding = True  # False while read_only_caches() holds: caches are read, never added to
        self._label_index: dict[tuple[str, str], frozenset[str]] | None = None
        self._key_index: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
        self.node_log = ChangeLog()  # a node, or anything placed on it, changed
        self.lease_log = ChangeLog()
        self._nodes_version = 0
        self._memos: OrderedDict[Hashable, Any] = OrderedDict()

    # -- reads ------------------------------------------------------------------------

    @property
    def nodes(self) -> Mapping[str, NodeInfo]:
        return self._nodes

    @property
    def leases(self) -> Mapping[str, float | None]:
        return self._leases

    def requested(self, node: str) -> Mapping[str, int]:
        totals = self._totals.get(node)
        return totals.requested if totals else {}

    def pods_on(self, node: str) -> Iterable[PodInfo]:
        totals = self._totals.get(node)
        return totals.pods.values() if totals else ()

    def pod_count(self, node: str) -> int:
        totals = self._totals.get(node)
        return len(totals.pods) if totals else 0

    def sleepy_memory(self, node: str) -> int:
        totals = self._totals.get(node)
        return totals.sleepy_memory if totals else 0

    def pod(self, uid: str) -> PodInfo | None:
        return self._pods.get(uid)

    def is_assumed(self, uid: str) -> bool:
        return uid in self._assumed

    def bound_pod_count(self) -> int:
        """Pods placed and shown by the API server (the assumed ones not counted)."""
        return len(self._pods) - len(self._assumed)

    def all_pods(self) -> Iterator[PodInfo]:
        return iter(self._pods.values())

    def pods_in_namespace(self, namespace: str) -> Iterable[PodInfo]:
        return self._by_namespace.get(namespace, {}).values()

    def matching_counts(self, namespace: str, selector: LabelSelector) -> Mapping[str, int]:
        """Per node, how many live pods of ``namespace`` match ``selector`` (terminating excluded)."""
        key = (namespace, selector_key(selector))
        hit = self._counts.get(key)
        if hit is not None:
            self._counts.move_to_end(key)
            return hit[1]
        counts: dict[str, int] = {}
        for pod in self.pods_in_namespace(namespace):
            if _counts_for(pod, selector):
                node = pod.node_name or ""
                counts[node] = counts.get(node, 0) + 1
        if self._adding:
            self._counts[key] = (selector, counts)
            self._counts_by_label.setdefault(_count_bucket(namespace, selector), set()).add(key)
            if len(self._counts) > COUNTED_SELECTORS:
                old, (old_selector, _) = self._counts.popitem(last=False)
                bucket = _count_bucket(old[0], old_selector)
                keys = self._counts_by_label[bucket]
                keys.discard(old)
                if not keys:
                    del self._counts_by_label[bucket]
        return counts

    def cache_sizes(self) -> dict[str, int]:
        """Entries of the view's bounded caches: counted selectors and memo tables."""
        return {"counted_selectors": len(self._counts), "tables": len(self._memos)}

    @contextmanager
    def read_only_caches(self) -> Iterator[None]:
        """Within: every cache is read and kept up to date, but none is added to (tables, memos,
        counted selectors). For questions asked by people rather than by the scheduler (a
        preview, a capacity query): whatever shapes and labels they ask about, the state the
        scheduling path keeps and walks does not grow, and its tables are not pushed out."""
        self._adding = False
        try:
            yield
        finally:
            self._adding = True

    def nodes_with_pod(self, namespace: str, labels: Mapping[str, str], exclude_uid: str) -> frozenset[str]:
        """Nodes running a live pod of ``namespace`` that carries every pair of ``labels``, not
        counting the pod ``exclude_uid`` (the one being placed or moved)."""
        counts = self.matching_counts(namespace, LabelSelector(dict(labels)))
        found = {node for node, n in counts.items() if n > 0}
        excluded = self._pods.get(exclude_uid)
        if excluded is not None and excluded.node_name and counts.get(excluded.node_name) == 1 \
                and _counts_for(excluded, LabelSelector(dict(labels))):
            found.discard(excluded.node_name)
        return frozenset(found)

    def nodes_labelled(self, key: str, value: str) -> frozenset[str]:
        """Nodes whose label ``key`` has ``value`` (a placement rule's ``within`` group)."""
        if self._label_index is None:
            self._label_index = label_index(self._nodes.values())
            self._key_index = {}
        return self._label_index.get((key, value), frozenset())

    def nodes_with_label_key(self, key: str) -> frozenset[str]:
        """Nodes that carry the label ``key`` at all (a ``within`` rule's domain)."""
        return self._keyed(key)[0]

    def nodes_without_label_key(self, key: str) -> frozenset[str]:
        """Nodes without the label ``key`` (outside every topology domain of that key)."""
        return self._keyed(key)[1]

    def _keyed(self, key: str) -> tuple[frozenset[str], frozenset[str]]:
        if self._label_index is None:
            self.nodes_labelled(key, "")
        hit = self._key_index.get(key)
        if hit is None:
            keyed = frozenset(n for n, node in self._nodes.items() if key in node.labels)
            hit = self._key_index[key] = (keyed, frozenset(self._nodes.keys() - keyed))
        return hit

    @property
    def nodes_version(self) -> int:
        return self._nodes_version

    @property
    def base(self) -> ClusterView:
        return self

    def local_nodes(self) -> Collection[str]:
        return ()

    def memo(self, key: Hashable) -> dict[Any, Any]:
        return self.table(("memo", key), dict)

    def table(self, key: Hashable, factory: Callable[[], T]) -> T:
        """The table under ``key``, made by ``factory`` when missing; the least recently used go.
        Under :meth:`read_only_caches` a missing table is made for the one use and not kept."""
        table = self._memos.get(key)
        if table is None:
            if not self._adding:
                return factory()
            table = self._memos[key] = factory()
            if len(self._memos) > MEMO_TABLES:
                self._memos.popitem(last=False)
        else:
            self._memos.move_to_end(key)
        return table

    def _touch(self, node: str | None) -> None:
        if node:
            self.node_log.append(node)

    def _track(self, pod: PodInfo, sign: int) -> None:
        if not self._counts:
            return
        namespace = pod.namespace
        buckets = self._counts_by_label
        keys = buckets.get((namespace,), set()).union(
            *(buckets.get((namespace, k, v), ()) for k, v in pod.labels.items()))
        for key in keys:
            selector, counts = self._counts[key]
            if _counts_for(pod, selector):
                node = pod.node_name or ""
                counts[node] = counts.get(node, 0) + sign
                if counts[node] <= 0:
                    del counts[node]

    # -- writes -----------------------------------------------------------------------

    def upsert_node(self, node: NodeInfo) -> None:
        old = self._nodes.get(node.name)
        if old == node:
            return  # a status update that changes nothing berth reads (most of them): every verdict stands
        if old is None or old.labels != node.labels:
            self._label_index = None
        self._nodes[node.name] = node
        self._totals.setdefault(node.name, _NodeTotals())
        self._touch(node.name)
        self._nodes_version += 1
        self.version += 1

    def remove_node(self, name: str) -> None:
        self._nodes.pop(name, None)
        self._label_index = None
        self._touch(name)
        self._nodes_version += 1
        self.version += 1

    def set_lease(self, node: str, renew_seconds: float | None) -> None:
        self._leases[node] = renew_seconds
        self.lease_log.append(node)
        self.version += 1

    def remove_lease(self, node: str) -> None:
        self._leases.pop(node, None)
        self.lease_log.append(node)
        self.version += 1

    def upsert_pod(self, pod: PodInfo) -> None:
        """Record a bound pod (or forget it when it has no node); a watched pod replaces its assumption."""
        self.remove_pod(pod.uid)
        if not pod.node_name:
            return
        self._pods[pod.uid] = pod
        self._by_namespace.setdefault(pod.namespace, {})[pod.uid] = pod
        totals = self._totals.setdefault(pod.node_name, _NodeTotals())
        totals.pods[pod.uid] = pod
        _add_requests(totals, pod, +1)
        self._track(pod, +1)
        self._touch(pod.node_name)
        self.version += 1

    def assume(self, pod: PodInfo, node: str) -> PodInfo:
        """Count ``pod`` on ``node`` before the API server shows it there (docs/behaviour.md#assumed-pods)."""
        placed = _with_node(pod, node)
        self.upsert_pod(placed)
        self._assumed.add(pod.uid)
        return placed

    def remove_pod(self, uid: str) -> PodInfo | None:
        self._assumed.discard(uid)
        old = self._pods.pop(uid, None)
        if old is None:
            return None
        self._by_namespace.get(old.namespace, {}).pop(uid, None)
        totals = self._totals.get(old.node_name or "")
        if totals is not None and totals.pods.pop(uid, None) is not None:
            _add_requests(totals, old, -1)
        self._track(old, -1)
        self._touch(old.node_name)
        self.version += 1
        return old

    def overlay(self) -> Overlay:
        return Overlay(self)


def _with_node(pod: PodInfo, node: str) -> PodInfo:
    from dataclasses import replace

    return replace(pod, node_name=node)


def _counts_for(pod: PodInfo, selector: LabelSelector) -> bool:
    return bool(pod.node_name) and not pod.terminating and selector.matches(pod.labels)


def _count_bucket(namespace: str, selector: LabelSelector) -> tuple[str, ...]:
    """Where a counted selector is filed: under one of its matchLabels pairs (a pod without that
    pair cannot match it), else under the namespace alone (visited for every pod of it)."""
    if selector.match_labels:
        key, value = min(selector.match_labels.items())
        return (namespace, key, value)
    return (namespace,)


def label_index(nodes: Iterable[NodeInfo]) -> dict[tuple[str, str], frozenset[str]]:
    """(label key, value) -> the nodes carrying that label."""
    index: dict[tuple[str, str], set[str]] = {}
    for node in nodes:
        for pair in node.labels.items():
            index.setdefault(pair, set()).add(node.name)
    return {pair: frozenset(names) for pair, names in index.items()}


def selector_key(selector: LabelSelector) -> object:
    return (tuple(sorted(selector.match_labels.items())), selector.match_expressions)


class Overlay:
    """Simulated placements on top of a view: what a plan reads while it places pod after pod, or
    what a node would hold without the victims preemption evicts (:meth:`remove`)."""

    def __init__(self, base: ClusterState) -> None:
        self._base = base
        self._placed: dict[str, list[PodInfo]] = {}
        self._removed: dict[str, dict[str, PodInfo]] = {}  # node -> uid -> pod gone from it
        self._requested: dict[str, dict[str, int]] = {}
        self._sleepy: dict[str, int] = {}
        self._counts: dict[tuple[str, object], tuple[LabelSelector, dict[str, int]]] = {}

    @property
    def nodes(self) -> Mapping[str, NodeInfo]:
        return self._base.nodes

    @property
    def leases(self) -> Mapping[str, float | None]:
        return self._base.leases

    @property
    def leases_tracked(self) -> bool:
        return self._base.leases_tracked

    def place(self, pod: PodInfo, node: str) -> None:
        placed = _with_node(pod, node)
        self._placed.setdefault(node, []).append(placed)
        self._shift(placed, +1)

    def remove(self, pod: PodInfo) -> None:
        """Take a pod of the base off its node, as if it were gone (a preemption victim): its
        requests, its place in the workload counts and in the pods the placement rules see."""
        node = pod.node_name
        if not node or pod.uid in self._removed.get(node, ()):
            return
        self._removed.setdefault(node, {})[pod.uid] = pod
        self._shift(pod, -1)

    def _shift(self, pod: PodInfo, sign: int) -> None:
        """Count ``pod`` on its node (``sign`` +1) or no longer (-1): its requests, sleepy memory and
        place in the workload counts worked out so far."""
        node = pod.node_name or ""
        req = self._requested.get(node)
        if req is None:
            req = self._requested[node] = dict(self._base.requested(node))
        for name, amount in pod.requests.items():
            req[name] = req.get(name, 0) + sign * amount
        req[PODS] = req.get(PODS, 0) + sign
        if pod.sleepy:
            self._sleepy[node] = self.sleepy_memory(node) + sign * pod.requests.get("memory", 0)
        for (namespace, _), (selector, counts) in self._counts.items():
            if namespace == pod.namespace and _counts_for(pod, selector):
                counts[node] = counts.get(node, 0) + sign

    def requested(self, node: str) -> Mapping[str, int]:
        req = self._requested.get(node)
        return req if req is not None else self._base.requested(node)

    def pods_on(self, node: str) -> Iterable[PodInfo]:
        extra = self._placed.get(node)
        gone = self._removed.get(node)
        if not extra and not gone:
            return self._base.pods_on(node)
        kept = [p for p in self._base.pods_on(node) if p.uid not in gone] if gone else list(self._base.pods_on(node))
        return [*kept, *(extra or ())]

    def pod_count(self, node: str) -> int:
        return self._base.pod_count(node) + len(self._placed.get(node, ())) - len(self._removed.get(node, ()))

    def sleepy_memory(self, node: str) -> int:
        return self._sleepy.get(node, self._base.sleepy_memory(node))

    def matching_counts(self, namespace: str, selector: LabelSelector) -> Mapping[str, int]:
        key = (namespace, selector_key(selector))
        hit = self._counts.get(key)
        if hit is not None:
            return hit[1]
        counts = dict(self._base.matching_counts(namespace, selector))
        for node, pods in self._placed.items():
            for pod in pods:
                if pod.namespace == namespace and selector.matches(pod.labels):
                    counts[node] = counts.get(node, 0) + 1
        for node, gone in self._removed.items():
            for pod in gone.values():
                if pod.namespace == namespace and _counts_for(pod, selector):
                    counts[node] = counts.get(node, 0) - 1
        self._counts[key] = (selector, counts)
        return counts

    def nodes_labelled(self, key: str, value: str) -> frozenset[str]:
        return self._base.nodes_labelled(key, value)

    def nodes_with_label_key(self, key: str) -> frozenset[str]:
        return self._base.nodes_with_label_key(key)

    def nodes_without_label_key(self, key: str) -> frozenset[str]:
        return self._base.nodes_without_label_key(key)

    @property
    def nodes_version(self) -> int:
        return self._base.nodes_version

    @property
    def base(self) -> ClusterView:
        return self._base.base

    def local_nodes(self) -> Collection[str]:
        under = self._base.local_nodes()
        mine: Collection[str] = self._placed.keys() | self._removed.keys() if self._removed else self._placed.keys()
        return {*mine, *under} if under else mine

    def memo(self, key: Hashable) -> dict[Any, Any]:
        return self._base.memo(key)

    def nodes_with_pod(self, namespace: str, labels: Mapping[str, str], exclude_uid: str) -> frozenset[str]:
        base = self._base.nodes_with_pod(namespace, labels, exclude_uid)
        extra = {
            node
            for node, pods in self._placed.items()
            for pod in pods
            if pod.namespace == namespace and all(pod.labels.get(k) == v for k, v in labels.items())
        }
        if self._removed:
            selector = LabelSelector(dict(labels))
            emptied = {node for node in self._removed.keys() & base
                       if not any(p.uid != exclude_uid and p.namespace == namespace and _counts_for(p, selector)
                                  for p in self.pods_on(node))}
            base = base - emptied
        return base | extra if extra else base
