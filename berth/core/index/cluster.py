"""What the index keeps on each state (:func:`index_of`): the view's per-node totals, counted
selectors, label index, change logs and tables (:class:`ViewIndex`); an overlay's simulated
pods added to its state beneath (:class:`OverlayIndex`); a request's own Node objects
(:class:`NodesIndex`). Each sits in its state's ``index`` slot, made when an indexed evaluation
first asks, and is told of every change by its state (:class:`berth.core.view.Watcher`). The plain
path never asks, so with the index off the slot stays empty and none of this is kept.

One invalidation scheme serves every cache kept between evaluations: the view's changes are
logged by what changed (:class:`Changes`: a node object, the pods on a node, a Lease), and a cache
keeps the token it was made at and asks what changed since of the kinds its check declares in
``DEPENDS`` (:class:`berth.core.plugins.Depends`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from berth.core.model import LabelSelector, NodeInfo, PodInfo
from berth.core.plugins import Depends
from berth.core.plugins.fit import NodeUse
from berth.core.quantity import MEMORY, PODS
from berth.core.settings import Settings
from berth.core.view import ClusterState, ClusterView, Overlay

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


LOGGED = (Depends.NODE, Depends.NODE_PODS, Depends.LEASES)
"""The kinds of change the view logs; a check's other dependencies are read through them: the
pods in a node's domain are the pods on the nodes of it, and the round is never kept."""

Token = tuple[int, ...]
"""Where :class:`Changes` stood, one position per logged kind."""


class Changes:
    """The view's changes, logged by kind: a cache made at :attr:`token` asks :meth:`since` that
    token which nodes changed in what its check reads, and re-judges only those."""

    def __init__(self) -> None:
        self._logs = tuple(ChangeLog() for _ in LOGGED)
        self._node, self._pods, self._leases = self._logs
        # the token now, made when first asked after a change: a cache asks for it (and compares it
        # with its own) on every evaluation, far more often than the view changes
        self._now: Token | None = None

    @property
    def token(self) -> Token:
        now = self._now
        if now is None:
            now = self._now = (self._node.token, self._pods.token, self._leases.token)
        return now

    def node(self, name: str) -> None:
        """The node object ``name`` was added, changed or removed."""
        self._node.append(name)
        self._now = None

    def pods(self, name: str) -> None:
        """A pod was placed on node ``name`` or left it."""
        self._pods.append(name)
        self._now = None

    def lease(self, name: str) -> None:
        """Node ``name``'s Lease was renewed, set unreadable or removed."""
        self._leases.append(name)
        self._now = None

    def since(self, token: Token | None, depends: Depends) -> set[str] | None:
        """The nodes whose verdict under ``depends`` may have changed since ``token``; None: every
        node's may have (no token yet, the log no longer reaches back to it, or the pods changed
        somewhere while ``depends`` reads the pods of a whole domain, which a node's name does not
        say)."""
        mask = depends._value_  # plain ints from here: this runs for every table on every evaluation
        if mask & _ROUND:
            check_keepable(depends)
        if token is None:
            return None
        if token == self.token:
            return set()
        if mask & _DOMAIN_PODS and self._pods.token != token[1]:
            return None
        names: set[str] = set()
        for kind, log, at in zip(_LOGGED_VALUES, self._logs, token, strict=True):
            if mask & kind and log.token != at:
                changed = log.since(at)
                if changed is None:
                    return None
                names |= changed
        return names

    def changed(self, token: Token | None, depends: Depends) -> bool:
        """Whether anything ``depends`` reads changed since ``token`` (for a cache of a whole set)."""
        mask = depends._value_
        if mask & _ROUND:
            check_keepable(depends)
        if token is None:
            return True
        if token == self.token:
            return False
        if mask & _DOMAIN_PODS:
            mask |= _NODE_PODS
        for kind, log, at in zip(_LOGGED_VALUES, self._logs, token, strict=True):
            if mask & kind and log.token != at:
                return True
        return False


_LOGGED_VALUES = tuple(kind._value_ for kind in LOGGED)
_ROUND = Depends.ROUND._value_
_DOMAIN_PODS = Depends.DOMAIN_PODS._value_
_NODE_PODS = Depends.NODE_PODS._value_


def check_keepable(depends: Depends) -> None:
    """Refuse to keep a verdict that reads the round: a round's plan is an evaluation's own."""
    if Depends.ROUND in depends:
        raise ValueError("a verdict that reads the round is made for one evaluation, never kept")


class StateIndex(ABC):
    """What the index answers about one state, from what it keeps."""

    view: ViewIndex
    """The index of the view beneath: its change logs and tables."""

    @abstractmethod
    def use(self, node: str) -> NodeUse:
        """What the pods on ``node`` take from it."""
        ...

    @abstractmethod
    def matching_counts(self, namespace: str, selector: LabelSelector) -> Mapping[str, int]:
        """Per node, how many live pods of ``namespace`` match ``selector`` (terminating excluded)."""
        ...

    @abstractmethod
    def nodes_with_pod(self, namespace: str, labels: Mapping[str, str], exclude_uid: str) -> frozenset[str]:
        """Nodes running a live pod of ``namespace`` that carries every pair of ``labels``, not
        counting the pod ``exclude_uid`` (the one being placed or moved)."""
        ...

    @abstractmethod
    def nodes_labelled(self, key: str, value: str) -> frozenset[str]:
        """Nodes whose label ``key`` has ``value``."""
        ...

    @abstractmethod
    def nodes_with_label_key(self, key: str) -> frozenset[str]:
        """Nodes that carry the label ``key`` at all."""
        ...

    @abstractmethod
    def nodes_without_label_key(self, key: str) -> frozenset[str]:
        """Nodes without the label ``key`` (outside every topology domain of that key)."""
        ...

    # -- what the state tells of its changes (berth.core.view.Watcher) ----------------------------
    # Not abstract: an index that keeps nothing about a kind of change ignores it.

    def node_changed(self, name: str, old: NodeInfo | None, new: NodeInfo | None) -> None:  # noqa: B027
        pass

    def pod_changed(self, pod: PodInfo, sign: int) -> None:  # noqa: B027
        pass

    def lease_changed(self, name: str) -> None:  # noqa: B027
        pass


def whole_view(state: ClusterState, nodes: Sequence[str] | None = None
               ) -> tuple[list[str], frozenset[str]] | None:
    """Every node of ``state`` in name order (a list of its own) and as a set, from what the view
    beneath keeps, when ``state`` shows the view's nodes (the view, an overlay of it); None when
    it shows nodes of its own (a request's Node objects).

    With ``nodes`` (the names a caller asks about), the same when they are exactly the view's
    nodes, each named once, in any order: the names in the caller's order, and the view's set.
    kube-scheduler's filter sends every node that passed its own filters, which is most often
    every node of the cluster, in an order of its own; judged as the whole view, its candidates
    need not be made one by one (``CandidateSet.rest_of``). None for any other ``nodes``."""
    if state.nodes is not state.base.nodes:
        return None
    names, every = index_of(state).view.node_names()
    if nodes is None:
        return list(names), every
    asked = list(nodes)
    if len(asked) != len(every) or every != frozenset(asked):  # same size and set: each named once
        return None
    return asked, every


def index_of(state: ClusterState) -> StateIndex:
    """The index kept on ``state``, made (and from then on told of every change) when first asked."""
    hit = state.index
    if hit is not None:  # only this function fills the slot; no ABC check, it runs several times an evaluation
        return cast(StateIndex, hit)
    made: StateIndex
    if isinstance(state, ClusterView):
        made = ViewIndex(state)
    elif isinstance(state, Overlay):
        made = OverlayIndex(state, index_of(state.under))
    else:
        made = NodesIndex(state, index_of(state.base))
    state.index = made
    return made


@dataclass
class _NodeTotals:
    requested: dict[str, int] = field(default_factory=dict)
    sleepy_memory: int = 0


def _add_requests(totals: _NodeTotals, pod: PodInfo, sign: int) -> None:
    req = totals.requested
    for name, amount in pod.requests.items():
        req[name] = req.get(name, 0) + sign * amount
    req[PODS] = req.get(PODS, 0) + sign
    if pod.sleepy:
        totals.sleepy_memory += sign * pod.requests.get(MEMORY, 0)


def counts_for(pod: PodInfo, selector: LabelSelector) -> bool:
    """Whether ``pod`` counts for a workload, spread or rule selector: placed, live, matching."""
    return bool(pod.node_name) and not pod.terminating and selector.matches(pod.labels)


def selector_key(selector: LabelSelector) -> object:
    return (tuple(sorted(selector.match_labels.items())), selector.match_expressions)


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


class ViewIndex(StateIndex):
    """Kept in step with one view: per-node totals (a fit check costs a few dict reads), counted
    selectors, the label index, the change logs the verdict tables catch up from, and the tables."""

    def __init__(self, view: ClusterView) -> None:
        self.view = self
        self._state = view
        self._totals: dict[str, _NodeTotals] = {}
        # Per (namespace, selector): matching live pods per node, kept up to date on every pod change
        # so that a scheduling cycle never rescans a namespace (COUNTED_SELECTORS at most); indexed by
        # (namespace, one matchLabels pair), or (namespace,) for selectors without one, so that a pod
        # change visits only the selectors that can match the pod.
        self._counts: OrderedDict[tuple[str, object], tuple[LabelSelector, dict[str, int]]] = OrderedDict()
        self._counts_by_label: dict[tuple[str, ...], set[tuple[str, object]]] = {}
        self._adding = True  # False while read_only_caches() holds: caches are read, never added to
        self._label_index: dict[tuple[str, str], frozenset[str]] | None = None
        self._key_index: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
        self.changes = Changes()
        self._memos: OrderedDict[Hashable, Any] = OrderedDict()
        self._names: tuple[tuple[str, ...], frozenset[str]] | None = None
        for pod in view.all_pods():
            _add_requests(self._totals.setdefault(pod.node_name or "", _NodeTotals()), pod, +1)

    # -- changes ----------------------------------------------------------------------------------

    def node_changed(self, name: str, old: NodeInfo | None, new: NodeInfo | None) -> None:
        if old is None or new is None:
            self._names = None
        if old is None or new is None or old.labels != new.labels:
            self._label_index = None
        self.changes.node(name)

    def pod_changed(self, pod: PodInfo, sign: int) -> None:
        node = pod.node_name or ""
        _add_requests(self._totals.setdefault(node, _NodeTotals()), pod, sign)
        if self._counts:
            self._track(pod, sign)
        if node:
            self.changes.pods(node)

    def lease_changed(self, name: str) -> None:
        self.changes.lease(name)

    def _track(self, pod: PodInfo, sign: int) -> None:
        namespace = pod.namespace
        buckets = self._counts_by_label
        keys = buckets.get((namespace,), set()).union(
            *(buckets.get((namespace, k, v), ()) for k, v in pod.labels.items()))
        for key in keys:
            selector, counts = self._counts[key]
            if counts_for(pod, selector):
                node = pod.node_name or ""
                counts[node] = counts.get(node, 0) + sign
                if counts[node] <= 0:
                    del counts[node]

    # -- reads ------------------------------------------------------------------------------------

    def node_names(self) -> tuple[tuple[str, ...], frozenset[str]]:
        """Every node of the view in name order, and as a set: what a judgement of the whole view
        considers, kept until a node comes or goes (not remade for each pod of a large cluster)."""
        if self._names is None:
            nodes = self._state.nodes
            self._names = (tuple(sorted(nodes)), frozenset(nodes))
        return self._names

    def use(self, node: str) -> NodeUse:
        totals = self._totals.get(node)
        if totals is None:
            return NodeUse({}, 0, 0)
        return NodeUse(totals.requested, self._state.pod_count(node), totals.sleepy_memory)

    def matching_counts(self, namespace: str, selector: LabelSelector) -> Mapping[str, int]:
        key = (namespace, selector_key(selector))
        hit = self._counts.get(key)
        if hit is not None:
            self._counts.move_to_end(key)
            return hit[1]
        counts: dict[str, int] = {}
        for pod in self._state.pods_in_namespace(namespace):
            if counts_for(pod, selector):
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

    def nodes_with_pod(self, namespace: str, labels: Mapping[str, str], exclude_uid: str) -> frozenset[str]:
        selector = LabelSelector(dict(labels))
        counts = self.matching_counts(namespace, selector)
        found = {node for node, n in counts.items() if n > 0}
        excluded = self._state.pod(exclude_uid)
        if excluded is not None and excluded.node_name and counts.get(excluded.node_name) == 1 \
                and counts_for(excluded, selector):
            found.discard(excluded.node_name)
        return frozenset(found)

    def nodes_labelled(self, key: str, value: str) -> frozenset[str]:
        if self._label_index is None:
            self._label_index = label_index(self._state.nodes.values())
            self._key_index = {}
        return self._label_index.get((key, value), frozenset())

    def nodes_with_label_key(self, key: str) -> frozenset[str]:
        return self._keyed(key)[0]

    def nodes_without_label_key(self, key: str) -> frozenset[str]:
        return self._keyed(key)[1]

    def _keyed(self, key: str) -> tuple[frozenset[str], frozenset[str]]:
        if self._label_index is None:
            self.nodes_labelled(key, "")
        hit = self._key_index.get(key)
        if hit is None:
            nodes = self._state.nodes
            keyed = frozenset(n for n, node in nodes.items() if key in node.labels)
            hit = self._key_index[key] = (keyed, frozenset(nodes.keys() - keyed))
        return hit

    # -- tables -----------------------------------------------------------------------------------

    def memo(self, key: Hashable) -> dict[Any, Any]:
        """A scratch table (the caller decides when its content is stale)."""
        return self.table(("memo", key), dict)

    def table(self, key: Hashable, factory: Callable[[], T]) -> T:
        """The table under ``key``, made by ``factory`` when missing; the least recently used go.
        Under :func:`read_only_caches` a missing table is made for the one use and not kept."""
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

    def cache_sizes(self) -> dict[str, int]:
        return {"counted_selectors": len(self._counts), "tables": len(self._memos)}


@contextmanager
def read_only_caches(view: ClusterView) -> Iterator[None]:
    """Within: the index kept on ``view`` is read and kept up to date, but nothing is added to it
    (tables, memos, counted selectors). For questions asked by people rather than by the
    scheduler (a preview, a capacity query): whatever shapes and labels they ask about, the state
    the scheduling path keeps and walks does not grow, and its tables are not pushed out. A view
    without an index (the index off) gets none."""
    kept = view.index
    if not isinstance(kept, ViewIndex):
        yield
        return
    kept._adding = False
    try:
        yield
    finally:
        kept._adding = True


def prepare_index(view: ClusterView, settings: Settings) -> None:
    """Make the index kept on ``view`` now, when ``settings`` has it on: its per-node totals are
    worked out from every pod here, once, rather than by the first scheduling cycle (a walk of
    every pod of a large cluster), and kept in step from then on; a view still empty is indexed as
    it fills, as its list arrives. With the index off, nothing is made."""
    if settings.indexed:
        index_of(view)


def cache_sizes(view: ClusterView) -> dict[str, int]:
    """Entries of the bounded caches the index keeps on ``view`` (none when it keeps nothing)."""
    kept = view.index
    return kept.cache_sizes() if isinstance(kept, ViewIndex) else {"counted_selectors": 0, "tables": 0}


class OverlayIndex(StateIndex):
    """An overlay's simulated pods on top of what is kept for the state beneath: the totals and
    counts of the nodes it changed, worked out when first asked and kept up as it changes."""

    def __init__(self, overlay: Overlay, under: StateIndex) -> None:
        self.view = under.view
        self._overlay = overlay
        self._under = under
        self._totals: dict[str, _NodeTotals] = {}
        self._counts: dict[tuple[str, object], tuple[LabelSelector, dict[str, int]]] = {}

    def pod_changed(self, pod: PodInfo, sign: int) -> None:
        node = pod.node_name or ""
        totals = self._totals.get(node)
        if totals is not None:
            _add_requests(totals, pod, sign)
        for (namespace, _), (selector, counts) in self._counts.items():
            if namespace == pod.namespace and counts_for(pod, selector):
                counts[node] = counts.get(node, 0) + sign

    def use(self, node: str) -> NodeUse:
        totals = self._totals.get(node)
        overlay = self._overlay
        if totals is None:
            placed, removed = overlay.placed_on(node), overlay.removed_from(node)
            if not placed and not removed:
                return self._under.use(node)
            below = self._under.use(node)
            totals = self._totals[node] = _NodeTotals(dict(below.requested), below.sleepy_memory)
            for pod in placed:
                _add_requests(totals, pod, +1)
            for pod in removed:
                _add_requests(totals, pod, -1)
        return NodeUse(totals.requested, overlay.pod_count(node), totals.sleepy_memory)

    def matching_counts(self, namespace: str, selector: LabelSelector) -> Mapping[str, int]:
        key = (namespace, selector_key(selector))
        hit = self._counts.get(key)
        if hit is not None:
            return hit[1]
        counts = dict(self._under.matching_counts(namespace, selector))
        overlay = self._overlay
        for node in overlay.changed_nodes():
            for pod in overlay.placed_on(node):
                if pod.namespace == namespace and counts_for(pod, selector):
                    counts[node] = counts.get(node, 0) + 1
            for pod in overlay.removed_from(node):
                if pod.namespace == namespace and counts_for(pod, selector):
                    counts[node] = counts.get(node, 0) - 1
        self._counts[key] = (selector, counts)
        return counts

    def nodes_with_pod(self, namespace: str, labels: Mapping[str, str], exclude_uid: str) -> frozenset[str]:
        below = self._under.nodes_with_pod(namespace, labels, exclude_uid)
        overlay = self._overlay
        selector = LabelSelector(dict(labels))

        def counts(pod: PodInfo) -> bool:
            return pod.uid != exclude_uid and pod.namespace == namespace and counts_for(pod, selector)

        found = set(below)
        for node in overlay.changed_nodes():
            if overlay.removed_from(node):
                has = any(map(counts, overlay.pods_on(node)))
            else:
                has = node in below or any(map(counts, overlay.placed_on(node)))
            if has:
                found.add(node)
            else:
                found.discard(node)
        return frozenset(found)

    def nodes_labelled(self, key: str, value: str) -> frozenset[str]:
        return self._under.nodes_labelled(key, value)

    def nodes_with_label_key(self, key: str) -> frozenset[str]:
        return self._under.nodes_with_label_key(key)

    def nodes_without_label_key(self, key: str) -> frozenset[str]:
        return self._under.nodes_without_label_key(key)


class NodesIndex(StateIndex):
    """A state showing Node objects of its own over the view's pods (a request's Node objects):
    the pods' answers are the view's, the labels' are worked out from its own nodes."""

    def __init__(self, state: ClusterState, under: StateIndex) -> None:
        self.view = under.view
        self._state = state
        self._under = under
        self._labels: dict[tuple[str, str], frozenset[str]] | None = None

    def use(self, node: str) -> NodeUse:
        return self._under.use(node)

    def matching_counts(self, namespace: str, selector: LabelSelector) -> Mapping[str, int]:
        return self._under.matching_counts(namespace, selector)

    def nodes_with_pod(self, namespace: str, labels: Mapping[str, str], exclude_uid: str) -> frozenset[str]:
        return self._under.nodes_with_pod(namespace, labels, exclude_uid)

    def nodes_labelled(self, key: str, value: str) -> frozenset[str]:
        if not self._state.local_nodes():
            return self._under.nodes_labelled(key, value)
        if self._labels is None:
            self._labels = label_index(self._state.nodes.values())
        return self._labels.get((key, value), frozenset())

    def nodes_with_label_key(self, key: str) -> frozenset[str]:
        if not self._state.local_nodes():
            return self._under.nodes_with_label_key(key)
        return frozenset(n for n, node in self._state.nodes.items() if key in node.labels)

    def nodes_without_label_key(self, key: str) -> frozenset[str]:
        if not self._state.local_nodes():
            return self._under.nodes_without_label_key(key)
        return frozenset(n for n, node in self._state.nodes.items() if key not in node.labels)
