"""Judge one pod against the nodes: the brain behind the extender's filter, prioritize and
bind recheck, and the preview API. A plan is this, repeated (see :mod:`berth.core.plan`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from berth.core.candidates import CandidateSet
from berth.core.decision import MAX_PRIORITY as MAX_PRIORITY
from berth.core.decision import RUNNER_UP_MAX as RUNNER_UP_MAX
from berth.core.decision import Decision
from berth.core.framework import collect_candidates
from berth.core.model import PodInfo
from berth.core.plugins import score as strategy_score
from berth.core.policy import ROUND_STRATEGIES, PlacementPolicy, Strategy
from berth.core.round import plan_fixed_round
from berth.core.settings import Settings
from berth.core.strategies import ranked, ranked_less
from berth.core.view import ClusterState


@dataclass
class Evaluation:
    decision: Decision
    passing: list[str] = field(default_factory=list)  # the nodes not refused, in the order considered

    @property
    def scores(self) -> dict[str, int]:
        """0..10 for each ranked node (:func:`scores`)."""
        return scores(self.decision.ranking)


def effective_strategy(policy: PlacementPolicy | None, settings: Settings,
                       override: Strategy | None = None) -> Strategy | None:
    if override is not None:
        return override
    if policy is not None:
        return policy.strategy
    return settings.default_strategy


def evaluate_pod(state: ClusterState, pod: PodInfo, policy: PlacementPolicy | None, settings: Settings,
                 now: float, *, nodes: Sequence[str] | None = None, quota: Mapping[str, int] | None = None,
                 strategy: Strategy | None = None) -> Evaluation:
    """Refuse or rank every node for ``pod``. With ``quota`` (a round of Fill or Each), only nodes
    the round's plan still gives pods pass, in the plan's order."""
    settings = settings.for_policy(policy)
    chosen = effective_strategy(policy, settings, strategy)
    round_error = None
    if quota is None and chosen in ROUND_STRATEGIES and policy is not None:
        # No round is open: judge the pod as the first of a fresh round would be.
        fresh = plan_fixed_round(state, pod, policy, chosen, settings, now, None)
        quota, round_error = fresh.plan, fresh.error
    result = collect_candidates(state, pod, policy, settings, now, nodes=nodes, quota=quota, strategy=chosen,
                                lazy=True)
    if round_error is not None:
        result.error = round_error
    ranking = rank(result, pod, chosen, quota)
    decision = Decision(
        pod=pod.key,
        policy=policy.key if policy is not None else None,
        strategy=chosen.value if chosen is not None else "Default",
        considered=result.considered,
        refused=result.refused,
        ranking=ranking,
        warnings=result.warnings,
        error=result.error,
        policy_generation=policy.generation if policy is not None else None,
    )
    return Evaluation(decision, result.passing())


def rank(result: CandidateSet, pod: PodInfo, strategy: Strategy | None,
         quota: Mapping[str, int] | None = None) -> list[str]:
    """The candidates best first: by the strategy's score (:mod:`berth.core.plugins.score`), or
    when the index keeps every node sorted by the strategy's key (``result.order``), that order
    filtered to the candidates. A round's candidates of a whole view (``result.rest_of``, with the
    index) are ranked in its plan's order by walking the plan, not by sorting them."""
    if quota is not None and result.rest_of is not None and result.order is not None:
        fast = strategy_score.in_plan_order_less(quota, result.rest_of, result.count)
        if fast is not None:
            return fast
    if quota is not None or result.order is None:
        return strategy_score.rank(result.candidates, strategy, pod, quota)
    greedy = strategy if strategy not in ROUND_STRATEGIES else None
    if result.rest_of is not None:
        fast = ranked_less(greedy, pod, result.order, result.rest_of, result.count)
        if fast is not None:
            return fast
    return ranked(result.candidates, greedy, pod, result.order)


def score_runs(ranking: Sequence[str]) -> list[tuple[int, Sequence[str]]]:
    """The scores as runs of the ranking, best first: the winner scores 10; the rest descend from 4
    towards 0 in ranking order, the node at position i scoring ``4 * (n - i) // n``."""
    n = len(ranking)
    if not n:
        return []
    runs: list[tuple[int, Sequence[str]]] = [(MAX_PRIORITY, ranking[:1])]
    start = 1
    for score in range(RUNNER_UP_MAX, -1, -1):
        # the last position with RUNNER_UP_MAX * (n - i) >= score * n
        end = n - (score * n + RUNNER_UP_MAX - 1) // RUNNER_UP_MAX + 1
        if end > start:
            runs.append((score, ranking[start:end]))
            start = end
    return runs


def scores(ranking: Sequence[str]) -> dict[str, int]:
    """Each ranked node's score (:func:`score_runs`)."""
    out: dict[str, int] = {}
    for score, run in score_runs(ranking):
        out.update(dict.fromkeys(run, score))
    return out
