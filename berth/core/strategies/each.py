"""Each adds count more pods to each of nodesLimit nodes. Nodes by capacity descending,
unverified nodes after every verified one; the top limit nodes (0: all) each get
exactly count, and every chosen node must have room for all of them or the whole plan fails."""

from __future__ import annotations

from collections.abc import Sequence

from berth.core.candidates import Candidate
from berth.core.errors import ErrorCode, PlacementError
from berth.core.fit import room_text
from berth.core.strategies.fill import LISTED


def key(c: Candidate) -> tuple[object, ...]:
    """Each's order of the nodes (lower first)."""
    return (bool(c.unverified), -c.capacity, c.name)


def plan(ordered: Sequence[Candidate], count: int, limit: int) -> dict[str, int] | PlacementError:
    """``ordered``: the candidates in :func:`key`'s order (``CandidateSet.sorted_by``)."""
    chosen = ordered[:limit] if limit else ordered
    if limit and len(ordered) < limit:
        return PlacementError(ErrorCode.INSUFFICIENT_RESOURCE,
                              f"Each: nodesLimit asks for {limit} nodes but only {len(ordered)} are candidates")
    if count == 0 or not chosen:
        return PlacementError(ErrorCode.ALREADY_FILLED, "Each: nothing to add (count is 0 or no node is chosen)")
    short = [room_text(c.name, count, c.capacity, c.unverified) for c in chosen if c.capacity < count]
    if short:
        more = f"; and {len(short) - LISTED} more" if len(short) > LISTED else ""
        return PlacementError(ErrorCode.INSUFFICIENT_RESOURCE, f"Each: every chosen node must take {count}; "
                              + "; ".join(short[:LISTED]) + more)
    return {c.name: count for c in chosen}
