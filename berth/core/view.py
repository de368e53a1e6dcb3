"""The cluster as the core sees it: nodes, the pods bound or assumed on them, and leases.

One mutable structure, updated by the extender's watches or filled once from a snapshot; plain
data, read as it is by the plain path (:class:`berth.core.framework.PlainVerdicts`). Plans simulate
pods on an :class:`Overlay`, which reads through to the view and never changes it.

Whatever is kept for speed (per-node totals, counted selectors, the label index, verdict tables,
the change log they catch up from) is the index's (:mod:`berth.core.index`): it sits in a state's
``index`` slot once an indexed evaluation asks for it, and the view and its overlays tell it of
every change (:class:`Watcher`). With the index off (``Settings.index``, ``BERTH_INDEX=off``) the
slot stays empty and nothing beyond the plain data is kept.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping
from typing import Protocol

from berth.core.model import NodeInfo, PodInfo
from berth.core.quantity import PODS


class Watcher(Protocol):
    """What a state tells the index kept on it (:func:`berth.core.index.index_of`) of each change."""

    def node_changed(self, name: str, old: NodeInfo | None, new: NodeInfo | None) -> None: ...

    def pod_changed(self, pod: PodInfo, sign: int) -> None:
        """``pod`` (its ``node_name`` set) now counts on its node (``sign`` +1) or no longer (-1)."""
        ...

    def lease_changed(self, name: str) -> None: ...


class ClusterState(Protocol):
    """What evaluation reads: the view itself, or an overlay of simulated placements."""

    index: Watcher | None
    """The index's slot (:func:`berth.core.index.index_of`): None until an indexed evaluation asks."""

    @property
    def nodes(self) -> Mapping[str, NodeInfo]: ...

    @property
    def leases(self) -> Mapping[str, float | None]: ...

    @property
    def leases_tracked(self) -> bool: ...

    def requested(self, node: str) -> Mapping[str, int]:
        """What the pods on ``node`` request, summed, with one pod slot each."""
        ...

    def pods_on(self, node: str) -> Iterable[PodInfo]: ...

    def pod_count(self, node: str) -> int: ...

    @property
    def nodes_version(self) -> int:
        """Changes whenever a node object is added, changed or removed."""
        ...

    @property
    def base(self) -> ClusterView:
        """The view beneath (the view itself, or the view under an overlay)."""
        ...

    def local_nodes(self) -> Collection[str]:
        """Nodes shown here differently from ``base`` (an overlay's simulated placements, a
        request's own Node objects)."""
        ...


def summed_requests(pods: Iterable[PodInfo]) -> dict[str, int]:
    """What ``pods`` request, summed, with one pod slot each (nothing for no pods)."""
    requested: dict[str, int] = {}
    count = 0
    for pod in pods:
        for resource, amount in pod.requests.items():
            requested[resource] = requested.get(resource, 0) + amount
        count += 1
    if count:
        requested[PODS] = requested.get(PODS, 0) + count
    return requested


class ClusterView:
    """Nodes, pods placed on them (bound or assumed) and node leases."""

    def __init__(self, *, leases_tracked: bool = False) -> None:
        self._nodes: dict[str, NodeInfo] = {}
        self._on_node: dict[str, dict[str, PodInfo]] = {}  # node -> uid -> pod (a deleted node's pods stay)
        self._pods: dict[str, PodInfo] = {}
        self._assumed: set[str] = set()
        self._by_namespace: dict[str, dict[str, PodInfo]] = {}
        self._leases: dict[str, float | None] = {}
        self.leases_tracked = leases_tracked
        self.version = 0  # anything changed
        self.cluster_version = 0  # a node, or the pods on one, changed (not a Lease)
        self._nodes_version = 0
        self.index: Watcher | None = None

    # -- reads ------------------------------------------------------------------------

    @property
    def nodes(self) -> Mapping[str, NodeInfo]:
        return self._nodes

    @property
    def leases(self) -> Mapping[str, float | None]:
        return self._leases

    def requested(self, node: str) -> Mapping[str, int]:
        return summed_requests(self.pods_on(node))

    def pods_on(self, node: str) -> Iterable[PodInfo]:
        pods = self._on_node.get(node)
        return pods.values() if pods else ()

    def pod_count(self, node: str) -> int:
        pods = self._on_node.get(node)
        return len(pods) if pods else 0

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

    @property
    def nodes_version(self) -> int:
        return self._nodes_version

    @property
    def base(self) -> ClusterView:
        return self

    def local_nodes(self) -> Collection[str]:
        return ()

    # -- writes -----------------------------------------------------------------------

    def upsert_node(self, node: NodeInfo) -> None:
        old = self._nodes.get(node.name)
        if old == node:
            return  # a status update that changes nothing berth reads (most of them): every verdict stands
        self._nodes[node.name] = node
        self._nodes_version += 1
        self.cluster_version += 1
        self.version += 1
        if self.index is not None:
            self.index.node_changed(node.name, old, node)

    def remove_node(self, name: str) -> None:
        old = self._nodes.pop(name, None)
        self._nodes_version += 1
        self.cluster_version += 1
        self.version += 1
        if self.index is not None:
            self.index.node_changed(name, old, None)

    def set_lease(self, node: str, renew_seconds: float | None) -> None:
        self._leases[node] = renew_seconds
        self.version += 1
        if self.index is not None:
            self.index.lease_changed(node)

    def remove_lease(self, node: str) -> None:
        self._leases.pop(node, None)
        self.version += 1
        if self.index is not None:
            self.index.lease_changed(node)

    def upsert_pod(self, pod: PodInfo) -> None:
        """Record a bound pod (or forget it when it has no node); a watched pod replaces its assumption."""
        self.remove_pod(pod.uid)
        if not pod.node_name:
            return
        self._pods[pod.uid] = pod
        self._by_namespace.setdefault(pod.namespace, {})[pod.uid] = pod
        self._on_node.setdefault(pod.node_name, {})[pod.uid] = pod
        self.cluster_version += 1
        self.version += 1
        if self.index is not None:
            self.index.pod_changed(pod, +1)

    def assume(self, pod: PodInfo, node: str) -> PodInfo:
        """Count ``pod`` on ``node`` before the API server shows it there (docs/behaviour.md#assumed-pods)."""
        placed = pod.placed_on(node)
        self.upsert_pod(placed)
        self._assumed.add(pod.uid)
        return placed

    def remove_pod(self, uid: str) -> PodInfo | None:
        self._assumed.discard(uid)
        old = self._pods.pop(uid, None)
        if old is None:
            return None
        self._by_namespace.get(old.namespace, {}).pop(uid, None)
        on_node = self._on_node.get(old.node_name or "")
        if on_node is not None:
            on_node.pop(uid, None)
            if not on_node:
                del self._on_node[old.node_name or ""]
        self.cluster_version += 1
        self.version += 1
        if self.index is not None:
            self.index.pod_changed(old, -1)
        return old

    def overlay(self) -> Overlay:
        return Overlay(self)


class Overlay:
    """Simulated placements on top of a view: what a plan reads while it places pod after pod, or
    what a node would hold without the victims preemption evicts (:meth:`remove`)."""

    def __init__(self, under: ClusterState) -> None:
        self.under = under
        self._placed: dict[str, list[PodInfo]] = {}
        self._removed: dict[str, dict[str, PodInfo]] = {}  # node -> uid -> pod gone from it
        self.index: Watcher | None = None

    @property
    def nodes(self) -> Mapping[str, NodeInfo]:
        return self.under.nodes

    @property
    def leases(self) -> Mapping[str, float | None]:
        return self.under.leases

    @property
    def leases_tracked(self) -> bool:
        return self.under.leases_tracked

    def place(self, pod: PodInfo, node: str) -> None:
        placed = pod.placed_on(node)
        self._placed.setdefault(node, []).append(placed)
        if self.index is not None:
            self.index.pod_changed(placed, +1)

    def remove(self, pod: PodInfo) -> None:
        """Take a pod of the state beneath off its node, as if it were gone (a preemption victim)."""
        node = pod.node_name
        if not node or pod.uid in self._removed.get(node, ()):
            return
        self._removed.setdefault(node, {})[pod.uid] = pod
        if self.index is not None:
            self.index.pod_changed(pod, -1)

    def changed_nodes(self) -> Collection[str]:
        """The nodes this overlay placed pods on or took pods off."""
        return self._placed.keys() | self._removed.keys() if self._removed else self._placed.keys()

    def placed_on(self, node: str) -> Collection[PodInfo]:
        """The pods this overlay placed on ``node``."""
        return self._placed.get(node, ())

    def removed_from(self, node: str) -> Collection[PodInfo]:
        """The pods of the state beneath this overlay took off ``node``."""
        gone = self._removed.get(node)
        return gone.values() if gone else ()

    def requested(self, node: str) -> Mapping[str, int]:
        return summed_requests(self.pods_on(node))

    def pods_on(self, node: str) -> Iterable[PodInfo]:
        extra = self._placed.get(node)
        gone = self._removed.get(node)
        if not extra and not gone:
            return self.under.pods_on(node)
        kept = [p for p in self.under.pods_on(node) if p.uid not in gone] if gone else list(self.under.pods_on(node))
        return [*kept, *(extra or ())]

    def pod_count(self, node: str) -> int:
        return self.under.pod_count(node) + len(self._placed.get(node, ())) - len(self._removed.get(node, ()))

    @property
    def nodes_version(self) -> int:
        return self.under.nodes_version

    @property
    def base(self) -> ClusterView:
        return self.under.base

    def local_nodes(self) -> Collection[str]:
        under = self.under.local_nodes()
        mine = self.changed_nodes()
        return {*mine, *under} if under else mine
