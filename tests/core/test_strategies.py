"""The strategies (docs/behaviour.md#strategies): Auto, Fill, Each, Global and Drained with
nodesLimit, and Balanced, Spread and BestFit with the sleepy-pod behaviour. One named case per behaviour."""

from __future__ import annotations

import pytest

from berth.core.errors import ErrorCode
from berth.core.model import NodeInfo, PodInfo
from berth.core.settings import Settings
from tests.builders import make_node, make_pod, make_policy

from .builders import Scenario, cluster, plan, run, spread_pods

# A web pod is 100m / 128Mi: a default node (4 cpu, 8Gi) holds 40 of them; "cpu=N" nodes hold 10*N.
EMPTY3 = (make_node("a").info(), make_node("b").info(), make_node("c").info())


def cpu_node(name: str, pods_fit: int) -> NodeInfo:
    """A node with room for exactly ``pods_fit`` web pods (cpu-bound)."""
    return make_node(name).cpu(f"{pods_fit * 100}m").info()


AUTO = [
    Scenario(
        "auto_places_on_the_node_with_fewest_instances",
        nodes=EMPTY3, pods=tuple(spread_pods({"a": 2, "c": 1})),
        spec={"strategy": "Auto"}, count=1, plan={"b": 1},
    ),
    Scenario(
        "auto_ties_go_to_most_room",
        nodes=(cpu_node("a", 5), cpu_node("b", 9), cpu_node("c", 7)),
        spec={"strategy": "Auto"}, count=1, plan={"b": 1},
    ),
    Scenario(
        "auto_equal_count_and_room_ties_go_to_lowest_name",
        nodes=(make_node("c").info(), make_node("b").info(), make_node("a").info()),
        spec={"strategy": "Auto"}, count=1, plan={"a": 1},
    ),
    Scenario(
        "auto_reaches_flattest_distribution_from_current_state",
        # 3/0/1 plus four: b, b (tie with c at 1 -> name), c, b -> 3/3/2.
        nodes=EMPTY3, pods=tuple(spread_pods({"a": 3, "c": 1})),
        spec={"strategy": "Auto"}, count=4, plan={"b": 3, "c": 1},
    ),
    Scenario(
        "auto_counts_only_the_workload_not_other_pods",
        nodes=(make_node("a").info(), make_node("b").info()),
        pods=(make_pod("x1").on("a").labels({"app": "other"}).info(),
              make_pod("x2").on("a").labels({"app": "other"}).info()),
        spec={"strategy": "Auto"}, count=2, plan={"a": 1, "b": 1},
    ),
    Scenario(
        "auto_counts_only_the_policys_namespace",
        nodes=(make_node("a").info(), make_node("b").info()),
        pods=(make_pod("t1").on("a").namespace("other-tenant").info(),
              make_pod("t2").on("a").namespace("other-tenant").info(),
              make_pod("mine").on("b").info()),
        spec={"strategy": "Auto"}, count=1, plan={"a": 1},
    ),
    Scenario(
        "auto_excludes_zero_capacity_nodes_up_front",
        nodes=(cpu_node("full", 1), make_node("b").info()),
        pods=(make_pod("x").on("full").labels({}).info(),),
        spec={"strategy": "Auto"}, count=2, plan={"b": 2},
    ),
    Scenario(
        "auto_fails_insufficient_resource_when_total_capacity_below_count",
        nodes=(cpu_node("a", 2), cpu_node("b", 1)),
        spec={"strategy": "Auto"}, count=4, error=ErrorCode.INSUFFICIENT_RESOURCE,
    ),
    Scenario(
        "auto_nodes_limit_is_a_per_node_ceiling",
        nodes=EMPTY3, pods=tuple(spread_pods({"a": 2})),
        spec={"strategy": "Auto", "nodesLimit": 2}, count=4, plan={"b": 2, "c": 2},
    ),
    Scenario(
        "auto_node_at_ceiling_is_not_a_candidate",
        nodes=EMPTY3, pods=tuple(spread_pods({"a": 2})),
        spec={"strategy": "Auto", "nodesLimit": 2},
        refused={"a": "nodesLimit"}, passing=frozenset({"b", "c"}),
    ),
    Scenario(
        "auto_fails_when_ceiling_makes_request_unsatisfiable",
        nodes=(make_node("a").info(), make_node("b").info()),
        spec={"strategy": "Auto", "nodesLimit": 1}, count=3, error=ErrorCode.INSUFFICIENT_RESOURCE,
    ),
]

FILL = [
    Scenario(
        "fill_tops_every_node_up_to_count",
        nodes=EMPTY3, pods=tuple(spread_pods({"a": 1, "c": 3})),
        spec={"strategy": "Fill", "count": 3}, round=True, plan={"a": 2, "b": 3},
    ),
    Scenario(
        "fill_top_up_is_never_negative",
        nodes=(make_node("a").info(), make_node("b").info()), pods=tuple(spread_pods({"a": 5})),
        spec={"strategy": "Fill", "count": 3}, round=True, plan={"b": 3},
    ),
    Scenario(
        "fill_is_a_no_op_once_satisfied_already_filled",
        nodes=(make_node("a").info(), make_node("b").info()), pods=tuple(spread_pods({"a": 3, "b": 4})),
        spec={"strategy": "Fill", "count": 3}, round=True, error=ErrorCode.ALREADY_FILLED,
    ),
    Scenario(
        "fill_nodes_limit_is_how_many_nodes_sorted_by_count_then_capacity",
        # (Count, Capacity) descending: a (count 1), then c (room 30) before b (room 20).
        nodes=(make_node("a").info(),
               make_node("b").cpu("2").info(),
               make_node("c").cpu("3").info()), pods=tuple(spread_pods({"a": 1})),
        spec={"strategy": "Fill", "count": 2, "nodesLimit": 2}, round=True, plan={"a": 1, "c": 2},
    ),
    Scenario(
        "fill_limit_covers_already_filled_nodes_first",
        nodes=(make_node("a").info(),
               make_node("b").info(),
               make_node("c").cpu("8").info()), pods=tuple(spread_pods({"a": 2})),
        spec={"strategy": "Fill", "count": 2, "nodesLimit": 2}, round=True, plan={"c": 2},
    ),
    Scenario(
        "fill_limit_zero_means_all_nodes",
        nodes=EMPTY3, spec={"strategy": "Fill", "count": 1, "nodesLimit": 0}, round=True,
        plan={"a": 1, "b": 1, "c": 1},
    ),
    Scenario(
        "fill_limit_zero_fails_when_a_candidate_cannot_reach_count",
        nodes=(make_node("a").info(), cpu_node("small", 1)),
        spec={"strategy": "Fill", "count": 2}, round=True, error=ErrorCode.INSUFFICIENT_RESOURCE,
        error_contains="small needs 2 more but has room for 1",
    ),
    Scenario(
        "fill_passes_over_a_node_that_cannot_reach_count",
        # small comes first (Count 1) but has room for 1 of the 2 it needs: b is covered instead.
        nodes=(make_node("a").info(),
               make_node("b").info(), cpu_node("small", 2)), pods=tuple(spread_pods({"small": 1})),
        spec={"strategy": "Fill", "count": 3, "nodesLimit": 2}, round=True, plan={"a": 3, "b": 3},
    ),
    Scenario(
        "fill_fails_when_fewer_than_nodes_limit_nodes_can_be_covered",
        nodes=(make_node("a").info(), cpu_node("small", 2)), pods=tuple(spread_pods({"small": 1})),
        spec={"strategy": "Fill", "count": 3, "nodesLimit": 2}, round=True,
        error=ErrorCode.INSUFFICIENT_RESOURCE, error_contains="Fill: 1 of 2 nodes can reach 3 pods",
    ),
    Scenario(
        "fill_nodes_limit_above_the_number_of_nodes_fails",
        nodes=(make_node("a").info(), make_node("b").info()),
        spec={"strategy": "Fill", "count": 1, "nodesLimit": 3}, round=True,
        error=ErrorCode.INSUFFICIENT_RESOURCE, error_contains="Fill: 2 of 3 nodes can reach 1 pods",
    ),
    Scenario(
        "fill_unverified_node_ranks_after_verified_nodes",
        # u holds more pods of the workload (Count first) but cannot verify its memory: a is covered.
        nodes=(make_node("u").memory(None).info(), make_node("a").info()), pods=tuple(spread_pods({"u": 1})),
        spec={"strategy": "Fill", "count": 2, "nodesLimit": 1}, round=True, plan={"a": 2},
    ),
    Scenario(
        "fill_unverified_node_that_must_be_covered_says_its_capacity_is_unknown",
        nodes=(make_node("a").info(), make_node("u").memory(None).info()),
        spec={"strategy": "Fill", "count": 2, "nodesLimit": 2}, round=True,
        error=ErrorCode.INSUFFICIENT_RESOURCE,
        error_contains="u needs 2 more but its capacity is unknown (the node reports no memory)",
    ),
    Scenario(
        "fill_round_count_takes_the_first_pods_of_the_plan",
        nodes=EMPTY3, spec={"strategy": "Fill", "count": 2}, count=3, plan={"a": 2, "b": 1},
    ),
    Scenario(
        "fill_round_count_beyond_the_plan_fails",
        nodes=(make_node("a").info(),), spec={"strategy": "Fill", "count": 2}, count=3,
        error=ErrorCode.INSUFFICIENT_RESOURCE,
    ),
]

EACH = [
    Scenario(
        "each_adds_count_to_every_node",
        nodes=EMPTY3, pods=tuple(spread_pods({"a": 4})),
        spec={"strategy": "Each", "count": 2}, round=True, plan={"a": 2, "b": 2, "c": 2},
    ),
    Scenario(
        "each_nodes_limit_takes_top_capacity_nodes",
        nodes=(make_node("a").cpu("1").info(), make_node("b").cpu("3").info(), make_node("c").cpu("2").info()),
        spec={"strategy": "Each", "count": 2, "nodesLimit": 2}, round=True, plan={"b": 2, "c": 2},
    ),
    Scenario(
        "each_capacity_ties_go_to_lowest_name",
        nodes=(make_node("c").info(), make_node("b").info(), make_node("a").info()),
        spec={"strategy": "Each", "count": 1, "nodesLimit": 2}, round=True, plan={"a": 1, "b": 1},
    ),
    Scenario(
        "each_fails_when_one_chosen_node_lacks_room",
        nodes=(make_node("a").info(), cpu_node("small", 1)),
        spec={"strategy": "Each", "count": 2}, round=True, error=ErrorCode.INSUFFICIENT_RESOURCE,
        error_contains="small needs 2 more but has room for 1",
    ),
    Scenario(
        "each_unverified_node_ranks_after_verified_nodes",
        # Both have room for one web pod; u comes first by name but cannot verify its memory.
        nodes=(make_node("u").memory(None).info(), cpu_node("v", 1)),
        spec={"strategy": "Each", "count": 1, "nodesLimit": 1}, round=True, plan={"v": 1},
    ),
    Scenario(
        "each_unverified_chosen_node_says_its_capacity_is_unknown",
        nodes=(make_node("a").info(), make_node("u").memory(None).info()),
        spec={"strategy": "Each", "count": 2}, round=True, error=ErrorCode.INSUFFICIENT_RESOURCE,
        error_contains="u needs 2 more but its capacity is unknown (the node reports no memory)",
    ),
    Scenario(
        "each_fails_when_fewer_candidates_than_nodes_limit",
        nodes=(make_node("a").info(), make_node("b").info()),
        spec={"strategy": "Each", "count": 1, "nodesLimit": 3}, round=True,
        error=ErrorCode.INSUFFICIENT_RESOURCE,
    ),
]

GLOBAL_DRAINED = [
    Scenario(
        "global_least_loaded_after_placing_not_fewest_instances",
        # big: 16 cpu / 32Gi, half used by pods of different sizes -> usage .5 + rate .125 = .625;
        # small: 4 cpu / 8Gi, empty -> 0 + .5. AUTO (most room) would pick big; GLOBAL picks small.
        nodes=(make_node("big").cpu("16").memory("32Gi").info(), make_node("small").cpu("4").memory("8Gi").info()),
        pods=(make_pod("x1").cpu("6").memory("4Gi").on("big").labels({}).info(),
              make_pod("x2").cpu("2").memory("12Gi").on("big").labels({}).info()),
        pod=make_pod("new").cpu("2").memory("4Gi").info(),
        spec={"strategy": "Global"}, count=1, plan={"small": 1},
    ),
    Scenario(
        "global_updates_projected_usage_before_the_next_pick",
        # small after one: 1.0 vs big .625 -> big; big then .75 vs small 1.0 -> big.
        nodes=(make_node("big").cpu("16").memory("32Gi").info(), make_node("small").cpu("4").memory("8Gi").info()),
        pods=(make_pod("x1").cpu("6").memory("4Gi").on("big").labels({}).info(),
              make_pod("x2").cpu("2").memory("12Gi").on("big").labels({}).info()),
        pod=make_pod("new").cpu("2").memory("4Gi").info(),
        spec={"strategy": "Global"}, count=3, plan={"small": 1, "big": 2},
    ),
    Scenario(
        "global_ignores_nodes_limit",
        nodes=(make_node("a").info(), make_node("b").info()),
        spec={"strategy": "Global", "nodesLimit": 1}, count=4, plan={"a": 2, "b": 2},
    ),
    Scenario(
        "drained_capacity_ascending_fills_tightest_first",
        nodes=(cpu_node("a", 2), cpu_node("b", 5), cpu_node("c", 3)),
        spec={"strategy": "Drained"}, count=4, plan={"a": 2, "c": 2},
    ),
    Scenario(
        "drained_capacity_ties_go_to_higher_usage",
        # Both have room for 2 web pods; b is 75% cpu used, a 50%.
        nodes=(make_node("a").cpu("4").info(), make_node("b").cpu("8").info()),
        pods=(make_pod("x1").cpu("3800m").memory(None).on("a").labels({}).info(),
              make_pod("x2").cpu("7800m").memory(None).on("b").labels({}).info()),
        spec={"strategy": "Drained"}, count=1, plan={"b": 1},
    ),
    Scenario(
        "drained_leaves_roomy_nodes_empty",
        nodes=(make_node("roomy").cpu("64").info(), cpu_node("t1", 3), cpu_node("t2", 4)),
        spec={"strategy": "Drained"}, count=7, plan={"t1": 3, "t2": 4},
    ),
    Scenario(
        "drained_ignores_nodes_limit",
        nodes=(cpu_node("a", 2), cpu_node("b", 5)),
        spec={"strategy": "Drained", "nodesLimit": 1}, count=4, plan={"a": 2, "b": 2},
    ),
]


def pct_node(name: str) -> NodeInfo:
    """A node with 100 cpu, 100Gi memory and 100Gi disk, so that shares read as percentages."""
    return make_node(name).cpu("100").memory("100Gi").disk("100Gi").info()


def load(name: str, on: str, *, cpu: str | None = None, memory: str | None = None, disk: str | None = None,
         sleepy: bool = False) -> PodInfo:
    return make_pod(name).on(on).cpu(cpu).memory(memory).disk(disk).labels({}).sleepy(sleepy).info()


BALANCED_SPREAD_BEST_FIT = [
    Scenario(
        "balanced_5_percent_memory_band_then_disk",
        # The pod brings A to 41% memory / 60% disk and B to 43% / 10%: same 40% band, B wins.
        nodes=(pct_node("host-a"), pct_node("host-b")),
        pods=(load("x1", "host-a", memory="40Gi", disk="60Gi"),
              load("x2", "host-b", memory="42Gi", disk="10Gi")),
        pod=make_pod("new").cpu(None).memory("1Gi").info(),
        spec={"strategy": "Balanced"}, ranking=("host-b", "host-a"),
    ),
    Scenario(
        "balanced_lower_memory_band_beats_lower_disk",
        nodes=(pct_node("host-a"), pct_node("host-b")),
        pods=(load("x1", "host-a", memory="36Gi", disk="80Gi"),
              load("x2", "host-b", memory="40Gi", disk="0")),
        pod=make_pod("new").cpu(None).memory("1Gi").info(),
        spec={"strategy": "Balanced"}, ranking=("host-a", "host-b"),
    ),
    Scenario(
        "balanced_same_band_and_disk_then_cpu",
        nodes=(pct_node("host-a"), pct_node("host-b")),
        pods=(load("x1", "host-a", memory="40Gi", cpu="50"),
              load("x2", "host-b", memory="43Gi", cpu="10")),
        pod=make_pod("new").cpu("1").memory("1Gi").info(),
        spec={"strategy": "Balanced"}, ranking=("host-b", "host-a"),
    ),
    Scenario(
        "balanced_full_tie_goes_to_host_name",
        nodes=(pct_node("host-b"), pct_node("host-a")),
        spec={"strategy": "Balanced"}, ranking=("host-a", "host-b"),
    ),
    Scenario(
        "spread_least_projected_use_first",
        # The pod brings host A to 80% and host B to 60%; Spread picks B.
        nodes=(pct_node("host-a"), pct_node("host-b")),
        pods=(load("x1", "host-a", memory="70Gi"), load("x2", "host-b", memory="50Gi")),
        pod=make_pod("new").cpu(None).memory("10Gi").info(),
        spec={"strategy": "Spread"}, ranking=("host-b", "host-a"),
    ),
    Scenario(
        "best_fit_most_projected_use_first",
        nodes=(pct_node("host-a"), pct_node("host-b")),
        pods=(load("x1", "host-a", memory="70Gi"), load("x2", "host-b", memory="50Gi")),
        pod=make_pod("new").cpu(None).memory("10Gi").info(),
        spec={"strategy": "BestFit"}, ranking=("host-a", "host-b"),
    ),
    Scenario(
        "best_fit_packs_one_node_before_the_next",
        nodes=(make_node("a").cpu("1").info(), make_node("b").cpu("1").info()),
        pods=(make_pod("x").cpu("100m").memory(None).on("b").labels({}).info(),),
        pod=make_pod("new").memory(None).info(),
        spec={"strategy": "BestFit"}, count=10, plan={"b": 9, "a": 1},
    ),
    Scenario(
        "spread_sleepy_pods_pack_onto_most_subscribed_sleepy_memory",
        # For a regular pod Spread would pick c (least used); a sleepy one goes to b (most sleepy memory).
        nodes=(pct_node("a"), pct_node("b"), pct_node("c")),
        pods=(load("s1", "a", memory="10Gi", sleepy=True),
              load("s2", "b", memory="20Gi", sleepy=True),
              load("r1", "a", memory="30Gi")),
        pod=make_pod("new").cpu(None).memory("1Gi").sleepy().info(),
        spec={"strategy": "Spread"}, ranking=("b", "a", "c"),
    ),
    Scenario(
        "best_fit_sleepy_pods_pack_like_spread",
        nodes=(pct_node("a"), pct_node("b"), pct_node("c")),
        pods=(load("s1", "a", memory="10Gi", sleepy=True),
              load("s2", "b", memory="20Gi", sleepy=True),
              load("r1", "a", memory="30Gi")),
        pod=make_pod("new").cpu(None).memory("1Gi").sleepy().info(),
        spec={"strategy": "BestFit"}, ranking=("b", "a", "c"),
    ),
    Scenario(
        "spread_regular_pod_ignores_sleepy_packing",
        nodes=(pct_node("a"), pct_node("b"), pct_node("c")),
        pods=(load("s1", "a", memory="10Gi", sleepy=True),
              load("s2", "b", memory="20Gi", sleepy=True),
              load("r1", "a", memory="30Gi")),
        pod=make_pod("new").cpu(None).memory("1Gi").info(),
        spec={"strategy": "Spread"}, ranking=("c", "b", "a"),
    ),
    Scenario(
        "sleepy_discount_changes_balanced_ranking",
        # Real memory after: a 80%, b 60% -> b. Discounted (factor 2): a (60/2+10/2)/100 = 35%,
        # b (40 + 10/2)/100 = 45% -> a.
        nodes=(pct_node("a"), pct_node("b")),
        pods=(load("s1", "a", memory="60Gi", sleepy=True), load("r1", "b", memory="40Gi")),
        pod=make_pod("new").cpu(None).memory("10Gi").sleepy().info(),
        spec={"strategy": "Balanced"}, ranking=("a", "b"),
    ),
    Scenario(
        "balanced_regular_pod_sees_real_memory",
        nodes=(pct_node("a"), pct_node("b")),
        pods=(load("s1", "a", memory="60Gi", sleepy=True), load("r1", "b", memory="40Gi")),
        pod=make_pod("new").cpu(None).memory("10Gi").info(),
        spec={"strategy": "Balanced"}, ranking=("b", "a"),
    ),
    Scenario(
        "sleepy_discount_factor_is_a_setting",
        # Factor 1 is no discount: a 80%, b 60%.
        nodes=(pct_node("a"), pct_node("b")),
        pods=(load("s1", "a", memory="60Gi", sleepy=True), load("r1", "b", memory="40Gi")),
        pod=make_pod("new").cpu(None).memory("10Gi").sleepy().info(),
        settings=Settings(sleepy_memory_factor=1.0),
        spec={"strategy": "Balanced"}, ranking=("b", "a"),
    ),
    Scenario(
        "sleepy_discount_not_in_capacity_check",
        # Discounted the pod would fit on a ((90/2 + 20/2) < 100), but real memory 90 + 20 > 100.
        nodes=(pct_node("a"),),
        pods=(load("s1", "a", memory="90Gi", sleepy=True),),
        pod=make_pod("new").cpu(None).memory("20Gi").sleepy().info(),
        spec={"strategy": "Balanced"},
        refused={"a": "insufficient capacity: memory: needs 20.0 GiB, 10.0 GiB free"},
        error=ErrorCode.INSUFFICIENT_RESOURCE,
    ),
    Scenario(
        "strategy_changes_order_never_the_capacity_rule",
        nodes=(pct_node("a"), make_node("tiny").cpu("100").memory("1Gi").info()),
        pod=make_pod("new").cpu(None).memory("2Gi").info(),
        spec={"strategy": "BestFit"}, ranking=("a",), refused={"tiny": "insufficient capacity"},
    ),
]


WEIGHED_DIMENSIONS = [
    Scenario(
        "global_weighs_disk_for_a_pod_that_asks_only_for_disk",
        # full-disk is idle on cpu and memory but its disk is 80% requested: a disk-only pod goes to
        # the node whose disk it loads least, not onto the fullest disk.
        nodes=(pct_node("full-disk"), pct_node("roomy-disk")),
        pods=(load("x1", "full-disk", disk="80Gi"), load("x2", "roomy-disk", cpu="50", memory="50Gi")),
        pod=make_pod("new").cpu(None).memory(None).disk("5Gi").info(),
        spec={"strategy": "Global"}, count=2, plan={"roomy-disk": 2},
    ),
    Scenario(
        "global_weighs_ephemeral_storage_beside_cpu_and_memory",
        # b is less used on cpu and memory (10% against 20%) but its disk is 60% requested, a's empty.
        nodes=(pct_node("a"), pct_node("b")),
        pods=(load("x1", "a", cpu="20", memory="20Gi"), load("x2", "b", cpu="10", memory="10Gi", disk="60Gi")),
        pod=make_pod("new").cpu("1").memory("1Gi").disk("1Gi").info(),
        spec={"strategy": "Global"}, ranking=("a", "b"),
    ),
    Scenario(
        "drained_usage_tie_break_weighs_the_disk_the_pod_asks_for",
        # Both have room for 5 pods of 10Gi disk; a's disk is 40% requested, b's 35% (b is busy on cpu,
        # which this pod does not ask for). Drained prefers the higher usage: a.
        nodes=(pct_node("a"), pct_node("b")),
        pods=(load("x1", "a", disk="40Gi"), load("x2", "b", disk="35Gi", cpu="90")),
        pod=make_pod("new").cpu(None).memory(None).disk("10Gi").info(),
        spec={"strategy": "Drained"}, count=1, plan={"a": 1},
    ),
    Scenario(
        "spread_ignores_a_dimension_the_pod_does_not_ask_for",
        # A memory-only pod: cpu-busy's cpu is 90% requested, which does not matter; its memory is lower.
        nodes=(pct_node("cpu-busy"), pct_node("mem-busy")),
        pods=(load("x1", "cpu-busy", cpu="90", memory="10Gi"), load("x2", "mem-busy", memory="50Gi")),
        pod=make_pod("new").cpu(None).memory("1Gi").info(),
        spec={"strategy": "Spread"}, ranking=("cpu-busy", "mem-busy"),
    ),
    Scenario(
        "best_fit_ignores_a_dimension_the_pod_does_not_ask_for",
        nodes=(pct_node("cpu-busy"), pct_node("mem-busy")),
        pods=(load("x1", "cpu-busy", cpu="90", memory="10Gi"), load("x2", "mem-busy", memory="50Gi")),
        pod=make_pod("new").cpu(None).memory("1Gi").info(),
        spec={"strategy": "BestFit"}, ranking=("mem-busy", "cpu-busy"),
    ),
    Scenario(
        "spread_a_dimension_the_node_does_not_report_is_not_full",
        # no-cpu reports no cpu, which a memory-only pod does not ask for: it is not 100% used.
        nodes=(make_node("no-cpu").cpu(None).memory("100Gi").info(), pct_node("half")),
        pods=(load("x1", "no-cpu", memory="20Gi"), load("x2", "half", memory="50Gi")),
        pod=make_pod("new").cpu(None).memory("1Gi").info(),
        spec={"strategy": "Spread"}, ranking=("no-cpu", "half"), no_warnings=True,
    ),
    Scenario(
        "best_fit_a_dimension_the_node_does_not_report_is_not_full",
        nodes=(make_node("no-cpu").cpu(None).memory("100Gi").info(), pct_node("half")),
        pods=(load("x1", "no-cpu", memory="20Gi"), load("x2", "half", memory="50Gi")),
        pod=make_pod("new").cpu(None).memory("1Gi").info(),
        spec={"strategy": "BestFit"}, ranking=("half", "no-cpu"), no_warnings=True,
    ),
]


@pytest.mark.parametrize("s", AUTO, ids=str)
def test_auto(s: Scenario) -> None:
    run(s)


@pytest.mark.parametrize("s", FILL, ids=str)
def test_fill(s: Scenario) -> None:
    run(s)


@pytest.mark.parametrize("s", EACH, ids=str)
def test_each(s: Scenario) -> None:
    run(s)


@pytest.mark.parametrize("s", GLOBAL_DRAINED, ids=str)
def test_global_and_drained(s: Scenario) -> None:
    run(s)


@pytest.mark.parametrize("s", BALANCED_SPREAD_BEST_FIT, ids=str)
def test_balanced_spread_best_fit(s: Scenario) -> None:
    run(s)


def test_fill_rerun_after_applying_its_plan_is_already_filled() -> None:
    """FILL is a convergence target: once its plan has landed, the same request adds nothing."""
    view = cluster([make_node("a").info(), make_node("b").info(), make_node("c").info()], spread_pods({"a": 1}))
    pol = make_policy().strategy("Fill").count(2).build()
    first = plan(view, make_pod("new").info(), pol)
    assert first.error is None and first.plan == {"a": 1, "b": 2, "c": 2}
    i = 0
    for node_name, n in first.plan.items():
        for _ in range(n):
            view.assume(make_pod(f"placed-{i}").info(), node_name)
            i += 1
    again = plan(view, make_pod("new").info(), pol)
    assert again.error is not None and again.error.code is ErrorCode.ALREADY_FILLED
    assert again.plan == {}


def test_each_is_an_increment_not_a_target() -> None:
    """Unlike FILL, EACH adds count again on every round."""
    view = cluster([make_node("a").info(), make_node("b").info()])
    pol = make_policy().strategy("Each").count(1).build()
    first = plan(view, make_pod("new").info(), pol)
    assert first.plan == {"a": 1, "b": 1}
    for i, node_name in enumerate(first.plan):
        view.assume(make_pod(f"placed-{i}").info(), node_name)
    assert plan(view, make_pod("new").info(), pol).plan == {"a": 1, "b": 1}


@pytest.mark.parametrize("s", WEIGHED_DIMENSIONS, ids=str)
def test_strategies_weigh_the_dimensions_the_pod_asks_for(s: Scenario) -> None:
    run(s)
