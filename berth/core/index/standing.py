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
from collections.abc import Callable, Iterable, Sequence
from collections.abc import Set as AbstractSet

from berth.core.candidates import CONTROLLER_LABELS
from berth.core.index.spread import spread_context
from berth.core.model import PodInfo
from berth.core.plugins.fit import Candidate
from berth.core.policy import PlacementPolicy
from berth.core.view import ClusterState

Key = Callable[[Candidate], tuple[object, ...]]

_PUSH_AT_MOST = 16
"""More nodes than this at once are heapified with the heap (linear in it), fewer pushed."""


class StandingNodes:
    """A heap of (the ranking's key, node), and each node's key as last judged: an entry whose key
    is no longer its node's is stale, and dropped when reached."""

    def __init__(self, key: Key) -> None:
        self._key = key
        self._heap: list[tuple[tuple[object, ...], str]] = []
        self._keys: dict[str, tuple[object, ...]] = {}
        self._unverified: dict[str, Candidate] = {}  # the nodes standing whose capacity is unknown

    def add(self, candidates: Iterable[Candidate]) -> None:
        """Nodes judged (again) standing, each with its key. Many at once (the first pod's
        candidates) are heapified in linear time rather than pushed one by one."""
        keys, key, unverified = self._keys, self._key, self._unverified
        entries = []
        for c in candidates:
            name = c.name
            keys[name] = entry = key(c)
            entries.append((entry, name))
            if c.unverified:
                unverified[name] = c
        heap = self._heap
        if len(entries) > _PUSH_AT_MOST:
            heap.extend(entries)
            heapq.heapify(heap)
        else:
            for entry_and_name in entries:
                heapq.heappush(heap, entry_and_name)

    def forget(self, name: str) -> None:
        """``name`` is to be judged again: its entries no longer hold."""
        self._keys.pop(name, None)
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
        """The first node in key order that no set of ``refused`` holds (taken out of the heap:
        :meth:`forget` it and :meth:`add` it again once judged), or None."""
        heap, keys = self._heap, self._keys
        held = []
        winner = None
        while heap:
            entry = heapq.heappop(heap)
            if keys.get(entry[1]) != entry[0]:
                continue
            if any(entry[1] in group for group in refused):
                held.append(entry)
                continue
            winner = entry[1]
            break
        for entry in held:
            heapq.heappush(heap, entry)
        return winner


def standing_nodes(state: ClusterState, pod: PodInfo, policy: PlacementPolicy | None, key: Key
                   ) -> StandingNodes | None:
    """A heap for pods alike ``pod`` (:func:`alike`), or None when it would not answer as the full
    judgement does: ScheduleAnyway spread scores every node anew after each pod."""
    spread = spread_context(state, pod, policy)
    if spread is not None and spread.soft:
        return None
    return StandingNodes(key)


def alike(pods: Iterable[PodInfo]) -> bool:
    """Whether every pod is judged like the first (:func:`shape`)."""
    shapes = map(shape, pods)
    first = next(shapes, None)
    return all(s == first for s in shapes)


def shape(pod: PodInfo) -> tuple[object, ...]:
    """What a pod's judgement depends on besides the cluster: pods alike here are judged alike."""
    return (tuple(sorted(pod.requests.items())), pod.sleepy, pod.constraint_signature(), pod.namespace,
            tuple(sorted((k, v) for k, v in pod.labels.items() if k not in CONTROLLER_LABELS)))
