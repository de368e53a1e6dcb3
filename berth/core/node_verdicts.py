"""Per-node verdicts for one evaluation signature, kept in step with the view's change log.

A scheduling cycle asks about every node, but between two cycles only the nodes whose object
or pods changed can change their verdict. A :class:`VerdictTable` holds one verdict per node
and, for each tag a verdict carries (refused, room left, capacity unverified ...), the set of
nodes carrying it, so that an evaluation works on whole node sets and re-judges only the
nodes the log names since the table last caught up.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Generic, TypeVar

from berth.core.model import NodeInfo
from berth.core.view import ClusterView

V = TypeVar("V")

_NONE: set[str] = set()


class VerdictTable(Generic[V]):
    def __init__(self, tags: Callable[[V], Iterable[str]]) -> None:
        self.tags_of = tags
        self.verdicts: dict[str, V] = {}
        self.tagged: dict[str, set[str]] = {}
        self._token: int | None = None

    def sync(self, view: ClusterView, judge: Callable[[NodeInfo], V],
             keep: Callable[[V, NodeInfo], bool] | None = None) -> None:
        """Re-judge the nodes changed since the last sync (all of them the first time).
        ``keep(verdict, node)``: whether a changed node's verdict still stands."""
        log = view.node_log
        changed: Iterable[str] | None = log.since(self._token) if self._token is not None else None
        if changed is None:
            self.verdicts.clear()
            self.tagged.clear()
            changed = view.nodes.keys()
        self._token = log.token
        nodes = view.nodes
        for name in changed:
            node = nodes.get(name)
            old = self.verdicts.get(name)
            if old is not None:
                if node is not None and keep is not None and keep(old, node):
                    continue
                del self.verdicts[name]
                for tag in self.tags_of(old):
                    self.tagged[tag].discard(name)
            if node is not None:
                verdict = self.verdicts[name] = judge(node)
                for tag in self.tags_of(verdict):
                    self.tagged.setdefault(tag, set()).add(name)

    def reading(self, fresh: Mapping[str, V]) -> Judged[V]:
        return Judged(self, fresh)


class Judged(Generic[V]):
    """One evaluation's reading of a table: its verdicts, with ``fresh`` ones (nodes the state
    shows differently from the view, judged afresh) in their place."""

    def __init__(self, table: VerdictTable[V], fresh: Mapping[str, V]) -> None:
        self._table = table
        self._fresh = fresh

    def __getitem__(self, name: str) -> V:
        hit = self._fresh.get(name)
        return self._table.verdicts[name] if hit is None else hit

    def each(self, names: Iterable[str]) -> list[V]:
        """The verdicts of ``names``, in order (the hot path: one list comprehension, no calls)."""
        verdicts, fresh = self._table.verdicts, self._fresh
        if not fresh:
            return [verdicts[n] for n in names]
        return [fresh[n] if n in fresh else verdicts[n] for n in names]

    def among(self, tag: str, nodes: Collection[str]) -> set[str]:
        """The nodes of ``nodes`` whose verdict carries ``tag``."""
        hit = self._table.tagged.get(tag, _NONE).intersection(nodes)
        if self._fresh:
            tags = self._table.tags_of
            hit.difference_update(self._fresh)
            hit.update(n for n, v in self._fresh.items() if n in nodes and tag in tags(v))
        return hit
