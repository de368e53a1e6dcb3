"""The strategy's score: greedy strategies rank the candidates by a sort key (lower first),
unverified nodes after every verified one and ScheduleAnyway spread before the strategy's own key
(:func:`~berth.core.strategies.rank_key`); Fill and Each rank in their round's plan order
(docs/behaviour.md#strategies)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from itertools import filterfalse

from berth.core.model import PodInfo
from berth.core.plugins import Depends
from berth.core.plugins.fit import Candidate
from berth.core.policy import ROUND_STRATEGIES, Strategy
from berth.core.strategies import rank_key

DEPENDS = Depends.NODE | Depends.NODE_PODS | Depends.ROUND


def rank(candidates: Sequence[Candidate], strategy: Strategy | None, pod: PodInfo,
         quota: Mapping[str, int] | None = None) -> list[str]:
    """The candidates' names, best first, each sorted by its key."""
    return [c.name for c in sorted(candidates, key=rank_order(strategy, pod, quota))]


def in_plan_order_less(quota: Mapping[str, int], rest_of: AbstractSet[str], count: int) -> list[str] | None:
    """:func:`rank` under a round's ``quota`` when the candidates are ``count`` nodes, none of them in
    ``rest_of`` and every one in the plan (the plan refuses the others): the plan's nodes less
    ``rest_of``, in the plan's order, which is each candidate's key, one node one place. None when
    that leaves another number of nodes (a node of the plan the state does not show): :func:`rank`
    then sorts them."""
    ranking = list(filterfalse(rest_of.__contains__, quota))
    return ranking if len(ranking) == count else None


def rank_order(strategy: Strategy | None, pod: PodInfo, quota: Mapping[str, int] | None = None
               ) -> Callable[[Candidate], tuple[object, ...]]:
    """The sort key of :func:`rank`: a round's plan order under ``quota``, else the strategy's."""
    if quota is not None:
        order = {name: i for i, name in enumerate(quota)}
        return lambda c: (order.get(c.name, len(order)), c.name)
    return rank_key(strategy if strategy not in ROUND_STRATEGIES else None, pod)
