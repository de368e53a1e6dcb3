"""One runner for the checks of :mod:`berth.core.plugins`: pre-filter (once per pod), filter
(each check refuses some of the nodes still standing, the first refusal standing), score and
record, as a :class:`~berth.core.candidates.CandidateSet` (the nodes considered, those refused
with their reasons, the candidates, warnings and the error when no node is left); ranking it is
:func:`~berth.core.evaluate.rank`.

The runner asks its questions of a :class:`Verdicts`: which nodes the checks that judge a node
alone refuse, the workload's count per node, the spread constraints and the nodes they refuse,
where each placement rule fails, each node's fit. :class:`PlainVerdicts` answers them check by
check over every node, with nothing kept; the index (:mod:`berth.core.index`) answers the same
from tables kept in step with the view. ``Settings.index`` (``BERTH_INDEX=off``) chooses the plain
one, and the tests hold both to the same answers.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from itertools import filterfalse
from operator import attrgetter
from typing import Protocol

from berth.core import index
from berth.core.candidates import (
    CandidateSet,
    FitReading,
    Refusals,
    apply_rules,
    is_unverified,
    no_node_error,
    workload_selector,
)
from berth.core.decision import Refusal
from berth.core.fit import demand, unverified_warning
from berth.core.model import PodInfo
from berth.core.placement_rules import RuleNode
from berth.core.plugins import PodContext, constraints, count_matching, liveness, node_filter, rules
from berth.core.plugins import fit as fit_check
from berth.core.plugins import quota as round_quota
from berth.core.plugins import spread as spread_check
from berth.core.plugins.fit import Candidate, Fitted, SortKey
from berth.core.policy import PlacementPolicy, Strategy
from berth.core.settings import Settings
from berth.core.topology import SpreadContext
from berth.core.view import ClusterState

UNKNOWN = "unknown node: berth has not seen it"

_CANDIDATE = attrgetter("candidate")


class Fits(FitReading, Protocol):
    """Each node's fit, as the runner reads it."""

    def each(self, names: Iterable[str]) -> list[Fitted]:
        """The fits of ``names``, in order; KeyError for a node the cluster does not know."""
        ...

    def kept_order(self) -> Callable[[SortKey], Sequence[str] | None] | None:
        """Every node sorted by a strategy's key, when kept (None: the ranking sorts)."""
        ...


class Verdicts(Protocol):
    """What the runner asks about the nodes for one pod (:class:`PlainVerdicts`, or the index's)."""

    def refuse_alone(self, considered: AbstractSet[str], refused: Refusals) -> None:
        """Record, for each node of ``considered``, the first refusal of the checks that judge the
        node by itself and its Lease: the pod's own constraints, the node filter, liveness."""
        ...

    def workload_counts(self, considered: AbstractSet[str]) -> Mapping[str, int]:
        """The pods of the pod's workload on each node (at least each of ``considered``, known to
        the cluster or not: a deleted node's pods may still be counted there)."""
        ...

    def spread(self) -> SpreadContext | None:
        """The pod's spread constraints with their domain counts (the spread pre-filter)."""
        ...

    def spread_refusals(self, spread: SpreadContext, considered: AbstractSet[str], out: AbstractSet[str]
                        ) -> Iterable[tuple[AbstractSet[str], tuple[str, bool]]]:
        """The nodes DoNotSchedule refuses, in groups with their (reason, resolvable), a node's
        first group first; at least those of ``considered`` not ``out`` yet."""
        ...

    def failing(self, rule: RuleNode) -> AbstractSet[str]:
        """Every node where ``rule`` does not hold."""
        ...

    def fits(self, considered: AbstractSet[str]) -> Fits:
        ...


def collect_candidates(state: ClusterState, pod: PodInfo, policy: PlacementPolicy | None, settings: Settings,
                       now: float, *, nodes: Sequence[str] | None = None, quota: Mapping[str, int] | None = None,
                       strategy: Strategy | None = None, require_fit: bool = True,
                       spread: SpreadContext | None = None, room_only: bool = False,
                       lazy: bool = False) -> CandidateSet:
    """Judge ``nodes`` (default: every node) for ``pod``. ``settings`` must already carry the policy's
    overrides. With ``require_fit=False`` nodes that cannot take one pod stay candidates with
    capacity 0 (round strategies and the capacity query judge capacity themselves). With
    ``room_only`` topology spread and placement rules are not judged: where the pod may go at
    all (its own constraints, the node filter, liveness) and how much room it has there.
    ``spread``: the pod's spread constraints with their domain counts, when the caller has them.
    ``lazy``: the candidates of a whole view that are exactly its nodes not refused
    (``CandidateSet.rest_of``) are made only if read, for a caller that reads them, if at all,
    before the state changes.

    Each check takes the set of nodes still standing and refuses a subset of it, in the order a
    user reasons in: does the node exist, may the pod go there at all, does the round leave it
    room, does topology spread allow it, do the placement rules hold, does it fit."""
    ctx = PodContext(state, pod, policy, settings, now, workload_selector(pod, policy), demand(pod), strategy,
                     quota, require_fit)
    verdicts: Verdicts = index.verdicts(ctx) if settings.indexed else PlainVerdicts(ctx)
    whole = index.whole_view(state, nodes) if settings.indexed else None
    considered: set[str] | frozenset[str]
    if whole is not None:
        names, considered = whole  # the view's set, kept: read, never changed
    else:
        names = sorted(state.nodes) if nodes is None else list(nodes)
        considered = set(names)
    result = CandidateSet(considered=names)
    if spread is None and not room_only:
        spread = verdicts.spread()
    checked_rules = policy.rules if policy is not None and not room_only else ()
    nf = ctx.node_filter

    out: set[str] = set()  # refused, or breaking a rule: each check judges only the nodes not yet out
    refused = Refusals(result.refused, out)

    def refuse_unknown() -> None:
        refused.group(considered.difference(state.nodes), UNKNOWN, False)

    if nf is not None and nf.includes and (unknown := node_filter.unknown_includes_warning(nf, state.nodes)):
        result.warnings.append(unknown)
    verdicts.refuse_alone(considered, refused)
    if quota is not None:
        if whole is None:  # the view's own names (whole) are all known
            refuse_unknown()  # before the plan, which would claim them too
        _refuse_off_plan(quota, considered, refused)
    if ceiling := round_quota.ceiling(ctx):
        _refuse_at_ceiling(verdicts.workload_counts(considered), ceiling, considered, refused)
    held = _refuse_by_spread(verdicts, spread, considered, refused)  # the nodes spread refused, group by group
    # The nodes breaking each rule, fitted only if needed; every node each rule refuses.
    broken, failing = _break_rules(verdicts, checked_rules, considered, out)
    fit = verdicts.fits(considered)
    for name in fit.among("refused" if require_fit else "refused-anyway", considered) - out:
        refused.one(name, fit[name].fit.refusal or "", True)

    def standing() -> list[Candidate]:
        return list(map(_CANDIDATE, fit.each(filterfalse(out.__contains__, names))))

    result.order = fit.kept_order()
    # a candidate's capacity is unverified only where its node's fit is
    unverified = bool(fit.among("unverified", considered))
    if (whole is not None and result.order is not None and not broken and not unverified
            and (spread is None or not spread.soft)):
        result.rest_of = out  # the candidates are the view's nodes not refused, as they stand
        result.candidate_of = lambda name: fit[name].candidate
    if lazy and result.rest_of is not None:
        result.defer(standing)  # every name is the view's: none unknown
    else:
        try:
            passing = standing()
        except KeyError:
            # A name the view does not know (a node deleted since the scheduler's snapshot): no check
            # above refuses it, as their node sets come from the view, so it is found here, when its
            # fit is looked up, rather than by one more pass over every name of every request.
            refuse_unknown()
            passing = standing()
        if broken:
            passing = apply_rules(result, passing, broken, policy, fit, require_fit, refused)
        if spread is not None and spread.soft:
            scores = spread.scores(state.nodes[c.name] for c in passing)
            passing = [c.with_spread_score(scores.get(c.name, 0)) for c in passing]
        result.candidates = passing
        if unverified:
            result.warnings.extend(unverified_warning(c.name, c.unverified) for c in filter(is_unverified, passing))
    if not result.count and result.error is None:
        result.error = no_node_error(result, held, failing, fit)
    return result


def _refuse_off_plan(quota: Mapping[str, int], considered: AbstractSet[str], refused: Refusals) -> None:
    """A round's plan: every node it gives no more pods."""
    no_more = round_quota.NO_MORE
    refused.group(considered - round_quota.planned(quota) - refused.out, no_more.reason, no_more.resolvable)


def _refuse_at_ceiling(counts: Mapping[str, int], ceiling: int, considered: AbstractSet[str],
                       refused: Refusals) -> None:
    """Auto's nodesLimit: every node already holding ``ceiling`` pods of the workload."""
    out = refused.out
    for name in [n for n, count in counts.items() if count >= ceiling and n in considered and n not in out]:
        refused.one(name, round_quota.limit_reason(counts[name], ceiling), False)


def _refuse_by_spread(verdicts: Verdicts, spread: SpreadContext | None, considered: AbstractSet[str],
                      refused: Refusals) -> list[AbstractSet[str]]:
    """DoNotSchedule's refusals; the groups of nodes refused, for the error when no node is left."""
    held: list[AbstractSet[str]] = []
    if spread is None or not spread.hard:
        return held
    out = refused.out
    for group, (reason, resolvable) in verdicts.spread_refusals(spread, considered, out):
        group = (group & considered) - out
        refused.group(group, reason, resolvable)
        held.append(group)
    return held


def _break_rules(verdicts: Verdicts, checked: Sequence[RuleNode], considered: AbstractSet[str], out: set[str]
                 ) -> tuple[list[tuple[AbstractSet[str], tuple[str, bool]]], list[AbstractSet[str]]]:
    """The nodes still standing that break each top-level rule (set aside in ``out``, refused or
    not once room is known: :func:`~berth.core.candidates.apply_rules`), and every node each rule
    refuses."""
    broken: list[tuple[AbstractSet[str], tuple[str, bool]]] = []
    failing: list[AbstractSet[str]] = []
    for i, rule in enumerate(checked):
        failing.append(verdicts.failing(rule))
        breaking = (failing[-1] & considered) - out
        if breaking:
            refusal = rules.refusal(i, rule)
            broken.append((breaking, (refusal.reason, refusal.resolvable)))
            out |= breaking
    return broken, failing


class PlainVerdicts:
    """Every answer worked out check by check (:mod:`berth.core.plugins`), node by node, reading the
    cluster pod by pod, with nothing kept beyond the one evaluation."""

    def __init__(self, ctx: PodContext) -> None:
        self._ctx = ctx
        self._fits: dict[str, Fitted] = {}

    def refuse_alone(self, considered: AbstractSet[str], refused: Refusals) -> None:
        ctx = self._ctx
        nodes = ctx.state.nodes
        lively = liveness.applies(ctx)
        for name in considered - refused.out:
            node = nodes.get(name)
            if node is None:
                continue  # the runner refuses it as unknown
            refusal = constraints.filter(ctx, node) or node_filter.filter(ctx, node)
            if refusal is None and lively:
                refusal = liveness.filter(ctx, node)
            if refusal is not None:
                refused.one(name, refusal.reason, refusal.resolvable)

    def workload_counts(self, considered: AbstractSet[str]) -> Mapping[str, int]:
        ctx = self._ctx
        return {name: count_matching(ctx.state, name, ctx.pod.namespace, ctx.workload) for name in considered}

    def spread(self) -> SpreadContext | None:
        return spread_check.pre_filter(self._ctx)

    def spread_refusals(self, context: SpreadContext, considered: AbstractSet[str], out: AbstractSet[str]
                        ) -> Iterator[tuple[AbstractSet[str], tuple[str, bool]]]:
        groups: dict[Refusal, set[str]] = {}
        nodes = self._ctx.state.nodes
        for name in considered - out:
            node = nodes.get(name)
            refusal = spread_check.filter(context, node) if node is not None else None
            if refusal is not None:
                groups.setdefault(refusal, set()).add(name)
        for refusal, group in groups.items():
            yield group, (refusal.reason, refusal.resolvable)

    def failing(self, rule: RuleNode) -> AbstractSet[str]:
        ctx = self._ctx
        return {name for name, node in ctx.state.nodes.items() if not rules.holds(ctx, rule, node)}

    def fits(self, considered: AbstractSet[str]) -> PlainVerdicts:
        return self

    # -- Fits: each node's fit, judged when first asked ------------------------------------

    def __getitem__(self, name: str) -> Fitted:
        hit = self._fits.get(name)
        if hit is None:
            hit = self._fits[name] = fit_check.judge_naively(self._ctx, self._ctx.state.nodes[name])
        return hit

    def each(self, names: Iterable[str]) -> list[Fitted]:
        return [self[n] for n in names]

    def kept_order(self) -> None:
        return None

    def among(self, tag: str, nodes: Collection[str]) -> set[str]:
        """The nodes the fit refuses (``refused``), or refuses even where the caller judges room
        itself (``refused-anyway``), or whose capacity it could not verify (``unverified``)."""
        known = self._ctx.state.nodes
        if tag == "unverified":
            return {n for n in nodes if n in known and self[n].fit.unverified}
        require_fit = tag == "refused"
        reject = self._ctx.settings.reject_unknown_capacity
        return {n for n in nodes if n in known and fit_check.refuses(self[n], require_fit, reject)}
