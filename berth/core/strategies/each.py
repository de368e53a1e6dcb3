"""Each adds count more pods to each of nodesLimit nodes. Nodes by capacity descending,
unverified nodes after every verified one; the top limit nodes (0: all) each get
exactly count, and every chosen node must have room for all of them or the whole plan fails."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import islice

from berth.core.candidates import Candidate
from berth.core.errors import ErrorCode, PlacementError
from berth.core.fit import room_text
from berth.core.strategies.fill import LISTED


def key(c: Candidate) -> tuple[object, ...]:
    """Each's order of the nodes (lower first)."""
    return (bool(c.unverified), -c.capacity, c.name)


def reach(c: Candidate) -> tuple[object, ...]:
    """A node's room for more pods (lower first): Each can choose a node for ``count`` only where
    this reaches ``count``."""
    return (c.capacity, c.name)


def every_reaches(lowest: Candidate | None, count: int) -> bool:
    """Whether every candidate has room for ``count``, from the one of least :func:`reach` (None:
    there is no candidate)."""
    return lowest is None or lowest.capacity >= count


def plan(ordered: Iterable[Candidate], size: int, count: int, limit: int, *,
         enough: int | None = None) -> dict[str, int] | PlacementError:
    """``ordered``: the candidates in :func:`key`'s order (``CandidateSet.sorted_by``, or a walk of
    the view's kept order, ``CandidateSet.walk_by``), ``size`` of them.

    ``enough``: for a caller that knows every candidate has room for ``count``
    (:func:`every_reaches`), the walk stops once the plan holds that many pods: its first places
    only, all a round cut to ``enough`` pods takes of it."""
    if limit and size < limit:
        return PlacementError(ErrorCode.INSUFFICIENT_RESOURCE,
                              f"Each: nodesLimit asks for {limit} nodes but only {size} are candidates")
    wanted = limit or size
    if count == 0 or not wanted:
        return PlacementError(ErrorCode.ALREADY_FILLED, "Each: nothing to add (count is 0 or no node is chosen)")
    stop = max(enough, 1) if enough is not None else None
    result: dict[str, int] = {}
    short: list[str] = []
    for c in islice(ordered, wanted):
        if c.capacity < count:
            short.append(room_text(c.name, count, c.capacity, c.unverified))
            continue
        result[c.name] = count
        if stop is not None and not short and len(result) * count >= stop:
            return result
    if short:
        more = f"; and {len(short) - LISTED} more" if len(short) > LISTED else ""
        return PlacementError(ErrorCode.INSUFFICIENT_RESOURCE, f"Each: every chosen node must take {count}; "
                              + "; ".join(short[:LISTED]) + more)
    return result
