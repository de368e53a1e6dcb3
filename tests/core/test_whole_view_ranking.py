"""A judgement of the whole view ranks its candidates as the view's kept order less the nodes
refused (``CandidateSet.rest_of``) only when the candidates are exactly those, and then ranks
and warns exactly as the plain path; otherwise it ranks as before."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest

from berth.core import candidates as candidate_set
from berth.core.evaluate import evaluate_pod
from berth.core.framework import collect_candidates
from berth.core.model import NodeInfo, PodInfo
from berth.core.plugins import score
from berth.core.policy import PlacementPolicy
from berth.core.settings import Settings
from tests.builders import make_node, make_pod

from .builders import NOW, cluster, judged, scenario_policy

ZONE = "topology.kubernetes.io/zone"


def zoned(name: str, zone: str) -> NodeInfo:
    return make_node(name).labels({ZONE: zone}).info()


NODES = (zoned("a", "z1"), zoned("b", "z2"), zoned("c", "z1"), zoned("d", "z2"))
WEB = make_pod("web-0").info()

WHOLE_VIEW = [
    # (name, nodes, running pods, policy spec, judged nodes, the nodes left out of the order, or None)
    ("every node a candidate: the whole order", NODES, (), {"strategy": "Spread"}, None, set()),
    ("refused nodes are left out of the order",
     (*NODES, make_node("e").cordoned().info(), make_node("f").cpu("50m").info()), (),
     {"strategy": "Auto"}, None, {"e", "f"}),
    ("pods of the workload change the order, not the candidates",
     NODES, (make_pod("w1").on("a").info(), make_pod("w2").on("a").info(), make_pod("w3").on("d").info()),
     {"strategy": "Auto"}, None, set()),
    ("a node of unknown capacity warns: ranked by sorting", (*NODES, make_node("u").memory(None).info()), (),
     {"strategy": "Spread"}, None, None),
    ("ScheduleAnyway spread scores the candidates: ranked by sorting", NODES, (make_pod("w1").on("a").info(),),
     {"strategy": "Spread", "topologySpreadConstraints": [
         {"topologyKey": ZONE, "maxSkew": 1, "whenUnsatisfiable": "ScheduleAnyway"}]}, None, None),
    ("DoNotSchedule spread refuses nodes: left out", NODES, (make_pod("w1").on("a").info(),),
     {"strategy": "Spread", "topologySpreadConstraints": [
         {"topologyKey": ZONE, "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}]}, None, {"a", "c"}),
    ("a placement rule that breaks on some nodes: ranked by sorting",
     (*NODES, make_node("s").labels({"disk": "ssd"}).info()), (),
     {"strategy": "Spread", "placementRules": [{"resource": "Node", "operator": "Has", "labels": {"disk": "ssd"}}]},
     None, None),
    ("nodes named by the caller: ranked by sorting", NODES, (), {"strategy": "Spread"}, ["d", "b", "a"], None),
    ("every node named by the caller, in its own order: the whole order", NODES, (), {"strategy": "Spread"},
     ["d", "b", "c", "a"], set()),
    ("every node named by the caller, refused ones left out",
     (*NODES, make_node("e").cordoned().info(), make_node("f").cpu("50m").info()), (),
     {"strategy": "Auto"}, ["f", "c", "e", "a", "d", "b"], {"e", "f"}),
    ("as many names as nodes, one twice: ranked by sorting", NODES, (), {"strategy": "Spread"},
     ["a", "b", "c", "c"], None),
    ("as many names as nodes, one unknown: ranked by sorting", NODES, (), {"strategy": "Spread"},
     ["a", "b", "c", "ghost"], None),
]


def evaluated(nodes: tuple[NodeInfo, ...], pods: tuple[PodInfo, ...], pol: PlacementPolicy, indexed: bool,
              names: list[str] | None) -> dict[str, Any]:
    settings = Settings(index=indexed)
    with mock.patch.object(candidate_set, "ORDER_WORTH_IT", 0):  # rank through the kept order at any size
        ev = evaluate_pod(cluster(nodes, pods), WEB, pol, settings, NOW, nodes=names)
    return {**judged(ev.decision, ranking_limit=100), "passing": ev.passing}


@pytest.mark.parametrize(("nodes", "pods", "spec", "names", "left_out"), [c[1:] for c in WHOLE_VIEW],
                         ids=[c[0] for c in WHOLE_VIEW])
def test_whole_view_ranking_is_the_kept_order_less_the_refused_only_when_exact(
        nodes: tuple[NodeInfo, ...], pods: tuple[PodInfo, ...], spec: dict[str, Any], names: list[str] | None,
        left_out: set[str] | None, index_path: str) -> None:
    pol = scenario_policy(spec)
    view = cluster(nodes, pods)
    indexed = index_path == "indexed"
    result = collect_candidates(view, WEB, pol, Settings(index=indexed).for_policy(pol), NOW, nodes=names,
                                strategy=pol.strategy)
    # the plain path keeps no order, so never ranks through one
    assert result.rest_of == (left_out if indexed else None)
    assert evaluated(nodes, pods, pol, indexed, names) == evaluated(nodes, pods, pol, False, names)
    # made only when read, the candidates are the same, and so are their count and names
    lazy = collect_candidates(view, WEB, pol, Settings(index=indexed).for_policy(pol), NOW, nodes=names,
                              strategy=pol.strategy, lazy=True)
    assert lazy.count == len(result.candidates)
    assert lazy.passing() == [c.name for c in result.candidates]
    assert lazy.candidates == result.candidates
    assert (lazy.refused.by_node(), lazy.warnings, lazy.error) == (result.refused.by_node(), result.warnings,
                                                                  result.error)


NODES_COME_AND_GO = [
    # (name, change to the view after a first judgement, the nodes the next one considers)
    ("a node removed", lambda view: view.remove_node("b"), ["a", "c", "d"]),
    ("a node added", lambda view: view.upsert_node(zoned("e", "z1")), ["a", "b", "c", "d", "e"]),
    ("a node added before the others in name order", lambda view: view.upsert_node(zoned("0", "z1")),
     ["0", "a", "b", "c", "d"]),
    ("a node changed, none added or removed", lambda view: view.upsert_node(make_node("c").cordoned().info()),
     ["a", "b", "c", "d"]),
    ("a node removed that was not there", lambda view: view.remove_node("x"), ["a", "b", "c", "d"]),
]


@pytest.mark.parametrize(("change", "considered"), [c[1:] for c in NODES_COME_AND_GO],
                         ids=[c[0] for c in NODES_COME_AND_GO])
def test_a_judgement_of_the_whole_view_considers_the_nodes_there_now(
        change: Any, considered: list[str], index_path: str) -> None:
    pol = scenario_policy({"strategy": "Spread"})
    settings = Settings(index=index_path == "indexed")
    view = cluster(NODES)
    evaluate_pod(view, WEB, pol, settings, NOW)
    change(view)
    decision = evaluate_pod(view, WEB, pol, settings, NOW).decision
    assert decision.considered == considered
    assert judged(decision, ranking_limit=100) == judged(
        evaluate_pod(cluster(view.nodes.values()), WEB, pol, Settings(index=False), NOW).decision, ranking_limit=100)


IN_PLAN_ORDER = [
    # (name, nodes, running pods of the workload, policy spec)
    ("Fill tops up the fullest nodes first", NODES, (make_pod("w1").on("c").info(), make_pod("w2").on("c").info()),
     {"strategy": "Fill", "count": 3}),
    ("Fill with a node limit leaves the others off the plan", NODES, (make_pod("w1").on("b").info(),),
     {"strategy": "Fill", "count": 2, "nodesLimit": 2}),
    ("Fill where a cordoned node is refused", (*NODES, make_node("e").cordoned().info()), (),
     {"strategy": "Fill", "count": 1}),
    ("Each places one pod on every node", NODES, (make_pod("w1").on("d").info(),), {"strategy": "Each"}),
]


@pytest.mark.parametrize(("nodes", "pods", "spec"), [c[1:] for c in IN_PLAN_ORDER], ids=[c[0] for c in IN_PLAN_ORDER])
def test_a_rounds_whole_view_is_ranked_by_walking_its_plan_as_sorting_would(
        nodes: tuple[NodeInfo, ...], pods: tuple[PodInfo, ...], spec: dict[str, Any], index_path: str) -> None:
    pol = scenario_policy(spec)
    indexed = index_path == "indexed"
    # with the index, a whole view's round is never sorted, whether the caller names every node (in
    # an order of its own) or none; without it, always
    for names in (None, [node.name for node in reversed(nodes)]):
        with mock.patch.object(score, "rank", side_effect=AssertionError("sorted") if indexed else score.rank):
            got = evaluated(nodes, pods, pol, indexed, names)
        assert got == evaluated(nodes, pods, pol, False, names)
        assert got["ranking"], got  # a plan to walk
