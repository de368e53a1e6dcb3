"""The decision record: one versioned shape, its published schema, and the records berth wrote
before the version field existed."""

from __future__ import annotations

import json

import pytest

from berth.core.decision import (
    DECISION_API_VERSION,
    Decision,
    DecisionRecord,
    Refusal,
    Refused,
    decision_record_schema,
    ranked_score,
)
from berth.core.errors import ErrorCode, PlacementError
from berth.core.evaluate import scores
from berth.core.policy import policy_from_manifest
from berth.operator import crdgen
from tests.builders import make_node, make_pod, make_policy
from tests.core.builders import cluster, evaluate
from tests.decision_schema import SCHEMA_FILE, schema_problems, valid_record

TIME = "2026-01-01T00:00:00Z"


def test_published_schema_is_what_the_model_generates() -> None:
    assert SCHEMA_FILE.read_text() == crdgen.render_decision_record(), (
        "docs/decision-record.schema.json is stale: run `python -m berth.operator.crdgen decision-record > "
        "docs/decision-record.schema.json`")
    assert json.loads(SCHEMA_FILE.read_text()) == decision_record_schema()


def test_generator_writes_the_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert crdgen.main(["decision-record"]) == 0
    assert capsys.readouterr().out == SCHEMA_FILE.read_text()


def test_record_of_an_evaluation_validates_and_counts_every_node() -> None:
    view = cluster([make_node("a").cpu("1").info(),
                    make_node("b").cpu("1").info(),
                    make_node("c").info(),
                    make_node("d").cordoned().info()])
    governing = policy_from_manifest({**(m := make_policy().obj()), "metadata": {**m["metadata"], "generation": 7}})
    decision = evaluate(view, make_pod("new").cpu("2").info(), governing).decision
    decision.time, decision.trigger = TIME, "filter"
    record = valid_record(decision.record().to_json())
    assert (record.considered_count, record.considered) == (4, ["a", "b", "c", "d"])
    assert record.refused_count == 3 and sum(group.count for group in record.refused) == 3
    assert [(group.reason, group.count, group.nodes) for group in record.refused] == [
        ("insufficient capacity: cpu", 2, ["a", "b"]),
        ("node is cordoned (spec.unschedulable)", 1, ["d"])]
    assert record.refusal_of("a") == decision.refused["a"].reason and "needs 2" in record.refusal_of("a")
    assert record.refusal_of("d") == "node is cordoned (spec.unschedulable)"
    assert record.refused[1].details == {}  # no figures beyond the cause
    assert record.winner is not None and (record.winner.node, record.winner.rank, record.winner.score) == ("c", 1, 10)
    assert (record.ranking_count, record.ranking) == (1, ["c"])
    assert (record.policy, record.policy_generation, record.strategy) == ("shop/web", 7, "Default")


def test_record_lists_the_first_nodes_and_keeps_every_count() -> None:
    refused = Refused({f"n{i:03d}": Refusal(f"insufficient capacity: memory: needs {i}") for i in range(150)})
    refused.group(frozenset(f"z{i:03d}" for i in range(40)), Refusal("node filter: excluded", False))
    considered = [*(f"n{i:03d}" for i in range(150)), *(f"z{i:03d}" for i in range(40)), "ok"]
    decision = Decision(pod="shop/p", policy=None, strategy="Default", considered=considered, refused=refused,
                        ranking=["ok"], trigger="filter", time=TIME)
    record = valid_record(decision.record(limit=20).to_json())
    assert (record.considered_count, len(record.considered)) == (191, 20)
    assert record.refused_count == 190
    assert [(g.reason, g.count, len(g.nodes)) for g in record.refused] == [
        ("insufficient capacity: memory", 150, 20), ("node filter: excluded", 40, 0)]
    cut = valid_record(record.cut(5).to_json())
    assert (cut.considered_count, cut.refused_count, len(cut.considered)) == (191, 190, 5)
    assert cut.refused[0].nodes == ["n000", "n001", "n002", "n003", "n004"]
    assert set(cut.refused[0].details) == set(cut.refused[0].nodes)


def test_record_of_a_failure_has_its_error_and_no_winner() -> None:
    decision = Decision(pod="p/q", policy=None, strategy="Default", ranking=["a"], trigger="preview", time=TIME,
                        error=PlacementError(ErrorCode.AFFINITY_UNSATISFIED, "x"), plan={"a": 1}, round_id="r-1")
    record = valid_record(decision.record().to_json())
    assert record.winner is None and record.error is not None
    assert (record.error.code, record.error.message) == (ErrorCode.AFFINITY_UNSATISFIED, "x")
    assert record.round is not None and (record.round.id, record.round.plan) == ("r-1", {"a": 1})


def _mixed_refusals() -> Refused:
    refused = Refused({f"n{i:03d}": Refusal(f"insufficient capacity: memory: needs {i}") for i in range(30)})
    refused.one("c000", Refusal("node is cordoned (spec.unschedulable)", False))
    refused.group(frozenset(f"z{i:03d}" for i in range(40)), Refusal(
        "topology spread: placing here makes skew 2 in topology.kubernetes.io/zone=zone-1 (maxSkew 1)"))
    return refused


RECORDED_DECISIONS = {
    "a winner, refusals one by one and in a group, cut": Decision(
        pod="shop/p", policy="shop/web", strategy="Spread", refused=_mixed_refusals(), ranking=["ok", "ok2"],
        considered=["c000", *(f"z{i:03d}" for i in range(40)), *(f"n{i:03d}" for i in range(30)), "ok", "ok2"],
        warnings=["w"], trigger="filter", time=TIME, policy_generation=2),
    "no node, a round": Decision(
        pod="p/q", policy=None, strategy="Fill", considered=["a"], refused=Refused({"a": Refusal("not Ready", False)}),
        trigger="prioritize", time=TIME, plan={"a": 1}, round_id="r-1",
        error=PlacementError(ErrorCode.INSUFFICIENT_RESOURCE, "0/1 nodes can take the pod")),
    "nothing considered": Decision(pod="p/q", policy=None, strategy="Default", trigger="preview", time=TIME),
}


@pytest.mark.parametrize("decision", RECORDED_DECISIONS.values(), ids=RECORDED_DECISIONS.keys())
def test_record_data_is_the_record_as_json(decision: Decision) -> None:
    """The filter encodes record_data without making the model: it must be the model's JSON form."""
    data = decision.record_data(limit=20)
    assert data == decision.record(limit=20).to_json()
    assert valid_record(data).to_json() == data


def test_a_decision_is_recorded_only_once_stamped() -> None:
    with pytest.raises(ValueError, match="stamped"):
        Decision(pod="p/q", policy=None, strategy="Default").record()


@pytest.mark.parametrize("total", range(1, 60))
def test_ranked_score_is_the_score_kube_scheduler_gets(total: int) -> None:
    ranking = [f"n{i}" for i in range(total)]
    given = scores(ranking)
    assert [ranked_score(i, total) for i in range(total)] == [given[n] for n in ranking]


def test_record_round_trips_through_json() -> None:
    decision = Decision(pod="shop/p", policy="shop/web", strategy="Fill", considered=["a", "b"],
                        refused=Refused({"b": Refusal("not Ready", False)}), ranking=["a"], warnings=["w"],
                        trigger="bind", time=TIME, plan={"a": 1}, policy_generation=3, round_id="shop/web-1")
    record = decision.record()
    assert DecisionRecord.read_json(record.model_dump_json(by_alias=True)) == record
    assert DecisionRecord.read(record.to_json()) == record


# An annotation as berth wrote it before the record had a version (the extender reads it after a
# restart to resume a round; the operator copies it into the policy status).
UNVERSIONED_ANNOTATION = (
    '{"pod":"shop/web-3","policy":"shop/web","strategy":"Fill","trigger":"bind","time":"2026-03-02T10:15:30.25Z",'
    '"considered":["node-a","node-b","node-c"],"refused":{"node-c":"insufficient capacity: memory: needs 2.0 GiB, '
    '1.0 GiB free","node-b":"node is cordoned (spec.unschedulable)"},"winner":"node-a","ranking":["node-a"],'
    '"warnings":["kube-scheduler chose node-a; berth ranked node-b first"],"error":null,'
    '"plan":{"node-a":2,"node-d":1},"consideredTotal":61,"refusedTotal":60}')


def test_unversioned_annotation_is_read_as_this_version() -> None:
    record = DecisionRecord.read_json(UNVERSIONED_ANNOTATION)
    assert record is not None and record.api_version == DECISION_API_VERSION
    assert (record.pod, record.policy, record.strategy, record.trigger, record.time) == (
        "shop/web-3", "shop/web", "Fill", "bind", "2026-03-02T10:15:30.25Z")
    assert (record.considered_count, record.considered) == (61, ["node-a", "node-b", "node-c"])
    assert record.refused_count == 60
    assert record.refusals() == {"node-b": "node is cordoned (spec.unschedulable)",
                                 "node-c": "insufficient capacity: memory: needs 2.0 GiB, 1.0 GiB free"}
    assert [(g.reason, g.count) for g in record.refused] == [
        ("insufficient capacity: memory", 1), ("node is cordoned (spec.unschedulable)", 1)]
    assert record.winner is not None and (record.winner.node, record.winner.rank, record.winner.score) == (
        "node-a", None, None)
    assert record.round is not None and (record.round.id, record.round.plan) == (None, {"node-a": 2, "node-d": 1})
    assert (record.ranking, record.ranking_count) == (["node-a"], 1)
    assert record.warnings == ["kube-scheduler chose node-a; berth ranked node-b first"]
    assert not schema_problems(record.to_json())


def test_unversioned_status_copy_is_read_with_its_counts() -> None:
    status_copy = {"pod": "shop/web-1", "policy": "shop/web", "strategy": "Auto", "trigger": "filter",
                   "time": TIME, "consideredCount": 9, "considered": ["a"], "refusedCount": 4,
                   "refused": {"a": "node filter: excluded"}, "ranking": ["b", "c"],
                   "warnings": [], "error": {"code": "insufficient_resource", "message": "no room"}}
    record = DecisionRecord.read(status_copy)
    assert record is not None
    assert (record.considered_count, record.refused_count, record.ranking_count) == (9, 4, 5)
    assert record.error is not None and record.error.code is ErrorCode.INSUFFICIENT_RESOURCE
    assert record.winner is None


@pytest.mark.parametrize("data", [
    None, [], "text", {"apiVersion": "berth.dev/decision/v9", "pod": "a/b"},
    {"pod": "a/b", "time": TIME, "trigger": "guess"}, {"time": TIME}, {"pod": "a/b"},
    {"pod": "a/b", "time": TIME, "refused": ["not", "a", "map"]},
])
def test_anything_else_is_not_a_record(data: object) -> None:
    assert DecisionRecord.read(data) is None


@pytest.mark.parametrize("text", ["", "{", "null", "[1]"])
def test_an_unreadable_annotation_is_not_a_record(text: str) -> None:
    assert DecisionRecord.read_json(text) is None


def test_schema_refuses_the_drifting_names() -> None:
    decision = Decision(pod="p/q", policy=None, strategy="Default", trigger="filter", time=TIME)
    data = decision.record().to_json()
    assert not schema_problems(data)
    assert schema_problems({**data, "consideredTotal": 3})
    assert schema_problems({k: v for k, v in data.items() if k != "apiVersion"})
    assert schema_problems({**data, "refused": {"a": "why"}})


def test_the_record_shown_in_the_docs_is_valid() -> None:
    text = (SCHEMA_FILE.parent / "behaviour.md").read_text()
    section = text[text.index("## Decision records"):]
    example = section[section.index("```json\n") + len("```json\n"):section.index("\n```", section.index("```json"))]
    record = valid_record(json.loads(example))
    assert sum(group.count for group in record.refused) == record.refused_count
