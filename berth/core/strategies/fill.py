"""Fill (docs/behaviour.md#strategy-fill): "each of limit nodes holds count pods". Nodes sorted by
(Count, Capacity) descending, unverified nodes after every verified one; the walk tops each node
up by count - Count (never negative) and covers it, passing over a node that cannot reach count,
until limit nodes are covered (0: every candidate). Fewer coverable nodes than that fail the
round. A convergence target: once satisfied it returns already_filled."""

from __future__ import annotations

from collections.abc import Sequence

from berth.core.candidates import Candidate
from berth.core.errors import ErrorCode, PlacementError
from berth.core.fit import room_text

LISTED = 10
"""Nodes that cannot reach count named in the error; the rest are counted."""


def key(c: Candidate) -> tuple[object, ...]:
    """Fill's order of the nodes (lower first)."""
    return (bool(c.unverified), -c.count, -c.capacity, c.name)


def plan(ordered: Sequence[Candidate], count: int, limit: int) -> dict[str, int] | PlacementError:
    """``ordered``: the candidates in :func:`key`'s order (``CandidateSet.sorted_by``)."""
    wanted = limit or len(ordered)
    result: dict[str, int] = {}
    covered = 0
    short: list[str] = []
    for c in ordered:
        if covered == wanted:
            break
        top_up = max(count - c.count, 0)
        if top_up > c.capacity:
            short.append(room_text(c.name, top_up, c.capacity, c.unverified))
            continue
        covered += 1
        if top_up:
            result[c.name] = top_up
    if covered < wanted:
        listed = "; ".join(short[:LISTED]) + (f"; and {len(short) - LISTED} more" if len(short) > LISTED else "")
        return PlacementError(ErrorCode.INSUFFICIENT_RESOURCE,
                              f"Fill: {covered} of {wanted} nodes can reach {count} pods"
                              + (f" ({len(ordered)} candidates)" if wanted > len(ordered) else "")
                              + (f": {listed}" if listed else ""))
    if not result:
        return PlacementError(ErrorCode.ALREADY_FILLED,
                              f"Fill: every chosen node ({covered}) already holds {count} or more pods")
    return result
