"""The cyclic collector stays out of the requests' way: the verbs leave no reference cycles behind
(their garbage goes with reference counting, never to a collection), and once the view is in,
young collections come rarely."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import orjson
import pytest

from berth.extender.heap import YOUNG_THRESHOLD, collector_paused, settle
from berth.extender.wire import ExtenderArgs
from tests.builders import make_node, make_pod, make_policy
from tests.extender.helpers import ZONE, args, harness

WEB = {"app": "web"}


@pytest.fixture
def no_collections() -> Iterator[None]:
    """The collector off (what a test leaves behind is found by the explicit collection only)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def test_filter_and_prioritize_leave_no_reference_cycles(no_collections: None) -> None:
    rules = [{"resource": "Node", "operator": "HasNot", "labels": {"type": "gpu"}},
             {"anyOf": [{"resource": "Pod", "operator": "HasNot", "labels": {"role": "db"}, "within": "rack"},
                        {"resource": "Node", "operator": "Has", "labels": {"disk": "ssd"}}]}]
    spread = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}]
    nodes = [(make_node(f"n{i}")
              .labels({ZONE: f"z{i % 3}", "rack": f"r{i // 4}", "type": "gpu" if i == 5 else "cpu"})
              .obj())
             for i in range(12)]
    h = harness([*nodes, (make_policy("web")
                          .strategy("Spread")
                          .spec(topologySpreadConstraints=spread, placementRules=rules)
                          .obj()),
                 make_pod("db-0").labels({"role": "db"}).on("n0").obj()])
    engine = h.app.state.engine

    def pair(i: int) -> None:
        p = make_pod(f"web-{i}").labels(WEB).obj()
        request = ExtenderArgs.model_validate(args(p, [f"n{k}" for k in range(12)]))
        passing = engine.filter(request)["NodeNames"]
        orjson.dumps(engine.prioritize(ExtenderArgs.model_validate(args(p, passing))))

    pair(0)  # the first pair builds the tables the next ones keep
    gc.collect()
    for i in range(1, 20):
        pair(i)
    assert gc.collect() == 0  # nothing for the collector: all freed by reference counting


def test_settle_freezes_the_view_and_spaces_young_collections_out() -> None:
    before = gc.get_threshold()
    try:
        with collector_paused():
            kept = [{"object": i} for i in range(1000)]  # a view built with the collector paused
        settle()
        assert gc.get_threshold() == (YOUNG_THRESHOLD, *before[1:])
        assert gc.get_freeze_count() >= len(kept)
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


def test_after_settle_a_young_collection_comes_within_a_few_thousand_new_objects() -> None:
    """Every reply waiting on the event loop waits out a collection whole, and a young collection
    scans every object made since the last one: they come often enough to stay short."""
    before = gc.get_threshold()
    collected: list[int] = []

    def noted(phase: str, info: dict[str, int]) -> None:
        if phase == "stop":
            collected.append(info["generation"])

    try:
        settle()
        gc.callbacks.append(noted)
        kept = [{"object": i} for i in range(3000)]  # new objects that live on, as a view's do
        assert collected, f"no collection within {len(kept)} new objects"
    finally:
        if noted in gc.callbacks:
            gc.callbacks.remove(noted)
        gc.unfreeze()
        gc.set_threshold(*before)


@pytest.mark.parametrize(("index", "made"), [("on", True), ("off", False)])
def test_the_app_makes_the_index_before_the_first_filter(monkeypatch: pytest.MonkeyPatch, index: str,
                                                         made: bool) -> None:
    """With the index on, the app makes it as it is made, rather than leaving the first filter a walk
    of every pod of the view; with the index off, nothing is made."""
    monkeypatch.setenv("BERTH_INDEX", index)
    h = harness([make_node("n0").obj(), make_pod("p0").on("n0").obj()])
    assert (h.store.view.index is not None) is made
