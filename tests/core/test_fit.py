"""Fit (docs/behaviour.md#fit): allocatable vs requested, shortfall messages, disk floor, unknown capacity, the
overcommit policy, the default ranking, the capacity query and the allocations view."""

from __future__ import annotations

from dataclasses import fields, replace

import pytest

from berth.core.capacity import Placeable, capacity_report, capacity_table, node_allocations
from berth.core.decision import refusal_cause
from berth.core.errors import ErrorCode
from berth.core.fit import check_fit, demand
from berth.core.model import Taint
from berth.core.plugins import fit as fit_check
from berth.core.plugins.fit import node_use
from berth.core.policy import Strategy
from berth.core.settings import Settings
from tests.builders import ZONE, make_node, make_pod, make_policy

from .builders import NOW, Scenario, cluster, evaluate, gib, plan, run, spread_pods

SHORTFALL = ("insufficient capacity: memory: needs 2.0 GiB, 1.0 GiB free of 1.0 GiB allocatable "
             "(short by 1.0 GiB)")

SCENARIOS = [
    Scenario(
        "fits_when_request_equals_free_exactly",
        nodes=(make_node("a").cpu("1").memory("1Gi").info(),),
        pods=(make_pod("old").cpu("500m").memory("512Mi").on("a").labels({"app": "other"}).info(),),
        pod=make_pod("new").cpu("500m").memory("512Mi").info(),
        winner="a", no_error=True,
    ),
    Scenario(
        "requested_sums_every_pod_on_the_node",
        nodes=(make_node("a").cpu("1").memory("1Gi").info(),),
        pods=(make_pod("o1").cpu("400m").on("a").labels({}).info(),
              make_pod("o2").cpu("400m").on("a").labels({}).info()),
        pod=make_pod("new").cpu("300m").info(),
        refused={"a": "cpu: needs 300m, 200m free of 1 allocatable (short by 100m)"},
        error=ErrorCode.INSUFFICIENT_RESOURCE,
    ),
    Scenario(
        "cpu_and_memory_shortfalls_both_listed",
        nodes=(make_node("a").cpu("1").memory("1Gi").info(),),
        pod=make_pod("new").cpu("2").memory("2Gi").info(),
        refused={"a": "cpu: needs 2, 1 free of 1 allocatable (short by 1); memory: needs 2.0 GiB"},
    ),
    Scenario(
        "unfit_nodes_filtered_out_with_reason_others_rank",
        nodes=(make_node("a").memory("1Gi").info(), make_node("b").memory("4Gi").info()),
        pod=make_pod("new").memory("2Gi").info(),
        winner="b", refused={"a": "insufficient capacity: memory"}, not_refused=("b",),
    ),
    Scenario(
        "overcommit_percent_allows_above_allocatable",
        nodes=(make_node("a").cpu("4").info(),),
        pods=(make_pod("old").cpu("3").on("a").labels({}).info(),),
        pod=make_pod("new").cpu("2").info(),
        settings=Settings(cpu_overcommit_percent=150),
        winner="a", no_error=True,
    ),
    Scenario(
        "overcommit_limit_still_refuses_beyond_it_and_says_so",
        nodes=(make_node("a").cpu("4").info(),),
        pods=(make_pod("old").cpu("5").on("a").labels({}).info(),),
        pod=make_pod("new").cpu("2").info(),
        settings=Settings(cpu_overcommit_percent=150),
        refused={"a": "cpu: needs 2, 1 free of 4 allocatable at 150% overcommit (short by 1)"},
    ),
    Scenario(
        "default_never_overcommits",
        nodes=(make_node("a").cpu("4").info(),),
        pods=(make_pod("old").cpu("3").on("a").labels({}).info(),),
        pod=make_pod("new").cpu("2").info(),
        refused={"a": "cpu: needs 2, 1 free of 4 allocatable (short by 1)"},
    ),
    Scenario(
        "memory_overcommit_from_policy_override",
        nodes=(make_node("a").memory("4Gi").info(),),
        pods=(make_pod("old").memory("4Gi").on("a").labels({}).info(),),
        pod=make_pod("new").memory("1Gi").info(),
        spec={"capacity": {"memoryOvercommitPercent": 125}},
        winner="a", no_error=True,
    ),
    Scenario(
        "disk_free_share_floor",
        nodes=(make_node("a").disk("100Gi").info(),),
        pods=(make_pod("old").disk("85Gi").on("a").labels({}).info(),),
        pod=make_pod("new").disk("6Gi").info(),
        refused={"a": "ephemeral-storage: placing leaves 9.0 GiB free of 100.0 GiB allocatable, below the "
                      "10% free floor (short by 1.0 GiB)"},
    ),
    Scenario(
        "short_by_is_the_whole_need_on_a_node_past_its_allocatable",
        # 5 cpu requested of 4: the message shows 0 free, so the pod is short by all it needs.
        nodes=(make_node("a").cpu("4").info(),),
        pods=(make_pod("old").cpu("5").on("a").labels({}).info(),),
        pod=make_pod("new").cpu("2").info(),
        refused={"a": "cpu: needs 2, 0 free of 4 allocatable (short by 2)"},
    ),
    Scenario(
        "short_by_is_the_whole_need_under_an_overcommit_below_100",
        # 80% of 4 cpu is 3.2, already requested past by 3.5: 0 free, short by the whole 1.
        nodes=(make_node("a").cpu("4").info(),),
        pods=(make_pod("old").cpu("3500m").on("a").labels({}).info(),),
        pod=make_pod("new").cpu("1").info(),
        settings=Settings(cpu_overcommit_percent=80),
        refused={"a": "cpu: needs 1, 0 free of 4 allocatable at 80% overcommit (short by 1)"},
    ),
    Scenario(
        "disk_short_by_is_the_floor_minus_the_free_figure_shown",
        # 105Gi requested of 100Gi: placing leaves (shown) 0 free, 10Gi below the 10% floor.
        nodes=(make_node("a").disk("100Gi").info(),),
        pods=(make_pod("old").disk("105Gi").on("a").labels({}).info(),),
        pod=make_pod("new").disk("1Gi").info(),
        refused={"a": "ephemeral-storage: placing leaves 0 B free of 100.0 GiB allocatable, below the "
                      "10% free floor (short by 10.0 GiB)"},
    ),
    Scenario(
        "disk_free_share_floor_exactly_met_fits",
        nodes=(make_node("a").disk("100Gi").info(),),
        pods=(make_pod("old").disk("85Gi").on("a").labels({}).info(),),
        pod=make_pod("new").disk("5Gi").info(),
        winner="a", no_error=True,
    ),
    Scenario(
        "disk_floor_refuses_a_node_already_below_it_even_without_a_disk_request",
        nodes=(make_node("a").disk("100Gi").info(), make_node("b").info()),
        pods=(make_pod("old").disk("95Gi").on("a").labels({}).info(),),
        pod=make_pod("new").info(),
        refused={"a": "ephemeral-storage: placing leaves"}, winner="b",
    ),
    Scenario(
        "disk_floor_from_policy_override",
        nodes=(make_node("a").disk("100Gi").info(),),
        pods=(make_pod("old").disk("85Gi").on("a").labels({}).info(),),
        pod=make_pod("new").disk("6Gi").info(),
        spec={"capacity": {"minFreeDiskPercent": 5}},
        winner="a", no_error=True,
    ),
    Scenario(
        "unknown_capacity_ranks_last_with_warning",
        nodes=(make_node("roomy-unknown").cpu("64").memory(None).info(),
               make_node("tight").cpu("1").memory("1Gi").info()),
        pod=make_pod("new").cpu("100m").memory("128Mi").info(),
        ranking=("tight", "roomy-unknown"),
        warnings=("roomy-unknown: capacity unverified for memory; ranked after verified nodes",),
        no_error=True,
    ),
    Scenario(
        "unknown_capacity_is_not_zero_node_stays_eligible",
        nodes=(make_node("u").memory(None).info(),),
        pod=make_pod("new").memory("64Gi").info(),
        winner="u", warnings=("u: capacity unverified for memory",), no_error=True,
    ),
    Scenario(
        "unknown_capacity_is_not_unlimited_known_dimensions_still_checked",
        nodes=(make_node("u").cpu("1").memory(None).info(),),
        pod=make_pod("new").cpu("2").memory("1Gi").info(),
        refused={"u": "insufficient capacity: cpu: needs 2, 1 free of 1 allocatable (short by 1)"},
        error=ErrorCode.INSUFFICIENT_RESOURCE,
    ),
    Scenario(
        "dimension_the_pod_does_not_ask_for_is_ignored",
        nodes=(make_node("a").cpu(None).info(),),
        pod=make_pod("new").cpu(None).memory("1Gi").info(),
        winner="a", no_warnings=True,
    ),
    Scenario(
        "disk_is_always_checked_no_reading_means_unverified",
        nodes=(make_node("nodisk").disk(None).cpu("64").memory("64Gi").info(), make_node("a").info()),
        pod=make_pod("new").info(),
        ranking=("a", "nodisk"), warnings=("nodisk: capacity unverified for ephemeral-storage",),
    ),
    Scenario(
        "reject_unknown_capacity_setting_refuses",
        nodes=(make_node("u").memory(None).info(), make_node("a").info()),
        pod=make_pod("new").info(),
        settings=Settings(reject_unknown_capacity=True),
        ranking=("a",), refused={"u": "unknown capacity: the node reports no memory"}, no_warnings=True,
    ),
    Scenario(
        "reject_unknown_capacity_from_policy_override",
        nodes=(make_node("u").memory(None).info(), make_node("a").info()),
        pod=make_pod("new").info(),
        spec={"capacity": {"rejectUnknownCapacity": True}},
        ranking=("a",), refused={"u": "unknown capacity: the node reports no memory"},
    ),
    Scenario(
        "default_most_free_share_of_tightest_resource_wins",
        # After placing 1 cpu / 1Gi: a keeps 50% cpu, 87.5% memory -> tightest 50%;
        # b keeps 75% cpu, 62.5% memory -> tightest 62.5%. b wins although a has more memory free.
        nodes=(make_node("a").cpu("2").memory("8Gi").info(), make_node("b").cpu("4").memory("4Gi").info()),
        pods=(make_pod("o").memory("1.5Gi").cpu(None).on("b").labels({}).info(),),
        pod=make_pod("new").cpu("1").memory("1Gi").info(),
        ranking=("a", "b"),
    ),
    Scenario(
        "default_ties_go_to_fewer_workloads_then_lowest_name",
        nodes=(make_node("c").info(), make_node("b").info(), make_node("a").info(), make_node("d").info()),
        pods=(make_pod("z1").cpu(None).memory(None).on("a").labels({}).info(),
              make_pod("z2").cpu(None).memory(None).on("a").labels({}).info(),
              make_pod("z3").cpu(None).memory(None).on("d").labels({}).info()),
        pod=make_pod("new").info(),
        ranking=("b", "c", "d", "a"),
    ),
]


@pytest.mark.parametrize("s", SCENARIOS, ids=str)
def test_fit(s: Scenario) -> None:
    run(s)


def test_shortfall_message_exact_form() -> None:
    view = cluster([make_node("node-a").memory("1Gi").info()])
    decision = evaluate(view, make_pod("new").cpu(None).memory("2Gi").info()).decision
    assert {node: refusal.reason for node, refusal in decision.refused.items()} == {"node-a": SHORTFALL}
    assert decision.error is not None
    assert decision.error.code is ErrorCode.INSUFFICIENT_RESOURCE
    assert f"node-a: {SHORTFALL}" in decision.error.message


def test_shortfall_lists_every_node_in_name_order() -> None:
    view = cluster([make_node("node-b").memory("1Gi").info(), make_node("node-a").memory("1Gi").info()])
    decision = evaluate(view, make_pod("new").cpu(None).memory("2Gi").info()).decision
    assert decision.error is not None
    assert decision.error.message == f"0/2 nodes can take the pod: node-a: {SHORTFALL}; node-b: {SHORTFALL}"


CAPACITY_CASES = [
    # name, node allocatable kwargs, requested by other pods, pod requests, settings, expected capacity
    ("capacity_is_min_over_resources", {"cpu": "4", "memory": "4Gi"}, {}, {"cpu": "1", "memory": "512Mi"},
     Settings(), 4),
    ("capacity_counts_pod_slots", {"pods": "3"}, {}, {"cpu": "100m", "memory": "1Mi"}, Settings(), 3),
    ("capacity_subtracts_requested", {"cpu": "4"}, {"cpu": "2500m"}, {"cpu": "500m", "memory": None},
     Settings(), 3),
    ("capacity_honours_overcommit", {"cpu": "4"}, {}, {"cpu": "1", "memory": None},
     Settings(cpu_overcommit_percent=200), 8),
    ("capacity_honours_disk_floor", {"ephemeral-storage": "100Gi"}, {}, {"cpu": None, "memory": None, "disk": "10Gi"},
     Settings(), 9),
    ("capacity_zero_when_full", {"memory": "1Gi"}, {"memory": "1Gi"}, {"cpu": None, "memory": "1Mi"},
     Settings(), 0),
]


@pytest.mark.parametrize(("name", "alloc", "used", "req", "settings", "expected"), CAPACITY_CASES,
                         ids=[c[0] for c in CAPACITY_CASES])
def test_capacity_per_node(name: str, alloc: dict[str, str], used: dict[str, str], req: dict[str, str | None],
                           settings: Settings, expected: int) -> None:
    n = make_node("a").resources(alloc).info()
    fillers = [(make_pod("used")
                .on("a")
                .labels({})
                .cpu(used.get("cpu"))
                .memory(used.get("memory"))
                .info())] if used else []
    view = cluster([n], fillers)
    shape = make_pod("new").cpu(req.get("cpu")).memory(req.get("memory")).disk(req.get("disk")).info()
    fit = check_fit(n.allocatable, view.requested("a"), demand(shape), settings)
    assert fit.capacity == expected


def test_capacity_table_is_raw_capacity_and_total() -> None:
    """The capacity query (docs/behaviour.md#capacity-only): each node's capacity for the shape and the sum."""
    view = cluster([make_node("a").cpu("4").info(),
                    make_node("b").cpu("2").info(),
                    make_node("c").cpu("8").ready(False).info()])
    table = capacity_table(view, make_pod("new").cpu("1").memory(None).info(), None, Settings(), NOW)
    assert table.nodes == {"a": 4, "b": 2}
    assert table.total == 6
    assert table.to_dict() == {"nodes": {"a": 4, "b": 2}, "total": 6}


def test_capacity_table_lists_full_nodes_with_zero() -> None:
    view = cluster([make_node("a").cpu("4").info(),
                    make_node("full").cpu("1").info()], [make_pod("o").cpu("1").on("full").labels({}).info()])
    table = capacity_table(view, make_pod("new").cpu("1").memory(None).info(), None, Settings(), NOW)
    assert table.nodes == {"a": 4, "full": 0}
    assert table.total == 4


def test_capacity_table_reports_unverified_nodes() -> None:
    view = cluster([make_node("a").info(), make_node("u").memory(None).info()])
    table = capacity_table(view, make_pod("new").info(), make_policy().build(), Settings(), NOW)
    assert table.unverified == {"u": ["memory"]}
    assert table.to_dict()["unverified"] == {"u": ["memory"]}


def test_capacity_table_is_room_not_where_spread_and_rules_do_not_remove_nodes() -> None:
    """The policy's node filter applies; topology spread and placement rules say where, not how much."""
    zones = [make_node("a").labels({"zone": "z1", "disk": "ssd"}).info(), make_node("b").labels({"zone": "z1"}).info(),
             make_node("c").labels({"zone": "z2"}).info(), make_node("gone").labels({"zone": "z2"}).ready(False).info(),
             make_node("out").labels({"zone": "z2"}).info()]
    spread = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
    pol = (make_policy()
           .node_filter({"excludes": ["out"]})
           .spread(spread)
           .rules({"resource": "Node", "operator": "Has", "labels": {"disk": "ssd"}})
           .build())
    view = cluster(zones, spread_pods({"a": 2}))
    table = capacity_table(view, make_pod("new").cpu("1").memory(None).info(), pol, Settings(), NOW)
    assert table.nodes == {"a": 3, "b": 4, "c": 4}  # a: two web pods (200m) already there
    assert table.placeable is None  # the plan is capacity_report's, asked for where it is shown


def test_placeable_plans_the_whole_policy_and_says_why_one_more_would_not_fit() -> None:
    view = cluster([make_node("a").labels({"disk": "ssd"}).info(), make_node("b").info()])
    pol = make_policy().rules({"resource": "Node", "operator": "Has", "labels": {"disk": "ssd"}}).build()
    report = capacity_report(view, make_pod("new").cpu("1").memory(None).info(), pol, Settings(), NOW)
    assert report.nodes == {"a": 4, "b": 4}
    assert report.placeable is not None
    assert (report.placeable.pods, report.placeable.code) == (4, "affinity_unsatisfied")
    bounded = capacity_report(view, make_pod("new").cpu("1").memory(None).info(), None, Settings(), NOW, limit=3)
    assert bounded.placeable == Placeable(3, None, "planning stops at 3 pods; more may fit")
    assert bounded.to_dict()["placeable"] == {"pods": 3, "code": None,
                                              "reason": "planning stops at 3 pods; more may fit"}


def test_node_allocations_reports_requested_free_and_unknown() -> None:
    view = cluster([make_node("a").cpu("4").memory("8Gi").disk(None).info()],
                   [make_pod("o").cpu("1").memory("2Gi").on("a").labels({}).info()])
    out = node_allocations(view, Settings(cpu_overcommit_percent=150))
    a = out["a"]
    assert a["allocatable"]["cpu"] == 4000
    assert a["requested"]["cpu"] == 1000
    assert a["requested"]["memory"] == gib(2)
    assert a["free"]["cpu"] == 6000 - 1000
    assert a["free"]["memory"] == gib(6)
    assert a["unknown"] == ["ephemeral-storage"]


def test_extended_resource_absent_from_node_is_zero_not_unknown() -> None:
    view = cluster([make_node("gpu").resources({"nvidia.com/gpu": "1"}).info(), make_node("plain").info()])
    gpu_pod = make_pod("new").requests({"nvidia.com/gpu": "1"}).info()
    assert "plain" in evaluate(view, gpu_pod).decision.refused
    result = plan(view, gpu_pod, make_policy().strategy("Auto").build(), count=2)
    assert result.error is not None and result.error.code is ErrorCode.INSUFFICIENT_RESOURCE


# -- one text per cause, for kube-scheduler's FailedScheduling event ----------------------------------

def _causes(s: Scenario) -> dict[str, str]:
    decision = run(s)
    return {name: refusal_cause(refusal.reason) for name, refusal in decision.refused.items()}


_ZONE_SPREAD = {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                                               "labelSelector": {"matchLabels": {"app": "web"}}}]}

# (case, scenario, the one text every refused node must share)
CAUSES = [
    ("memory_short_by_different_amounts",
     Scenario("m", nodes=(make_node("a").memory("1Gi").info(),
                          make_node("b").memory("512Mi").info()), pod=make_pod("new").memory("2Gi").info()),
     "insufficient capacity: memory"),
    ("cpu_and_memory_short",
     Scenario("cm", nodes=(make_node("a").cpu("1").memory("1Gi").info(),
                           make_node("b").cpu("500m").memory("512Mi").info()),
              pod=make_pod("new").cpu("2").memory("2Gi").info()),
     "insufficient capacity: cpu, memory"),
    ("disk_floor_at_different_fill",
     Scenario("d", nodes=(make_node("a").disk("10Gi").info(),
                          make_node("b").disk("20Gi").info()), pod=make_pod("new").disk("19Gi").info()),
     "insufficient capacity: ephemeral-storage"),
    ("leases_of_different_ages",
     Scenario("l", nodes=(make_node("a").info(), make_node("b").info()), leases={"a": NOW - 50, "b": NOW - 90}),
     "node is down: Lease not renewed"),
    ("skew_in_different_domains",
     Scenario("s", nodes=(make_node("a").labels({ZONE: "z1"}).info(), make_node("b").labels({ZONE: "z2"}).info(),
                          make_node("c").labels({ZONE: "z3"}).info()),
              pods=(*spread_pods({"a": 3, "b": 2}),), spec=_ZONE_SPREAD),
     f"topology spread: placing here breaks maxSkew 1 in {ZONE}"),
    ("node_limit_reached_with_different_counts",
     Scenario("n", nodes=(make_node("a").info(),
                          make_node("b").info(),
                          make_node("c").info()), pods=(*spread_pods({"a": 3, "b": 2}),),
              spec={"strategy": "Auto", "nodesLimit": 2}),
     "nodesLimit: already holds the per-node ceiling of 2 pods of this workload"),
    ("untolerated_taint_is_already_one_text",
     Scenario("t", nodes=(make_node("a").taints((Taint("gpu", "true", "NoSchedule"),)).info(),
                          make_node("b").taints((Taint("gpu", "true", "NoSchedule"),)).info())),
     "untolerated taint gpu=true:NoSchedule"),
]


@pytest.mark.parametrize(("name", "scenario", "cause"), CAUSES, ids=[c[0] for c in CAUSES])
def test_refusals_of_one_cause_share_one_text(name: str, scenario: Scenario, cause: str) -> None:
    causes = _causes(scenario)
    refused = {n for n, reason in causes.items() if reason == cause}
    assert len(refused) >= 2, causes
    assert set(causes.values()) == {cause}, causes


# Another value for every setting: a fit table is shared by settings alike in what a fit reads
# (berth.core.plugins.fit.settings_read), so a setting outside those must change no fit.
ANOTHER_SETTING = {"cpu_overcommit_percent": 150, "memory_overcommit_percent": 130, "min_free_disk_percent": 50,
                   "reject_unknown_capacity": True, "liveness_threshold_seconds": 5.0, "sleepy_memory_factor": 4.0,
                   "default_strategy": Strategy.SPREAD, "index": False}


@pytest.mark.parametrize("setting", sorted(ANOTHER_SETTING))
def test_a_setting_changes_a_fit_only_when_the_fit_table_key_names_it(setting: str) -> None:
    assert set(ANOTHER_SETTING) == {f.name for f in fields(Settings)}  # every setting has another value here
    base, other = Settings(), replace(Settings(), **{setting: ANOTHER_SETTING[setting]})
    nodes = [make_node("full").cpu("1").info(), make_node("roomy").cpu("8").memory("64Gi").info(),
             make_node("unknown").memory(None).info(), make_node("small-disk").disk("4Gi").info()]
    view = cluster(nodes, [make_pod("p").on("full").cpu("900m").info(),
                           make_pod("s").on("roomy").sleepy().memory("8Gi").info()])
    for pod in (make_pod("new").cpu("500m").memory("1Gi").disk("3Gi").info(),
                make_pod("z").sleepy().memory("2Gi").info()):
        need = demand(pod)
        judged = [[fit_check.judge(node, node_use(view, node.name), need, pod, s, 0) for node in nodes]
                  for s in (base, other)]
        if fit_check.settings_read(base) == fit_check.settings_read(other):
            assert judged[0] == judged[1], setting
