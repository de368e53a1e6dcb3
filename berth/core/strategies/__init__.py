"""The strategies: each turns candidates into an order (greedy strategies) or a round plan
(Fill and Each). Where a strategy is decided can be read off the file names."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from itertools import filterfalse

from berth.core import candidates as candidate_set
from berth.core.candidates import Candidate, is_unverified, spread_scored
from berth.core.model import PodInfo
from berth.core.policy import Strategy
from berth.core.strategies import auto, balanced, best_fit, default, drained, global_balance, spread

RankKey = Callable[[Candidate], tuple[object, ...]]

_GREEDY: dict[Strategy | None, Callable[[PodInfo], RankKey]] = {
    None: default.key,
    Strategy.AUTO: auto.key,
    Strategy.GLOBAL: global_balance.key,
    Strategy.DRAINED: drained.key,
    Strategy.BALANCED: balanced.key,
    Strategy.SPREAD: spread.key,
    Strategy.BEST_FIT: best_fit.key,
}


def strategy_key(strategy: Strategy | None, pod: PodInfo) -> RankKey:
    """A greedy strategy's own sort key (lower first) for one pod: :func:`rank_key` without its
    prefix, the whole order among candidates of known capacity when no spread scores them."""
    return _GREEDY[strategy](pod)


def rank_key(strategy: Strategy | None, pod: PodInfo) -> RankKey:
    """The sort key (lower first) of a greedy strategy for one pod. Unverified nodes always rank
    after verified ones (docs/behaviour.md#unknown-capacity) and ScheduleAnyway spread takes
    precedence over the strategy."""
    inner = strategy_key(strategy, pod)

    def key(c: Candidate) -> tuple[object, ...]:
        return (bool(c.unverified), -c.spread_score, *c.sort_key(inner))

    return key


def ranked_less(strategy: Strategy | None, pod: PodInfo, order: Callable[[RankKey], Sequence[str] | None],
                rest_of: AbstractSet[str], count: int) -> list[str] | None:
    """The candidates' names, best first, when they are every node of ``order`` (every node sorted
    by a strategy key, ``CandidateSet.order``) but ``rest_of``, ``count`` of them, none of unknown
    capacity or scored by spread (``CandidateSet.rest_of``): that order less ``rest_of``, made
    without reading a candidate. None when :func:`ranked` is to rank them (too few, or no order)."""
    if count < candidate_set.ORDER_WORTH_IT:
        return None
    every = order(strategy_key(strategy, pod))
    if every is None:
        return None
    ranking = list(filterfalse(rest_of.__contains__, every)) if rest_of else list(every)
    # every candidate is in the order: as many nodes left as candidates are the candidates
    return ranking if len(ranking) == count else None


def ranked(candidates: list[Candidate], strategy: Strategy | None, pod: PodInfo,
           order: Callable[[RankKey], Sequence[str] | None] | None = None) -> list[str]:
    """The candidates' names, best first: sorted by :func:`rank_key`, without its prefix when no
    candidate needs it (the common case, and the hot path of every scheduling cycle). ``order``:
    every node sorted by a strategy key (``CandidateSet.order``); the ranking is then that order
    filtered to the candidates, with no sort at all."""
    if any(map(is_unverified, candidates)) or any(map(spread_scored, candidates)):
        return [c.name for c in sorted(candidates, key=rank_key(strategy, pod))]
    inner = strategy_key(strategy, pod)
    kept = candidate_set.kept_order(candidates, inner, order)
    if kept is not None:
        return kept
    keys = [c.keys.get(inner) or c.sort_key(inner) for c in candidates]
    return [candidates[i].name for i in sorted(range(len(candidates)), key=keys.__getitem__)]
