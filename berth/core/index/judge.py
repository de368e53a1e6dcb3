"""The framework's questions (:class:`berth.core.framework.Verdicts`) answered for whole node sets
from state kept between calls, so that a scheduling cycle re-judges only the nodes that changed
since the last one. It answers exactly as the plain :class:`berth.core.framework.PlainVerdicts`,
which the tests hold it to."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from functools import cache
from operator import attrgetter

from berth.core.candidates import (
    Refusals,
)
from berth.core.index.cluster import index_of
from berth.core.index.leases import lease_suspects
from berth.core.index.rules import RuleContext, rule_context
from berth.core.index.shape import shape_judge
from berth.core.index.spread import spread_context, spread_refusals
from berth.core.index.verdicts import Judged, VerdictTable
from berth.core.model import NodeInfo, PodInfo
from berth.core.placement_rules import RuleNode
from berth.core.plugins import PodContext, constraints, liveness
from berth.core.plugins import fit as fit_check
from berth.core.plugins import node_filter as node_filter_check
from berth.core.plugins.fit import Fitted, SortKey
from berth.core.plugins.liveness import ALIVE, ASK_LEASE, lease_down_reason, node_liveness
from berth.core.policy import PlacementPolicy
from berth.core.topology import SpreadContext
from berth.core.view import ClusterState

_CANDIDATE = attrgetter("candidate")

STATIC = constraints.DEPENDS | node_filter_check.DEPENDS | liveness.NODE_DEPENDS
"""What the verdicts of the checks that judge a node alone read: the pod's own constraints and the
node filter, and the part of liveness read off the node object (its Lease is asked apart,
:mod:`.leases`)."""


class IndexedVerdicts:
    """The framework's questions answered from tables kept on the view (:func:`verdicts`)."""

    def __init__(self, ctx: PodContext) -> None:
        self._ctx = ctx
        self._counts: Mapping[str, int] | None = None
        self._rules: RuleContext | None = None

    def refuse_alone(self, considered: AbstractSet[str], refused: Refusals) -> None:
        """What depends only on the node and the policy (the pod's own constraints, the node filter,
        the node's own liveness) comes from a verdict table; the Leases from the stale-lease heap."""
        ctx = self._ctx
        state, settings, now = ctx.state, ctx.settings, ctx.now
        static = _static_reading(ctx, considered)
        out = refused.out
        for name in static.among("refused", considered):
            refused.one(name, static[name].reason or "", False)
        if liveness.applies(ctx):
            for name in static.among("down", considered) - out:
                refused.one(name, static[name].liveness, False)
            for name in (lease_suspects(state, settings, now) & considered) - out:
                if static[name].liveness is ASK_LEASE and (reason := lease_down_reason(name, state, settings, now)):
                    refused.one(name, reason, False)

    def workload_counts(self, considered: AbstractSet[str] = frozenset()) -> Mapping[str, int]:
        if self._counts is None:
            self._counts = index_of(self._ctx.state).matching_counts(self._ctx.pod.namespace, self._ctx.workload)
        return self._counts

    def spread(self) -> SpreadContext | None:
        return spread_context(self._ctx.state, self._ctx.pod, self._ctx.policy)

    def spread_refusals(self, spread: SpreadContext, considered: AbstractSet[str], out: AbstractSet[str]
                        ) -> Iterator[tuple[AbstractSet[str], tuple[str, bool]]]:
        return spread_refusals(spread, self._ctx.state)

    def failing(self, rule: RuleNode) -> AbstractSet[str]:
        if self._rules is None:
            self._rules = rule_context(self._ctx.state, self._ctx.pod, self._ctx.policy)
        return self._rules.failing(rule)

    def fits(self, considered: AbstractSet[str]) -> FitJudged:
        """What depends only on the node's pods and the pod's shape (the fit and the per-node
        figures) comes from a verdict table, with the nodes it keeps sorted by each strategy key."""
        return _fit_reading(self._ctx, self.workload_counts(), considered)


def verdicts(ctx: PodContext) -> IndexedVerdicts:
    return IndexedVerdicts(ctx)


@dataclass(frozen=True, slots=True)
class _Static:
    """A node's verdict that depends only on the node object and the policy."""

    node: NodeInfo
    reason: str | None  # the pod's own constraints or the node filter refuse the node
    liveness: str  # ALIVE, ASK_LEASE, or why the node itself says it is down


def _static_tags(v: _Static) -> tuple[str, ...]:
    if v.reason is not None:
        return ("refused",)
    if v.liveness is ASK_LEASE:
        return ("asking",)
    return () if v.liveness is ALIVE else ("down",)


def _static_reading(ctx: PodContext, considered: AbstractSet[str]) -> Judged[_Static]:
    """The verdicts of the checks that read the node alone (:data:`STATIC`)."""
    state, pod, node_filter = ctx.state, ctx.pod, ctx.node_filter

    def judge(node: NodeInfo) -> _Static:
        refusal = constraints.filter(ctx, node) or node_filter_check.filter(ctx, node)
        return _Static(node, refusal.reason if refusal is not None else None, node_liveness(node))

    # Keyed by what the verdicts read (the pod's own constraints and the node filter), not by the
    # whole policy: the policies that differ only in what they select share one table.
    filter_key = node_filter.key if node_filter is not None else None
    table = index_of(state.base).view.table(("static", pod.constraint_signature(), filter_key),
                                            lambda: VerdictTable(_static_tags, STATIC))
    table.sync(state.base, judge)
    nodes, verdicts = state.nodes, table.verdicts
    fresh = {n: judge(nodes[n]) for n in state.local_nodes()
             if n in considered and (n not in verdicts or verdicts[n].node is not nodes[n])}
    return table.reading(fresh)


class FitJudged(Judged[Fitted]):
    """A reading of the fit table, ranking through the orders the table keeps."""

    def kept_order(self) -> Callable[[SortKey], Sequence[str] | None]:
        return lambda key: self.order(_by_candidate(key))


def _fit_reading(ctx: PodContext, counts: Mapping[str, int], considered: AbstractSet[str]) -> FitJudged:
    state, pod, settings, need = ctx.state, ctx.pod, ctx.settings, ctx.need
    reject_unknown = settings.reject_unknown_capacity

    def tags(v: Fitted) -> tuple[str, ...]:
        fit = v.fit
        if fit.refusal is None:
            return ("unverified",) if fit.unverified else ()
        if fit.unverified:
            # refused even where the caller judges capacity itself, when unknown capacity is refused
            return ("refused", "refused-anyway", "unverified") if reject_unknown else ("refused", "unverified")
        return ("refused",)

    judge_shape = shape_judge(need, pod, settings)  # fit_check.judge, worked out once for the shape

    def judge_in(where: ClusterState, where_counts: Mapping[str, int]) -> Callable[[NodeInfo], Fitted]:
        use = index_of(where).use

        def judge(node: NodeInfo) -> Fitted:
            name = node.name
            return judge_shape(node, use(name), where_counts.get(name, 0))
        return judge

    workload = ctx.workload
    base = state.base
    kept = index_of(base)
    table = kept.view.table(("fit", tuple(sorted(need.items())), pod.sleepy, fit_check.settings_read(settings),
                             pod.namespace, tuple(sorted(workload.match_labels.items())), workload.match_expressions),
                            lambda: VerdictTable(tags, fit_check.DEPENDS))
    table.sync(base, judge_in(base, kept.matching_counts(pod.namespace, workload)))
    judge_here = judge_in(state, counts)
    fresh = {n: judge_here(state.nodes[n]) for n in state.local_nodes() if n in considered}
    return FitJudged(table, fresh)


@cache
def _by_candidate(key: SortKey) -> Callable[[Fitted], tuple[object, ...]]:
    """A strategy's sort key as a key of fit verdicts: one function per strategy key, so that the
    fit table keeps one order per strategy (:meth:`VerdictTable.order`)."""
    def fitted_key(v: Fitted) -> tuple[object, ...]:
        return v.candidate.sort_key(key)
    return fitted_key


def shared_refusals(state: ClusterState, pod: PodInfo, policy: PlacementPolicy | None) -> list[AbstractSet[str]]:
    """The node sets that the checks reading other nodes' pods hold against ``pod`` now: each
    domain topology spread's DoNotSchedule refuses, and the nodes breaking each placement rule
    (the candidates judged ``room_only`` less these, when one is left, are the full judgement's)."""
    if policy is None or not (policy.spread_constraints or policy.rules):
        return []  # neither check: asked for every pod of a round, so told without asking them
    groups: list[AbstractSet[str]] = []
    spread = spread_context(state, pod, policy)
    if spread is not None and spread.hard:
        groups.extend(group for group, _ in spread_refusals(spread, state))
    if policy is not None and policy.rules:
        ctx = rule_context(state, pod, policy)
        groups.extend(ctx.failing(rule) for rule in policy.rules)
    return groups
