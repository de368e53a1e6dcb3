"""Every node judged for one pod: refused with a reason, or a candidate carrying the per-node
fields the strategies read (seed 000's Capacity, Count, Usage, Rate; seed 001's free share;
seed 002's projected shares).

The order of the checks is the order a user reasons in: does the node exist, may this pod go
there at all (its own constraints, the policy's node filter and liveness), does the round's
plan leave it room, does topology spread allow it, does it fit, and do the placement rules hold.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from berth.core.decision import Refusal
from berth.core.errors import ErrorCode, PlacementError
from berth.core.fit import SHARE_DIMENSIONS, Fit, check_fit, demand, unverified_warning
from berth.core.liveness import ALIVE, ASK_LEASE, lease_down_reason, node_liveness
from berth.core.model import LabelSelector, NodeInfo, PodInfo
from berth.core.node_filter import node_filter_refusal, pod_constraint_refusal
from berth.core.placement_rules import RuleNode
from berth.core.policy import AffinityMatching, NodeFilter, PlacementPolicy, Strategy
from berth.core.quantity import CPU, DISK, MEMORY, PODS
from berth.core.rule_matching import RuleContext, first_broken, reads_pods
from berth.core.settings import Settings
from berth.core.topology import SpreadContext, spread_context
from berth.core.view import ClusterState

CONTROLLER_LABELS = frozenset({"pod-template-hash", "controller-revision-hash",
                               "statefulset.kubernetes.io/pod-name", "apps.kubernetes.io/pod-index"})


@dataclass(slots=True)
class Candidate:
    name: str
    capacity: int  # how many more pods of this shape fit
    count: int  # pods of this workload already there, bound + assumed (+ planned)
    usage: float  # requested / allocatable, averaged over cpu, memory and requested extended resources
    rate: float  # what this pod adds, same averaging
    free_share_after: float  # free share of the tightest resource after placing (seed 001)
    pod_count: int  # all pods on the node
    cpu_after: float
    memory_after: float
    memory_after_discounted: float  # sleepy memory divided by the factor (seed 002, ranking only)
    disk_after: float
    sleepy_memory: int
    unverified: tuple[str, ...] = ()
    spread_score: int = 0  # ScheduleAnyway score, 0..100

    def with_spread_score(self, score: int) -> Candidate:
        """A copy for one evaluation (memoised candidates are shared and never changed)."""
        return Candidate(self.name, self.capacity, self.count, self.usage, self.rate, self.free_share_after,
                         self.pod_count, self.cpu_after, self.memory_after, self.memory_after_discounted,
                         self.disk_after, self.sleepy_memory, self.unverified, score)

    @property
    def projected_use(self) -> float:
        """The dominant projected share (seed 002's "projected use" for Spread and BestFit)."""
        return max(self.cpu_after, self.memory_after)


@dataclass
class CandidateSet:
    considered: list[str]
    candidates: list[Candidate]
    refused: dict[str, Refusal] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    error: PlacementError | None = None


def workload_selector(pod: PodInfo, policy: PlacementPolicy | None) -> LabelSelector:
    """The pods that count as this pod's workload: the policy's, else pods labelled like it."""
    if policy is not None:
        return policy.selector
    return LabelSelector({k: v for k, v in pod.labels.items() if k not in CONTROLLER_LABELS})


def collect_candidates(state: ClusterState, pod: PodInfo, policy: PlacementPolicy | None, settings: Settings,
                       now: float, *, nodes: Sequence[str] | None = None, quota: Mapping[str, int] | None = None,
                       strategy: Strategy | None = None, require_fit: bool = True,
                       spread: SpreadContext | None = None) -> CandidateSet:
    """Judge ``nodes`` (default: every node) for ``pod``. ``settings`` must already carry the policy's
    overrides. With ``require_fit=False`` nodes that cannot take one pod stay candidates with
    capacity 0 (round strategies and the capacity query judge capacity themselves).

    What depends only on the node and the policy (the pod's own constraints, the node filter,
    node-label rules) and what depends only on the node's pods and the pod's shape (the fit and
    the per-node figures) is memoised on the view, keyed by the node object and its stamp, so a
    scheduling cycle recomputes only the nodes whose pods changed since the last one."""
    names = sorted(state.nodes) if nodes is None else list(nodes)
    result = CandidateSet(considered=names, candidates=[])
    need = demand(pod)
    workload = workload_selector(pod, policy)
    counts = state.matching_counts(pod.namespace, workload)
    if spread is None:
        spread = spread_context(state, pod, policy)
    rules = policy.rules if policy is not None else ()
    dynamic_rules = bool(rules) and reads_pods(rules)
    rule_ctx = RuleContext(state, pod) if rules else None
    node_filter = policy.spec.node_filter if policy is not None else None
    check_liveness = node_filter is None or not (node_filter.includes or node_filter.all)
    ceiling = policy.spec.nodes_limit if policy is not None and strategy is Strategy.AUTO else 0
    static_memo = state.memo(("static", pod.constraint_signature(), policy))
    # The workload's count on a node changes only with the node's pods, so it is memoised too,
    # and an unchanged node's candidate is reused as is (copied only to carry a spread score).
    fit_memo = state.memo(("fit", tuple(sorted(need.items())), pod.sleepy, settings, pod.namespace,
                           tuple(sorted(workload.match_labels.items())), workload.match_expressions))
    all_nodes = state.nodes
    soft_spread = spread is not None and bool(spread.soft)
    refusals: dict[tuple[str, bool], Refusal] = {}

    def refuse(name: str, reason: str, resolvable: bool) -> None:
        """Record a refusal; thousands of nodes share a handful of reasons, so share the objects."""
        key = (reason, resolvable)
        shared = refusals.get(key)
        if shared is None:
            shared = refusals[key] = Refusal(reason, resolvable)
        result.refused[name] = shared

    passing: list[tuple[Candidate, NodeInfo]] = []
    deferred: list[tuple[NodeInfo, int, tuple[str, bool]]] = []  # broken rules: fitted only if needed

    def fitted(node: NodeInfo, count: int) -> Candidate | None:
        name = node.name
        stamp = state.node_stamp(name)
        hit = fit_memo.get(name)
        if hit is None or hit[0] is not node or hit[1] != stamp:
            hit = fit_memo[name] = (node, stamp, *_fit_and_figures(state, node, need, pod, settings, count))
        fit, candidate = hit[2], hit[3]
        if fit.refusal is not None and (require_fit or (fit.unverified and settings.reject_unknown_capacity)):
            refuse(name, fit.refusal, True)
            return None
        return candidate.with_spread_score(0) if soft_spread else candidate

    for name in names:
        node = all_nodes.get(name)
        if node is None:
            refuse(name, "unknown node: berth has not seen it", False)
            continue
        static = static_memo.get(name)
        if static is None or static[0] is not node:
            static = static_memo[name] = (node, *_static_verdict(pod, node, node_filter, rules, dynamic_rules,
                                                                 rule_ctx))
        _, reason, rule_broken, liveness = static
        if reason is None and check_liveness and liveness is not ALIVE:
            reason = lease_down_reason(name, state, settings, now) if liveness is ASK_LEASE else liveness
        if reason is not None:
            refuse(name, reason, False)
            continue
        if quota is not None and quota.get(name, 0) <= 0:
            refuse(name, "the round's plan places no more pods here", False)
            continue
        count = counts.get(name, 0)
        if ceiling and count >= ceiling:
            refuse(name, f"nodesLimit: already holds {count} pods of this workload (per-node ceiling {ceiling})",
                   False)
            continue
        if spread is not None and spread.hard:
            spread_refusal = spread.refusal(node)
            if spread_refusal is not None:
                refuse(name, *spread_refusal)
                continue
        if dynamic_rules:
            assert rule_ctx is not None
            rule_broken = first_broken(rules, node, rule_ctx)
        if rule_broken is not None:
            deferred.append((node, count, rule_broken))
            continue
        candidate = fitted(node, count)
        if candidate is not None:
            passing.append((candidate, node))
    if deferred:
        passing = _apply_rules(result, passing, deferred, policy, fitted, refuse)
    if spread is not None and spread.soft:
        scores = spread.scores(node for _, node in passing)
        for candidate, _ in passing:
            candidate.spread_score = scores.get(candidate.name, 0)
    result.candidates = [c for c, _ in passing]
    for c in result.candidates:
        if c.unverified:
            result.warnings.append(unverified_warning(c.name, c.unverified))
    if not result.candidates and result.error is None:
        result.error = PlacementError(ErrorCode.INSUFFICIENT_RESOURCE, no_node_message(result))
    return result


def _static_verdict(pod: PodInfo, node: NodeInfo, node_filter: NodeFilter | None, rules: tuple[RuleNode, ...],
                    dynamic_rules: bool, rule_ctx: RuleContext | None
                    ) -> tuple[str | None, tuple[str, bool] | None, str]:
    reason = pod_constraint_refusal(pod, node)
    if reason is None and node_filter is not None:
        reason = node_filter_refusal(node_filter, node, lambda: None)
    broken = None
    if reason is None and rules and not dynamic_rules:
        assert rule_ctx is not None
        broken = first_broken(rules, node, rule_ctx)
    return reason, broken, node_liveness(node)


def _fit_and_figures(state: ClusterState, node: NodeInfo, need: Mapping[str, int], pod: PodInfo,
                     settings: Settings, count: int) -> tuple[Fit, Candidate]:
    requested = state.requested(node.name)
    fit = check_fit(node.allocatable, requested, need, settings)
    proto = _candidate(node, requested, need, fit.capacity if fit.refusal is None else 0, count,
                       state.pod_count(node.name), state.sleepy_memory(node.name), pod, settings)
    proto.unverified = fit.unverified
    return fit, proto


def no_node_message(result: CandidateSet) -> str:
    lines = [f"{node}: {result.refused[node].reason}" for node in sorted(result.refused)]
    if not result.considered:
        return "no node to consider"
    return f"0/{len(result.considered)} nodes can take the pod: " + "; ".join(lines)


def _apply_rules(result: CandidateSet, passing: list[tuple[Candidate, NodeInfo]],
                 deferred: list[tuple[NodeInfo, int, tuple[str, bool]]], policy: PlacementPolicy | None,
                 fitted: Callable[[NodeInfo, int], Candidate | None],
                 refuse: Callable[[str, str, bool], None]) -> list[tuple[Candidate, NodeInfo]]:
    """Seed 002: when a node that meets the rules has room, the others go; when none does,
    Enforced refuses with affinity_unsatisfied and Preferred ignores the rules."""
    if any(c.capacity > 0 for c, _ in passing):
        for node, _, (reason, resolvable) in deferred:
            refuse(node.name, reason, resolvable)
        return passing
    assert policy is not None
    if policy.spec.affinity_matching is AffinityMatching.PREFERRED:
        result.warnings.append("no node that meets placementRules has room; Preferred matching ignores the rules")
        for node, count, _ in deferred:
            candidate = fitted(node, count)
            if candidate is not None:
                passing.append((candidate, node))
        return passing
    for node, _, (reason, resolvable) in deferred:
        refuse(node.name, reason, resolvable)
    result.error = PlacementError(
        ErrorCode.AFFINITY_UNSATISFIED,
        "no node that meets placementRules has room: "
        + "; ".join(f"{node.name}: {reason}" for node, _, (reason, _r) in deferred))
    return []


def _share(used: int, total: int | None) -> float:
    return used / total if total else 1.0


def _candidate(node: NodeInfo, requested: Mapping[str, int], need: Mapping[str, int], capacity: int,
               count: int, pod_count: int, sleepy_memory: int, pod: PodInfo, settings: Settings) -> Candidate:
    alloc = node.allocatable
    usage_dims = [CPU, MEMORY, *(d for d in need if d not in (CPU, MEMORY, DISK, PODS))]
    usage = rate = 0.0
    known = 0
    for dim in usage_dims:
        total = alloc.get(dim)
        if total:
            known += 1
            usage += requested.get(dim, 0) / total
            rate += need.get(dim, 0) / total
    if known:
        usage, rate = usage / known, rate / known
    free_after = min(
        ((alloc[d] - requested.get(d, 0) - need.get(d, 0)) / alloc[d]
         for d in (*SHARE_DIMENSIONS, *(d for d in need if d not in SHARE_DIMENSIONS and d != PODS))
         if alloc.get(d)),
        default=0.0)
    mem_total = alloc.get(MEMORY)
    mem_used = requested.get(MEMORY, 0)
    mem_need = need.get(MEMORY, 0)
    factor = settings.sleepy_memory_factor
    discounted = mem_used - sleepy_memory + sleepy_memory / factor + (mem_need / factor if pod.sleepy else mem_need)
    return Candidate(
        name=node.name,
        capacity=capacity,
        count=count,
        usage=usage,
        rate=rate,
        free_share_after=free_after,
        pod_count=pod_count,
        cpu_after=_share(requested.get(CPU, 0) + need.get(CPU, 0), alloc.get(CPU)),
        memory_after=_share(mem_used + mem_need, mem_total),
        memory_after_discounted=discounted / mem_total if mem_total else 1.0,
        disk_after=_share(requested.get(DISK, 0) + need.get(DISK, 0), alloc.get(DISK)),
        sleepy_memory=sleepy_memory,
    )
