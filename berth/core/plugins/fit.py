"""Does the pod fit? Allocatable (times the overcommit percent) against the requests of every pod
bound or assumed on the node, disk as a free-share floor, and a resource the node does not report
unknown (never zero, never unlimited): :func:`~berth.core.fit.check_fit`. A node that fits becomes
a :class:`Candidate` carrying the per-node figures the strategies rank by (capacity, the
workload's count, usage and rate, the shares after placing). See docs/behaviour.md#fit and
#unknown-capacity."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from berth.core.fit import SHARE_DIMENSIONS, Fit, check_fit
from berth.core.model import NodeInfo, PodInfo
from berth.core.plugins import Depends, PodContext, count_matching
from berth.core.quantity import CPU, DISK, MEMORY, PODS
from berth.core.settings import Settings
from berth.core.view import ClusterState

DEPENDS = Depends.NODE | Depends.NODE_PODS


def settings_read(settings: Settings) -> tuple[object, ...]:
    """The settings a fit verdict reads (the overcommit percents and the disk floor of
    :func:`~berth.core.fit.check_fit`, unknown capacity refused or not, the sleepy memory factor of
    the candidate's figures): verdicts judged under settings alike in these are alike."""
    return (settings.cpu_overcommit_percent, settings.memory_overcommit_percent, settings.min_free_disk_percent,
            settings.reject_unknown_capacity, settings.sleepy_memory_factor)


@dataclass(slots=True)
class Candidate:
    name: str
    capacity: int  # how many more pods of this shape fit
    count: int  # pods of this workload already there, bound + assumed (+ planned)
    usage: float  # requested / allocatable, averaged over the resources the pod asks for (weighed_dimensions)
    rate: float  # what this pod adds, same averaging
    free_share_after: float  # free share of the tightest resource after placing (the default ranking)
    pod_count: int  # all pods on the node
    cpu_after: float
    memory_after: float
    memory_after_discounted: float  # sleepy memory divided by the factor (Balanced, ranking only)
    disk_after: float
    sleepy_memory: int
    projected_use: float  # the dominant projected share of cpu and memory the pod asks for (Spread, BestFit)
    unverified: tuple[str, ...] = ()
    spread_score: int = 0  # ScheduleAnyway score, 0..100
    keys: dict[Callable[[Candidate], tuple[object, ...]], tuple[object, ...]] = field(
        default_factory=dict, repr=False, compare=False)  # strategy sort keys worked out (candidates are shared)

    def with_spread_score(self, score: int) -> Candidate:
        """A copy for one evaluation (memoised candidates are shared and never changed)."""
        return Candidate(self.name, self.capacity, self.count, self.usage, self.rate, self.free_share_after,
                         self.pod_count, self.cpu_after, self.memory_after, self.memory_after_discounted,
                         self.disk_after, self.sleepy_memory, self.projected_use, self.unverified, score)

    def sort_key(self, strategy_key: Callable[[Candidate], tuple[object, ...]]) -> tuple[object, ...]:
        """``strategy_key(self)``, worked out once: a candidate outlives evaluations until its node changes."""
        hit = self.keys.get(strategy_key)
        if hit is None:
            hit = self.keys[strategy_key] = strategy_key(self)
        return hit


SortKey = Callable[[Candidate], tuple[object, ...]]


@dataclass(frozen=True, slots=True)
class NodeUse:
    """What the pods on a node take from it."""

    requested: Mapping[str, int]  # summed requests, and one pod slot per pod
    pod_count: int
    sleepy_memory: int  # memory requested by sleepy pods


def node_use(state: ClusterState, name: str) -> NodeUse:
    """Summed over the pods on the node, one by one."""
    requested: dict[str, int] = {}
    count = sleepy = 0
    for pod in state.pods_on(name):
        for resource, amount in pod.requests.items():
            requested[resource] = requested.get(resource, 0) + amount
        count += 1
        if pod.sleepy:
            sleepy += pod.requests.get(MEMORY, 0)
    if count:
        requested[PODS] = requested.get(PODS, 0) + count
    return NodeUse(requested, count, sleepy)


@dataclass(frozen=True, slots=True)
class Fitted:
    """A node's fit for a pod's shape, and the candidate it makes."""

    fit: Fit
    candidate: Candidate


def judge(node: NodeInfo, use: NodeUse, need: Mapping[str, int], pod: PodInfo, settings: Settings,
          count: int) -> Fitted:
    """``count``: the pods of the workload on the node already."""
    fit = check_fit(node.allocatable, use.requested, need, settings)
    proto = _candidate(node, use.requested, need, fit.capacity if fit.refusal is None else 0, count,
                       use.pod_count, use.sleepy_memory, pod, settings)
    proto.unverified = fit.unverified
    return Fitted(fit, proto)


def refuses(fitted: Fitted, require_fit: bool, reject_unknown: bool) -> bool:
    """Whether the fit refuses the node; with ``require_fit`` False (the caller judges room
    itself), only a node whose capacity is unknown while unknown capacity is refused."""
    if fitted.fit.refusal is None:
        return False
    return require_fit or bool(fitted.fit.unverified and reject_unknown)


def judge_naively(ctx: PodContext, node: NodeInfo) -> Fitted:
    """:func:`judge`, the node's use and the workload's count read pod by pod."""
    count = count_matching(ctx.state, node.name, ctx.pod.namespace, ctx.workload)
    return judge(node, node_use(ctx.state, node.name), ctx.need, ctx.pod, ctx.settings, count)


def _share(used: int, total: int | None) -> float:
    return used / total if total else 1.0


def weighed_dimensions(need: Mapping[str, int], among: AbstractSet[str] | None = None) -> list[str]:
    """The resources a strategy weighs for a pod (a resource the pod does not ask for is
    ignored): those it asks for (``among`` them, when given), or cpu and memory for a pod
    that asks for none."""
    asked = [d for d in need if d != PODS and (among is None or d in among)]
    return asked or [CPU, MEMORY]


PROJECTED_DIMENSIONS = frozenset({CPU, MEMORY})
"""The dimensions a node's projected use is weighed over, by the plain judge here and by the index
layer's per-shape judge (berth.core.index.shape), which must weigh the same."""


def _candidate(node: NodeInfo, requested: Mapping[str, int], need: Mapping[str, int], capacity: int,
               count: int, pod_count: int, sleepy_memory: int, pod: PodInfo, settings: Settings) -> Candidate:
    alloc = node.allocatable
    usage = rate = 0.0
    known = 0
    for dim in weighed_dimensions(need):
        total = alloc.get(dim)
        if total:  # a resource the node does not report is unknown: not weighed, never full
            known += 1
            usage += requested.get(dim, 0) / total
            rate += need.get(dim, 0) / total
    if known:
        usage, rate = usage / known, rate / known
    projected = max((((requested.get(d, 0) + need.get(d, 0)) / alloc[d])
                     for d in weighed_dimensions(need, PROJECTED_DIMENSIONS) if alloc.get(d)), default=0.0)
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
        projected_use=projected,
    )
