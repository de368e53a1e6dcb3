"""The plan an executing drain keeps for its replacement pods (berth.core.drain_hold)."""

from __future__ import annotations

import pytest

from berth.core.drain_hold import (
    NO_STEER,
    Hold,
    claim,
    evicted_from_entry,
    honour_target,
    same_shape,
    shape_of,
    steer,
)
from berth.core.evaluate import Evaluation, evaluate_pod
from berth.core.model import NodeInfo, Owner, PodInfo, Taint
from berth.core.policy import PlacementPolicy
from berth.core.settings import Settings
from berth.core.view import ClusterView
from tests.builders import make_node, make_pod, make_policy
from tests.core.builders import NOW, cluster

RS = Owner("ReplicaSet", "web-1")
OTHER = Owner("ReplicaSet", "api-1")


def evicted(name: str = "w1", uid: str | None = None) -> PodInfo:
    return make_pod(name).on("a").owner(RS).uid(uid).info()


def hold(destination: str = "c", *, pod: PodInfo | None = None, explicit: bool = False,
         deadline: float = NOW + 300) -> Hold:
    return Hold("retire-a", pod or evicted(), destination, explicit, deadline)


SHAPES = [
    ("same workload and requests", make_pod("r1").owner(RS).info(), True),
    ("another controller", make_pod("r1").owner(OTHER).info(), False),
    ("no controller", make_pod("r1").info(), False),
    ("another namespace", make_pod("r1").owner(RS).namespace("other").info(), False),
    ("other requests", make_pod("r1").owner(RS).cpu("200m").info(), False),
]


@pytest.mark.parametrize(("case", "replacement", "same"), SHAPES, ids=[c[0] for c in SHAPES])
def test_a_replacement_is_of_the_same_workload_and_shape(case: str, replacement: PodInfo, same: bool) -> None:
    assert same_shape(evicted(), replacement) is same


def test_claim_takes_the_first_hold_by_destination() -> None:
    holds = [hold("d", pod=evicted("w1", uid="u1")), hold("c", pod=evicted("w2", uid="u2"))]
    found = claim(holds, make_pod("r1").owner(RS).info(), NOW)
    assert found is not None and found.destination == "c"


def test_claim_skips_holds_another_pod_took() -> None:
    holds = [hold("d", pod=evicted("w1", uid="u1")), hold("c", pod=evicted("w2", uid="u2"))]
    found = claim(holds, make_pod("r1").owner(RS).info(), NOW, taken={"u2"})
    assert found is not None and found.destination == "d"


def test_claim_ignores_a_hold_past_its_deadline() -> None:
    assert claim([hold(deadline=NOW)], make_pod("r1").owner(RS).info(), NOW) is None


def test_steer_offers_a_claimed_hold_s_destination_alone() -> None:
    found = steer(make_pod("r1").owner(RS).info(), [hold("c")], {}, NOW)
    assert found.hold is not None and found.nodes(["a", "b", "c"]) == ["c"]


def test_steer_keeps_a_drained_workload_off_the_drained_nodes() -> None:
    found = steer(make_pod("r1").owner(RS).cpu("200m").info(), [hold("c")], {("shop", RS): frozenset({"a"})}, NOW)
    assert found.hold is None and found.nodes(["a", "b", "c"]) == ["b", "c"]


def test_steer_says_nothing_about_other_workloads() -> None:
    assert steer(make_pod("r1").owner(OTHER).info(), [hold("c")], {("shop", RS): frozenset({"a"})}, NOW) is NO_STEER


def test_a_hold_s_placeholder_has_the_evicted_pod_s_shape() -> None:
    placeholder = hold().placeholder()
    assert placeholder.requests == evicted().requests and placeholder.node_name is None
    assert placeholder.uid != evicted().uid


def _evaluation_on(view_nodes: list[NodeInfo], target: str,
                   pol: PlacementPolicy) -> tuple[ClusterView, PodInfo, Evaluation]:
    view = cluster(view_nodes)
    replacement = make_pod("r1").owner(RS).info()
    return view, replacement, evaluate_pod(view, replacement, pol, Settings(), NOW, nodes=[target])


def test_an_explicit_target_berth_refuses_is_honoured_with_a_warning() -> None:
    view, replacement, ev = _evaluation_on([make_node("a").info(),
                                            make_node("c").info()], "c",
                                            make_policy().node_filter({"excludes": ["c"]}).build())
    assert ev.decision.winner is None  # berth's own checks refuse it
    honour_target(view, replacement, hold("c", explicit=True), ev)
    assert ev.decision.winner == "c" and ev.passing == ["c"]
    assert any("excluded by nodeFilter.excludes" in w and "explicit target" in w for w in ev.decision.warnings)


def test_an_explicit_target_kube_scheduler_refuses_stays_refused() -> None:
    tainted = make_node("c").taints([Taint("dedicated", "gpu", "NoSchedule")]).info()
    view, replacement, ev = _evaluation_on([make_node("a").info(), tainted], "c", make_policy().build())
    honour_target(view, replacement, hold("c", explicit=True), ev)
    assert ev.decision.winner is None and "c" not in ev.passing


def test_a_destination_of_a_whole_node_drain_is_not_honoured_over_berth_s_checks() -> None:
    view, replacement, ev = _evaluation_on([make_node("a").info(),
                                            make_node("c").info()], "c",
                                            make_policy().node_filter({"excludes": ["c"]}).build())
    honour_target(view, replacement, hold("c", explicit=False), ev)
    assert ev.decision.winner is None


def test_the_shape_a_status_keeps_gives_back_the_evicted_pod() -> None:
    """An extender that never saw an evicted pod rebuilds its hold from the drain status's entry."""
    pod = PodInfo(uid="uid-w1", name="w1", namespace="shop", labels={"app": "web", "tier": "front"},
                  requests={"cpu": 1500, "memory": 3 * 2**30 + 1, "nvidia.com/gpu": 1}, controller=RS)
    shape = shape_of(pod)
    assert shape == {"requests": {"cpu": "1500m", "memory": str(3 * 2**30 + 1), "nvidia.com/gpu": "1"},
                     "labels": {"app": "web", "tier": "front"}}
    entry = {"pod": "shop/w1", "uid": "uid-w1", "workload": "ReplicaSet/web-1", **shape}
    back = evicted_from_entry(entry)
    assert back is not None
    assert (back.uid, back.key, back.controller, dict(back.labels), dict(back.requests)) == \
        ("uid-w1", "shop/w1", RS, dict(pod.labels), dict(pod.requests))
    assert same_shape(back, PodInfo(uid="uid-r1", name="r1", namespace="shop", requests=dict(pod.requests),
                                    controller=RS))


FULL = {"pod": "shop/w1", "uid": "uid-w1", "workload": "ReplicaSet/web-1", "requests": {"cpu": "100m"}}


@pytest.mark.parametrize(("name", "entry"), [
    ("written before the status kept shapes", {k: v for k, v in FULL.items() if k != "requests"}),
    ("no controller", {k: v for k, v in FULL.items() if k != "workload"}),
    ("no uid", {k: v for k, v in FULL.items() if k != "uid"}),
    ("a pod without its namespace", {**FULL, "pod": "w1"}),
    ("a workload without its kind", {**FULL, "workload": "web-1"}),
    ("a request that is no quantity", {**FULL, "requests": {"cpu": "lots"}}),
    ("labels that are no map", {**FULL, "labels": ["app"]}),
])
def test_an_entry_without_a_readable_shape_gives_no_pod(name: str, entry: dict[str, object]) -> None:
    assert evicted_from_entry(entry) is None
