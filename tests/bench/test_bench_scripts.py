"""The benchmarks' own arithmetic and set-up, small: a benchmark that measures the wrong thing (or
nothing) reports a figure all the same."""

from __future__ import annotations

from bench.bench_nominated_filter import build_store, run


def test_the_nominated_filter_benchmark_nominates_every_pod_and_each_filter_hits() -> None:
    """The benchmark plans its pods at once (the nominator's wait before taking a pod would leave it
    nothing to time)."""
    got = run(build_store(6), "Drained", 12, None)
    assert (got["filters"], got["hits"]) == (12, 12)
