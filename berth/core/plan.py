"""The plan of a round: N pods of one workload, a node -> count map and the decision behind it,
and the one greedy placer every round goes through (:func:`place_in_turn`).

Greedy strategies place pod after pod, each on the node :func:`~berth.core.evaluate.rank` puts
first with the earlier pods of the round counted: the plan is by construction what the extender
does pod by pod. The same placer counts a plan's pods on an overlay of the view, ``berth
simulate``'s on the view itself (its cluster fills up workload after workload), a drain's on the
drain's overlay, limited to its destinations; what differs between them is a parameter of the
placer, not a placer of its own (docs/behaviour.md#rounds).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import overload

from berth.core import index
from berth.core.candidates import CandidateSet
from berth.core.decision import Decision, Refused
from berth.core.errors import PlacementError
from berth.core.evaluate import effective_strategy, rank
from berth.core.fit import unverified_warning
from berth.core.framework import collect_candidates
from berth.core.model import PodInfo
from berth.core.policy import ROUND_STRATEGIES, PlacementPolicy, Strategy
from berth.core.round import plan_fixed_round
from berth.core.settings import Settings
from berth.core.view import ClusterState, ClusterView


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
    overlay = view.overlay()
    placed = place_in_turn(overlay, replicas(pod, max(count, 1)), policy, settings, now, put=overlay.place,
                           count=count, stop_at_failure=True)
    first = placed.first
    decision = _decision(pod, policy, strategy, first.considered, first)
    decision.ranking = placed.ranking if placed.ranking is not None else rank(first, pod, strategy)
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


class Replicas(Sequence[PodInfo]):
    """``size`` pods shaped like ``pod``, the first ``pod`` itself, each other one its own identity
    (``name~i``), made when read: a round of thousands costs nothing before its pods are placed."""

    def __init__(self, pod: PodInfo, size: int) -> None:
        self.pod = pod
        self.size = size

    def __len__(self) -> int:
        return self.size

    @overload
    def __getitem__(self, i: int) -> PodInfo: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[PodInfo]: ...

    def __getitem__(self, i: int | slice) -> PodInfo | Sequence[PodInfo]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self.size))]
        if not -self.size <= i < self.size:
            raise IndexError(i)
        i %= self.size
        return self.pod if i == 0 else self.pod.with_identity(f"{self.pod.uid}~{i}", f"{self.pod.name}~{i}")


def replicas(pod: PodInfo, count: int) -> Replicas:
    """The pods of a round of ``count`` pods shaped like ``pod`` (:class:`Replicas`)."""
    return Replicas(pod, count)


@dataclass
class Placed:
    """Pods placed one after another (:func:`place_in_turn`)."""

    nodes: list[str | None]
    """Each pod's node, in the pods' order; None where no node could take it. Shorter than the
    pods when placing stopped at the first failure."""
    first: CandidateSet
    """The first pod's judgement (before any pod of the turn was placed)."""
    refusals: dict[int, CandidateSet]
    """The judgement of each pod that no node could take, by its index: its refusals and error."""
    warnings: list[str]
    """Every pod's warnings (those its full judgement gives), each once, in the order they came."""
    ranking: list[str] | None = None
    """The first pod's judgement ranked with no quota (:func:`rank`), when the placer ranked it to
    place that pod: a plan's decision lists it rather than ranking every node a second time."""

    @property
    def failure(self) -> CandidateSet | None:
        return self.refusals[min(self.refusals)] if self.refusals else None


def place_in_turn(state: ClusterState, pods: Sequence[PodInfo], policy: PlacementPolicy | None, settings: Settings,
                  now: float, *, put: Callable[[PodInfo, str], object], count: int | None = None,
                  nodes: Sequence[str] | None = None, quota: Mapping[str, int] | None = None,
                  stop_at_failure: bool = False, placed: Callable[[], None] | None = None) -> Placed:
    """Place ``pods`` one after another, each on the node :func:`rank` puts first with the earlier
    ones counted: the one greedy placer of berth (a greedy round's plan, ``berth simulate``, a
    drain's round). The first pod is always judged (it is the plan's decision), ``count`` of them
    placed (default: all; 0 judges the first only).

    What each caller decides:

    - ``put``: how a pod is counted on its node, on ``state``: ``Overlay.place`` for a what-if
      (a plan, a drain), ``ClusterView.assume`` to keep it (simulate's cluster fills up);
    - ``nodes``: where the pods may go (default: every node; a drain's destinations);
    - ``quota``: a Fill or Each round's plan (required for them), spent as the extender spends it:
      the pods follow the plan's order;
    - ``stop_at_failure``: a pod no node can take ends the turn (a round stops there), or is left
      out with its judgement kept and the next pod tried (a drain blocks that pod only);
    - ``placed``: called after each pod placed.

    ``settings`` are the cluster's (the policy's overrides are applied here). With the index on,
    pods alike, enough of them to pay for it (:func:`berth.core.index.worth_keeping`), are placed
    through the nodes left standing between them (:mod:`berth.core.index.standing`), not judged in
    full one by one; the answers are the same."""
    settings = settings.for_policy(policy)
    if settings.index is None:  # the environment's switch, read once for the turn, not at each judgement
        settings = replace(settings, index=settings.indexed)
    strategy = effective_strategy(policy, settings)
    if strategy in ROUND_STRATEGIES and policy is not None and quota is None:
        raise ValueError(f"{strategy.value} places pods only within a round's plan (quota)")
    count = len(pods) if count is None else count
    left = dict(quota) if quota is not None else None

    def judge(pod: PodInfo, among: Sequence[str] | None = nodes, room_only: bool = False) -> CandidateSet:
        # A node judged again reads its own place in the plan only, not the whole plan.
        quota = left if left is None or among is None or among is nodes else {n: left[n] for n in among if n in left}
        return collect_candidates(state, pod, policy, settings, now, nodes=among, quota=quota, strategy=strategy,
                                  room_only=room_only)

    first = judge(pods[0])
    out = Placed(nodes=[], first=first, refusals={}, warnings=[])
    warnings = dict.fromkeys(first.warnings)
    kept = None
    if (settings.indexed and index.worth_keeping(state, count)
            and (isinstance(pods, Replicas) or index.alike(pods[:count]))):
        kept = index.standing_nodes(state, pods[0], policy, strategy, left)
    ready = False  # the heap holds every node left standing (once a pod was placed)
    # With no spread constraint and no rule, the first pod's candidates are the nodes left standing.
    seeded = policy is None or not (policy.spread_constraints or policy.rules)
    position: dict[str, int] | None = None  # where each node is in the order the judgement lists them
    following: PodInfo | None = None  # pods[i + 1], made once: each replica of a round is a new object
    for i in range(count):
        pod = pods[i] if following is None else following
        following = None
        winner = None
        if kept is not None and ready:
            refused = index.shared_refusals(state, pod, policy)
            winner = kept.first(refused)
            if winner is not None and (unverified := kept.take_unverified(refused)):
                # The warnings the full judgement would give: one for each candidate of unknown capacity.
                if position is None:
                    position = {name: n for n, name in enumerate(sorted(state.nodes) if nodes is None else nodes)}
                unverified.sort(key=lambda c: position[c.name])
                warnings.update((unverified_warning(c.name, c.unverified), None) for c in unverified)
        if winner is None:
            step = first if i == 0 else judge(pod)
            if i:
                warnings.update(dict.fromkeys(step.warnings))
            if step.error is not None:
                out.refusals[i] = step
                out.nodes.append(None)
                if stop_at_failure:
                    break
                continue
            ranking = rank(step, pod, strategy, left)
            if i == 0 and left is None:
                out.ranking = ranking
            winner = ranking[0]
        put(pod, winner)
        out.nodes.append(winner)
        if left is not None:
            left[winner] -= 1
        if placed is not None:
            placed()
        if kept is not None and i + 1 < count:
            following = pods[i + 1]
            if ready:
                kept.forget(winner)
                kept.add(judge(following, [winner], room_only=True).candidates)
            elif i == 0 and seeded:
                kept.add(first.candidates)
                kept.forget(winner)
                kept.add(judge(following, [winner], room_only=True).candidates)
            else:
                kept.add(judge(following, room_only=True).candidates)
            ready = True
    out.warnings = list(warnings)
    return out
