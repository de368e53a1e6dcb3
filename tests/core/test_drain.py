"""Planning a drain or a move (:func:`berth.core.drain.plan_drain`): each affected pod's destination
under its PlacementPolicy, or why it is blocked, and the pods a drain leaves alone."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from berth.core.drain import DrainPlan, DrainRequest, InvalidDrain, PodPlan, PodState, plan_drain
from berth.core.kube import pod_from_object
from berth.core.model import LabelSelector, Owner, PodInfo, Taint
from berth.core.policy import PlacementPolicy
from berth.core.settings import Settings
from berth.core.view import ClusterView
from tests.builders import ZONE, NodeBuilder, PodBuilder, make_node, make_pod, make_policy

from .builders import NOW, cluster, evaluate

WEB = Owner("ReplicaSet", "web-7d9f")
API = Owner("ReplicaSet", "api-5c4b")


def web(name: str, at: str) -> PodBuilder:
    """A pod of the web Deployment's ReplicaSet, bound to ``at``."""
    return make_pod(name).on(at).owner(WEB)


def api(name: str, at: str) -> PodBuilder:
    return make_pod(name).on(at).labels({"app": "api"}).owner(API)


def zoned(name: str, zone: str) -> NodeBuilder:
    return make_node(name).zone(zone)


def drain(view: ClusterView, request: DrainRequest, pol: PlacementPolicy | None = None) -> DrainPlan:
    def policy_for(p: PodInfo) -> PlacementPolicy | None:
        return pol if pol is not None and pol.governs(p.namespace, p.labels) else None

    return plan_drain(view, request, policy_for, Settings(), NOW)


def by_pod(result: DrainPlan) -> dict[str, PodPlan]:
    return {p.pod.split("/", 1)[1]: p for p in result.pods}


@dataclass(frozen=True)
class Case:
    """One behaviour: a cluster and a drain in, each named pod's destination (or state) out."""

    name: str
    nodes: tuple[Any, ...]
    pods: tuple[PodInfo, ...]
    request: DrainRequest
    spec: Mapping[str, Any] | None = None
    destination: Mapping[str, str] = field(default_factory=dict)  # pod name -> node
    destination_in: Mapping[str, frozenset[str]] = field(default_factory=dict)  # pod name -> one of these
    state: Mapping[str, PodState] = field(default_factory=dict)
    never: frozenset[str] = frozenset()  # no pod may be planned here
    check: Callable[[DrainPlan], None] | None = None

    def __str__(self) -> str:
        return self.name


def _zone_counts(result: DrainPlan, view_pods: tuple[PodInfo, ...], zones: Mapping[str, str]) -> Counter[str]:
    moved = {p.uid for p in result.pods if p.state is PodState.PLANNED}
    counts = Counter(zones[p.node_name or ""] for p in view_pods if p.uid not in moved)
    counts.update(zones[p.destination or ""] for p in result.pods if p.state is PodState.PLANNED)
    return counts


SPREAD_NODES = (zoned("a1", "zone-a").info(),
                zoned("a2", "zone-a").info(),
                zoned("b1", "zone-b").info(),
                zoned("c1", "zone-c").info())
SPREAD_PODS = (web("w1", "a1").info(), web("w2", "a1").info(), web("w3", "b1").info(), web("w4", "c1").info(),
               # a2 is busy: the default ranking alone would send the pods to b1 and c1
               make_pod("batch").on("a2").cpu("3").labels({"app": "batch"}).owner(Owner("Job", "batch")).info())
SPREAD_ZONES = {"a1": "zone-a", "a2": "zone-a", "b1": "zone-b", "c1": "zone-c"}
ONE_PER_NODE = [{"resource": "Pod", "operator": "HasNot", "labels": {"app": "web"}}]


def _spread_held(result: DrainPlan) -> None:
    counts = _zone_counts(result, SPREAD_PODS[:4], SPREAD_ZONES)
    assert max(counts.values()) - min(counts.get(z, 0) for z in ("zone-a", "zone-b", "zone-c")) <= 1, counts


CASES = [
    Case("destinations_only: the pods go only to the named destinations, though c has more room",
         nodes=(make_node("a").info(), make_node("b").info(), make_node("c").cpu("64").memory("256Gi").info()),
         pods=(web("w1", "a").info(), web("w2", "a").info()),
         request=DrainRequest(nodes=("a",), destinations=("b",)),
         destination={"w1": "b", "w2": "b"}),
    Case("destinations_by_selector: the nodes the destination selector matches",
         nodes=(make_node("a").info(), zoned("b", "zone-b").info(), zoned("c", "zone-c").cpu("64").info()),
         pods=(web("w1", "a").info(),),
         request=DrainRequest(nodes=("a",), destination_selector=LabelSelector({ZONE: "zone-b"})),
         destination={"w1": "b"}),
    Case("any_destination: every node but the drained one, spread by the default ranking",
         nodes=(make_node("a").info(), make_node("b").info(), make_node("c").info()),
         pods=(web("w1", "a").info(), web("w2", "a").info()),
         request=DrainRequest(nodes=("a",), any_destination=True),
         destination_in={"w1": frozenset({"b", "c"}), "w2": frozenset({"b", "c"})},
         check=lambda r: (
             assert_equal({p.destination for p in r.pods}, {"b", "c"}),
             assert_equal(r.destinations, ["b", "c"]))),
    Case("never_the_source: the drained node is never chosen, though it has the most room",
         nodes=(make_node("a").cpu("64").memory("256Gi").info(), make_node("b").info(), make_node("c").info()),
         pods=(web("w1", "a").info(), web("w2", "a").info(), web("w3", "a").info()),
         request=DrainRequest(nodes=("a",), any_destination=True),
         never=frozenset({"a"})),
    Case("never_a_drained_node: two drained nodes never take each other's pods",
         nodes=(make_node("a").cpu("64").info(), make_node("b").cpu("64").info(), make_node("c").info()),
         pods=(web("w1", "a").info(), web("w2", "b").info()),
         request=DrainRequest(nodes=("a", "b"), any_destination=True),
         destination={"w1": "c", "w2": "c"}),
    Case("spread_held_across_moved_pods: DoNotSchedule sends a pod back into the emptied zone",
         nodes=SPREAD_NODES, pods=SPREAD_PODS,
         request=DrainRequest(nodes=("a1",), any_destination=True),
         spec={"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ZONE,
                                              "labelSelector": {"matchLabels": {"app": "web"}}}]},
         check=_spread_held),
    Case("rules_held_across_moved_pods: one web pod per node, the second moved pod sees the first "
         "(without the rule both would go to the roomy c)",
         nodes=(make_node("a").info(),
                make_node("b").info(),
                make_node("c").cpu("64").memory("256Gi").info(),
                make_node("d").info(),
                make_node("e").info()),
         pods=(web("w1", "a").info(), web("w2", "b").info(), web("w3", "c").info()),
         request=DrainRequest(nodes=("a", "b"), any_destination=True),
         spec={"placementRules": ONE_PER_NODE},
         check=lambda r: assert_equal(sorted(p.destination or "" for p in r.pods), ["d", "e"])),
    Case("moved_pod_does_not_count_against_itself: one per node, its own node emptied by the drain",
         nodes=(make_node("a").info(), make_node("b").info()),
         pods=(web("w1", "a").info(),),
         request=DrainRequest(nodes=("a",), destinations=("b",)),
         spec={"placementRules": ONE_PER_NODE},
         destination={"w1": "b"}),
    Case("daemonset_and_mirror_pods_left_alone",
         nodes=(make_node("a").info(), make_node("b").info()),
         pods=(web("w1", "a").info(),
               make_pod("agent").on("a").labels({"app": "agent"}).owner(Owner("DaemonSet", "agent")).info(),
               make_pod("etcd-a").on("a").labels({"app": "etcd"}).owner(Owner("Node", "a")).mirror().info()),
         request=DrainRequest(nodes=("a",), any_destination=True),
         destination={"w1": "b"}, state={"agent": PodState.LEFT, "etcd-a": PodState.LEFT}),
    Case("pod_without_controller_left_unless_included",
         nodes=(make_node("a").info(), make_node("b").info()),
         pods=(make_pod("lonely").on("a").info(),),
         request=DrainRequest(nodes=("a",), any_destination=True),
         state={"lonely": PodState.LEFT}),
    Case("pod_without_controller_moved_when_included",
         nodes=(make_node("a").info(), make_node("b").info()),
         pods=(make_pod("lonely").on("a").info(),),
         request=DrainRequest(nodes=("a",), any_destination=True, include_unmanaged=True),
         destination={"lonely": "b"}),
    Case("terminating_pod_left: it is already leaving",
         nodes=(make_node("a").info(), make_node("b").info()),
         pods=(web("w1", "a").terminating().info(),),
         request=DrainRequest(nodes=("a",), any_destination=True),
         state={"w1": PodState.LEFT}),
    Case("move_takes_only_the_selected_pods",
         nodes=(make_node("a").info(), make_node("b").info(), make_node("c").info()),
         pods=(web("w1", "a").info(), api("a1", "a").info()),
         request=DrainRequest(nodes=("a",), pods=LabelSelector({"app": "api"}), destinations=("b", "c")),
         check=lambda r: assert_equal([p.pod for p in r.pods], ["shop/a1"])),
    Case("fill_round_on_the_destinations: Fill tops each destination up to its count (3), in its plan's order",
         nodes=(make_node("a").info(), make_node("b").info(), make_node("c").info(), make_node("d").info()),
         pods=(web("w1", "a").info(), web("w2", "a").info(), web("w3", "a").info(), web("w4", "a").info()),
         request=DrainRequest(nodes=("a",), destinations=("b", "c")),
         spec={"strategy": "Fill", "count": 3, "nodesLimit": 2},
         check=lambda r: assert_equal(Counter(p.destination for p in r.pods), Counter({"b": 3, "c": 1}))),
    Case("fill_round_short_of_room_blocks_the_rest: Fill on one destination takes only its count",
         nodes=(make_node("a").info(), make_node("b").info()),
         pods=(web("w1", "a").info(), web("w2", "a").info(), web("w3", "a").info()),
         request=DrainRequest(nodes=("a",), destinations=("b",)),
         spec={"strategy": "Fill", "count": 2, "nodesLimit": 1},
         state={"w1": PodState.PLANNED, "w2": PodState.PLANNED, "w3": PodState.BLOCKED}),
]


def assert_equal(got: object, want: object) -> None:
    assert got == want, got


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name.split(":")[0])
def test_drain_plan(case: Case) -> None:
    view = cluster(case.nodes, case.pods)
    pol = make_policy().spec(**case.spec).build() if case.spec is not None else None
    result = drain(view, case.request, pol)
    found = by_pod(result)
    for name, where in case.destination.items():
        assert found[name].state is PodState.PLANNED, found[name]
        assert found[name].destination == where, found[name]
    for name, options in case.destination_in.items():
        assert found[name].destination in options, found[name]
    for name, state in case.state.items():
        assert found[name].state is state, found[name]
    for entry in result.pods:
        assert entry.destination not in case.never
        assert entry.destination not in case.request.nodes
    if case.check is not None:
        case.check(result)


def test_pod_that_fits_nowhere_is_blocked_with_every_destinations_shortfall() -> None:
    view = cluster([make_node("a").cpu("8").info(),
                    make_node("b").cpu("2").info(),
                    make_node("c").cpu("2").info()], [web("big", "a").cpu("3").info()])
    result = drain(view, DrainRequest(nodes=("a",), any_destination=True))
    entry = by_pod(result)["big"]
    assert entry.state is PodState.BLOCKED and entry.destination is None
    assert entry.code is not None and entry.code.value == "insufficient_resource"
    # the same message the fit check gives for each destination
    fit = evaluate(cluster([make_node("b").cpu("2").info(),
                            make_node("c").cpu("2").info()]),
                            make_pod("big").cpu("3").info()).decision.refused
    assert entry.refused == {"b": fit["b"].reason, "c": fit["c"].reason}
    assert entry.refused["b"] == "insufficient capacity: cpu: needs 3, 2 free of 2 allocatable (short by 1)"
    assert result.blocked


def test_two_workloads_competing_for_one_destination_never_overfill_it() -> None:
    """b has room for two 1-CPU pods: the first workload (by namespace and name) takes its room, the
    second gets what is left, and its other pod is blocked with b's shortfall."""
    view = cluster([make_node("a").info(), make_node("b").cpu("2").info()],
                   [api("api-1", "a").cpu("1").info(),
                    web("web-1", "a").cpu("1").info(),
                    web("web-2", "a").cpu("1").info()])
    result = drain(view, DrainRequest(nodes=("a",), destinations=("b",)))
    found = by_pod(result)
    assert found["api-1"].destination == "b"
    assert [found[n].state for n in ("web-1", "web-2")] == [PodState.PLANNED, PodState.BLOCKED]
    assert found["web-2"].refused == {"b": "insufficient capacity: cpu: needs 1, 0 free of 2 allocatable "
                                           "(short by 1)"}
    assert (result.count(PodState.PLANNED), result.count(PodState.BLOCKED)) == (2, 1)


def test_held_destinations_are_kept_and_their_room_counted_first() -> None:
    """An executing drain keeps the destination of a pod on its way (terminating once evicted): the
    pod is planned there, and the others are planned around the room it takes."""
    on_its_way = web("web-1", "a").cpu("2").terminating().info()
    view = cluster([make_node("a").info(),
                    make_node("b").cpu("2").info(),
                    make_node("c").cpu("2").info()], [on_its_way,
                    web("web-2", "a").cpu("2").info()])
    result = plan_drain(view, DrainRequest(nodes=("a",), any_destination=True), lambda _: None, Settings(), NOW,
                        {on_its_way.uid: "b"})
    found = by_pod(result)
    assert (found["web-1"].state, found["web-1"].destination) == (PodState.PLANNED, "b")
    assert (found["web-2"].state, found["web-2"].destination) == (PodState.PLANNED, "c")


def test_a_held_destination_no_longer_allowed_is_not_kept() -> None:
    moving = web("web-1", "a").cpu("2").info()
    view = cluster([make_node("a").info(), make_node("b").cpu("2").info(), make_node("c").cpu("2").info()], [moving])
    result = plan_drain(view, DrainRequest(nodes=("a",), destinations=("b",)), lambda _: None, Settings(), NOW,
                        {moving.uid: "c"})
    assert by_pod(result)["web-1"].destination == "b"


def test_explicit_move_target_is_honoured_with_a_warning_where_berth_refuses() -> None:
    view = cluster([make_node("a").info(), make_node("b").info(), make_node("c").info()], [web("w1", "a").info()])
    pol = make_policy().node_filter({"excludes": ["b"]}).build()
    result = drain(view, DrainRequest(nodes=("a",), pods=LabelSelector({"app": "web"}), destinations=("b",)), pol)
    entry = by_pod(result)["w1"]
    assert (entry.state, entry.destination) == (PodState.PLANNED, "b")
    assert any("excluded by nodeFilter.excludes" in w and "explicit target" in w for w in entry.warnings), \
        entry.warnings


def test_explicit_move_target_is_blocked_where_kube_scheduler_refuses() -> None:
    tainted = make_node("b").taints([Taint("dedicated", "gpu", "NoSchedule")]).info()
    view = cluster([make_node("a").info(), tainted], [web("w1", "a").info()])
    result = drain(view, DrainRequest(nodes=("a",), pods=LabelSelector({"app": "web"}), destinations=("b",)))
    entry = by_pod(result)["w1"]
    assert entry.state is PodState.BLOCKED
    assert entry.refused == {"b": "untolerated taint dedicated=gpu:NoSchedule"}


def test_named_destinations_without_a_pod_selector_are_not_an_explicit_target() -> None:
    """A whole-node drain to one destination still obeys berth's checks."""
    view = cluster([make_node("a").info(), make_node("b").info()], [web("w1", "a").info()])
    pol = make_policy().node_filter({"excludes": ["b"]}).build()
    entry = by_pod(drain(view, DrainRequest(nodes=("a",), destinations=("b",)), pol))["w1"]
    assert entry.state is PodState.BLOCKED
    assert entry.refused == {"b": "excluded by nodeFilter.excludes"}


def test_planning_never_changes_the_view() -> None:
    view = cluster([make_node("a").info(), make_node("b").info()], [web("w1", "a").info(), web("w2", "a").info()])
    before = {n: dict(view.requested(n)) for n in view.nodes}
    drain(view, DrainRequest(nodes=("a",), any_destination=True))
    assert {n: dict(view.requested(n)) for n in view.nodes} == before
    assert {p.node_name for p in view.all_pods()} == {"a"}


@pytest.mark.parametrize(("name", "request_", "field_name", "phrase"), [
    ("unknown_drained_node", DrainRequest(nodes=("zz",), any_destination=True), "nodes", "unknown node 'zz'"),
    ("node_selector_matches_nothing", DrainRequest(node_selector=LabelSelector({"x": "y"}), any_destination=True),
     "nodes", "matches no node"),
    ("nothing_to_drain", DrainRequest(any_destination=True), "nodes", "no node to drain"),
    ("unknown_destination", DrainRequest(nodes=("a",), destinations=("zz",)), "destinations", "unknown node 'zz'"),
    ("drained_destination", DrainRequest(nodes=("a",), destinations=("a",)), "destinations",
     "a drained node is never a destination"),
    ("no_destination", DrainRequest(nodes=("a",)), "destinations", "or allow any destination"),
    ("any_and_named", DrainRequest(nodes=("a",), destinations=("b",), any_destination=True), "anyDestination",
     "cannot be combined"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_invalid_drain_names_its_field(name: str, request_: DrainRequest, field_name: str, phrase: str) -> None:
    view = cluster([make_node("a").info(), make_node("b").info()], [web("w1", "a").info()])
    with pytest.raises(InvalidDrain) as caught:
        drain(view, request_)
    assert caught.value.field == field_name
    assert phrase in caught.value.problem, caught.value.problem


@pytest.mark.parametrize(("name", "meta", "controller", "mirror"), [
    ("controller_reference_read", {"ownerReferences": [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f", "uid": "u1", "controller": True}]},
     Owner("ReplicaSet", "web-7d9f"), False),
    ("owner_that_is_not_the_controller_ignored", {"ownerReferences": [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "uid": "u2"}]}, None, False),
    ("mirror_annotation_read", {"annotations": {"kubernetes.io/config.mirror": "abc"}}, None, True),
], ids=lambda v: v if isinstance(v, str) else "")
def test_pod_controller_and_mirror_read_from_the_object(name: str, meta: dict[str, Any], controller: Owner | None,
                                                        mirror: bool) -> None:
    obj = {"kind": "Pod", "metadata": {"name": "p", "namespace": "shop", **meta}, "spec": {"nodeName": "a"}}
    got = pod_from_object(obj)
    assert (got.controller, got.mirror) == (controller, mirror)


# --- invariants, on generated clusters -------------------------------------------------------------

OWNERS = [Owner("ReplicaSet", f"rs-{i}") for i in range(3)]


@st.composite
def drains(draw: st.DrawFn) -> tuple[ClusterView, DrainRequest]:
    names = [f"n{i}" for i in range(draw(st.integers(2, 6)))]
    nodes = [(make_node(n)
              .cpu(str(draw(st.integers(1, 6))))
              .memory(f"{draw(st.integers(1, 8))}Gi")
              .pods(str(draw(st.integers(1, 12))))
              .info()) for n in names]
    pods = []
    for i in range(draw(st.integers(0, 14))):
        owner = draw(st.sampled_from([*OWNERS, None]))
        pods.append(make_pod(f"p{i}")
                     .on(draw(st.sampled_from(names)))
                     .cpu(f"{draw(st.integers(1, 20)) * 100}m")
                     .memory(f"{draw(st.integers(1, 8)) * 128}Mi")
                     .labels({"app": owner.name if owner else f"bare-{i}"})
                     .owner(owner)
                     .info())
    drained = draw(st.lists(st.sampled_from(names), min_size=1, max_size=len(names) - 1, unique=True))
    rest = [n for n in names if n not in drained]
    if draw(st.booleans()):
        request = DrainRequest(nodes=tuple(drained), any_destination=True, include_unmanaged=draw(st.booleans()))
    else:
        chosen = draw(st.lists(st.sampled_from(rest), min_size=1, unique=True))
        request = DrainRequest(nodes=tuple(drained), destinations=tuple(chosen))
    view = ClusterView()
    for n in nodes:
        view.upsert_node(n)
    for p in pods:
        view.upsert_pod(p)
    return view, request


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=drains())
def test_a_drain_plan_never_overfills_a_destination_nor_uses_a_drained_node(
        case: tuple[ClusterView, DrainRequest]) -> None:
    view, request = case
    before = {n: dict(view.requested(n)) for n in view.nodes}
    result = drain(view, request)
    assert {n: dict(view.requested(n)) for n in view.nodes} == before  # the view is never changed
    affected = [p for n in request.nodes for p in view.pods_on(n)]
    assert sorted(p.pod for p in result.pods) == sorted(p.key for p in affected)  # each pod once
    allowed = set(result.destinations)
    assert not allowed & set(request.nodes)
    load = {n: dict(view.requested(n)) for n in view.nodes}
    for entry in result.pods:
        if entry.state is PodState.PLANNED:
            assert entry.destination in allowed
            moved = next(p for p in affected if p.uid == entry.uid)
            for dim, amount in (*moved.requests.items(), ("pods", 1)):
                load[entry.destination or ""][dim] = load[entry.destination or ""].get(dim, 0) + amount
        elif entry.state is PodState.BLOCKED:
            assert set(entry.refused) == allowed, entry  # every destination's refusal
    for name in allowed:
        alloc = view.nodes[name].allocatable
        for dim in ("cpu", "memory", "pods"):
            assert load[name].get(dim, 0) <= alloc[dim] or load[name].get(dim, 0) == before[name].get(dim, 0), \
                (name, dim, load[name], alloc)
