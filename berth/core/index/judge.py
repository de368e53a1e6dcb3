"""The indexed runner: the framework's checks (:mod:`berth.core.plugins`) answered for whole node
sets from state kept between calls, so that a scheduling cycle re-judges only the nodes that
changed since the last one. It answers exactly as :func:`berth.core.framework.run`, the plain
path, which the tests hold it to."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from functools import cache
from itertools import filterfalse
from operator import attrgetter

from berth.core.candidates import (
    CandidateSet,
    Refusals,
    apply_rules,
    is_unverified,
    no_node_error,
    workload_selector,
)
from berth.core.fit import demand, unverified_warning
from berth.core.index.leases import lease_suspects
from berth.core.index.rules import rule_context
from berth.core.index.spread import spread_context
from berth.core.index.verdicts import Judged, VerdictTable
from berth.core.liveness import ALIVE, ASK_LEASE, lease_down_reason, node_liveness
from berth.core.model import NodeInfo, PodInfo
from berth.core.node_filter import unknown_includes
from berth.core.plugins import Depends, PodContext, constraints
from berth.core.plugins import fit as fit_check
from berth.core.plugins import node_filter as node_filter_check
from berth.core.plugins.fit import Candidate, Fitted, NodeUse, SortKey
from berth.core.policy import NodeFilter, PlacementPolicy, Strategy
from berth.core.settings import Settings
from berth.core.topology import SpreadContext
from berth.core.view import ClusterState

_CANDIDATE = attrgetter("candidate")

STATIC = (constraints, node_filter_check)
"""Checks whose verdict reads the node object alone (and the pod's constraints, the policy's node
filter): a node's verdict stands until the node object changes."""
assert all(check.DEPENDS == Depends.NODE for check in STATIC)


def judge(state: ClusterState, pod: PodInfo, policy: PlacementPolicy | None, settings: Settings, now: float, *,
          nodes: Sequence[str] | None = None, quota: Mapping[str, int] | None = None,
          strategy: Strategy | None = None, require_fit: bool = True,
          spread: SpreadContext | None = None, room_only: bool = False) -> CandidateSet:
    """:func:`berth.core.framework.collect_candidates` through the index.

    Each check takes the set of nodes still standing and refuses a subset of it. What depends
    only on the node and the policy (the pod's own constraints, the node filter, the node's own
    liveness) and what depends only on the node's pods and the pod's shape (the fit and the
    per-node figures) come from verdict tables kept on the view (:mod:`berth.core.index.verdicts`),
    so a scheduling cycle re-judges only the nodes that changed since the last one."""
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
    ctx = PodContext(state, pod, policy, settings, now, workload, demand(pod), strategy, quota, require_fit)
    static = _static_reading(ctx, node_filter, considered)
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
        rule_sets = rule_context(state, pod, policy)
        for index, rule in enumerate(rules):
            failing.append(rule_sets.failing(rule))
            breaking = (failing[-1] & considered) - out
            if breaking:
                broken.append((breaking, rule_sets.refusal(index, rule)))
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


def _static_reading(ctx: PodContext, node_filter: NodeFilter | None, considered: set[str]) -> Judged[_Static]:
    """The verdicts of the checks that read the node alone (:data:`STATIC`)."""
    state, pod = ctx.state, ctx.pod

    def judge(node: NodeInfo) -> _Static:
        refusal = constraints.filter(ctx, node) or node_filter_check.filter(ctx, node)
        return _Static(node, refusal.reason if refusal is not None else None, node_liveness(node))

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
    groups: list[AbstractSet[str]] = []
    spread = spread_context(state, pod, policy)
    if spread is not None and spread.hard:
        groups.extend(group for group, _ in spread.refusals(state))
    if policy is not None and policy.rules:
        ctx = rule_context(state, pod, policy)
        groups.extend(ctx.failing(rule) for rule in policy.rules)
    return groups
