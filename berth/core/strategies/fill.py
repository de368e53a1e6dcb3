"""Fill (docs/behaviour.md#strategy-fill): "each of limit nodes holds count pods". Nodes sorted by
(Count, Capacity) descending, unverified nodes after every verified one; the walk tops each node
up by count - Count (never negative) and covers it, passing over a node that cannot reach count,
until limit nodes are covered (0: every candidate). Fewer coverable nodes than that fail the
round. A convergence target: once satisfied it returns already_filled."""

from __future__ import annotations

from collections.abc import Iterable

from berth.core.candidates import Candidate
from berth.core.errors import ErrorCode, PlacementError
from berth.core.fit import room_text

LISTED = 10
"""Nodes that cannot reach count named in the error; the rest are counted."""


def key(c: Candidate) -> tuple[object, ...]:
    """Fill's order of the nodes (lower first)."""
    return (bool(c.unverified), -c.count, -c.capacity, c.name)


def reach(c: Candidate) -> tuple[object, ...]:
    """The most pods of the workload a node can hold, its pods and its room (lower first): Fill can
    cover a node for ``count`` only where this reaches ``count``."""
    return (c.count + c.capacity, c.name)


def every_reaches(lowest: Candidate | None, count: int) -> bool:
    """Whether every candidate can be covered for ``count``, from the one of least :func:`reach`
    (None: there is no candidate)."""
    return lowest is None or lowest.count + lowest.capacity >= count


def plan(ordered: Iterable[Candidate], size: int, count: int, limit: int, *,
         enough: int | None = None) -> dict[str, int] | PlacementError:
    """``ordered``: the candidates in :func:`key`'s order (``CandidateSet.sorted_by``, or a walk of
    the view's kept order, ``CandidateSet.walk_by``), ``size`` of them.

    ``enough``: for a caller that knows every candidate can be covered (:func:`every_reaches`), the
    walk stops once the plan holds that many pods: the plan is then its first places only, which is
    all a round cut to ``enough`` pods takes of it, and the nodes after could only add places. A
    round of one pod at 5,000 nodes then walks the nodes filled already and one more, not all."""
    wanted = limit or size
    stop = max(enough, 1) if enough is not None and wanted <= size else None
    result: dict[str, int] = {}
    covered = placed = 0
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
            placed += top_up
            if stop is not None and placed >= stop:
                return result
    if covered < wanted:
        listed = "; ".join(short[:LISTED]) + (f"; and {len(short) - LISTED} more" if len(short) > LISTED else "")
        return PlacementError(ErrorCode.INSUFFICIENT_RESOURCE,
                              f"Fill: {covered} of {wanted} nodes can reach {count} pods"
                              + (f" ({size} candidates)" if wanted > size else "")
                              + (f": {listed}" if listed else ""))
    if not result:
        return PlacementError(ErrorCode.ALREADY_FILLED,
                              f"Fill: every chosen node ({covered}) already holds {count} or more pods")
    return result
