"""The benchmarks' own arithmetic and set-up, small: a benchmark that measures the wrong thing (or
nothing) reports a figure all the same."""

from __future__ import annotations

from bench.bench_nominated_filter import build_store, run
from bench.bench_scheduler_throughput import scheduler_means_ms

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


def test_the_nominated_filter_benchmark_nominates_every_pod_and_each_filter_hits() -> None:
    """The benchmark plans its pods at once (the nominator's wait before taking a pod would leave it
    nothing to time)."""
    got = run(build_store(6), "Drained", 12, None)
    assert (got["filters"], got["hits"]) == (12, 12)
