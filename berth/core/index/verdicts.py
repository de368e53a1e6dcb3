"""Per-node verdicts for one evaluation signature, kept in step with the view's changes.

A scheduling cycle asks about every node, but between two cycles only the nodes whose object
or pods changed can change their verdict, and only in what the checks behind the verdict read
(their ``DEPENDS``). A :class:`VerdictTable` holds one verdict per node
and, for each tag a verdict carries (refused, room left, capacity unverified ...), the set of
nodes carrying it, so that an evaluation works on whole node sets and re-judges only the
nodes the log names since the table last caught up.

A table also keeps its nodes sorted by any key a caller asks for (:meth:`VerdictTable.order`),
moving only the re-judged nodes, so that ranking a cycle's candidates is a filter of that order
rather than a sort.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from berth.core.index.cluster import ChangeLog, Token, check_keepable, index_of
from berth.core.model import NodeInfo
from berth.core.plugins import Depends
from berth.core.view import ClusterView

V = TypeVar("V")

_NONE: set[str] = set()


@dataclass(slots=True)
class _Order:
    """The table's nodes sorted by one key: ``keys[i]`` is the key of ``names[i]``."""

    token: int
    keys: list[Any] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    key_of: dict[str, Any] = field(default_factory=dict)


class VerdictTable(Generic[V]):
    """``depends``: what the verdicts read (the checks' ``DEPENDS``, combined): a node's verdict
    is judged again when one of those changed on it since the table last caught up."""

    def __init__(self, tags: Callable[[V], Iterable[str]], depends: Depends) -> None:
        check_keepable(depends)
        self.tags_of = tags
        self.depends = depends
        self.verdicts: dict[str, V] = {}
        self.tagged: dict[str, set[str]] = {}
        self._token: Token | None = None
        # The nodes whose verdict was replaced since an order was last read, logged only while the
        # table keeps an order: orders are read every cycle, so a short log suffices (an order
        # that falls behind it is sorted again).
        self._rejudged = ChangeLog(limit=4096)
        self._orders: dict[Callable[[V], Any], _Order] = {}

    def sync(self, view: ClusterView, judge: Callable[[NodeInfo], V]) -> None:
        """Re-judge the nodes changed since the last sync in what the verdicts read (all of them
        the first time).

        Every changed node is judged before the table changes at all: if ``judge`` raises, the
        table is left exactly as it was (its token too), so the next sync judges the same nodes
        again rather than trusting verdicts that were never made."""
        changes = index_of(view).view.changes
        token = changes.token
        if token == self._token:
            return  # nothing changed since (the common case: a round's pods change only its overlay)
        changed: Iterable[str] | None = changes.since(self._token, self.depends)
        nodes = view.nodes
        if changed is None:
            judged = {name: judge(node) for name, node in nodes.items()}
            self.verdicts.clear()
            self.tagged.clear()
            self._orders.clear()
            self._token = token
            for name, verdict in judged.items():
                self.verdicts[name] = verdict
                for tag in self.tags_of(verdict):
                    self.tagged.setdefault(tag, set()).add(name)
            return
        updates: list[tuple[str, V | None]] = []
        for name in changed:
            node = nodes.get(name)
            updates.append((name, judge(node) if node is not None else None))
        self._token = token
        for name, fresh in updates:
            previous = self.verdicts.pop(name, None)
            if previous is not None:
                for tag in self.tags_of(previous):
                    self.tagged[tag].discard(name)
            if self._orders:
                self._rejudged.append(name)
            if fresh is not None:
                self.verdicts[name] = fresh
                for tag in self.tags_of(fresh):
                    self.tagged.setdefault(tag, set()).add(name)

    def order(self, key: Callable[[V], Any]) -> Sequence[str]:
        """Every node of the table, sorted by ``key`` of its verdict. ``key`` must be one function
        kept for the purpose (the orders are kept per function) and unique per node. The order is
        kept between calls: only the nodes re-judged since are moved."""
        kept = self._orders.get(key)
        changed = self._rejudged.since(kept.token) if kept is not None else None
        if kept is None or changed is None or not self._move(kept, changed, key):
            pairs = sorted((key(v), name) for name, v in self.verdicts.items())
            kept = self._orders[key] = _Order(0, [k for k, _ in pairs], [n for _, n in pairs],
                                              {n: k for k, n in pairs})
        kept.token = self._rejudged.token
        return kept.names

    def _move(self, kept: _Order, changed: Iterable[str], key: Callable[[V], Any]) -> bool:
        """Put the re-judged nodes in their new places; False if a key turns out not to be unique."""
        keys, names = kept.keys, kept.names
        for name in changed:
            old = kept.key_of.pop(name, _ABSENT)
            if old is not _ABSENT:
                i = bisect_left(keys, old)
                if i == len(names) or names[i] != name:
                    return False
                del keys[i], names[i]
            verdict = self.verdicts.get(name)
            if verdict is not None:
                new = kept.key_of[name] = key(verdict)
                i = bisect_left(keys, new)
                if i < len(keys) and keys[i] == new:
                    return False
                keys.insert(i, new)
                names.insert(i, name)
        return True

    def reading(self, fresh: Mapping[str, V]) -> Judged[V]:
        return Judged(self, fresh)


_ABSENT = object()


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
        """The verdicts of ``names``, in order (the hot path: no Python-level loop without fresh ones)."""
        verdicts, fresh = self._table.verdicts, self._fresh
        if not fresh:
            return list(map(verdicts.__getitem__, names))
        return [fresh[n] if n in fresh else verdicts[n] for n in names]

    def order(self, key: Callable[[V], Any]) -> Sequence[str] | None:
        """The table's order by ``key`` (:meth:`VerdictTable.order`); None when this reading has fresh
        verdicts, which the order does not know."""
        return None if self._fresh else self._table.order(key)

    def among(self, tag: str, nodes: Collection[str]) -> set[str]:
        """The nodes of ``nodes`` whose verdict carries ``tag``."""
        hit = self._table.tagged.get(tag, _NONE).intersection(nodes)
        if self._fresh:
            tags = self._table.tags_of
            hit.difference_update(self._fresh)
            hit.update(n for n, v in self._fresh.items() if n in nodes and tag in tags(v))
        return hit
