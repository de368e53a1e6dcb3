"""The nodes a round's next pod may take, kept between its pods (:func:`berth.core.plan.place_in_turn`).

Pods alike are judged alike: the checks a node decides alone (the pod's own constraints, the
node filter, liveness, the round's plan, Auto's nodesLimit, the fit) change only on the node that
took the last pod. So after the first pod the nodes those checks leave standing wait in a heap by
the ranking's key, and each pod takes the first of them that the checks reading other nodes' pods
(DoNotSchedule topology spread, placement rules: :func:`~berth.core.index.judge.shared_refusals`)
leave standing; that is the node the full judgement ranks first. Only the node that took it is
judged again. When none is left standing the placer judges the pod in full (Preferred rules with
no meeting node left, or no node at all). ScheduleAnyway spread scores every node anew after each
pod, so it keeps nothing then.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from operator import methodcaller

from berth.core.candidates import CONTROLLER_LABELS, is_unverified
from berth.core.index.spread import spread_context
from berth.core.model import PodInfo
from berth.core.plugins.fit import Candidate
from berth.core.plugins.score import rank_order
from berth.core.policy import ROUND_STRATEGIES, PlacementPolicy, Strategy
from berth.core.strategies import strategy_key
from berth.core.view import ClusterState, ClusterView

Key = Callable[[Candidate], tuple[object, ...]]
Entry = tuple[tuple[object, ...], str]

VIEW_WORTH_FROM = 8
"""The fewest pods alike a turn on the view itself places through the nodes left standing (the
nominator's turns; fewer are judged in full, one by one): see :func:`worth_keeping`."""

_PUSH_AT_MOST = 16
"""More nodes than this at once are heapified with the heap (linear in it), fewer pushed."""


class StandingNodes:
    """The nodes left standing, each in a heap of (the ranking's key, node): those of known
    capacity, and after every one of them those of unknown capacity (the ranking puts those last,
    docs/behaviour.md#unknown-capacity; one heap when ``unverified_last`` is False). A node judged
    again is forgotten and added again with its new key: its older entries no longer hold, and are
    dropped when reached."""

    def __init__(self, key: Key, unverified_last: bool = True) -> None:
        self._key = key
        self._unverified_last = unverified_last
        self._heap: list[Entry] = []  # known capacity (every node, when not unverified_last)
        self._last: list[Entry] = []  # unknown capacity, when unverified_last
        # The nodes forgotten since they were first added, each with its key when added again
        # (None: not standing): only those have entries that may no longer hold, so a round's
        # first nodes, thousands, are added with nothing noted.
        self._again: dict[str, tuple[object, ...] | None] = {}
        self._unverified: dict[str, Candidate] = {}  # the nodes standing whose capacity is unknown

    def add(self, candidates: Iterable[Candidate]) -> None:
        """Nodes judged (again) standing, each with its key; a node added before is forgotten
        (:meth:`forget`) before it is added again. Many at once (the first pod's candidates) are
        heapified in linear time rather than pushed one by one."""
        candidates = candidates if isinstance(candidates, list) else list(candidates)
        key = self._key
        entries = [(key(c), c.name) for c in candidates]
        again = self._again
        if again:
            for entry in entries:
                if entry[1] in again:
                    again[entry[1]] = entry[0]
        unverified = list(filter(is_unverified, candidates))
        if unverified:
            self._unverified.update((c.name, c) for c in unverified)
            if self._unverified_last:
                late = {c.name for c in unverified}
                _push(self._last, [e for e in entries if e[1] in late])
                entries = [e for e in entries if e[1] not in late]
        _push(self._heap, entries)

    def forget(self, name: str) -> None:
        """``name`` is to be judged again: its entries no longer hold."""
        self._again[name] = None
        self._unverified.pop(name, None)

    def take_unverified(self, refused: Sequence[AbstractSet[str]]) -> list[Candidate]:
        """The candidates of the pod that :meth:`first` placed whose capacity is unknown (those
        standing that no set of ``refused`` holds: each gives the full judgement a warning), taken
        out: a node's warning is the same for every pod alike, so each is returned once until the
        node is judged again."""
        taken = [c for name, c in self._unverified.items() if not any(name in group for group in refused)]
        for c in taken:
            del self._unverified[c.name]
        return taken

    def first(self, refused: Sequence[AbstractSet[str]]) -> str | None:
        """The first node in the ranking's order that no set of ``refused`` holds (taken out of its
        heap: :meth:`forget` it and :meth:`add` it again once judged), or None."""
        winner = self._first_in(self._heap, refused)
        if winner is None and self._last:
            winner = self._first_in(self._last, refused)
        return winner

    def _first_in(self, heap: list[Entry], refused: Sequence[AbstractSet[str]]) -> str | None:
        again = self._again
        held = []
        winner = None
        while heap:
            entry = heapq.heappop(heap)
            name = entry[1]
            if again and name in again and again[name] != entry[0]:
                continue
            if any(name in group for group in refused):
                held.append(entry)
                continue
            winner = name
            break
        for entry in held:
            heapq.heappush(heap, entry)
        return winner


def _push(heap: list[Entry], entries: list[Entry]) -> None:
    if len(entries) > _PUSH_AT_MOST:
        heap.extend(entries)
        heapq.heapify(heap)
    else:
        for entry in entries:
            heapq.heappush(heap, entry)


def worth_keeping(state: ClusterState, count: int) -> bool:
    """Whether ``count`` pods alike are placed on ``state`` through the nodes left standing sooner
    than judged in full one by one. The heap is made from every candidate of the first pod, each
    keyed by the ranking. On an overlay (a round's plan, a drain's), once a pod is placed there, a
    full judgement costs about ten times one on the view at 5,000 nodes, so the heap pays from the
    second pod. On the view itself a judgement reads the order its verdict table keeps, and the
    heap costs as much as eight to twelve of them at 5,000 nodes (three to five at 500): a
    nominator's turn of two or three pods took four times longer through it
    (``bench/bench_core.py``, small turns)."""
    return count >= (VIEW_WORTH_FROM if isinstance(state, ClusterView) else 2)


def standing_nodes(state: ClusterState, pod: PodInfo, policy: PlacementPolicy | None, strategy: Strategy | None,
                   quota: Mapping[str, int] | None) -> StandingNodes | None:
    """A heap for pods alike ``pod`` (:func:`alike`) ranked as :func:`~berth.core.plugins.score.rank`
    ranks them under ``strategy`` and ``quota``, or None when it would not answer as the full
    judgement does: ScheduleAnyway spread scores every node anew after each pod.

    With no ScheduleAnyway spread no candidate has a spread score, so the ranking's key is the
    strategy's own, unknown capacity last: each node's key is the one its candidate keeps
    (:meth:`~berth.core.plugins.fit.Candidate.sort_key`), made once per node, not once per round.
    A round's plan (``quota``) ranks in the plan's order, unknown capacity or not."""
    spread = spread_context(state, pod, policy)
    if spread is not None and spread.soft:
        return None
    if quota is not None:
        return StandingNodes(rank_order(strategy, pod, quota), unverified_last=False)
    return StandingNodes(methodcaller("sort_key", strategy_key(strategy if strategy not in ROUND_STRATEGIES else None,
                                                                  pod)))


def alike(pods: Iterable[PodInfo]) -> bool:
    """Whether every pod is judged like the first (:func:`shape`)."""
    shapes = map(shape, pods)
    first = next(shapes, None)
    return all(s == first for s in shapes)


def shape(pod: PodInfo) -> tuple[object, ...]:
    """What a pod's judgement depends on besides the cluster: pods alike here are judged alike."""
    return (tuple(sorted(pod.requests.items())), pod.sleepy, pod.constraint_signature(), pod.namespace,
            tuple(sorted((k, v) for k, v in pod.labels.items() if k not in CONTROLLER_LABELS)))
