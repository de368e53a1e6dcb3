"""Invariants of the core, checked on generated clusters (hypothesis):

- a successful plan never takes a node over capacity (allocatable x overcommit, and the disk floor);
- the same inputs give the same plan and decision, whatever order nodes and pods were inserted in;
- a plan sums exactly to the count, or fails with an error and no plan;
- AUTO ends at the flattest distribution reachable from the current one;
- a greedy round equals placing its pods one at a time with evaluate_pod + ClusterView.assume,
  judged plainly (the index off);
- a drain's round (pods of one or several shapes on an overlay, limited to the destinations, a pod
  no node takes left out) places each pod where evaluate_pod would, with the index off;
- the one placer (place_in_turn) answers alike with the index on and off, whatever its caller asks;
- place_in_turn assuming its pods on the view (as ``berth simulate`` does), through the nodes the
  index keeps standing, places every pod where evaluate_pod + ClusterView.assume would with the
  index off, and stops at the same pod with the same judgement, for every strategy (Fill and Each
  within their round's plan);
- the index answers like the plain path: a long-lived view with its tables, orders and counts
  caught up through changes, an overlay, a capacity query, a request naming nodes berth has not seen;
- the refused nodes kept in groups (Refused) read exactly like a plain node -> refusal dict.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import berth.core.candidates as candidate_set
from berth.core.candidates import CandidateSet
from berth.core.capacity import capacity_table
from berth.core.decision import Decision, Refusal, Refused
from berth.core.errors import ErrorCode
from berth.core.evaluate import evaluate_pod
from berth.core.index.cluster import index_of
from berth.core.model import NodeInfo, PodInfo
from berth.core.plan import Placed, PlanResult, place_in_turn, plan_round, replicas
from berth.core.plugins import count_matching
from berth.core.plugins.fit import NodeUse, node_use
from berth.core.policy import ROUND_STRATEGIES, PlacementPolicy
from berth.core.quantity import CPU, DISK, MEMORY, PODS
from berth.core.round import Opening, open_round
from berth.core.settings import Settings
from berth.core.view import ClusterView
from tests.builders import ZONE, make_policy

from .builders import NOW, judged

GI = 2**30
MI = 2**20
NAMES = ["a", "b", "c", "d", "e", "f", "g", "h"]
GREEDY = ["Auto", "Global", "Drained", "Balanced", "Spread", "BestFit", None]
ALL_STRATEGIES = [*GREEDY, "Fill", "Each"]

PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@dataclass(frozen=True)
class World:
    """A generated cluster: nodes, the pods already on them, the settings in force."""

    nodes: tuple[NodeInfo, ...]
    pods: tuple[PodInfo, ...]
    settings: Settings

    def view(self, node_order: list[int] | None = None, pod_order: list[int] | None = None) -> ClusterView:
        view = ClusterView()
        for i in node_order if node_order is not None else range(len(self.nodes)):
            view.upsert_node(self.nodes[i])
        for i in pod_order if pod_order is not None else range(len(self.pods)):
            view.upsert_pod(self.pods[i])
        return view


def _limit(node: NodeInfo, resource: str, s: Settings) -> int | None:
    total = node.allocatable.get(resource)
    if total is None:
        return None
    if resource == DISK:
        return total - total * s.min_free_disk_percent // 100
    return total * s.overcommit_percent(resource) // 100


def _fits(node: NodeInfo, used: dict[str, int], p: PodInfo, s: Settings) -> bool:
    for resource in (CPU, MEMORY, DISK, PODS):
        limit = _limit(node, resource, s)
        need = 1 if resource == PODS else p.requests.get(resource, 0)
        if limit is not None and used.get(resource, 0) + need > limit:
            return False
    return True


@st.composite
def worlds(draw: st.DrawFn, *, unknown: bool = True, min_nodes: int = 1) -> World:
    names = draw(st.lists(st.sampled_from(NAMES), min_size=min_nodes, max_size=6, unique=True))
    nodes = []
    for name in names:
        labels = {"kubernetes.io/hostname": name}
        zone = draw(st.sampled_from(["z1", "z2", "z3", None]))
        if zone:
            labels[ZONE] = zone
        rack = draw(st.sampled_from(["r1", "r2", None]))
        if rack:
            labels["rack"] = rack
        if draw(st.booleans()):
            labels["disk"] = "ssd"
        alloc = {CPU: draw(st.sampled_from([1000, 2000, 4000, 8000])),
                 MEMORY: draw(st.sampled_from([1, 2, 4, 8])) * GI,
                 DISK: draw(st.sampled_from([10, 100])) * GI,
                 PODS: draw(st.sampled_from([1, 2, 3, 4, 6, 10, 30]))}
        if unknown and draw(st.integers(0, 9)) == 0:
            del alloc[draw(st.sampled_from([CPU, MEMORY, DISK]))]
        nodes.append(NodeInfo(name=name, labels=labels, allocatable=alloc, ready=True))
    s = Settings(cpu_overcommit_percent=draw(st.sampled_from([100, 150, 200])),
                 memory_overcommit_percent=draw(st.sampled_from([100, 120])),
                 min_free_disk_percent=draw(st.sampled_from([0, 10, 50])))
    used: dict[str, dict[str, int]] = {n.name: {} for n in nodes}
    pods = []
    for i in range(draw(st.integers(0, 20))):
        where = draw(st.sampled_from(nodes))
        p = PodInfo(uid=f"old-{i}", name=f"old-{i}", namespace=draw(st.sampled_from(["shop", "shop", "other"])),
                    labels=draw(st.sampled_from([{"app": "web"}, {"app": "web", "role": "db"}, {"app": "db"}, {}])),
                    requests=_requests(draw), node_name=where.name,
                    terminating=draw(st.integers(0, 9)) == 0, sleepy=draw(st.integers(0, 4)) == 0)
        if _fits(where, used[where.name], p, s):
            for resource, amount in (*p.requests.items(), (PODS, 1)):
                used[where.name][resource] = used[where.name].get(resource, 0) + amount
            pods.append(p)
    return World(tuple(nodes), tuple(pods), s)


def _requests(draw: st.DrawFn) -> dict[str, int]:
    out = {CPU: draw(st.sampled_from([0, 100, 250, 500, 1000])),
           MEMORY: draw(st.sampled_from([0, 64, 256, 512, 1024])) * MI,
           DISK: draw(st.sampled_from([0, 0, 0, 1, 5])) * GI}
    return {k: v for k, v in out.items() if v}


@st.composite
def new_pods(draw: st.DrawFn) -> PodInfo:
    return PodInfo(uid="new", name="new", namespace="shop", labels={"app": "web", "role": "db"},
                   requests=_requests(draw), sleepy=draw(st.integers(0, 4)) == 0)


@st.composite
def policies(draw: st.DrawFn, strategies: list[str | None], *, extras: bool = True,
             min_count: int = 0) -> PlacementPolicy:
    spec: dict[str, Any] = {}
    strategy = draw(st.sampled_from(strategies))
    if strategy:
        spec["strategy"] = strategy
    spec["nodesLimit"] = draw(st.integers(0, 3))
    spec["count"] = draw(st.integers(min_count, 6))
    if extras and draw(st.booleans()):
        spec["topologySpreadConstraints"] = [{
            "maxSkew": draw(st.integers(1, 2)), "topologyKey": ZONE,
            "whenUnsatisfiable": draw(st.sampled_from(["DoNotSchedule", "ScheduleAnyway"]))}]
    if extras and draw(st.booleans()):
        spec["placementRules"] = draw(st.sampled_from([
            [{"resource": "Pod", "operator": "HasNot", "labels": {"role": "db"}}],
            [{"resource": "Pod", "operator": "HasNot", "labels": {"role": "db"}, "within": "rack"}],
            [{"resource": "Node", "operator": "Has", "labels": {"disk": "ssd"}}],
            [{"anyOf": [{"resource": "Pod", "operator": "Has", "labels": {"app": "db"}},
                        {"resource": "Node", "operator": "HasNot", "labels": {"disk": "ssd"}}]}],
        ]))
        spec["affinityMatching"] = draw(st.sampled_from(["Enforced", "Preferred"]))
    return make_policy().spec(**spec).build()


def _round_count(pol: PlacementPolicy, drawn: int) -> int | None:
    """Fill and Each define their own round half the time; greedy rounds take the drawn count."""
    return None if pol.strategy_name in ("Fill", "Each") and drawn % 2 == 0 else drawn


def _apply(view: ClusterView, p: PodInfo, result: PlanResult) -> None:
    i = 0
    for node, n in result.plan.items():
        for _ in range(n):
            view.assume(replace(p, uid=f"applied-{i}", name=f"applied-{i}"), node)
            i += 1


def _check_capacity(world: World, p: PodInfo, pol: PlacementPolicy, count: int | None) -> None:
    view = world.view()
    result = plan_round(view, p, pol, world.settings, NOW, count)
    if result.error is not None:
        return
    _apply(view, p, result)
    s = world.settings.for_policy(pol)
    for node in world.nodes:
        if node.name not in result.plan:
            continue
        requested = view.requested(node.name)
        for resource in (CPU, MEMORY, PODS) + ((DISK,) if p.requests.get(DISK) else ()):
            limit = _limit(node, resource, s)
            if limit is not None:
                assert requested.get(resource, 0) <= limit, (node.name, resource, result.plan)


@PROPS
@given(world=worlds(), p=new_pods(), pol=policies(GREEDY), count=st.integers(0, 25))
def test_never_over_capacity_greedy(world: World, p: PodInfo, pol: PlacementPolicy, count: int) -> None:
    _check_capacity(world, p, pol, count)


@settings(PROPS, max_examples=300)
@given(world=worlds(), p=new_pods(), pol=policies(["Fill", "Each"], extras=False, min_count=1),
       count=st.integers(0, 25))
def test_never_over_capacity_fill_and_each(world: World, p: PodInfo, pol: PlacementPolicy, count: int) -> None:
    _check_capacity(world, p, pol, _round_count(pol, count))


@PROPS
@given(world=worlds(), p=new_pods(), pol=policies(ALL_STRATEGIES), count=st.integers(0, 25), data=st.data())
def test_deterministic_whatever_the_insertion_order(world: World, p: PodInfo, pol: PlacementPolicy, count: int,
                                                    data: st.DataObject) -> None:
    n = _round_count(pol, count)
    first = plan_round(world.view(), p, pol, world.settings, NOW, n)
    again = plan_round(world.view(), p, pol, world.settings, NOW, n)
    node_order = data.draw(st.permutations(range(len(world.nodes))))
    pod_order = data.draw(st.permutations(range(len(world.pods))))
    shuffled = plan_round(world.view(node_order, pod_order), p, pol, world.settings, NOW, n)
    for other in (again, shuffled):
        assert list(other.plan.items()) == list(first.plan.items())
        assert other.error == first.error
        assert judged(other.decision) == judged(first.decision)
    one = judged(evaluate_pod(world.view(), p, pol, world.settings, NOW).decision)
    assert judged(evaluate_pod(world.view(node_order, pod_order), p, pol, world.settings, NOW).decision) == one


@PROPS
@given(world=worlds(), p=new_pods(), pol=policies(ALL_STRATEGIES), count=st.integers(0, 25))
def test_plan_sums_to_the_count_or_fails(world: World, p: PodInfo, pol: PlacementPolicy, count: int) -> None:
    n = _round_count(pol, count)
    result = plan_round(world.view(), p, pol, world.settings, NOW, n)
    if result.error is None:
        assert all(v > 0 for v in result.plan.values())
        if n is not None:
            assert sum(result.plan.values()) == n
        assert result.decision.plan == result.plan
    else:
        assert result.plan == {}
        assert result.error.code in set(ErrorCode)
        assert result.error.message


@PROPS
@given(world=worlds(unknown=False), p=new_pods(), count=st.integers(1, 40))
def test_auto_ends_at_the_flattest_reachable_distribution(world: World, p: PodInfo, count: int) -> None:
    pol = make_policy().strategy("Auto").build()
    view = world.view()
    table = capacity_table(view, p, pol, world.settings, NOW)
    have = {n: count_matching(view, n, "shop", pol.selector) for n in view.nodes}
    result = plan_round(view, p, pol, world.settings, NOW, count)
    if table.total < count:
        assert result.error is not None and result.error.code is ErrorCode.INSUFFICIENT_RESOURCE
        return
    assert result.error is None, result.error
    # The lowest ceiling M such that topping every candidate up to M (within its room) holds count pods.
    room = {n: table.nodes.get(n, 0) for n in view.nodes}
    level = 0
    while sum(min(room[n], max(0, level - have.get(n, 0))) for n in room) < count:
        level += 1
    final = {n: have.get(n, 0) + result.plan.get(n, 0) for n in room}
    assert max(final[n] for n in result.plan) == level
    assert all(result.plan.get(n, 0) <= room[n] for n in room)


@PROPS
@given(world=worlds(), p=new_pods(), pol=policies(GREEDY), count=st.integers(0, 15))
def test_round_equals_pod_by_pod(world: World, p: PodInfo, pol: PlacementPolicy, count: int) -> None:
    batch = plan_round(world.view(), p, pol, _indexed(world.settings), NOW, count)
    view = world.view()
    placed: dict[str, int] = {}
    error = None
    for i in range(count):
        one = p if i == 0 else replace(p, uid=f"{p.uid}~{i}", name=f"{p.name}~{i}")
        decision = evaluate_pod(view, one, pol, _plain(world.settings), NOW).decision
        if decision.error is not None or not decision.ranking:
            error = decision.error
            break
        view.assume(one, decision.ranking[0])
        placed[decision.ranking[0]] = placed.get(decision.ranking[0], 0) + 1
    if batch.error is None:
        assert error is None, error
        assert list(batch.plan.items()) == list(placed.items())
    else:
        assert error is not None, (batch.error, placed)
        assert batch.error.code is error.code  # the round stops for the reason its next pod would


def _indexed(s: Settings) -> Settings:
    return replace(s, index=True)


def opened(opening: Opening) -> tuple[object, ...]:
    """What an opening decides: the round's plan in its order, and the decision's refusals and error."""
    decision = opening.decision
    return (None if opening.round is None else list(opening.round.plan.items()), judged(decision, ranking_limit=100),
            decision.plan)


def _plain(s: Settings) -> Settings:
    """The index off: every check over every node, nothing kept between evaluations."""
    return replace(s, index=False)


def _used(use: NodeUse) -> tuple[dict[str, int], int, int]:
    """A node's use, a resource requested 0 in all the same as one not requested."""
    return {k: v for k, v in use.requested.items() if v}, use.pod_count, use.sleepy_memory


def _rebuilt(view: ClusterView) -> ClusterView:
    """A fresh view with the same nodes, pods and leases: no memo, no cache, no history."""
    fresh = ClusterView(leases_tracked=view.leases_tracked)
    for name in sorted(view.nodes):
        fresh.upsert_node(view.nodes[name])
    for p in sorted(view.all_pods(), key=lambda p: p.uid):
        fresh.upsert_pod(p)
    for name, renewed in view.leases.items():
        fresh.set_lease(name, renewed)
    return fresh


@st.composite
def operations(draw: st.DrawFn, world: World) -> list[tuple[str, Any]]:
    ops: list[tuple[str, Any]] = []
    names = [n.name for n in world.nodes]
    for i in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["pod", "move", "remove", "assume", "terminate", "relabel", "resize",
                                     "down", "lease", "plan", "node gone", "node back"]))
        uid = draw(st.sampled_from([p.uid for p in world.pods] + [f"op-{i}"]))
        ops.append((kind, (uid, draw(st.sampled_from(names)), _requests(draw),
                           draw(st.sampled_from([{"app": "web"}, {"app": "web", "role": "db"}, {"app": "db"}])),
                           draw(st.sampled_from([NOW, NOW - 100, None])))))
    return ops


def _mutate(view: ClusterView, kind: str, arg: Any, p: PodInfo, pol: PlacementPolicy, s: Settings,
            world: World) -> None:
    uid, where, requests, labels, renewed = arg
    old = view.pod(uid)
    node = view.nodes.get(where)
    if kind == "node gone":  # its pods stay in the view until their deletions come
        if node is not None and len(view.nodes) > 1:
            view.remove_node(where)
    elif kind == "node back":
        if node is None:
            view.upsert_node(next(n for n in world.nodes if n.name == where))
    elif kind == "pod":
        view.upsert_pod(PodInfo(uid=uid, name=uid, namespace="shop", labels=labels, requests=requests,
                                node_name=where))
    elif kind == "move" and old is not None:
        view.upsert_pod(replace(old, node_name=where))
    elif kind == "remove":
        view.remove_pod(uid)
    elif kind == "assume":
        view.assume(PodInfo(uid=uid, name=uid, namespace="shop", labels=labels, requests=requests), where)
    elif kind == "terminate" and old is not None:
        view.upsert_pod(replace(old, terminating=True))
    elif kind == "relabel" and node is not None:
        flipped = dict(node.labels)
        if flipped.pop("disk", None) is None:
            flipped["disk"] = "ssd"
        flipped["rack"] = "r1" if node.labels.get("rack") != "r1" else "r2"
        view.upsert_node(replace(node, labels=flipped))
    elif kind == "resize" and node is not None:
        view.upsert_node(replace(node, allocatable={**node.allocatable, CPU: node.allocatable.get(CPU, 1000) * 2}))
    elif kind == "down" and node is not None:
        view.upsert_node(replace(node, ready=not node.ready))
    elif kind == "lease":
        view.leases_tracked = True
        view.set_lease(where, renewed)
    elif kind == "plan":
        plan_round(view, p, pol, s, NOW, 5)


def _ranking(*, through_order: bool) -> Any:
    """Rank and order every candidate set (a ranking, a Fill or Each plan) through the fit table's kept
    order, or by sorting it."""
    return mock.patch.object(candidate_set, "ORDER_WORTH_IT", 0 if through_order else 1 << 30)


STAMP = "2026-01-01T00:00:00Z"


def _pod_by_pod(view: ClusterView, p: PodInfo, pol: PlacementPolicy, s: Settings, count: int,
                quota: dict[str, int] | None) -> tuple[dict[str, int], object]:
    """Where evaluate_pod + assume put ``count`` pods, and the decision that stopped them (or None)."""
    placed: dict[str, int] = {}
    left = dict(quota) if quota is not None else None
    for i in range(count):
        one = p if i == 0 else replace(p, uid=f"{p.uid}~{i}", name=f"{p.name}~{i}")
        decision = evaluate_pod(view, one, pol, s, NOW, quota=left).decision
        if decision.winner is None:
            return placed, judged(decision)
        view.assume(one, decision.winner)
        placed[decision.winner] = placed.get(decision.winner, 0) + 1
        if left is not None:
            left[decision.winner] -= 1
    return placed, None


def _as_judged(stopped: CandidateSet, p: PodInfo, pol: PlacementPolicy) -> dict[str, Any]:
    """What the decision for a pod no node took says, read from its judgement (:func:`judged`)."""
    return judged(Decision(pod=p.key, policy=pol.key, strategy=pol.strategy_name,
                           considered=stopped.considered, refused=stopped.refused, warnings=stopped.warnings,
                           error=stopped.error, policy_generation=pol.generation))


@PROPS
@given(world=worlds(), p=new_pods(), pol=policies(ALL_STRATEGIES), count=st.integers(0, 25))
def test_placing_in_turn_on_the_view_places_where_the_filter_would(world: World, p: PodInfo, pol: PlacementPolicy,
                                                   count: int) -> None:
    quota = None
    if pol.strategy_name in ("Fill", "Each"):
        fixed = plan_round(world.view(), p, pol, world.settings, NOW, None)
        if fixed.error is not None:
            return
        quota = dict(fixed.plan)
    want, want_stop = _pod_by_pod(world.view(), p, pol, _plain(world.settings), count, quota)
    view = world.view()
    ticks: list[None] = []
    got = place_in_turn(view, replicas(p, max(count, 1)), pol, _indexed(world.settings), NOW, put=view.assume,
                        count=count, quota=quota, stop_at_failure=True, placed=lambda: ticks.append(None))
    placed: dict[str, int] = {}
    for node in got.nodes[:len(got.nodes) - len(got.refusals)]:
        assert node is not None
        placed[node] = placed.get(node, 0) + 1
    assert list(placed.items()) == list(want.items())
    assert len(ticks) == sum(want.values())
    stopped = (_as_judged(got.failure, replicas(p, count)[min(got.refusals)], pol) if got.failure is not None
               else None)
    assert stopped == want_stop
    for node, n in want.items():
        assert sum(1 for q in view.pods_on(node) if view.is_assumed(q.uid)) == n


@PROPS
@given(data=st.data(), world=worlds(min_nodes=2), p=new_pods(), pol=policies(GREEDY), count=st.integers(1, 12))
def test_a_drains_round_places_each_pod_where_the_filter_would(data: st.DataObject, world: World, p: PodInfo,
                                                               pol: PlacementPolicy, count: int) -> None:
    """A drain's round (pods of one workload, of one shape or several, on an overlay, limited to the
    destinations; a pod no destination takes is left out and the next one tried) places each pod
    where evaluate_pod with the index off would, with the same judgement for each pod left out."""
    destinations = sorted(data.draw(st.sets(st.sampled_from([n.name for n in world.nodes]), min_size=1),
                                    label="destinations"))
    bigger = data.draw(st.sets(st.integers(0, count - 1)), label="bigger pods")
    pods = [replace(p, uid=f"{p.uid}~{i}", name=f"{p.name}~{i}",
                    requests={**p.requests, CPU: p.requests.get(CPU, 0) + 500} if i in bigger else p.requests)
            for i in range(count)]
    overlay = world.view().overlay()
    want_nodes: list[str | None] = []
    want_left: dict[int, dict[str, Any]] = {}
    warnings: dict[str, None] = {}
    for i, one in enumerate(pods):
        decision = evaluate_pod(overlay, one, pol, _plain(world.settings), NOW, nodes=destinations).decision
        warnings.update(dict.fromkeys(decision.warnings))
        want_nodes.append(decision.winner)
        if decision.winner is None:
            want_left[i] = {"refused": dict(decision.refused.by_node()), "error": decision.error}
        else:
            overlay.place(one, decision.winner)
    overlay = world.view().overlay()
    got = place_in_turn(overlay, pods, pol, _indexed(world.settings), NOW, put=overlay.place, nodes=destinations)
    assert got.nodes == want_nodes
    assert {i: {"refused": dict(j.refused.by_node()), "error": j.error} for i, j in got.refusals.items()} == want_left
    assert got.warnings == list(warnings)


def _placed(placed: Placed) -> dict[str, Any]:
    def judged_set(j: CandidateSet) -> dict[str, Any]:
        return {"considered": j.considered, "refused": j.refused.by_node(), "warnings": j.warnings, "error": j.error,
                "candidates": [c.name for c in j.candidates]}
    return {"nodes": placed.nodes, "warnings": placed.warnings, "first": judged_set(placed.first),
            "refusals": {i: judged_set(j) for i, j in placed.refusals.items()}}


@PROPS
@given(data=st.data(), world=worlds(), p=new_pods(), pol=policies(ALL_STRATEGIES), count=st.integers(0, 25))
def test_placing_in_turn_answers_alike_with_the_index_on_and_off(data: st.DataObject, world: World, p: PodInfo,
                                                                  pol: PlacementPolicy, count: int) -> None:
    """The one placer, whatever its caller asks (some nodes only, a round's plan, stopping at the
    first pod no node takes or going on), places every pod, judges the first pod and each pod left
    out, and warns alike through the nodes the index keeps standing and judging every pod in full."""
    quota = None
    if pol.strategy_name in ("Fill", "Each"):
        fixed = plan_round(world.view(), p, pol, world.settings, NOW, None)
        if fixed.error is not None:
            return
        quota = dict(fixed.plan)
    names = [n.name for n in world.nodes]
    nodes = sorted(data.draw(st.sets(st.sampled_from(names), min_size=1), label="nodes")) \
        if data.draw(st.booleans(), label="some nodes") else None
    stop = data.draw(st.booleans(), label="stop at failure")
    answers = []
    for s in (_indexed(world.settings), _plain(world.settings)):
        overlay = world.view().overlay()
        answers.append(_placed(place_in_turn(overlay, replicas(p, max(count, 1)), pol, s, NOW, put=overlay.place,
                                             count=count, nodes=nodes, quota=quota, stop_at_failure=stop)))
    assert answers[0] == answers[1]


@PROPS
@given(data=st.data(), world=worlds(min_nodes=2), p=new_pods(), pols=st.lists(policies(ALL_STRATEGIES),
                                                                               min_size=1, max_size=3))
def test_indexed_answers_like_naive(data: st.DataObject, world: World, p: PodInfo,
                                    pols: list[PlacementPolicy]) -> None:
    """Whatever the index keeps between evaluations (verdict tables caught up from the view's change
    log, kept orders, domain sums, stale-lease heaps), a view that lived through changes, and
    through a clock that moves on and back, gives the same decisions and plans as the plain path,
    which judges every node afresh, and as the plain path on a view built from scratch. The
    indexed path ranks through the orders its fit tables keep, the plain one by sorting."""
    view = world.view()
    s = _indexed(world.settings)
    for pol in pols:
        evaluate_pod(view, p, pol, s, NOW)
    for kind, arg in data.draw(operations(world)):
        _mutate(view, kind, arg, p, pols[0], s, world)
        fresh = _rebuilt(view)
        at = data.draw(st.sampled_from([NOW, NOW + 30, NOW + 200, NOW - 30]))
        for pol in pols:
            with _ranking(through_order=True):
                got = judged(evaluate_pod(view, p, pol, s, at).decision, ranking_limit=100)
            want = judged(evaluate_pod(view, p, pol, _plain(s), at).decision, ranking_limit=100)
            assert got == want, (kind, pol.spec)
            assert judged(evaluate_pod(fresh, p, pol, _plain(s), at).decision, ranking_limit=100) == want
            with _ranking(through_order=True):  # a Fill or Each plan walks the kept order too
                got_plan = plan_round(view, p, pol, s, at, 3)
            want_plan = plan_round(fresh, p, pol, _plain(s), at, 3)
            assert got_plan.to_dict(STAMP) == want_plan.to_dict(STAMP), (kind, pol.spec)
            if pol.strategy in ROUND_STRATEGIES:  # a round for the pods waiting: Fill may stop its walk
                waiting = data.draw(st.integers(0, 4), label="waiting")
                got_open = opened(open_round(view, p, pol, s, at, waiting))
                assert got_open == opened(open_round(fresh, p, pol, _plain(s), at, waiting)), (kind, pol.spec)
        assert fresh.index is None  # the plain path keeps nothing on the view it reads
        kept = index_of(view)
        for name in view.nodes:
            assert _used(kept.use(name)) == _used(node_use(fresh, name)), (kind, name)


@PROPS
@given(world=worlds(), p=new_pods(), pol=policies(ALL_STRATEGIES), data=st.data())
def test_indexed_capacity_and_named_nodes_answer_like_naive(world: World, p: PodInfo, pol: PlacementPolicy,
                                                            data: st.DataObject) -> None:
    """The capacity query (room only) and an evaluation of some named nodes, among them nodes berth
    has not seen, a node deleted while its pods are still counted, and names given twice, answer
    alike with the index on and off."""
    view = world.view()
    evaluate_pod(view, p, pol, _indexed(world.settings), NOW)  # tables built before the questions
    if data.draw(st.booleans(), label="delete a node"):
        view.remove_node(data.draw(st.sampled_from([n.name for n in world.nodes]), label="deleted"))
    got = capacity_table(view, p, pol, _indexed(world.settings), NOW)
    want = capacity_table(view, p, pol, _plain(world.settings), NOW)
    assert got.to_dict() == want.to_dict()
    names = data.draw(st.lists(st.sampled_from([*NAMES, "gone"]), max_size=10), label="nodes")
    got_one = evaluate_pod(view, p, pol, _indexed(world.settings), NOW, nodes=names)
    want_one = evaluate_pod(view, p, pol, _plain(world.settings), NOW, nodes=names)
    assert judged(got_one.decision, ranking_limit=100) == judged(want_one.decision, ranking_limit=100)
    assert got_one.passing == want_one.passing


@PROPS
@given(data=st.data(), world=worlds(), p=new_pods(), pol=policies(GREEDY))
def test_an_overlay_without_some_pods_judges_like_a_view_without_them(data: st.DataObject, world: World,
                                                                       p: PodInfo, pol: PlacementPolicy) -> None:
    """Preemption judges a node as it would be with its victims gone (``Overlay.remove``): every
    node must be judged through the index exactly as the plain path judges it in a view that
    never had those pods."""
    gone = data.draw(st.lists(st.sampled_from(world.pods), unique_by=lambda q: q.uid), label="gone") \
        if world.pods else []
    view = world.view()
    for node in world.nodes:  # a long-lived view: its tables built before the overlay reads it
        evaluate_pod(view, p, pol, world.settings, NOW, nodes=[node.name])
    overlay = view.overlay()
    for victim in gone:
        overlay.remove(victim)
    without = world.view()
    for victim in gone:
        without.remove_pod(victim.uid)
    kept = index_of(overlay)
    for node in world.nodes:
        assert overlay.requested(node.name) == without.requested(node.name)
        assert _used(kept.use(node.name)) == _used(node_use(without, node.name))
        assert overlay.pod_count(node.name) == without.pod_count(node.name)
        assert {q.uid for q in overlay.pods_on(node.name)} == {q.uid for q in without.pods_on(node.name)}
        ours = evaluate_pod(overlay, p, pol, _indexed(world.settings), NOW, nodes=[node.name]).decision
        theirs = evaluate_pod(without, p, pol, _plain(world.settings), NOW, nodes=[node.name]).decision
        assert (ours.ranking, ours.refused, ours.error) == (theirs.ranking, theirs.refused, theirs.error), node.name
    everyone = evaluate_pod(overlay, p, pol, _indexed(world.settings), NOW).decision
    assert judged(everyone) == judged(evaluate_pod(without, p, pol, _plain(world.settings), NOW).decision)


REASONS = [Refusal("spread", True), Refusal("rule", False), Refusal("fit", True)]


@PROPS
@given(st.lists(st.tuples(st.integers(0, 40), st.sampled_from(REASONS)), max_size=6),
       st.permutations(range(200)), st.integers(1, 60))
def test_refusals_kept_in_groups_read_like_a_dict(batches: list[tuple[int, Refusal]], order: list[int],
                                                  limit: int) -> None:
    """Groups large and small (below Refused.GROUP_MIN they are kept node by node), each node once."""
    names = [f"n{i:03d}" for i in order]
    refused, plain = Refused(), {}
    start = 0
    for size, refusal in batches:
        batch = set(names[start:start + size])
        start += size
        if size == 1:
            refused.one(next(iter(batch)), refusal)
        else:
            refused.group(batch, refusal)
        plain.update(dict.fromkeys(batch, refusal))
    assert refused == plain and len(refused) == len(plain) and set(refused) == set(plain)
    assert all(refused[n] is plain[n] for n in plain) and "absent" not in refused
    assert refused.by_node() == sorted(plain.items())
    considered = sorted(names)
    kept = refused.first(considered, limit)
    expected = [n for n in considered if n in plain][:limit]
    assert list(kept) == expected and all(kept[n] is plain[n] for n in expected)
