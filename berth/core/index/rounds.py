"""A round's places left (:func:`berth.core.round.quota`), kept on the round, in its ``index`` slot,
as its pods take and give them back: each change of a round derives the new round's counts from
the old one's (a dict copy and one count), so that asking for a pod's places left costs no walk
over the round's pods (a bind asks twice). The plain path counts them from the plan and the pods
placed at every ask (:func:`berth.core.round.counted_left`); the tests hold both to the same counts.

Kept with them, once asked, the nodes with a place left, in plan order (what a round's quota
answers, a walk over every node of the plan on the plain path): each change derives them from the
old round's too (a dict copy; a node given its first place back goes in front of or behind them
when the plan has it there, else they are made again at the next ask).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from berth.core.round import Round

Count = Callable[["Round"], dict[str, int]]
"""The plain count of a round's places left, node -> the plan's count minus the pods placed there."""

WithPlace = Callable[[dict[str, int]], dict[str, int]]
"""The plain filter of counts to the nodes with a place left, in their order."""


class PlacesLeft(dict[str, int]):
    """A round's counts (every node of its plan, in its order), with the nodes with a place left
    (:attr:`open`, None until asked or when a change could not derive them) and each plan node's
    place in the plan (:attr:`order`, shared by every round derived from the one that made it: a
    round's changes keep its plan)."""

    __slots__ = ("open", "order")

    def __init__(self, counts: dict[str, int], order: dict[str, int] | None = None) -> None:
        super().__init__(counts)
        self.open: dict[str, int] | None = None
        self.order = order


def places_left(rnd: Round, count: Count) -> PlacesLeft:
    """The counts kept on ``rnd`` (every node of its plan, in its order), counted by ``count`` once
    when no change of an earlier round gave them. Shared: the caller copies before changing them."""
    kept = rnd.index
    if kept is None:
        kept = PlacesLeft(count(rnd))
        object.__setattr__(rnd, "index", kept)
    return kept  # type: ignore[return-value]  # only this module sets it


def quota(rnd: Round, own: str | None, count: Count, with_place: WithPlace) -> dict[str, int]:
    """``rnd``'s places left for a pod whose own place is on ``own`` (None: it has none), which
    counts as free: the nodes with a place left, in plan order (a dict of the caller's own), read
    from what is kept rather than by walking every node of the plan."""
    left = places_left(rnd, count)
    kept = left.open
    if kept is None:
        kept = left.open = with_place(left)
    if own is None or own not in left:
        return dict(kept)
    n = left[own] + 1
    if own in kept:
        return {**kept, own: n}  # the node keeps its place in the order
    return with_place({**left, own: n}) if n > 0 else dict(kept)


def moved(rnd: Round, changed: Round, took: str | None, gave: str | None, count: Count) -> None:
    """Keep on ``changed`` (``rnd`` with one pod's place changed) its counts, derived from
    ``rnd``'s: a place taken on ``took`` and one given back on ``gave``."""
    before = places_left(rnd, count)
    left = PlacesLeft(before, before.order)
    kept = dict(before.open) if before.open is not None else None
    if gave is not None and gave in left:
        left[gave] += 1
        if kept is not None:
            kept = _given(left, kept, gave)
    if took is not None and took in left:
        left[took] -= 1
        if kept is not None:
            if left[took] > 0:
                kept[took] = left[took]
            else:
                kept.pop(took, None)
    left.open = kept
    object.__setattr__(changed, "index", left)


def _given(left: PlacesLeft, kept: dict[str, int], node: str) -> dict[str, int] | None:
    """``kept`` (the nodes with a place left, a copy of the caller's) once ``node`` was given a
    place back (its count in ``left`` already): None when it goes between two of them (made again
    when next asked)."""
    n = left[node]
    if node in kept:
        kept[node] = n
        return kept
    if n <= 0:
        return kept
    if not kept:
        return {node: n}
    order = left.order
    if order is None:
        order = left.order = {name: i for i, name in enumerate(left)}
    place = order[node]
    if place < order[next(iter(kept))]:
        return {node: n, **kept}
    if place > order[next(reversed(kept))]:
        kept[node] = n
        return kept
    return None
