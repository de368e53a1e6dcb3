"""Every node judged for one pod: refused with a reason, or a candidate carrying the per-node
figures the strategies read (capacity, count, usage, rate, free share after, projected shares:
docs/behaviour.md#strategies).

The order of the checks is the order a user reasons in: does the node exist, may this pod go
there at all (its own constraints, the policy's node filter and liveness), does the round's
plan leave it room, does topology spread allow it, does it fit, and do the placement rules hold.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from functools import cache
from itertools import filterfalse
from operator import attrgetter
from typing import Protocol

from berth.core.decision import Refusal, Refused
from berth.core.errors import ErrorCode, PlacementError
from berth.core.fit import demand, unverified_warning
from berth.core.liveness import ALIVE, ASK_LEASE, lease_down_reason, lease_suspects, node_liveness
from berth.core.model import LabelSelector, NodeInfo, PodInfo
from berth.core.node_filter import node_filter_refusal, pod_constraint_refusal, unknown_includes
from berth.core.node_verdicts import Judged, VerdictTable
from berth.core.plugins import fit as fit_check
from berth.core.plugins.fit import Candidate, Fitted, NodeUse, SortKey, weighed_dimensions
from berth.core.policy import AffinityMatching, NodeFilter, PlacementPolicy, Strategy
from berth.core.rule_matching import rule_context
from berth.core.settings import Settings
from berth.core.topology import SpreadContext, spread_context
from berth.core.view import ClusterState

CONTROLLER_LABELS = frozenset({"pod-template-hash", "controller-revision-hash",
                               "statefulset.kubernetes.io/pod-name", "apps.kubernetes.io/pod-index"})

__all__ = ["CONTROLLER_LABELS", "Candidate", "CandidateSet", "SortKey", "collect_candidates", "weighed_dimensions"]


@dataclass
class CandidateSet:
    considered: list[str]
    candidates: list[Candidate]
    refused: Refused = field(default_factory=Refused)
    warnings: list[str] = field(default_factory=list)
    error: PlacementError | None = None
    order: Callable[[SortKey], Sequence[str] | None] | None = field(default=None, repr=False)
    """Every node of the view sorted by a strategy's sort key (kept between cycles), when the
    candidates are the view's own; ranking them is then a filter of that order."""


class FitReading(Protocol):
    """Each node's fit, as the rules and the error read it (a verdict table's reading, or the
    plain path's)."""

    def __getitem__(self, name: str) -> Fitted: ...

    def among(self, tag: str, nodes: Collection[str]) -> set[str]: ...


def workload_selector(pod: PodInfo, policy: PlacementPolicy | None) -> LabelSelector:
    """The pods that count as this pod's workload: the policy's, else pods labelled like it."""
    if policy is not None:
        return policy.selector
    return LabelSelector({k: v for k, v in pod.labels.items() if k not in CONTROLLER_LABELS})


def collect_candidates(state: ClusterState, pod: PodInfo, policy: PlacementPolicy | None, settings: Settings,
                       now: float, *, nodes: Sequence[str] | None = None, quota: Mapping[str, int] | None = None,
                       strategy: Strategy | None = None, require_fit: bool = True,
                       spread: SpreadContext | None = None, room_only: bool = False) -> CandidateSet:
    """Judge ``nodes`` (default: every node) for ``pod``. ``settings`` must already carry the policy's
    overrides. With ``require_fit=False`` nodes that cannot take one pod stay candidates with
    capacity 0 (round strategies and the capacity query judge capacity themselves). With
    ``room_only`` topology spread and placement rules are not judged: where the pod may go at
    all (its own constraints, the node filter, liveness) and how much room it has there.

    Each check takes the set of nodes still standing and refuses a subset of it. What depends
    only on the node and the policy (the pod's own constraints, the node filter, the node's own
    liveness) and what depends only on the node's pods and the pod's shape (the fit and the
    per-node figures) come from verdict tables kept on the view (:mod:`berth.core.node_verdicts`),
    so a scheduling cycle re-judges only the nodes that changed since the last one.

    With the index off (``settings.indexed``), :func:`berth.core.framework.run` judges instead,
    every check over every node with nothing kept."""
    if not settings.indexed:
        from berth.core.framework import run  # it builds on this module

        return run(state, pod, policy, settings, now, nodes=nodes, quota=quota, strategy=strategy,
                   require_fit=require_fit, spread_context=spread, room_only=room_only)
    names = sorted(state.nodes) if nodes is None else list(nodes)
    result = CandidateSet(considered=names, candidates=[])
    workload = workload_selector(pod, policy)
    counts = state.matching_counts(pod.namespace, workload)
    if spread is None and not room_only:
        spread = spread_context(state, pod, policy)
    rules = policy.rules if policy is not None and not room_only else ()
    node_filter = policy.spec.node_filter if policy is not None else None
    check_liveness = node_filter is None or not (node_filter.includes or node_filter.all)
    ceiling = policy.spec.nodes_limit if policy is not None and strategy is Strategy.AUTO else 0

    considered = set(names)
    out: set[str] = set()  # refused, or breaking a rule: each check judges only the nodes not yet out
    refused = Refusals(result.refused, out)

    def refuse_unknown() -> None:
        refused.group(considered.difference(state.nodes), "unknown node: berth has not seen it", False)

    if node_filter is not None and node_filter.includes and (unknown := unknown_includes(node_filter, state.nodes)):
        result.warnings.append(unknown)
    static = _static_reading(state, pod, node_filter, considered)
    for name in static.among("refused", considered):
        refused.one(name, static[name].reason or "", False)
    if check_liveness:
        for name in static.among("down", considered) - out:
            refused.one(name, static[name].liveness, False)
        for name in (lease_suspects(state, settings, now) & considered) - out:
            if static[name].liveness is ASK_LEASE and (reason := lease_down_reason(name, state, settings, now)):
                refused.one(name, reason, False)
    if quota is not None:
        refuse_unknown()  # before the plan, which would claim them too
        refused.group(considered - {n for n, left in quota.items() if left > 0} - out,
                      "the round's plan places no more pods here", False)
    if ceiling:
        for name in [n for n, count in counts.items() if count >= ceiling and n in considered and n not in out]:
            refused.one(name, f"nodesLimit: already holds {counts[name]} pods of this workload (per-node ceiling "
                              f"{ceiling})", False)
    held: list[AbstractSet[str]] = []  # the nodes topology spread refused, group by group
    if spread is not None and spread.hard:
        for group, (reason, resolvable) in spread.refusals(state):
            group = (group & considered) - out
            refused.group(group, reason, resolvable)
            held.append(group)
    broken: list[tuple[AbstractSet[str], tuple[str, bool]]] = []  # nodes breaking each rule: fitted only if needed
    failing: list[AbstractSet[str]] = []  # every node each rule refuses, spread-refused ones included
    if rules:
        ctx = rule_context(state, pod, policy)
        for index, rule in enumerate(rules):
            failing.append(ctx.failing(rule))
            breaking = (failing[-1] & considered) - out
            if breaking:
                broken.append((breaking, ctx.refusal(index, rule)))
                out |= breaking
    fit = _fit_reading(state, pod, policy, settings, counts, considered)
    for name in fit.among("refused" if require_fit else "refused-anyway", considered) - out:
        refused.one(name, fit[name].fit.refusal or "", True)

    def standing() -> list[Candidate]:
        return list(map(_CANDIDATE, fit.each(filterfalse(out.__contains__, names))))

    try:
        passing = standing()
    except KeyError:
        # A name the view does not know (a node deleted since the scheduler's snapshot): no check
        # above refuses it, as their node sets come from the view, so it is found here, when its
        # verdict is looked up, rather than by one more pass over every name of every request.
        refuse_unknown()
        passing = standing()
    result.order = lambda key: fit.order(_by_candidate(key))
    if broken:
        passing = apply_rules(result, passing, broken, policy, fit, require_fit, refused)
    if spread is not None and spread.soft:
        scores = spread.scores(state.nodes[c.name] for c in passing)
        passing = [c.with_spread_score(scores.get(c.name, 0)) for c in passing]
    result.candidates = passing
    result.warnings.extend(unverified_warning(c.name, c.unverified) for c in filter(is_unverified, passing))
    if not result.candidates and result.error is None:
        result.error = no_node_error(result, held, failing, fit)
    return result


def no_node_error(result: CandidateSet, held: Sequence[AbstractSet[str]], failing: Sequence[AbstractSet[str]],
                   fit: FitReading) -> PlacementError:
    """Why no node can take the pod: spread_unsatisfied when topology spread refuses nodes that
    have room for it and meet the rules (spread alone holds the pod back), else a lack of room."""
    roomy = set().union(*held)
    roomy -= fit.among("refused", roomy)
    for breaking in failing:
        roomy -= breaking
    if not roomy:
        return PlacementError(ErrorCode.INSUFFICIENT_RESOURCE, no_node_message(result))
    listed = heapq.nsmallest(LISTED, roomy)
    more = f"; and {len(roomy) - LISTED} more" if len(roomy) > LISTED else ""
    return PlacementError(ErrorCode.SPREAD_UNSATISFIED,
                          f"0/{len(result.considered)} nodes can take the pod; topology spread refuses every node "
                          "with room for it: " + "; ".join(f"{n}: {result.refused[n].reason}" for n in listed) + more)


def shared_refusals(state: ClusterState, pod: PodInfo, policy: PlacementPolicy | None) -> list[AbstractSet[str]]:
    """The node sets that the checks reading other nodes' pods hold against ``pod`` now: each
    domain topology spread's DoNotSchedule refuses, and the nodes breaking each placement rule
    (the candidates judged ``room_only`` less these, when one is left, are the full judgement's)."""
    groups: list[AbstractSet[str]] = []
    spread = spread_context(state, pod, policy)
    if spread is not None and spread.hard:
        groups.extend(group for group, _ in spread.refusals(state))
    if policy is not None and policy.rules:
        ctx = rule_context(state, pod, policy)
        groups.extend(ctx.failing(rule) for rule in policy.rules)
    return groups


class Refusals:
    """Records refusals and adds the refused nodes to ``out``. Thousands of nodes share a
    handful of reasons, so they share the objects."""

    def __init__(self, into: Refused, out: set[str]) -> None:
        self._into = into
        self._out = out
        self._shared: dict[tuple[str, bool], Refusal] = {}

    def _refusal(self, reason: str, resolvable: bool) -> Refusal:
        key = (reason, resolvable)
        shared = self._shared.get(key)
        if shared is None:
            shared = self._shared[key] = Refusal(reason, resolvable)
        return shared

    def one(self, name: str, reason: str, resolvable: bool) -> None:
        self._into.one(name, self._refusal(reason, resolvable))
        self._out.add(name)

    def group(self, names: AbstractSet[str], reason: str, resolvable: bool) -> None:
        """``names``: a set of its own, none of them refused yet (it is kept, not copied)."""
        if names:
            self._into.group(names, self._refusal(reason, resolvable))
            self._out |= names


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


def _static_reading(state: ClusterState, pod: PodInfo, node_filter: NodeFilter | None,
                    considered: set[str]) -> Judged[_Static]:
    def judge(node: NodeInfo) -> _Static:
        reason = pod_constraint_refusal(pod, node)
        if reason is None and node_filter is not None:
            reason = node_filter_refusal(node_filter, node, lambda: None)
        return _Static(node, reason, node_liveness(node))

    # Keyed by what the verdicts read (the pod's own constraints and the node filter), not by the
    # whole policy: the policies that differ only in what they select share one table.
    filter_key = node_filter.model_dump_json() if node_filter is not None else None
    table = state.base.table(("static", pod.constraint_signature(), filter_key), lambda: VerdictTable(_static_tags))
    table.sync(state.base, judge, keep=lambda v, node: v.node is node)
    nodes, verdicts = state.nodes, table.verdicts
    fresh = {n: judge(nodes[n]) for n in state.local_nodes()
             if n in considered and (n not in verdicts or verdicts[n].node is not nodes[n])}
    return table.reading(fresh)


def _fit_reading(state: ClusterState, pod: PodInfo, policy: PlacementPolicy | None, settings: Settings,
                 counts: Mapping[str, int], considered: set[str]) -> Judged[Fitted]:
    need = demand(pod)
    reject_unknown = settings.reject_unknown_capacity

    def tags(v: Fitted) -> tuple[str, ...]:
        if v.fit.refusal is None:
            return ()
        if v.fit.unverified and reject_unknown:
            return ("refused", "refused-anyway")  # refused even where the caller judges capacity itself
        return ("refused",)

    def judge_in(where: ClusterState, where_counts: Mapping[str, int]) -> Callable[[NodeInfo], Fitted]:
        def judge(node: NodeInfo) -> Fitted:
            name = node.name
            use = NodeUse(where.requested(name), where.pod_count(name), where.sleepy_memory(name))
            return fit_check.judge(node, use, need, pod, settings, where_counts.get(name, 0))
        return judge

    workload = workload_selector(pod, policy)
    table = state.base.table(("fit", tuple(sorted(need.items())), pod.sleepy, settings, pod.namespace,
                              tuple(sorted(workload.match_labels.items())), workload.match_expressions),
                             lambda: VerdictTable(tags))
    base = state.base
    table.sync(base, judge_in(base, base.matching_counts(pod.namespace, workload)))
    judge_here = judge_in(state, counts)
    fresh = {n: judge_here(state.nodes[n]) for n in state.local_nodes() if n in considered}
    return table.reading(fresh)


_CANDIDATE = attrgetter("candidate")
candidate_name = attrgetter("name")
is_unverified = attrgetter("unverified")  # the dimensions whose capacity is unknown: truthy if any
spread_scored = attrgetter("spread_score")


@cache
def _by_candidate(key: SortKey) -> Callable[[Fitted], tuple[object, ...]]:
    """A strategy's sort key as a key of fit verdicts: one function per strategy key, so that the
    fit table keeps one order per strategy (:meth:`VerdictTable.order`)."""
    def fitted_key(v: Fitted) -> tuple[object, ...]:
        return v.candidate.sort_key(key)
    return fitted_key


LISTED = 10
"""Nodes named one by one in a spread_unsatisfied message; the rest are counted."""


def no_node_message(result: CandidateSet, leave_out: AbstractSet[str] = frozenset(),
                    more: Sequence[str] = ()) -> str:
    """Every refused node's reason (but ``leave_out``'s), then ``more`` lines."""
    lines = [f"{node}: {refusal.reason}" for node, refusal in result.refused.by_node() if node not in leave_out]
    lines.extend(more)
    if not result.considered:
        return "no node to consider"
    return f"0/{len(result.considered)} nodes can take the pod: " + "; ".join(lines)


def apply_rules(result: CandidateSet, passing: list[Candidate],
                 broken: Sequence[tuple[AbstractSet[str], tuple[str, bool]]],
                 policy: PlacementPolicy | None, fit: FitReading, require_fit: bool,
                 refused: Refusals) -> list[Candidate]:
    """When a node that meets the rules has room, the others go; when none does,
    Preferred ignores the rules and Enforced refuses: affinity_unsatisfied when nodes that break
    the rules have room, insufficient_resource (with the shortfall of the nodes that meet them)
    when nothing has room anywhere."""
    if any(c.capacity > 0 for c in passing):
        for group, (reason, resolvable) in broken:
            refused.group(group, reason, resolvable)
        return passing
    assert policy is not None
    reasons = {name: verdict for group, verdict in broken for name in group}
    in_order = [n for n in result.considered if n in reasons]
    if policy.spec.affinity_matching is AffinityMatching.PREFERRED:
        result.warnings.append("no node that meets placementRules has room; Preferred matching ignores the rules")
        unfit = fit.among("refused" if require_fit else "refused-anyway", set(reasons))
        for name in in_order:
            if name in unfit:
                refused.one(name, fit[name].fit.refusal or "", True)
            else:
                passing.append(fit[name].candidate)
        return passing
    for group, (reason, resolvable) in broken:
        refused.group(group, reason, resolvable)
    if not any(fit[name].candidate.capacity > 0 for name in in_order):
        # Nothing fits anywhere: room, not the rules, is what is missing.
        # A fixed round keeps candidates with no room (it judges room itself): their shortfall too.
        no_room = [f"{c.name}: {fit[c.name].fit.refusal}" for c in passing if fit[c.name].fit.refusal]
        message = no_node_message(result, leave_out=reasons.keys(), more=no_room)
        result.error = PlacementError(
            ErrorCode.INSUFFICIENT_RESOURCE,
            f"{message}; the {len(in_order)} node(s) that do not meet placementRules have no room either")
        return []
    result.error = PlacementError(
        ErrorCode.AFFINITY_UNSATISFIED,
        "no node that meets placementRules has room: " + "; ".join(f"{n}: {reasons[n][0]}" for n in in_order))
    return []
