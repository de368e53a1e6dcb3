"""The benchmarks' own arithmetic and set-up, small: a benchmark that measures the wrong thing (or
nothing) reports a figure all the same."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.bench_nominated_filter import build_store, run
from bench.bench_scheduler_throughput import cpu_profile_option, judge_vs_noop, reference_label, scheduler_means_ms

SCHEDULER_PAGE = """\
# TYPE scheduler_framework_extension_point_duration_seconds histogram
scheduler_framework_extension_point_duration_seconds_sum{extension_point="Filter",status="Success"} 1.5
scheduler_framework_extension_point_duration_seconds_count{extension_point="Filter",status="Success"} 600
scheduler_framework_extension_point_duration_seconds_sum{extension_point="Filter",status="Unschedulable"} 0.5
scheduler_framework_extension_point_duration_seconds_count{extension_point="Filter",status="Unschedulable"} 400
scheduler_framework_extension_point_duration_seconds_sum{extension_point="Reserve",status="Success"} 9.0
scheduler_framework_extension_point_duration_seconds_count{extension_point="Reserve",status="Success"} 1000
# TYPE scheduler_scheduling_algorithm_duration_seconds histogram
scheduler_scheduling_algorithm_duration_seconds_sum 4.0
scheduler_scheduling_algorithm_duration_seconds_count 1000
"""


def test_kube_schedulers_filter_time_a_pod_is_the_filter_extension_points_alone() -> None:
    assert scheduler_means_ms(SCHEDULER_PAGE) == {"filter": 2.0, "algorithm": 4.0}


def test_kube_schedulers_times_are_unknown_when_it_scheduled_nothing() -> None:
    assert scheduler_means_ms("") == {"filter": None, "algorithm": None}


def test_a_cpu_profile_option_gives_its_folder_and_seconds() -> None:
    assert cpu_profile_option("out/profiles:12.5") == (Path("out/profiles"), 12.5)


@pytest.mark.parametrize("text", ["profiles", ":10", "profiles:", "profiles:ten", "profiles:0.5", "profiles:601",
                                  "profiles:nan"])
def test_a_cpu_profile_option_without_a_folder_and_seconds_from_1_to_600_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="DIR:SECONDS"):
        cpu_profile_option(text)


def test_the_nominated_filter_benchmark_nominates_every_pod_and_each_filter_hits() -> None:
    """The benchmark plans its pods at once (the nominator's wait before taking a pod would leave it
    nothing to time)."""
    got = run(build_store(6), "Drained", 12, None)
    assert (got["filters"], got["hits"]) == (12, 12)


def rows(*rates: tuple[str, float]) -> list[dict[str, Any]]:
    return [{"config": config, "pods_per_second": rate} for config, rate in rates]


RUN = (("default", 400.0), ("noop", 200.0), ("noop-auto-nominate", 160.0), ("berth-auto-nominate", 160.0),
       ("noop-fill-nominate", 100.0), ("berth-fill-nominate", 90.0))


@pytest.mark.parametrize(("references", "expected"), [
    pytest.param(set(), {"default": ("noop", 2.0), "noop": ("noop", 1.0), "noop-auto-nominate": ("noop", 0.8),
                         "berth-auto-nominate": ("noop", 0.8), "noop-fill-nominate": ("noop", 0.5),
                         "berth-fill-nominate": ("noop", 0.45)},
                 id="without --noop-each every row is judged against the first noop row"),
    pytest.param({"noop-auto-nominate", "noop-fill-nominate"},
                 {"default": ("noop", 2.0), "noop": ("noop", 1.0), "noop-auto-nominate": ("noop", 0.8),
                  "berth-auto-nominate": ("noop-auto-nominate", 1.0), "noop-fill-nominate": ("noop", 0.5),
                  "berth-fill-nominate": ("noop-fill-nominate", 0.9)},
                 id="with --noop-each a berth row is judged against the noop row run just before it"),
])
def test_a_rows_ratio_to_the_noop_extender_uses_the_noop_row_it_names(
        references: set[str], expected: dict[str, tuple[str, float]]) -> None:
    results = rows(*RUN)
    judge_vs_noop(results, references)
    assert {r["config"]: (r["vs_noop_row"], r["vs_noop"]) for r in results} == expected


def test_a_versus_pair_is_judged_against_the_one_noop_row_run_before_the_pair() -> None:
    results = rows(("noop", 200.0), ("noop-auto-nominate", 150.0), ("berth-auto-nominate", 150.0),
                   ("berth-auto-nominate-vs", 75.0))
    judge_vs_noop(results, {"noop-auto-nominate"})
    assert [(r["vs_noop_row"], r["vs_noop"]) for r in results] == [
        ("noop", 1.0), ("noop", 0.75), ("noop-auto-nominate", 1.0), ("noop-auto-nominate", 0.5)]


def test_without_a_noop_row_no_row_has_a_ratio_to_it() -> None:
    results = rows(("default", 400.0), ("berth-auto", 100.0))
    judge_vs_noop(results, set())
    assert [(r["vs_noop_row"], r["vs_noop"]) for r in results] == [(None, None), (None, None)]


@pytest.mark.parametrize(("row", "reference"), [("berth-auto", "noop-auto"), ("berth-none", "noop-none"),
                                                ("berth-fill-profile", "noop-fill-profile"),
                                                ("berth-balanced-nominate", "noop-balanced-nominate")])
def test_the_noop_row_run_before_a_berth_row_is_named_after_it(row: str, reference: str) -> None:
    assert reference_label(row) == reference
