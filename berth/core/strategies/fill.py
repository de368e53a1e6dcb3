"""Seed 000's FILL: "make sure each of limit nodes has count pods". Nodes sorted by (Count,
Capacity) descending, each topped up by count - Count (never negative) until limit nodes are
covered (0: all). A convergence target: once satisfied it returns already_filled."""

from __future__ import annotations

from collections.abc import Sequence

from berth.core.candidates import Candidate
from berth.core.errors import ErrorCode, PlacementError


def plan(candidates: Sequence[Candidate], count: int, limit: int) -> dict[str, int] | PlacementError:
    ordered = sorted(candidates, key=lambda c: (-c.count, -c.capacity, c.name))
    chosen = ordered[:limit] if limit else ordered
    result: dict[str, int] = {}
    for c in chosen:
        top_up = max(count - c.count, 0)
        if top_up > c.capacity:
            return PlacementError(ErrorCode.INSUFFICIENT_RESOURCE,
                                  f"Fill: {c.name} needs {top_up} more to reach {count} but has room for "
                                  f"{c.capacity}")
        if top_up:
            result[c.name] = top_up
    if not result:
        return PlacementError(ErrorCode.ALREADY_FILLED,
                              f"Fill: every chosen node ({len(chosen)}) already holds {count} or more pods")
    return result
