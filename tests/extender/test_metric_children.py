"""The verbs' metrics look each labelled child up once (Metrics.labelled), and count exactly as a
lookup per observation would."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client.metrics import MetricWrapperBase

from berth.extender.metrics import Metrics
from tests.builders import make_node, make_pod, make_policy
from tests.extender.helpers import harness


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, tuple[str, ...]]]]:
    """Every labels() call of prometheus_client, by metric name and values."""
    seen: list[tuple[str, tuple[str, ...]]] = []
    labels = MetricWrapperBase.labels

    def counted(self: MetricWrapperBase, *values: Any, **named: Any) -> Any:
        seen.append((self._name, tuple(map(str, values))))
        return labels(self, *values, **named)

    monkeypatch.setattr(MetricWrapperBase, "labels", counted)
    yield seen


def sample(metrics: Metrics, name: str, labels: dict[str, str]) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return value if value is not None else 0.0


def test_a_verbs_latency_and_result_are_counted_each_time_and_looked_up_once(
        lookups: list[tuple[str, tuple[str, ...]]]) -> None:
    metrics = Metrics()
    for _ in range(3):
        metrics.observe("filter", 0.002, "placed")
    metrics.observe("filter", 0.004)
    metrics.observe("prioritize", 0.001, "reused")
    assert sample(metrics, "berth_extender_request_seconds_count", {"verb": "filter"}) == 4
    assert sample(metrics, "berth_extender_request_seconds_sum", {"verb": "filter"}) == pytest.approx(0.010)
    assert sample(metrics, "berth_extender_decisions_total", {"verb": "filter", "result": "placed"}) == 3
    assert sample(metrics, "berth_extender_decisions_total", {"verb": "prioritize", "result": "reused"}) == 1
    assert sorted(lookups) == sorted([("berth_extender_request_seconds", ("filter",)),
                                      ("berth_extender_decisions", ("filter", "placed")),
                                      ("berth_extender_request_seconds", ("prioritize",)),
                                      ("berth_extender_decisions", ("prioritize", "reused"))])


def test_a_second_scheduling_cycle_looks_up_no_label(lookups: list[tuple[str, tuple[str, ...]]]) -> None:
    h = harness([make_node("a").cpu("4").obj(), make_node("b").cpu("4").obj(),
                 make_policy("web").strategy("Spread").obj()])
    first, second = (make_pod(f"web-{i}").labels({"app": "web"}).cpu("1").obj() for i in range(2))
    assert h.schedule(first) is not None
    looked_up = len(lookups)
    assert looked_up > 0
    assert h.schedule(second) is not None
    assert lookups[looked_up:] == []
    metrics: Metrics = h.app.state.engine.metrics
    assert sample(metrics, "berth_extender_request_seconds_count", {"verb": "bind"}) == 2
    assert sample(metrics, "berth_bind_step_seconds_count", {"step": "recheck"}) == 2
