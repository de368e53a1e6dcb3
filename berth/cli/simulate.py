"""``berth simulate``: place a workload mix with every strategy and compare the outcomes.

Each strategy starts from the cluster as the snapshot shows it and places the workloads in the
mix's order, pod by pod, each where the extender's filter would put it
(:func:`berth.core.plan.place_in_turn`), until a pod finds no node; Fill and Each run in rounds as
the extender runs them (:mod:`berth.core.round`: each round places the smaller of the strategy's
own round and the pods still waiting, with their ``count`` and ``nodesLimit`` as the mix says,
see :meth:`Workload.round_shape`), their pods following each round's plan, round after round
until the workload is placed or a round cannot open; topology spread and placement rules are
checked as the extender checks them. The strategies run in parallel worker processes (``jobs``); the results do
not depend on how many.

The measures, over the *pool* (nodes a pod with no tolerations or node constraints may use:
up, not cordoned, no untolerated NoSchedule/NoExecute taint) unless said otherwise:

- **nodes used**: nodes holding at least one pod of the mix.
- **lower bound**: the bin-packing lower bound of the mix alone: for each resource the mix
  requests (and the pod count), ceil(total requested / the largest usable allocatable of a pool
  node), the highest of these. Usable is allocatable times the overcommit percent; for
  ephemeral storage, allocatable less the free-disk floor. Existing pods are not counted, so no
  placement can use fewer nodes.
- **skew/node**, **skew/zone**: per workload, the max minus the min of its pods over the nodes it
  may use (zero counts included), or over their zones (``topology.kubernetes.io/zone``); the
  worst workload's figure.
- **util stddev**, **util range**: each pool node's utilisation is its dominant requested share
  (the higher of CPU and memory requested / allocatable, all pods counted); their population
  standard deviation, and max minus min, in percentage points.
- **stranded**: free CPU and memory on the nodes holding a pod of the mix that cannot take one
  more reference pod (the mix's ``referencePod``, default its smallest shape): room left in one
  resource on a node that another resource has filled. Summed over those nodes.
- **refused**: pods of the mix that found no node.
"""

from __future__ import annotations

import math
import multiprocessing
import signal
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from queue import Empty
from typing import Any

from berth.cli.workloads import Workload, WorkloadMix
from berth.core import (
    CPU,
    DISK,
    MEMORY,
    PODS,
    ROUND_STRATEGIES,
    ClusterView,
    LabelSelector,
    PlacementError,
    PlacementPolicy,
    PodInfo,
    Settings,
    Strategy,
    capacity_table,
    check_fit,
    collect_candidates,
    demand,
    place_in_turn,
    replicas,
    rounds,
)
from berth.snapshot import Snapshot

ZONE_LABEL = "topology.kubernetes.io/zone"
ALL_STRATEGIES: tuple[Strategy | None, ...] = (
    Strategy.AUTO, Strategy.FILL, Strategy.EACH, Strategy.GLOBAL, Strategy.DRAINED,
    Strategy.BALANCED, Strategy.SPREAD, Strategy.BEST_FIT, None,
)
DEFAULT_NAME = "Default"


def strategy_name(strategy: Strategy | None) -> str:
    return strategy.value if strategy is not None else DEFAULT_NAME


def parse_strategies(text: str) -> tuple[Strategy | None, ...]:
    """``Auto,Fill,Default`` (case-insensitive) to strategies; ValueError names an unknown one."""
    known = {strategy_name(s).lower(): s for s in ALL_STRATEGIES}
    out: list[Strategy | None] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if part.lower() not in known:
            expected = ", ".join(strategy_name(s) for s in ALL_STRATEGIES)
            raise ValueError(f"unknown strategy {part!r}; expected {expected}")
        if known[part.lower()] not in out:
            out.append(known[part.lower()])
    if not out:
        raise ValueError("no strategy given")
    return tuple(out)


@dataclass
class Outcome:
    """One workload placed with one strategy."""

    workload: str  # namespace/name
    requested: int
    placed: int
    nodes: dict[str, int]  # node -> pods placed there
    error: PlacementError | None = None
    refusals: dict[str, str] = field(default_factory=dict)  # node -> reason, when a pod found no node

    @property
    def refused(self) -> int:
        return self.requested - self.placed


@dataclass
class StrategyResult:
    strategy: str
    nodes_used: int
    node_skew: int
    zone_skew: int | None  # None: no node carries the zone label
    util_stddev: float  # percentage points
    util_range: float
    stranded_cpu: int  # millicores
    stranded_memory: int  # bytes
    placed: int
    refused: int
    outcomes: list[Outcome]
    utilisation: dict[str, float]  # pool node -> dominant share, 0..1

    def to_dict(self) -> dict[str, object]:
        return {
            "strategy": self.strategy,
            "nodesUsed": self.nodes_used,
            "nodeSkew": self.node_skew,
            "zoneSkew": self.zone_skew,
            "utilisationStddev": round(self.util_stddev, 2),
            "utilisationRange": round(self.util_range, 2),
            "strandedCpuMillicores": self.stranded_cpu,
            "strandedMemoryBytes": self.stranded_memory,
            "placed": self.placed,
            "refused": self.refused,
            "workloads": [
                {"workload": o.workload, "requested": o.requested, "placed": o.placed, "nodes": o.nodes,
                 "error": o.error.to_dict() if o.error else None}
                for o in self.outcomes
            ],
        }


@dataclass
class Simulation:
    cluster: str
    workloads: str
    nodes: int
    pool: int
    zones: int
    pods: int  # pods in the mix
    reference: Workload
    lower_bound: int
    lower_bound_by: dict[str, int]  # resource -> ceil(total / largest usable)
    now: float
    results: list[StrategyResult]

    def to_dict(self) -> dict[str, object]:
        ref = self.reference.pod.requests
        return {
            "cluster": self.cluster,
            "workloads": self.workloads,
            "nodes": self.nodes,
            "poolNodes": self.pool,
            "zones": self.zones,
            "pods": self.pods,
            "referencePod": {"workload": f"{self.reference.namespace}/{self.reference.name}",
                             "requests": dict(ref)},
            "lowerBound": self.lower_bound,
            "lowerBoundByResource": dict(self.lower_bound_by),
            "strategies": [r.to_dict() for r in self.results],
        }


Progress = Callable[[int, int], None]
"""Told (strategy's index, pods of the mix done with it so far: placed or refused) as it runs."""

PROGRESS_EVERY = 0.1
"""Seconds between two progress reports of one strategy."""


@dataclass(frozen=True)
class _Work:
    """What every strategy's run reads (given to each worker process once)."""

    snapshot: Snapshot
    mix: WorkloadMix
    settings: Settings
    now: float
    strategies: tuple[Strategy | None, ...]
    pool: list[str]
    eligible: dict[str, list[str]]


def simulate(snapshot: Snapshot, mix: WorkloadMix, settings: Settings, now: float,
             strategies: Sequence[Strategy | None] = ALL_STRATEGIES, *, jobs: int = 1,
             progress: Progress | None = None) -> Simulation:
    """Every strategy on a fresh view of ``snapshot``, ``jobs`` strategies at a time in worker
    processes (1: in this process). The result does not depend on ``jobs``: each strategy's run
    reads only its own view, and the results are kept in the order of ``strategies``."""
    fresh = snapshot.view()
    pool = pool_nodes(fresh, settings, now)
    eligible = {w.name: _eligible(fresh, w, settings, now) for w in mix.workloads}
    bound, by = lower_bound(fresh, pool, mix, settings)
    zones = {fresh.nodes[n].labels[ZONE_LABEL] for n in pool if ZONE_LABEL in fresh.nodes[n].labels}
    work = _Work(snapshot, mix, settings, now, tuple(strategies), pool, eligible)
    if jobs <= 1 or len(strategies) <= 1:
        results = [_run(work, i, fresh, progress) for i in range(len(strategies))]
    else:
        results = _run_in_processes(work, fresh, min(jobs, len(strategies)), progress)
    return Simulation(cluster=snapshot.source, workloads=mix.source, nodes=len(snapshot.nodes), pool=len(pool),
                      zones=len(zones), pods=mix.pods, reference=mix.reference, lower_bound=bound,
                      lower_bound_by=by, now=now, results=results)


def _run(work: _Work, index: int, view: ClusterView, progress: Progress | None) -> StrategyResult:
    """One strategy: every workload of the mix placed on ``view`` (the snapshot's), then measured;
    ``view`` is then given back as it was (its pods placed here removed), for the next strategy:
    cheaper than a new view of a large snapshot, and its kept verdicts follow the change."""
    strategy = work.strategies[index]
    done = 0
    last = time.monotonic()

    def report(force: bool = False) -> None:
        nonlocal last
        if progress is not None and (force or time.monotonic() - last >= PROGRESS_EVERY):
            last = time.monotonic()
            progress(index, done)

    def placed() -> None:
        nonlocal done
        done += 1
        report()

    outcomes = []
    for w in work.mix.workloads:
        outcome = place_workload(view, w, strategy, work.settings, work.now, placed if progress else None)
        outcomes.append(outcome)
        done = sum(o.requested for o in outcomes)  # the pods refused are done too
        report(force=True)
    result = _measure(view, strategy, outcomes, work.mix, work.pool, work.eligible, work.settings)
    for uid in [p.uid for p in view.all_pods() if view.is_assumed(p.uid)]:
        view.remove_pod(uid)
    return result


@dataclass
class _Worker:
    """A worker process's work, progress queue and view (made at its first strategy)."""

    work: _Work
    queue: Any
    view: ClusterView | None = None


_WORKER: _Worker | None = None
_FORKED_VIEW: ClusterView | None = None
"""The parent's view, set while it forks its workers: each inherits a copy rather than reading the
snapshot into a view of its own (a view holds functions, so it cannot be sent to a spawned worker)."""


def _start_worker(work: _Work, queue: Any) -> None:
    global _WORKER
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _WORKER = _Worker(work, queue, _FORKED_VIEW)


def _run_in_worker(index: int) -> StrategyResult:
    worker = _WORKER
    assert worker is not None, "not a worker process"
    if worker.view is None:
        worker.view = worker.work.snapshot.view()
    queue = worker.queue
    return _run(worker.work, index, worker.view, lambda i, done: queue.put((i, done)))


def _run_in_processes(work: _Work, view: ClusterView, jobs: int, progress: Progress | None) -> list[StrategyResult]:
    """The strategies over ``jobs`` worker processes; their progress relayed from a queue. Where the
    platform can fork, the workers inherit the snapshot and its view rather than receive a copy.
    The workers ignore Ctrl-C: on it, or when one fails, the parent stops them all (leaving the pool
    terminates its workers)."""
    global _FORKED_VIEW
    methods = multiprocessing.get_all_start_methods()
    fork = "fork" in methods
    context = multiprocessing.get_context("fork" if fork else None)
    queue = context.Queue()
    _FORKED_VIEW = view if fork else None
    try:
        with context.Pool(jobs, initializer=_start_worker, initargs=(work, queue)) as pool:
            runs = [pool.apply_async(_run_in_worker, (i,)) for i in range(len(work.strategies))]
            while not all(r.ready() for r in runs):
                next(r for r in runs if not r.ready()).wait(PROGRESS_EVERY)
                _relay(queue, progress)
                if any(r.ready() and not r.successful() for r in runs):
                    break
            results = [r.get() for r in runs]  # a worker's exception is raised here
            pool.close()  # the workers exit on their own, their last reports sent
            _relay(queue, progress)
            pool.join()
    finally:
        _FORKED_VIEW = None
    _relay(queue, progress)
    return results


def _relay(queue: Any, progress: Progress | None) -> None:
    while True:
        try:
            index, done = queue.get_nowait()
        except Empty:
            return
        if progress is not None:
            progress(index, done)


def pool_nodes(view: ClusterView, settings: Settings, now: float) -> list[str]:
    """Nodes a pod with no tolerations or node constraints may use."""
    blank = PodInfo(uid="berth-simulate/pool", name="pool", namespace="berth-simulate")
    result = collect_candidates(view, blank, None, settings, now, require_fit=False)
    return [c.name for c in result.candidates]


def _eligible(view: ClusterView, w: Workload, settings: Settings, now: float) -> list[str]:
    """The nodes a workload may use at all (its constraints, the policy's node filter, liveness)."""
    policy = w.policy(None)
    result = collect_candidates(view, w.pod, policy, settings.for_policy(policy), now, require_fit=False)
    refused_for_room = [n for n, r in result.refused.items() if r.resolvable]
    return sorted([c.name for c in result.candidates] + refused_for_room)


def lower_bound(view: ClusterView, pool: Sequence[str], mix: WorkloadMix,
                settings: Settings) -> tuple[int, dict[str, int]]:
    totals: dict[str, int] = {PODS: mix.pods}
    for w in mix.workloads:
        for resource, amount in w.pod.requests.items():
            totals[resource] = totals.get(resource, 0) + amount * w.replicas
    by: dict[str, int] = {}
    for resource, total in totals.items():
        largest = 0
        for name in pool:
            alloc = view.nodes[name].allocatable.get(resource)
            if alloc is None:
                continue
            usable = (alloc - alloc * settings.min_free_disk_percent // 100 if resource == DISK
                      else alloc * settings.overcommit_percent(resource) // 100)
            largest = max(largest, usable)
        if largest > 0 and total > 0:
            by[resource] = math.ceil(total / largest)
    return max(by.values(), default=0), by


def _replica(pod: PodInfo, w: Workload, i: int) -> PodInfo:
    name = f"{w.name}-{i:04d}"
    return replace(pod, uid=f"berth-simulate/{w.namespace}/{name}", name=name, node_name=None)


def place_workload(view: ClusterView, w: Workload, strategy: Strategy | None, settings: Settings,
                   now: float, placed: Callable[[], None] | None = None) -> Outcome:
    """Place ``w``'s replicas on ``view`` (assumed pods) and say where they went; ``placed`` is
    called after each pod placed."""
    outcome = Outcome(f"{w.namespace}/{w.name}", w.replicas, 0, {})
    if w.replicas == 0:
        return outcome
    if strategy in ROUND_STRATEGIES:
        _place_round(view, w, strategy, settings, now, outcome, placed)
    else:
        _place(view, w, w.policy(strategy), settings, now, outcome, w.replicas, placed=placed)
    return outcome


def _place(view: ClusterView, w: Workload, policy: PlacementPolicy, settings: Settings, now: float,
           outcome: Outcome, count: int, quota: Mapping[str, int] | None = None,
           placed: Callable[[], None] | None = None) -> bool:
    """Place ``count`` more pods of ``w`` pod by pod as the extender would (within ``quota``, a
    round's plan), until one finds no node; False when one did."""
    done = place_in_turn(view, replicas(_replica(w.pod, w, outcome.placed), count), policy, settings, now,
                         put=view.assume, quota=quota, stop_at_failure=True, placed=placed)
    for node in done.nodes:
        if node is not None:
            outcome.placed += 1
            outcome.nodes[node] = outcome.nodes.get(node, 0) + 1
    if (stopped := done.failure) is not None:
        outcome.error = stopped.error or outcome.error
        outcome.refusals = {n: r.reason for n, r in stopped.refused.items()}
        return False
    return True


def _place_round(view: ClusterView, w: Workload, strategy: Strategy | None, settings: Settings, now: float,
                 outcome: Outcome, placed: Callable[[], None] | None) -> None:
    """Fill and Each, round after round as the extender runs them: each round opened for the pods
    still waiting (the round's count rule), until every pod is placed or a round cannot open."""
    probe = w.policy(strategy)
    count, limit = w.round_shape(list(capacity_table(view, w.pod, probe, settings, now).nodes.values()))
    policy = w.policy(strategy, count=count, nodes_limit=limit)
    while outcome.placed < w.replicas:
        opening = rounds.open_round(view, _replica(w.pod, w, outcome.placed), policy, settings, now,
                             w.replicas - outcome.placed)
        if opening.round is None:
            outcome.error = opening.error
            outcome.refusals = {n: r.reason for n, r in opening.decision.refused.items()}
            return
        if not _place(view, w, policy, settings, now, outcome, opening.round.size, quota=opening.round.plan,
                      placed=placed):
            return


def _measure(view: ClusterView, strategy: Strategy | None, outcomes: list[Outcome], mix: WorkloadMix,
             pool: Sequence[str], eligible: Mapping[str, list[str]], settings: Settings) -> StrategyResult:
    used = sorted({node for o in outcomes for node in o.nodes})
    node_skew = 0
    zone_skew: int | None = None
    for w in mix.workloads:
        counts = _workload_counts(view, w.namespace, w.policy(None).selector)
        nodes = eligible[w.name]
        if not nodes:
            continue
        per_node = [counts.get(n, 0) for n in nodes]
        node_skew = max(node_skew, max(per_node) - min(per_node))
        per_zone: dict[str, int] = {}
        for n in nodes:
            zone = view.nodes[n].labels.get(ZONE_LABEL)
            if zone is not None:
                per_zone[zone] = per_zone.get(zone, 0) + counts.get(n, 0)
        if per_zone:
            skew = max(per_zone.values()) - min(per_zone.values())
            zone_skew = skew if zone_skew is None else max(zone_skew, skew)
    utilisation = {name: dominant_share(view, name) for name in pool}
    shares = [100 * u for u in utilisation.values()]
    stddev = statistics.pstdev(shares) if shares else 0.0
    spread = max(shares) - min(shares) if shares else 0.0
    ref = demand(mix.reference.pod)
    stranded = {CPU: 0, MEMORY: 0}
    for name in used:
        node = view.nodes[name]
        requested = view.requested(name)
        if check_fit(node.allocatable, requested, ref, settings).refusal is None:
            continue
        for dim in stranded:
            alloc = node.allocatable.get(dim)
            if alloc is not None:
                stranded[dim] += max(alloc * settings.overcommit_percent(dim) // 100 - requested.get(dim, 0), 0)
    placed = sum(o.placed for o in outcomes)
    return StrategyResult(
        strategy=strategy_name(strategy), nodes_used=len(used), node_skew=node_skew, zone_skew=zone_skew,
        util_stddev=stddev, util_range=spread, stranded_cpu=stranded[CPU], stranded_memory=stranded[MEMORY],
        placed=placed, refused=sum(o.refused for o in outcomes), outcomes=outcomes, utilisation=utilisation)


def _workload_counts(view: ClusterView, namespace: str, selector: LabelSelector) -> dict[str, int]:
    """Per node, the live pods of ``namespace`` that ``selector`` matches."""
    counts: dict[str, int] = {}
    for pod in view.pods_in_namespace(namespace):
        if pod.node_name and not pod.terminating and selector.matches(pod.labels):
            counts[pod.node_name] = counts.get(pod.node_name, 0) + 1
    return counts


def dominant_share(view: ClusterView, name: str) -> float:
    node = view.nodes[name]
    requested = view.requested(name)
    shares = [requested.get(dim, 0) / node.allocatable[dim] for dim in (CPU, MEMORY) if node.allocatable.get(dim)]
    return max(shares, default=0.0)
