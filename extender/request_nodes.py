"""The Node objects of a ``nodeCacheCapable: false`` request (kube-scheduler sends every Node whole
in every filter and prioritize): read by the core once per resourceVersion, judged in place of the
view's own (:class:`RequestNodes`), and the passing ones echoed back encoded once per
resourceVersion (:class:`NodeEcho`). With ``nodeCacheCapable: true`` the request carries names only
and none of this runs.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any, NamedTuple

import orjson

from berth.core import (
    ClusterView,
    NodeInfo,
    ObjectError,
    Overlay,
    PodInfo,
    node_from_object,
)
from berth.extender.store import ClusterStore
from berth.extender.wire import BadRequest, ExtenderArgs, node_name


class RequestedNodes(NamedTuple):
    names: list[str]
    """every node the request names, in its order"""
    parsed: dict[str, NodeInfo]
    """the Node objects it carries, read"""
    unreadable: dict[str, str]
    """the Node objects the core cannot read, with why"""
    raw: dict[str, dict[str, Any]]
    """the Node objects as sent, by name (echoed back when they pass)"""


class RequestNodes:
    """The view with the Node objects of a ``nodeCacheCapable: false`` request in place of its own."""

    def __init__(self, view: ClusterView, nodes: Mapping[str, NodeInfo]) -> None:
        self._view = view
        own = view.nodes
        # A request's Node equal to the view's is the view's: its verdicts come from the view's tables.
        local = {name: node for name, node in nodes.items() if own.get(name) != node}
        self._nodes: Mapping[str, NodeInfo] = {**own, **local} if local else own
        self._local = frozenset(local)
        self.index: Any = None  # the index's slot (its own: not the view's)

    @property
    def nodes(self) -> Mapping[str, NodeInfo]:
        return self._nodes

    @property
    def leases(self) -> Mapping[str, float | None]:
        return self._view.leases

    @property
    def base(self) -> ClusterView:
        return self._view

    def local_nodes(self) -> Collection[str]:
        return self._local

    @property
    def leases_tracked(self) -> bool:
        return self._view.leases_tracked

    def requested(self, node: str) -> Mapping[str, int]:
        return self._view.requested(node)

    def pods_on(self, node: str) -> Iterable[PodInfo]:
        return self._view.pods_on(node)

    def pod_count(self, node: str) -> int:
        return self._view.pod_count(node)

    def overlay(self) -> Overlay:
        return Overlay(self)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._view, name)


def read_request_nodes(args: ExtenderArgs, store: ClusterStore) -> RequestedNodes:
    """The nodes a filter or prioritize request names; the Node objects it carries (``nodeCacheCapable:
    false``) read by the core once per resourceVersion (``store.request_nodes`` keeps them). Kept
    whatever the index switch says: not for speed alone, it is where bind finds a node the view
    does not have (kube-scheduler names it, and sent it whole only in filter and prioritize)."""
    if args.NodeNames is not None:
        return RequestedNodes(list(args.NodeNames), {}, {}, {})
    if args.Nodes is None:
        raise BadRequest("ExtenderArgs: one of Nodes or NodeNames is required")
    names: list[str] = []
    parsed: dict[str, NodeInfo] = {}
    bad: dict[str, str] = {}
    raw: dict[str, dict[str, Any]] = {}
    cache = store.request_nodes
    for obj in args.Nodes.items:
        name = node_name(obj)
        names.append(name)
        raw[name] = obj
        meta = obj.get("metadata")
        rv = str(meta.get("resourceVersion") or "") if isinstance(meta, dict) else ""
        hit = cache.get(name)
        if hit is not None and rv and hit[0] == rv:
            parsed[name] = hit[1]
            continue
        try:
            node = node_from_object(obj)
        except (ObjectError, TypeError, ValueError, AttributeError) as exc:
            bad[name] = f"berth cannot read the node: {exc}"
            continue
        parsed[name] = node
        if rv and name:
            cache[name] = (rv, node)
    if len(cache) > 4 * max(len(store.view.nodes), 1000):
        cache.clear()
    return RequestedNodes(names, parsed, bad, raw)


class NodeEcho:
    """The passing Node objects of a ``nodeCacheCapable: false`` filter, echoed back as the protocol
    requires, each encoded once per resourceVersion; with ``kept`` False (the index off) each time,
    since the encodings are kept for speed only."""

    def __init__(self, store: ClusterStore, *, kept: bool = True) -> None:
        self._store = store
        self._kept = kept
        self._encoded: dict[str, tuple[str, orjson.Fragment]] = {}

    def __len__(self) -> int:
        return len(self._encoded)

    def encoded(self, obj: dict[str, Any]) -> orjson.Fragment:
        """A passing Node echoed back (``nodeCacheCapable: false``), encoded once per resourceVersion."""
        meta = obj.get("metadata")
        name = str(meta.get("name") or "") if isinstance(meta, dict) else ""
        rv = str(meta.get("resourceVersion") or "") if isinstance(meta, dict) else ""
        hit = self._encoded.get(name) if rv and self._kept else None
        if hit is not None and hit[0] == rv:
            return hit[1]
        fragment = orjson.Fragment(orjson.dumps(obj))
        if rv and name and self._kept:
            if len(self._encoded) > 4 * max(len(self._store.view.nodes), 1000):
                self._encoded.clear()
            self._encoded[name] = (rv, fragment)
        return fragment
