"""Topology spread (docs/behaviour.md#topology-spread) with kube-scheduler's PodTopologySpread
semantics: the worked examples of the TopologySpreadConstraint API, skew against the global
minimum, minDomains, nodeAffinityPolicy / nodeTaintsPolicy, matchLabelKeys and ScheduleAnyway
scoring."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from berth.core.errors import ErrorCode, InvalidPolicy
from berth.core.model import NodeAffinity, Taint, Toleration
from tests.builders import HOSTNAME, ZONE, NodeBuilder, make_node, make_pod, make_policy

from .builders import Scenario, cluster, evaluate, plan, run, spread_pods


def zoned(name: str, zone: str) -> NodeBuilder:
    return make_node(name).zone(zone)


Z3 = (zoned("n1", "zone1").info(), zoned("n2", "zone2").info(), zoned("n3", "zone3").info())
ALL3 = frozenset({"n1", "n2", "n3"})


def tsc(max_skew: int = 1, when: str = "DoNotSchedule", **extra: Any) -> dict[str, Any]:
    return {"maxSkew": max_skew, "topologyKey": ZONE, "whenUnsatisfiable": when,
            "labelSelector": {"matchLabels": {"app": "web"}}, **extra}


def spec(*constraints: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"topologySpreadConstraints": list(constraints), **extra}


SSD_POD = replace(make_pod("new").info(), node_affinity=NodeAffinity(node_selector={"disk": "ssd"}))

SCENARIOS = [
    Scenario(
        "zones_1_1_0_max_skew_1_only_zone3",
        nodes=Z3, pods=tuple(spread_pods({"n1": 1, "n2": 1})), spec=spec(tsc(1)),
        passing=frozenset({"n3"}),
        refused={"n1": "placing here makes skew 2 in topology.kubernetes.io/zone=zone1 (maxSkew 1)",
                 "n2": "skew 2"},
    ),
    Scenario(
        "zones_1_1_0_max_skew_2_any_zone",
        nodes=Z3, pods=tuple(spread_pods({"n1": 1, "n2": 1})), spec=spec(tsc(2)), passing=ALL3,
    ),
    Scenario(
        "zones_3_1_1_only_zone2_or_zone3",
        nodes=Z3, pods=tuple(spread_pods({"n1": 3, "n2": 1, "n3": 1})), spec=spec(tsc(1)),
        passing=frozenset({"n2", "n3"}), refused={"n1": "skew 3"},
    ),
    Scenario(
        "skew_counts_every_node_of_a_domain",
        nodes=(zoned("n1a", "zone1").info(), zoned("n1b", "zone1").info(), zoned("n2", "zone2").info()),
        pods=tuple(spread_pods({"n1a": 1, "n1b": 1, "n2": 1})), spec=spec(tsc(1)),
        passing=frozenset({"n2"}),
    ),
    Scenario(
        "node_without_topology_key_is_refused_unresolvably",
        nodes=(*Z3, make_node("nozone").info()), spec=spec(tsc(1)),
        passing=ALL3, refused={"nozone": "node has no label topology.kubernetes.io/zone"},
    ),
    Scenario(
        "label_selector_counts_only_matching_pods",
        nodes=Z3, pods=tuple(spread_pods({"n1": 2}, labels={"app": "other"})), spec=spec(tsc(1)),
        passing=ALL3,
    ),
    Scenario(
        "absent_label_selector_uses_the_policy_selector",
        nodes=Z3, pods=tuple(spread_pods({"n1": 1, "n2": 1})),
        spec=spec({"maxSkew": 1, "topologyKey": ZONE}), passing=frozenset({"n3"}),
    ),
    Scenario(
        "pod_outside_the_selector_adds_no_self_match",
        # labelSelector app=db: the 1/1/0 db pods do not grow when a web pod lands, skew stays 1.
        nodes=Z3, pods=tuple(spread_pods({"n1": 1, "n2": 1}, labels={"app": "db"})),
        spec=spec({**tsc(1), "labelSelector": {"matchLabels": {"app": "db"}}}), passing=ALL3,
    ),
    Scenario(
        "terminating_pods_do_not_count_for_spread",
        nodes=Z3, pods=(make_pod("t1").on("n1").terminating().info(), make_pod("t2").on("n1").terminating().info()),
        spec=spec(tsc(1)), passing=ALL3,
    ),
    Scenario(
        "pods_of_other_namespaces_do_not_count_for_spread",
        nodes=Z3, pods=(make_pod("o1").on("n1").namespace("other").info(),
                        make_pod("o2").on("n1").namespace("other").info()),
        spec=spec(tsc(1)), passing=ALL3,
    ),
    Scenario(
        "min_domains_not_reached_makes_global_minimum_zero",
        # Two zones with 1/1 and minDomains 3: the global minimum is 0, so both zones would go to skew 2.
        nodes=Z3[:2], pods=tuple(spread_pods({"n1": 1, "n2": 1})), spec=spec(tsc(1, minDomains=3)),
        passing=frozenset(), error=ErrorCode.SPREAD_UNSATISFIED,
    ),
    Scenario(
        "spread_alone_refusing_every_node_with_room_is_spread_unsatisfied_with_the_skew",
        # n3 is full; n1 and n2 have room, but zone3 has no pods of the workload: skew 2 for both.
        nodes=(zoned("n1", "zone1").info(), zoned("n2", "zone2").info(), zoned("n3", "zone3").cpu("100m").info()),
        pods=(*spread_pods({"n1": 1, "n2": 1}), make_pod("x").on("n3").labels({}).info()), spec=spec(tsc(1)),
        passing=frozenset(), error=ErrorCode.SPREAD_UNSATISFIED,
        error_contains="n1: topology spread: placing here makes skew 2 in topology.kubernetes.io/zone=zone1",
        refused={"n3": "insufficient capacity"},
    ),
    Scenario(
        "spread_refusing_only_nodes_without_room_is_insufficient_resource",
        # Every node is full; spread refuses n1 and n2 too, but room is what is missing.
        nodes=(zoned("n1", "zone1").cpu("100m").info(),
               zoned("n2", "zone2").cpu("100m").info(),
               zoned("n3", "zone3").cpu("100m").info()),
        pods=(*spread_pods({"n1": 1, "n2": 1}), make_pod("x").on("n3").labels({}).info()), spec=spec(tsc(1)),
        passing=frozenset(), error=ErrorCode.INSUFFICIENT_RESOURCE,
    ),
    Scenario(
        "without_min_domains_same_cluster_fits",
        nodes=Z3[:2], pods=tuple(spread_pods({"n1": 1, "n2": 1})), spec=spec(tsc(1)),
        passing=frozenset({"n1", "n2"}),
    ),
    Scenario(
        "min_domains_reached_uses_the_real_minimum",
        nodes=Z3, pods=tuple(spread_pods({"n1": 1, "n2": 1, "n3": 1})), spec=spec(tsc(1, minDomains=3)),
        passing=ALL3,
    ),
    Scenario(
        "node_affinity_policy_honor_leaves_out_domains_the_pod_cannot_use",
        nodes=(zoned("n1", "zone1").labels({"disk": "ssd"}).info(), zoned("n2", "zone2").labels({"disk": "ssd"}).info(),
               zoned("n3", "zone3").info()),
        pods=tuple(spread_pods({"n1": 1, "n2": 1})), pod=SSD_POD, spec=spec(tsc(1)),
        passing=frozenset({"n1", "n2"}), refused={"n3": "nodeSelector"},
    ),
    Scenario(
        "node_affinity_policy_ignore_counts_every_domain",
        nodes=(zoned("n1", "zone1").labels({"disk": "ssd"}).info(), zoned("n2", "zone2").labels({"disk": "ssd"}).info(),
               zoned("n3", "zone3").info()),
        pods=tuple(spread_pods({"n1": 1, "n2": 1})), pod=SSD_POD,
        spec=spec(tsc(1, nodeAffinityPolicy="Ignore")),
        passing=frozenset(), refused={"n1": "skew 2", "n2": "skew 2"},
    ),
    Scenario(
        "node_affinity_policy_honor_applies_the_node_filter",
        nodes=Z3, pods=tuple(spread_pods({"n1": 1, "n2": 1})),
        spec=spec(tsc(1), nodeFilter={"excludes": ["n3"]}),
        passing=frozenset({"n1", "n2"}), refused={"n3": "excluded"},
    ),
    Scenario(
        "node_taints_policy_ignore_is_the_default_and_counts_tainted_domains",
        nodes=(zoned("n1", "zone1").info(), zoned("n2", "zone2").info(),
               zoned("n3", "zone3").taints((Taint("dedicated", "gpu", "NoSchedule"),)).info()),
        pods=tuple(spread_pods({"n1": 1, "n2": 1})), spec=spec(tsc(1)),
        passing=frozenset(), refused={"n1": "skew 2", "n3": "untolerated taint dedicated=gpu:NoSchedule"},
    ),
    Scenario(
        "node_taints_policy_honor_leaves_out_untolerated_tainted_domains",
        nodes=(zoned("n1", "zone1").info(), zoned("n2", "zone2").info(),
               zoned("n3", "zone3").taints((Taint("dedicated", "gpu", "NoSchedule"),)).info()),
        pods=tuple(spread_pods({"n1": 1, "n2": 1})), spec=spec(tsc(1, nodeTaintsPolicy="Honor")),
        passing=frozenset({"n1", "n2"}),
    ),
    Scenario(
        "node_taints_policy_honor_keeps_tolerated_tainted_domains",
        nodes=(zoned("n1", "zone1").info(), zoned("n2", "zone2").info(),
               zoned("n3", "zone3").taints((Taint("dedicated", "gpu", "NoSchedule"),)).info()),
        pods=tuple(spread_pods({"n1": 1, "n2": 1})),
        pod=make_pod("new").tolerations((Toleration("dedicated", "Equal", "gpu", "NoSchedule"),)).info(),
        spec=spec(tsc(1, nodeTaintsPolicy="Honor")),
        passing=frozenset({"n3"}),
    ),
    Scenario(
        "match_label_keys_count_only_the_pods_own_revision",
        # Two pods of the old revision in zone1; the new revision counts 0/0/0.
        nodes=Z3, pods=tuple(spread_pods({"n1": 2}, labels={"app": "web", "pod-template-hash": "v1"})),
        pod=make_pod("new").labels({"app": "web", "pod-template-hash": "v2"}).info(),
        spec=spec(tsc(1, matchLabelKeys=["pod-template-hash"])), passing=ALL3,
    ),
    Scenario(
        "without_match_label_keys_every_revision_counts",
        nodes=Z3, pods=tuple(spread_pods({"n1": 2}, labels={"app": "web", "pod-template-hash": "v1"})),
        pod=make_pod("new").labels({"app": "web", "pod-template-hash": "v2"}).info(),
        spec=spec(tsc(1)), passing=frozenset({"n2", "n3"}),
    ),
    Scenario(
        "schedule_anyway_never_filters",
        nodes=Z3, pods=tuple(spread_pods({"n1": 3})), spec=spec(tsc(1, "ScheduleAnyway")), passing=ALL3,
    ),
    Scenario(
        "schedule_anyway_prefers_the_emptier_zone",
        # The default ranking alone would pick the roomy n1 (most free share); spread prefers zone2.
        nodes=(zoned("n1", "zone1").cpu("64").memory("256Gi").info(), zoned("n2", "zone2").info()),
        pods=tuple(spread_pods({"n1": 3})), spec=spec(tsc(1, "ScheduleAnyway")),
        ranking=("n2", "n1"),
    ),
    Scenario(
        "schedule_anyway_outranks_the_strategy",
        nodes=(zoned("n1", "zone1").info(), zoned("n2", "zone2").info()),
        pods=tuple(spread_pods({"n1": 2})),
        spec=spec(tsc(1, "ScheduleAnyway"), strategy="BestFit"), ranking=("n2", "n1"),
    ),
]


@pytest.mark.parametrize("s", SCENARIOS, ids=str)
def test_topology_spread(s: Scenario) -> None:
    run(s)


def test_default_ranking_without_spread_picks_the_roomy_node() -> None:
    """The control case for schedule_anyway_prefers_the_emptier_zone."""
    view = cluster([zoned("n1", "zone1").cpu("64").memory("256Gi").info(),
                    zoned("n2", "zone2").info()], spread_pods({"n1": 3}))
    assert evaluate(view, make_pod("new").info(), make_policy().build()).decision.ranking == ["n1", "n2"]


def test_assumed_pods_count_for_spread() -> None:
    view = cluster(Z3, spread_pods({"n1": 1}))
    view.assume(make_pod("inflight").info(), "n2")
    decision = evaluate(view, make_pod("new").info(), make_policy().spec(**spec(tsc(1))).build()).decision
    assert decision.ranking == ["n3"]


def test_round_respects_spread_pod_by_pod() -> None:
    """1/1/0: the first pod must go to zone3; then 1/1/1 is level and the ranking decides."""
    view = cluster(Z3, spread_pods({"n1": 1, "n2": 1}))
    result = plan(view, make_pod("new").info(), make_policy().spec(**spec(tsc(1))).build(), count=3)
    assert result.error is None
    assert result.plan == {"n3": 1, "n1": 1, "n2": 1}
    assert list(result.plan) == ["n3", "n1", "n2"]


def test_round_stops_with_an_error_when_spread_cannot_be_kept() -> None:
    view = cluster(Z3[:2], spread_pods({"n1": 1, "n2": 1}))
    pol = make_policy().spec(**spec(tsc(1, minDomains=3))).build()
    result = plan(view, make_pod("new").info(), pol, count=1)
    assert result.plan == {} and result.error is not None
    assert result.error.code is ErrorCode.SPREAD_UNSATISFIED
    assert "skew 2" in result.error.message


def test_round_that_spread_stops_part_way_keeps_the_spread_code() -> None:
    """1/1/0, maxSkew 1, n1 and n2 with room for one more each: five pods reach 2/2/3, then n3 is the
    only node with room and a sixth there would make skew 2: spread, not room, stops the round."""
    nodes = (zoned("n1", "zone1").cpu("200m").info(),
             zoned("n2", "zone2").cpu("200m").info(),
             zoned("n3", "zone3").info())
    view = cluster(nodes, spread_pods({"n1": 1, "n2": 1}))
    result = plan(view, make_pod("new").info(), make_policy().spec(**spec(tsc(1))).build(), count=6)
    assert result.error is not None and result.error.code is ErrorCode.SPREAD_UNSATISFIED, result.error
    assert result.error.message.startswith("placed 5 of 6: ")


def _no_selector(**extra: Any) -> dict[str, Any]:
    c = tsc(**extra)
    del c["labelSelector"]
    return c


# What the Kubernetes API refuses in topology spread constraints (pod validation), refused the same
# way in a policy: (case, constraints, the field path named, a part of the problem).
INVALID_SPREAD = [
    ("match_label_keys_in_match_labels", [tsc(matchLabelKeys=["app"])],
     "spec.topologySpreadConstraints[0].matchLabelKeys[0]", "exists in both matchLabelKeys and labelSelector"),
    ("match_label_keys_in_match_expressions",
     [tsc(labelSelector={"matchExpressions": [{"key": "tier", "operator": "Exists"}]},
          matchLabelKeys=["pod-template-hash", "tier"])],
     "spec.topologySpreadConstraints[0].matchLabelKeys[1]", "exists in both matchLabelKeys and labelSelector"),
    ("match_label_keys_without_label_selector", [_no_selector(matchLabelKeys=["pod-template-hash"])],
     "spec.topologySpreadConstraints[0].matchLabelKeys", "must not be specified when labelSelector is not set"),
    ("match_label_keys_not_a_label_key", [tsc(matchLabelKeys=["bad key"])],
     "spec.topologySpreadConstraints[0].matchLabelKeys[0]", "label key 'bad key'"),
    ("duplicate_topology_key_and_when_unsatisfiable", [tsc(1), tsc(2)],
     "spec.topologySpreadConstraints[0].{topologyKey, whenUnsatisfiable}",
     f"duplicate value {{{ZONE}, DoNotSchedule}}"),
    ("duplicate_counts_the_default_when_unsatisfiable",
     [tsc(3), {"maxSkew": 1, "topologyKey": ZONE, "labelSelector": {"matchLabels": {"app": "web"}}}],
     "spec.topologySpreadConstraints[0].{topologyKey, whenUnsatisfiable}", "duplicate value"),
    ("duplicate_named_at_the_first_of_the_pair",
     [tsc(when="ScheduleAnyway"), {**tsc(), "topologyKey": "rack"}, tsc(when="ScheduleAnyway")],
     "spec.topologySpreadConstraints[0].{topologyKey, whenUnsatisfiable}", "ScheduleAnyway"),
]


@pytest.mark.parametrize(("name", "constraints", "path", "problem"), INVALID_SPREAD, ids=[c[0] for c in INVALID_SPREAD])
def test_spread_is_validated_as_the_kubernetes_api_does(name: str, constraints: list[dict[str, Any]], path: str,
                                                        problem: str) -> None:
    with pytest.raises(InvalidPolicy) as refused:
        make_policy().spec(**spec(*constraints)).build()
    assert refused.value.path == path
    assert problem in refused.value.problem


VALID_SPREAD = [
    ("same_key_different_when_unsatisfiable", [tsc(), tsc(when="ScheduleAnyway")]),
    ("same_when_unsatisfiable_different_keys", [tsc(), {**tsc(), "topologyKey": HOSTNAME}]),
    ("match_label_keys_beside_the_selector", [tsc(matchLabelKeys=["pod-template-hash"])]),
    ("no_match_label_keys_without_selector", [_no_selector()]),
]


@pytest.mark.parametrize(("name", "constraints"), VALID_SPREAD, ids=[c[0] for c in VALID_SPREAD])
def test_spread_the_kubernetes_api_accepts_is_accepted(name: str, constraints: list[dict[str, Any]]) -> None:
    assert len(make_policy().spec(**spec(*constraints)).build().spec.topology_spread_constraints) == len(constraints)
