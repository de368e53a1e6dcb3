"""Every node judged for one pod: refused with a reason, or a candidate carrying the per-node
fields the strategies read (seed 000's Capacity, Count, Usage, Rate; seed 001's free share;
seed 002's projected shares).

The order of the checks is the order a user reasons in: does the node exist, may this pod go
there at all (its own constraints, the policy's node filter and liveness), does the round's
plan leave it room, does topology spread allow it, does it fit, and do the placement rules hold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

from berth.core.decision import Refusal
from berth.core.errors import ErrorCode, PlacementError
from berth.core.fit import SHARE_DIMENSIONS, check_fit, demand, unverified_warning
from berth.core.liveness import down_reason
from berth.core.model import LabelSelector, NodeInfo, PodInfo
from berth.core.node_filter import node_filter_refusal, pod_constraint_refusal
from berth.core.policy import AffinityMatching, PlacementPolicy, Strategy
from berth.core.quantity import CPU, DISK, MEMORY, PODS
from berth.core.rule_matching import RuleContext, first_broken
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
    capacity 0 (round strategies and the capacity query judge capacity themselves)."""
    names = sorted(state.nodes) if nodes is None else list(nodes)
    result = CandidateSet(considered=names, candidates=[])
    need = demand(pod)
    counts = state.matching_counts(pod.namespace, workload_selector(pod, policy))
    if spread is None:
        spread = spread_context(state, pod, policy)
    rules = policy.rules if policy is not None else ()
    rule_ctx = RuleContext(state, pod) if rules else None
    node_filter = policy.spec.node_filter if policy is not None else None
    ceiling = policy.spec.nodes_limit if policy is not None and strategy is Strategy.AUTO else 0
    passing: list[tuple[Candidate, NodeInfo]] = []
    broken: dict[str, tuple[str, bool]] = {}
    for name in names:
        node = state.nodes.get(name)
        if node is None:
            result.refused[name] = Refusal("unknown node: berth has not seen it", False)
            continue
        reason = pod_constraint_refusal(pod, node)
        if reason is None and node_filter is not None:
            reason = node_filter_refusal(node_filter, node, partial(down_reason, node, state, settings, now))
        elif reason is None:
            reason = down_reason(node, state, settings, now)
        if reason is not None:
            result.refused[name] = Refusal(reason, False)
            continue
        if quota is not None and quota.get(name, 0) <= 0:
            result.refused[name] = Refusal("the round's plan places no more pods here", False)
            continue
        count = counts.get(name, 0)
        if ceiling and count >= ceiling:
            result.refused[name] = Refusal(
                f"nodesLimit: already holds {count} pods of this workload (per-node ceiling {ceiling})", False)
            continue
        if spread is not None:
            spread_refusal = spread.refusal(node)
            if spread_refusal is not None:
                result.refused[name] = Refusal(*spread_refusal)
                continue
        requested = state.requested(name)
        fit = check_fit(node.allocatable, requested, need, settings)
        if fit.refusal is not None and (require_fit or (fit.unverified and settings.reject_unknown_capacity)):
            result.refused[name] = Refusal(fit.refusal, True)
            continue
        candidate = _candidate(node, requested, need, fit.capacity if fit.refusal is None else 0, count,
                               state.pod_count(name), state.sleepy_memory(name), pod, settings)
        candidate.unverified = fit.unverified
        if rule_ctx is not None:
            rule_refusal = first_broken(rules, node, rule_ctx)
            if rule_refusal is not None:
                broken[name] = rule_refusal
        passing.append((candidate, node))
    passing = _apply_rules(result, passing, broken, policy)
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


def no_node_message(result: CandidateSet) -> str:
    lines = [f"{node}: {result.refused[node].reason}" for node in sorted(result.refused)]
    if not result.considered:
        return "no node to consider"
    return f"0/{len(result.considered)} nodes can take the pod: " + "; ".join(lines)


def _apply_rules(result: CandidateSet, passing: list[tuple[Candidate, NodeInfo]],
                 broken: Mapping[str, tuple[str, bool]],
                 policy: PlacementPolicy | None) -> list[tuple[Candidate, NodeInfo]]:
    """Seed 002: when a node that meets the rules has room, the others go; when none does,
    Enforced refuses with affinity_unsatisfied and Preferred ignores the rules."""
    if not broken or policy is None:
        return passing
    meeting = [(c, n) for c, n in passing if c.name not in broken and c.capacity > 0]
    if meeting:
        for name, (reason, resolvable) in broken.items():
            result.refused[name] = Refusal(reason, resolvable)
        return [(c, n) for c, n in passing if c.name not in broken]
    if policy.spec.affinity_matching is AffinityMatching.PREFERRED:
        result.warnings.append("no node that meets placementRules has room; Preferred matching ignores the rules")
        return passing
    for name, (reason, resolvable) in broken.items():
        result.refused[name] = Refusal(reason, resolvable)
    result.error = PlacementError(
        ErrorCode.AFFINITY_UNSATISFIED,
        "no node that meets placementRules has room: " + "; ".join(f"{n}: {broken[n][0]}" for n in sorted(broken)))
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
