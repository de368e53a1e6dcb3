"""The record a bind keeps (the pod's decision annotation, the explain API's record) is the same with
the index on and off (``BERTH_INDEX=off``): with the index, filter's record is changed as JSON data
(``berth.core.index.records``), never read into the record model; without it, read into the model,
copied and encoded again."""

from __future__ import annotations

import contextlib
from typing import Any
from unittest import mock

import orjson
import pytest

from berth.core import DecisionRecord
from tests.builders import NAMESPACE, make_node, make_pod, make_policy
from tests.extender.helpers import harness

# 30 nodes with room, 30 too small (refused with their own figures, more than a record lists) and a
# cordoned one; the pods' policy; which node kube-scheduler binds: berth's first, another of the
# nodes filter's record ranks.
BIND_RECORDS = [
    ("Auto, bound where berth ranks first", "Auto", {}, 0),
    ("Auto, bound on the node berth ranks third", "Auto", {}, 2),
    ("BestFit, bound on the node berth ranks last", "BestFit", {}, -1),
    ("Fill, the round's carrier records its whole plan", "Fill", {"count": 2, "nodesLimit": 10}, 0),
    ("Fill, bound off the place berth ranks first", "Fill", {"count": 2, "nodesLimit": 10}, 1),
    ("Each, under topology spread", "Each", {"count": 1, "nodesLimit": 10, "topologySpreadConstraints": [
        {"maxSkew": 5, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchLabels": {"app": "web"}}}]}, 0),
]


def bound_records(strategy: str, spec: dict[str, Any], pick: int, index: str,
                  monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    monkeypatch.setenv("BERTH_INDEX", index)
    pods = [make_pod(f"web-{i}").labels({"app": "web"}).cpu("300m").memory("256Mi").obj() for i in range(3)]
    h = harness([*pods,*(make_node(f"big-{i:02d}").cpu("4").memory("8Gi").labels({"zone": f"z{i % 3}"}).obj()
                   for i in range(30)),
                 *(make_node(f"small-{i:02d}").cpu("100m").memory("8Gi").labels({"zone": f"z{i % 3}"}).obj()
                   for i in range(30)),
                 make_node("off").cpu("4").memory("8Gi").cordoned().obj(),
                 make_policy("web").strategy(strategy).spec(**spec).obj()])
    names = sorted(h.store.view.nodes)
    engine = h.app.state.engine
    seen = []
    for i, pod in enumerate(pods):  # pending together: a round places all three
        assert h.filter(pod, names[i:] + names[:i])["NodeNames"]
        key = f"{NAMESPACE}/web-{i}"
        # bound straight after filter (prioritize judges again with the index off, and records that)
        ranking = orjson.loads(h.store.decisions[key])["ranking"]
        node = ranking[min(pick, len(ranking) - 1)]
        # with the index, the bind never reads filter's record into the record model
        unread = mock.patch.object(DecisionRecord, "model_validate_json", side_effect=AssertionError("read"))
        with unread if index == "on" else contextlib.nullcontext():
            assert h.bind(pod, node) == ""
        seen.append((engine.binder.annotations[key], h.store.decisions[key]))
    return seen


@pytest.mark.parametrize(("strategy", "spec", "pick"), [case[1:] for case in BIND_RECORDS],
                         ids=[case[0] for case in BIND_RECORDS])
def test_a_binds_record_is_filters_changed_as_data_with_the_index_and_the_same_without(
        strategy: str, spec: dict[str, Any], pick: int, monkeypatch: pytest.MonkeyPatch) -> None:
    indexed = bound_records(strategy, spec, pick, "on", monkeypatch)
    assert indexed == bound_records(strategy, spec, pick, "off", monkeypatch)
    record = orjson.loads(indexed[0][1])  # filter's record cut to the annotation's 20 nodes a list
    assert record["trigger"] == "bind" and record["refusedCount"] >= 31, record
    assert sum(len(group["nodes"]) for group in record["refused"]) == 20, record
    if strategy not in ("Fill", "Each"):  # a round lists the nodes off its plan first
        assert any(group["details"] for group in record["refused"]), record
