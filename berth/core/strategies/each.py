"""Seed 000's EACH: "add count more to each of limit nodes". Nodes by capacity descending; the
top limit nodes (0: all) each get exactly count, and every chosen node must have room for all
of them or the whole plan fails."""

from __future__ import annotations

from collections.abc import Sequence

from berth.core.candidates import Candidate
from berth.core.errors import ErrorCode, PlacementError


def plan(candidates: Sequence[Candidate], count: int, limit: int) -> dict[str, int] | PlacementError:
    ordered = sorted(candidates, key=lambda c: (-c.capacity, c.name))
    chosen = ordered[:limit] if limit else ordered
    if limit and len(ordered) < limit:
        return PlacementError(ErrorCode.INSUFFICIENT_RESOURCE,
                              f"Each: nodesLimit asks for {limit} nodes but only {len(ordered)} are candidates")
    if count == 0 or not chosen:
        return PlacementError(ErrorCode.ALREADY_FILLED, "Each: nothing to add (count is 0 or no node is chosen)")
    short = [c for c in chosen if c.capacity < count]
    if short:
        return PlacementError(ErrorCode.INSUFFICIENT_RESOURCE, "Each: every chosen node must take " + str(count)
                              + "; " + ", ".join(f"{c.name} has room for {c.capacity}" for c in short))
    return {c.name: count for c in chosen}
