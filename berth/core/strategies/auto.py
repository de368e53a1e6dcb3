"""Auto (docs/behaviour.md#strategy-auto): the node with the fewest pods of the workload, ties to
the most room.

Placing pod after pod with this key, each counted before the next, is a min-heap over (count,
-capacity) and ends at the flattest distribution reachable. The nodesLimit ceiling is a refusal
in :mod:`berth.core.candidates`; zero-capacity nodes never become candidates."""

from __future__ import annotations

from collections.abc import Callable

from berth.core.candidates import Candidate
from berth.core.model import PodInfo


def _key(c: Candidate) -> tuple[object, ...]:
    return (c.count, -c.capacity, c.name)


def key(pod: PodInfo) -> Callable[[Candidate], tuple[object, ...]]:
    return _key
