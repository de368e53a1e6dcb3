"""The nodes a round keeps standing between its pods (berth.core.index.standing) come out in the
order the full judgement ranks them: each greedy strategy's own order with every node of unknown
capacity after the others (docs/behaviour.md#unknown-capacity), a round's plan in its order, and a
node judged again in its new place. The placer keeps them only for turns long enough to pay for
the heap (that the answers are the same either way is a property: tests/core/test_properties.py)."""

from __future__ import annotations

import pytest

from berth.core import index
from berth.core.evaluate import rank
from berth.core.framework import collect_candidates
from berth.core.index import standing_nodes
from berth.core.index.standing import VIEW_WORTH_FROM, StandingNodes
from berth.core.plan import place_in_turn, replicas
from berth.core.policy import PlacementPolicy, Strategy
from berth.core.settings import Settings
from berth.core.view import ClusterView
from tests.builders import make_node, make_pod, make_policy

from .builders import NOW, cluster

GREEDY = [None, "Auto", "Global", "Drained", "Balanced", "Spread", "BestFit"]


def _cluster() -> ClusterView:
    """Nodes of several sizes, two of them reporting no memory (unknown capacity), pods on some."""
    nodes = [
        make_node("a").cpu("4").memory("8Gi").info(),
        make_node("b").cpu("8").memory("16Gi").info(),
        make_node("c").cpu("2").memory(None).info(),
        make_node("d").cpu("16").memory("8Gi").info(),
        make_node("e").cpu("8").memory(None).info(),
        make_node("f").cpu("4").memory("32Gi").info(),
    ]
    pods = [make_pod("p1").on("b").cpu("2").info(), make_pod("p2").on("d").memory("4Gi").info(),
            make_pod("p3").on("f").cpu("1").info(), make_pod("p4").on("e").cpu("3").info()]
    return cluster(nodes, pods)


def _drained(kept: StandingNodes) -> list[str]:
    out = []
    while (name := kept.first([])) is not None:
        out.append(name)
    return out


@pytest.mark.parametrize("strategy", GREEDY, ids=[s or "Default" for s in GREEDY])
def test_nodes_kept_standing_come_out_in_the_ranking_order_unknown_capacity_last(strategy: str | None) -> None:
    view = _cluster()
    pod = make_pod("new").cpu("500m").memory("256Mi").info()
    policy: PlacementPolicy = make_policy().strategy(strategy).build()
    chosen = Strategy(strategy) if strategy else None
    judged = collect_candidates(view, pod, policy, Settings(), NOW, strategy=chosen)
    kept = standing_nodes(view, pod, policy, chosen, None)
    assert kept is not None
    kept.add(judged.candidates)
    ranking = rank(judged, pod, chosen)
    assert _drained(kept) == ranking
    assert ranking[-2:] in (["c", "e"], ["e", "c"])  # unknown capacity last, whatever the strategy


def test_nodes_kept_standing_under_a_plan_come_out_in_the_plan_order_unknown_capacity_or_not() -> None:
    view = _cluster()
    pod = make_pod("new").cpu("500m").info()
    policy = make_policy().strategy("Fill").count(2).build()
    plan = {"e": 1, "a": 2, "c": 1, "f": 1}
    judged = collect_candidates(view, pod, policy, Settings(), NOW, strategy=Strategy.FILL, quota=plan)
    kept = standing_nodes(view, pod, policy, Strategy.FILL, plan)
    assert kept is not None
    kept.add(judged.candidates)
    assert _drained(kept) == rank(judged, pod, Strategy.FILL, plan) == ["e", "a", "c", "f"]


def test_a_node_judged_again_stands_in_its_new_place_only() -> None:
    view = _cluster()
    pod = make_pod("new").cpu("500m").memory("256Mi").info()
    policy = make_policy().strategy("Auto").build()
    judged = collect_candidates(view, pod, policy, Settings(), NOW, strategy=Strategy.AUTO)
    kept = standing_nodes(view, pod, policy, Strategy.AUTO, None)
    assert kept is not None
    kept.add(judged.candidates)
    winner = rank(judged, pod, Strategy.AUTO)[0]  # the first pod's node, its first entry still kept
    overlay = view.overlay()
    overlay.place(pod, winner)
    kept.forget(winner)
    again = collect_candidates(overlay, pod, policy, Settings(), NOW, nodes=[winner], strategy=Strategy.AUTO,
                               room_only=True)
    kept.add(again.candidates)
    whole = collect_candidates(overlay, pod, policy, Settings(), NOW, strategy=Strategy.AUTO)
    assert _drained(kept) == rank(whole, pod, Strategy.AUTO)


TURNS = [
    # name, placed on the view itself (else an overlay), pods in the turn, the heap made
    ("one_pod_on_the_view", True, 1, False),
    ("a_turn_too_short_to_pay_on_the_view", True, VIEW_WORTH_FROM - 1, False),
    ("a_turn_long_enough_on_the_view", True, VIEW_WORTH_FROM, True),
    ("one_pod_on_an_overlay", False, 1, False),
    ("two_pods_on_an_overlay", False, 2, True),
]


@pytest.mark.parametrize(("name", "on_view", "pods", "made"), TURNS, ids=[t[0] for t in TURNS])
def test_the_placer_keeps_nodes_standing_only_for_turns_that_pay_for_the_heap(
        monkeypatch: pytest.MonkeyPatch, name: str, on_view: bool, pods: int, made: bool) -> None:
    """On the view itself a full judgement reads the order its verdict table keeps, so a short turn
    (a nominator's few pods) is judged pod by pod; on an overlay a judgement makes every candidate,
    so the heap pays from the second pod."""
    view = _cluster()
    state = view if on_view else view.overlay()
    heaps: list[object] = []
    real = index.standing_nodes
    monkeypatch.setattr(index, "standing_nodes", lambda *a: heaps.append(a) or real(*a))
    pod = make_pod("new").cpu("100m").memory("64Mi").info()
    put = view.assume if on_view else state.place  # type: ignore[union-attr]
    placed = place_in_turn(state, replicas(pod, pods), make_policy().strategy("Auto").build(),
                           Settings(index=True), NOW, put=put)
    assert None not in placed.nodes and len(placed.nodes) == pods
    assert bool(heaps) is made
