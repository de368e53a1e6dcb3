"""The strategy's score: greedy strategies rank the candidates by a sort key (lower first),
unverified nodes after every verified one and ScheduleAnyway spread before the strategy's own key
(:func:`~berth.core.strategies.rank_key`); Fill and Each rank in their round's plan order
(docs/behaviour.md#strategies)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

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


def rank_order(strategy: Strategy | None, pod: PodInfo, quota: Mapping[str, int] | None = None
               ) -> Callable[[Candidate], tuple[object, ...]]:
    """The sort key of :func:`rank`: a round's plan order under ``quota``, else the strategy's."""
    if quota is not None:
        order = {name: i for i, name in enumerate(quota)}
        return lambda c: (order.get(c.name, len(order)), c.name)
    return rank_key(strategy if strategy not in ROUND_STRATEGIES else None, pod)
