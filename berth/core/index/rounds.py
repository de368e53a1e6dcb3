"""A round's places left (:func:`berth.core.round.quota`), kept on the round, in its ``index`` slot,
as its pods take and give them back: each change of a round derives the new round's counts from
the old one's (a dict copy and one count), so that asking for a pod's places left costs no walk
over the round's pods (a bind asks twice). The plain path counts them from the plan and the pods
placed at every ask (:func:`berth.core.round.counted_left`); the tests hold both to the same counts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from berth.core.round import Round

Count = Callable[["Round"], dict[str, int]]
"""The plain count of a round's places left, node -> the plan's count minus the pods placed there."""


def places_left(rnd: Round, count: Count) -> dict[str, int]:
    """The counts kept on ``rnd`` (every node of its plan, in its order), counted by ``count`` once
    when no change of an earlier round gave them. Shared: the caller copies before changing them."""
    kept = rnd.index
    if kept is None:
        kept = count(rnd)
        object.__setattr__(rnd, "index", kept)
    return kept


def moved(rnd: Round, changed: Round, took: str | None, gave: str | None, count: Count) -> None:
    """Keep on ``changed`` (``rnd`` with one pod's place changed) its counts, derived from
    ``rnd``'s: a place taken on ``took`` and one given back on ``gave``."""
    left = dict(places_left(rnd, count))
    if gave is not None and gave in left:
        left[gave] += 1
    if took is not None and took in left:
        left[took] -= 1
    object.__setattr__(changed, "index", left)
