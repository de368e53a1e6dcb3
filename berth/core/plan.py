"""The plan of a round: N pods of one workload, a node -> count map and the decision behind it.

Greedy strategies place pod after pod, each on the node :func:`evaluate_pod` ranks first with
the earlier pods of the round counted (an overlay on the view): the plan is by construction
what the extender does pod by pod. When no spread constraint or pod-reading rule is in force,
placing a pod changes only its own node, so only that node is judged again.

:func:`place_pods` places the pods of a round on the view itself, each assumed where the
extender's filter would put it (``berth simulate`` replays a workload mix with it).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace

from berth.core.candidates import CONTROLLER_LABELS, Candidate, CandidateSet
from berth.core.decision import Decision, Refused
from berth.core.errors import PlacementError
from berth.core.evaluate import effective_strategy, evaluate_pod, rank
from berth.core.framework import collect_candidates
from berth.core.index import shared_refusals, spread_context
from berth.core.model import PodInfo
from berth.core.placement_rules import reads_pods
from berth.core.policy import ROUND_STRATEGIES, PlacementPolicy, Strategy
from berth.core.round import plan_fixed_round
from berth.core.settings import Settings
from berth.core.strategies import rank_key
from berth.core.view import ClusterView, Overlay


@dataclass
class PlanResult:
    plan: dict[str, int]
    decision: Decision
    error: PlacementError | None
    placed: dict[str, int] = field(default_factory=dict)
    """The pods placed before the round stopped (the plan itself when it did not)."""
    stop: PlacementError | None = None
    """Why the pod after ``placed`` found no node: ``error`` as its own pod said it."""

    def to_dict(self, time: str) -> dict[str, object]:
        """``berth plan``'s answer: the plan, the decision behind it (its first pod's, every node
        listed, stamped with ``time``: when the plan judges the cluster) and the error."""
        decision = replace(self.decision, time=time)
        return {
            "plan": dict(self.plan),
            "decision": decision.record(limit=len(decision.considered), ranking_limit=len(decision.ranking)).to_json(),
            "error": self.error.to_dict() if self.error else None,
        }


def plan_round(state: ClusterView, pod: PodInfo, policy: PlacementPolicy | None, settings: Settings, now: float,
               count: int | None = None) -> PlanResult:
    """Plan ``count`` pods shaped like ``pod`` (None: Fill and Each plan their own round; the
    others plan one pod)."""
    settings = settings.for_policy(policy)
    strategy = effective_strategy(policy, settings)
    if count is not None and count < 0:
        raise ValueError("count must be 0 or more")
    if strategy in ROUND_STRATEGIES and policy is not None:
        fixed = plan_fixed_round(state, pod, policy, strategy, settings, now, count)
        decision = _decision(pod, policy, strategy, fixed.candidates.considered, fixed.candidates)
        decision.plan, decision.error = dict(fixed.plan), fixed.error
        return PlanResult(dict(fixed.plan), decision, fixed.error, dict(fixed.plan), fixed.error)
    return _greedy(state, pod, policy, strategy, settings, now, 1 if count is None else count)


def shared_plan_key(pod: PodInfo, policy: PlacementPolicy, count: int) -> Hashable | None:
    """What :func:`plan_round`'s plan and error for ``count`` pods shaped like ``pod`` depend on
    besides the cluster, the settings and the time, when they do not depend on which pods the
    policy selects: policies with the same key get the same plan on the same cluster. None when
    the plan reads the workload: topology spread and placement rules read the pods it selects,
    Auto and the round strategies count them per node.

    Otherwise the workload enters no check and no ranking (its per-node count goes only to the
    strategies named above), so the key is the spec without its selector and the pod's shape."""
    strategy = policy.strategy
    if strategy in ROUND_STRATEGIES or strategy is Strategy.AUTO or policy.spread_constraints or policy.rules:
        return None
    compiled = (strategy, policy.count, policy.nodes_limit, policy.node_filter.key, policy.affinity_matching,
                policy.capacity)
    return (compiled, tuple(sorted(pod.requests.items())), pod.sleepy, pod.constraint_signature(), count)


def _decision(pod: PodInfo, policy: PlacementPolicy | None, strategy: Strategy | None, considered: list[str],
              first: CandidateSet) -> Decision:
    return Decision(pod=pod.key, policy=policy.key if policy else None,
                    strategy=strategy.value if strategy else "Default", considered=considered,
                    refused=Refused(first.refused), warnings=list(first.warnings), trigger="plan",
                    policy_generation=policy.generation if policy else None)


def _greedy(view: ClusterView, pod: PodInfo, policy: PlacementPolicy | None, strategy: Strategy | None,
            settings: Settings, now: float, count: int) -> PlanResult:
    pods = [_nth(pod, i) for i in range(count)]
    placed = place_in_turn(view.overlay(), pods or [pod], policy, strategy, settings, now, stop_at_failure=True,
                           try_pods=count)
    first = placed.first
    decision = _decision(pod, policy, strategy, first.considered, first)
    decision.ranking = rank(first, pod, strategy)
    plan: dict[str, int] = {}
    for node in placed.nodes:
        if node is not None:
            plan[node] = plan.get(node, 0) + 1
    failed = placed.failure
    stop = failed.error if failed is not None else None
    error = stop
    done = len(placed.nodes) - 1
    if error is not None and done:
        error = PlacementError(error.code, f"placed {done} of {count}: {error.message}")
    decision.warnings = placed.warnings
    decision.plan = plan if error is None else None
    decision.error = error
    return PlanResult(plan if error is None else {}, decision, error, plan, stop)


@dataclass
class Placed:
    """Pods placed one after another on an overlay (:func:`place_in_turn`)."""

    nodes: list[str | None]
    """Each pod's node, in the pods' order; None where no node could take it. Shorter than the
    pods when placing stopped at the first failure."""
    first: CandidateSet
    """The first pod's judgement (before any pod of the turn was placed)."""
    refusals: dict[int, CandidateSet]
    """The judgement of each pod that no node could take, by its index: its refusals and error."""
    warnings: list[str]
    """Every step's warnings, each once, in the order they came."""

    @property
    def failure(self) -> CandidateSet | None:
        return self.refusals[min(self.refusals)] if self.refusals else None


def place_in_turn(overlay: Overlay, pods: Sequence[PodInfo], policy: PlacementPolicy | None,
                  strategy: Strategy | None, settings: Settings, now: float, *, nodes: Sequence[str] | None = None,
                  stop_at_failure: bool = False, try_pods: int | None = None) -> Placed:
    """Place ``pods`` (at least one; all governed by ``policy``, whose overrides ``settings`` carries)
    one after another on ``overlay``, each on the node :func:`rank` puts first with the earlier
    ones counted: a greedy strategy's round. ``nodes`` limits where they may go (default: every
    node). A pod no node can take is left out (or ends the turn with ``stop_at_failure``) with its
    judgement kept. ``try_pods``: how many pods to place (default: all; 0 judges the first only).
    When no spread constraint or pod-reading rule is in force and the pods share one shape,
    placing a pod changes only its own node, so only that node is judged again."""
    count = len(pods) if try_pods is None else try_pods
    local_only = settings.indexed and (policy is None or not (policy.spread_constraints or reads_pods(policy.rules))) \
        and len({_shape(p) for p in pods}) == 1
    first = collect_candidates(overlay, pods[0], policy, settings, now, nodes=nodes, strategy=strategy)
    out = Placed(nodes=[], first=first, refusals={}, warnings=[])
    warnings = dict.fromkeys(first.warnings)
    placed = 0
    if local_only and first.error is None and count:
        placed = _greedy_local(overlay, pods, policy, strategy, settings, now, count, first.candidates, out.nodes)
    step: CandidateSet | None = first if placed == 0 else None
    while placed < count:
        if step is None:
            step = collect_candidates(overlay, pods[placed], policy, settings, now, nodes=nodes, strategy=strategy)
            warnings.update(dict.fromkeys(step.warnings))
        if step.error is not None:
            out.refusals[placed] = step
            out.nodes.append(None)
            if stop_at_failure:
                break
        else:
            winner = rank(step, pods[placed], strategy)[0]
            overlay.place(pods[placed], winner)
            out.nodes.append(winner)
        placed += 1
        step = None
    out.warnings = list(warnings)
    return out


def _greedy_local(overlay: Overlay, pods: Sequence[PodInfo], policy: PlacementPolicy | None,
                  strategy: Strategy | None, settings: Settings, now: float, count: int,
                  candidates: list[Candidate], into: list[str | None]) -> int:
    """Place pods with a heap while each placement changes only its own node's verdict. Stops
    (returning how many it placed) when the heap runs dry, leaving the rest to the full path."""
    key = rank_key(strategy, pods[0])
    heap = [(key(c), c.name) for c in candidates]
    heapq.heapify(heap)
    placed = 0
    while placed < count and heap:
        _, name = heapq.heappop(heap)
        overlay.place(pods[placed], name)
        into.append(name)
        placed += 1
        if placed == count:
            break
        again = collect_candidates(overlay, pods[placed], policy, settings, now, nodes=[name], strategy=strategy)
        if again.candidates:
            heapq.heappush(heap, (key(again.candidates[0]), name))
    return placed


def _shape(pod: PodInfo) -> tuple[object, ...]:
    """What a pod's judgement depends on besides the cluster: pods alike here are judged alike."""
    return (tuple(sorted(pod.requests.items())), pod.sleepy, pod.constraint_signature(), pod.namespace,
            tuple(sorted((k, v) for k, v in pod.labels.items() if k not in CONTROLLER_LABELS)))


def _nth(pod: PodInfo, i: int) -> PodInfo:
    """The i-th pod of the round: same shape and labels, its own identity."""
    return pod if i == 0 else replace(pod, uid=f"{pod.uid}~{i}", name=f"{pod.name}~{i}")


@dataclass
class Placement:
    """What :func:`place_pods` placed."""

    nodes: dict[str, int] = field(default_factory=dict)  # node -> pods placed there, in order of first use
    placed: int = 0
    warnings: list[str] = field(default_factory=list)  # the first pod's
    stopped: Decision | None = None  # the decision for the pod that found no node, if one did


def place_pods(view: ClusterView, pod: PodInfo, policy: PlacementPolicy | None, settings: Settings, now: float,
               count: int, *, quota: Mapping[str, int] | None = None,
               placed: Callable[[], None] | None = None) -> Placement:
    """Place ``count`` pods shaped like ``pod`` on ``view`` one after another, each assumed on the
    node :func:`evaluate_pod` (the extender's filter) ranks first, stopping at the first pod that
    finds no node. ``quota``: a Fill or Each round's plan (required for them), spent as the
    extender spends it. ``placed`` is called after each pod placed.

    Each pod costs what the view's incremental tables make it cost, not a judgement of every node:
    after the first pod, the nodes that pass the checks a node decides alone wait in a heap by the
    strategy's key (the plan's order under a quota); a pod takes the first of them that the checks
    reading other nodes' pods (topology spread, placement rules) leave standing, which is the node
    the full judgement ranks first, and only that node is judged again. When none is left standing
    (or ScheduleAnyway spread scores every node anew), the pod is judged in full by
    :func:`evaluate_pod`."""
    settings = settings.for_policy(policy)
    strategy = effective_strategy(policy, settings)
    if strategy in ROUND_STRATEGIES and policy is not None and quota is None:
        raise ValueError(f"{strategy.value} places pods only within a round's plan (quota)")
    left = dict(quota) if quota is not None else None
    result = Placement()
    # Incremental while no ScheduleAnyway spread scores every node anew, and the index is on.
    incremental = settings.indexed and ((spread := spread_context(view, pod, policy)) is None or not spread.soft)
    key = rank_key(strategy, pod) if left is None else _in_plan_order(left)
    heap: list[tuple[tuple[object, ...], str]] = []
    keys: dict[str, tuple[object, ...]] = {}  # each node's entry in the heap that still holds
    ready = False  # the heap holds every node standing (from the second pod on, when incremental)

    def judge(one: PodInfo, nodes: list[str] | None) -> None:
        quota = {n: left[n] for n in nodes if n in left} if left is not None and nodes is not None else left
        for c in collect_candidates(view, one, policy, settings, now, nodes=nodes, quota=quota, strategy=strategy,
                                    room_only=True).candidates:
            keys[c.name] = entry = key(c)
            heapq.heappush(heap, (entry, c.name))

    for i in range(count):
        one = _nth(pod, i)
        winner = _first_standing(heap, keys, shared_refusals(view, one, policy)) if ready else None
        if winner is None:
            decision = evaluate_pod(view, one, policy, settings, now, quota=left).decision
            if i == 0:
                result.warnings = list(decision.warnings)
            winner = decision.winner
            if winner is None:
                result.stopped = decision
                break
        view.assume(one, winner)
        result.nodes[winner] = result.nodes.get(winner, 0) + 1
        result.placed += 1
        if left is not None:
            left[winner] -= 1
        if placed is not None:
            placed()
        if incremental and i + 1 < count:
            keys.pop(winner, None)
            judge(_nth(pod, i + 1), [winner] if ready else None)
            ready = True
    return result


def _in_plan_order(plan: Mapping[str, int]) -> Callable[[Candidate], tuple[object, ...]]:
    """A round's ranking as a key: the plan's order (:func:`rank` with a quota)."""
    position = {name: i for i, name in enumerate(plan)}

    def key(c: Candidate) -> tuple[object, ...]:
        return (position[c.name], c.name)

    return key


def _first_standing(heap: list[tuple[tuple[object, ...], str]], keys: dict[str, tuple[object, ...]],
                    refused: list[AbstractSet[str]]) -> str | None:
    """The heap's first node that no set of ``refused`` holds (taken out of the heap), or None;
    entries whose node was judged again since are dropped."""
    held = []
    winner = None
    while heap:
        entry = heapq.heappop(heap)
        if keys.get(entry[1]) != entry[0]:
            continue
        if any(entry[1] in group for group in refused):
            held.append(entry)
            continue
        winner = entry[1]
        break
    for entry in held:
        heapq.heappush(heap, entry)
    return winner
