"""The plan an executing drain keeps for its replacement pods (berth.core.drain_hold)."""

from __future__ import annotations

import pytest

from berth.core.drain_hold import NO_STEER, Hold, claim, honour_target, same_shape, steer
from berth.core.evaluate import Evaluation, evaluate_pod
from berth.core.model import NodeInfo, Owner, PodInfo, Taint
from berth.core.policy import PlacementPolicy
from berth.core.settings import Settings
from berth.core.view import ClusterView
from tests.core.builders import NOW, cluster, node, policy, web

RS = Owner("ReplicaSet", "web-1")
OTHER = Owner("ReplicaSet", "api-1")


def evicted(name: str = "w1", uid: str | None = None) -> PodInfo:
    return web(name, "a", controller=RS, uid=uid)


def hold(destination: str = "c", *, pod: PodInfo | None = None, explicit: bool = False,
         deadline: float = NOW + 300) -> Hold:
    return Hold("retire-a", pod or evicted(), destination, explicit, deadline)


SHAPES = [
    ("same workload and requests", web("r1", controller=RS), True),
    ("another controller", web("r1", controller=OTHER), False),
    ("no controller", web("r1"), False),
    ("another namespace", web("r1", controller=RS, namespace="other"), False),
    ("other requests", web("r1", controller=RS, cpu="200m"), False),
]


@pytest.mark.parametrize(("case", "replacement", "same"), SHAPES, ids=[c[0] for c in SHAPES])
def test_a_replacement_is_of_the_same_workload_and_shape(case: str, replacement: PodInfo, same: bool) -> None:
    assert same_shape(evicted(), replacement) is same


def test_claim_takes_the_first_hold_by_destination() -> None:
    holds = [hold("d", pod=evicted("w1", uid="u1")), hold("c", pod=evicted("w2", uid="u2"))]
    found = claim(holds, web("r1", controller=RS), NOW)
    assert found is not None and found.destination == "c"


def test_claim_skips_holds_another_pod_took() -> None:
    holds = [hold("d", pod=evicted("w1", uid="u1")), hold("c", pod=evicted("w2", uid="u2"))]
    found = claim(holds, web("r1", controller=RS), NOW, taken={"u2"})
    assert found is not None and found.destination == "d"


def test_claim_ignores_a_hold_past_its_deadline() -> None:
    assert claim([hold(deadline=NOW)], web("r1", controller=RS), NOW) is None


def test_steer_offers_a_claimed_hold_s_destination_alone() -> None:
    found = steer(web("r1", controller=RS), [hold("c")], {}, NOW)
    assert found.hold is not None and found.nodes(["a", "b", "c"]) == ["c"]


def test_steer_keeps_a_drained_workload_off_the_drained_nodes() -> None:
    found = steer(web("r1", controller=RS, cpu="200m"), [hold("c")], {("shop", RS): frozenset({"a"})}, NOW)
    assert found.hold is None and found.nodes(["a", "b", "c"]) == ["b", "c"]


def test_steer_says_nothing_about_other_workloads() -> None:
    assert steer(web("r1", controller=OTHER), [hold("c")], {("shop", RS): frozenset({"a"})}, NOW) is NO_STEER


def test_a_hold_s_placeholder_has_the_evicted_pod_s_shape() -> None:
    placeholder = hold().placeholder()
    assert placeholder.requests == evicted().requests and placeholder.node_name is None
    assert placeholder.uid != evicted().uid


def _evaluation_on(view_nodes: list[NodeInfo], target: str,
                   pol: PlacementPolicy) -> tuple[ClusterView, PodInfo, Evaluation]:
    view = cluster(view_nodes)
    replacement = web("r1", controller=RS)
    return view, replacement, evaluate_pod(view, replacement, pol, Settings(), NOW, nodes=[target])


def test_an_explicit_target_berth_refuses_is_honoured_with_a_warning() -> None:
    view, replacement, ev = _evaluation_on([node("a"), node("c")], "c", policy(nodeFilter={"excludes": ["c"]}))
    assert ev.decision.winner is None  # berth's own checks refuse it
    honour_target(view, replacement, hold("c", explicit=True), ev)
    assert ev.decision.winner == "c" and ev.passing == ["c"]
    assert any("excluded by nodeFilter.excludes" in w and "explicit target" in w for w in ev.decision.warnings)


def test_an_explicit_target_kube_scheduler_refuses_stays_refused() -> None:
    tainted = node("c", taints=[Taint("dedicated", "gpu", "NoSchedule")])
    view, replacement, ev = _evaluation_on([node("a"), tainted], "c", policy())
    honour_target(view, replacement, hold("c", explicit=True), ev)
    assert ev.decision.winner is None and "c" not in ev.passing


def test_a_destination_of_a_whole_node_drain_is_not_honoured_over_berth_s_checks() -> None:
    view, replacement, ev = _evaluation_on([node("a"), node("c")], "c", policy(nodeFilter={"excludes": ["c"]}))
    honour_target(view, replacement, hold("c", explicit=False), ev)
    assert ev.decision.winner is None
