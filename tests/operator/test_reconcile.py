"""The status of a policy computed with the core from given pods and nodes: table-driven over
valid policies and every invalid example (docs/behaviour.md#rule-limits)."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import yaml

from berth.core import InvalidPolicy, format_time, policy_from_manifest
from berth.core.decision import DecisionRecord, Winner
from berth.core.settings import Settings
from berth.operator.patches import apply_merge_patch, merge_patch
from berth.operator.reconcile import Outcome, compute_status, parsed_policy
from berth.operator.status_model import LIST_LIMIT, PolicyStatus
from tests.builders import make_node, make_pod, make_policy
from tests.crd.schema_check import check
from tests.decision_schema import valid_record
from tests.operator import objects as o
from tests.operator.objects import store_of

ROOT = Path(__file__).resolve().parents[2]
NOW = 1_800_000_000.0


def conditions(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


def compute(body: dict[str, Any], pods: Iterable[dict[str, Any]], nodes: Iterable[dict[str, Any]] = (),
            leases: Iterable[dict[str, Any]] | None = None, now: float = NOW) -> Outcome:
    store = store_of(nodes, pods, leases)
    return compute_status(body, store.records(body["metadata"]["namespace"]), lambda: store.view, Settings(), now)


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    crd = yaml.safe_load((ROOT / "crds" / "placementpolicies.berth.dev.yaml").read_text())
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]


TWO_NODES = [make_node("node-a").disk(None).obj(), make_node("node-b").disk(None).cpu("2").obj()]
WEB = {"selector": {"matchLabels": {"app": "web"}}}

CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]], dict[str, Any]]] = [
    ("no pods", WEB, [], {
        "conditions": {"Valid": ("True", "Validated"), "Satisfied": ("True", "NoPendingPods"),
                       "Ready": ("True", "AllPodsPlaced")},
        "selected": 0, "placedTotal": 0, "pending": 0, "placed": {}, "plan": None}),
    ("all placed", WEB, [make_pod("w1").on("node-a").cpu("1").memory("1Gi").obj(),
                         make_pod("w2").on("node-b").cpu("1").memory("1Gi").obj(),
                         make_pod("w3").on("node-a").cpu("1").memory("1Gi").obj()], {
        "conditions": {"Satisfied": ("True", "NoPendingPods"), "Ready": ("True", "AllPodsPlaced")},
        "selected": 3, "placedTotal": 3, "placed": {"node-a": 2, "node-b": 1}, "pending": 0}),
    ("pending that fit", WEB, [make_pod("w1").on("node-a").cpu("1").memory("1Gi").obj(),
                               make_pod("w2").cpu("1").memory("1Gi").obj(),
                               make_pod("w3").cpu("1").memory("1Gi").obj()], {
        "conditions": {"Satisfied": ("True", "Planned"), "Ready": ("False", "PodsPending")},
        "pending": 2, "plan": {"node-a": 1, "node-b": 1}, "planError": None}),
    ("Auto over two nodes", {**WEB, "strategy": "Auto"}, [make_pod("w1").on("node-a").cpu("1").memory("1Gi").obj(),
                                                          make_pod("w2").cpu("1").memory("1Gi").obj(),
                                                          make_pod("w3").cpu("1").memory("1Gi").obj()], {
        "strategy": "Auto", "plan": {"node-a": 1, "node-b": 1}}),
    ("insufficient resource", WEB, [make_pod("big").cpu("8").memory("1Gi").obj()], {
        "conditions": {"Satisfied": ("False", "InsufficientResource"), "Ready": ("False", "PodsPending")},
        "planError.code": "insufficient_resource", "plan": None}),
    ("already filled", {**WEB, "strategy": "Fill", "count": 1},
     [make_pod("w1").on("node-a").cpu("1").memory("1Gi").obj(),
      make_pod("w2").on("node-b").cpu("1").memory("1Gi").obj(),
      make_pod("w3").cpu("1").memory("1Gi").obj()], {
        "conditions": {"Satisfied": ("False", "AlreadyFilled")}, "planError.code": "already_filled"}),
    ("affinity unsatisfied", {**WEB, "placementRules": [
        {"resource": "Node", "operator": "Has", "labels": {"gpu": "a100"}}]}, [(make_pod("w1")
                                                                                .cpu("1")
                                                                                .memory("1Gi")
                                                                                .obj())], {
        "conditions": {"Satisfied": ("False", "AffinityUnsatisfied")}, "planError.code": "affinity_unsatisfied"}),
    ("spread unsatisfied", {**WEB, "topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
         "minDomains": 3}]}, [make_pod("w1").on("node-a").cpu("1").memory("1Gi").obj(),
                              make_pod("w2").on("node-b").cpu("1").memory("1Gi").obj(),
                              make_pod("w3").cpu("1").memory("1Gi").obj()], {
        "conditions": {"Satisfied": ("False", "SpreadUnsatisfied")}, "planError.code": "spread_unsatisfied"}),
    ("includes naming a missing node", {**WEB, "nodeFilter": {"includes": ["node-a", "node-gone"]}},
     [(make_pod("w1")
       .on("node-a")
       .cpu("1")
       .memory("1Gi")
       .obj())], {"conditions": {"Valid": ("True", "IncludesUnknownNodes")}}),
    ("affinity met", {**WEB, "placementRules": [
        {"resource": "Pod", "operator": "HasNot", "labels": {"app": "web"}}]}, [(make_pod("w1")
                                                                                 .on("node-a")
                                                                                 .cpu("1")
                                                                                 .memory("1Gi")
                                                                                 .obj()),
                                                                                (make_pod("w2")
                                                                                 .cpu("1")
                                                                                 .memory("1Gi")
                                                                                 .obj())], {
        "conditions": {"Satisfied": ("True", "Planned")}, "plan": {"node-b": 1}}),
    ("other namespaces, unselected, finished and terminating pods do not count", WEB, [
        make_pod("w1").on("node-a").cpu("1").memory("1Gi").obj(),
        make_pod("x").on("node-a").namespace("other").cpu("1").memory("1Gi").obj(),
        make_pod("y").labels({"app": "db"}).cpu("1").memory("1Gi").obj(),
        make_pod("done").on("node-b").phase("Succeeded").cpu("1").memory("1Gi").obj(),
        make_pod("failed").phase("Failed").cpu("1").memory("1Gi").obj(),
        make_pod("going").on("node-b").terminating().cpu("1").memory("1Gi").obj()], {
        "selected": 1, "placed": {"node-a": 1}, "pending": 0,
        "conditions": {"Ready": ("True", "AllPodsPlaced")}}),
    ("empty selector selects the whole namespace", {}, [(make_pod("a")
                                                         .on("node-a")
                                                         .labels({})
                                                         .cpu("1")
                                                         .memory("1Gi")
                                                         .obj()),
                                                        make_pod("b").labels({"x": "y"}).cpu("1").memory("1Gi").obj()],
     {"selected": 2, "pending": 1, "strategy": "Default"}),
]


def _get(status: dict[str, Any], dotted: str) -> Any:
    value: Any = status
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


@pytest.mark.parametrize(("name", "spec", "pods", "expected"), CASES, ids=[c[0] for c in CASES])
def test_status(name: str, spec: dict[str, Any], pods: list[dict[str, Any]], expected: dict[str, Any],
                schema: dict[str, Any]) -> None:
    outcome = compute(make_policy().whole_spec(spec).generation(7).obj(), pods, TWO_NODES)
    status = outcome.status
    assert outcome.invalid is None and outcome.policy is not None
    assert status["observedGeneration"] == 7
    assert [c["type"] for c in status["conditions"]] == ["Valid", "Satisfied", "Ready"]
    assert all(c["observedGeneration"] == 7 and c["lastTransitionTime"] == format_time(NOW)
               for c in status["conditions"])
    got = conditions(status)
    for kind, want in expected.get("conditions", {}).items():
        assert got[kind] == want, kind
    for key, want in expected.items():
        if key != "conditions":
            assert _get(status, key) == want, key
    assert check(schema, status) is None
    PolicyStatus.model_validate(status)


def test_unsatisfied_message_names_the_shortfall() -> None:
    status = compute(make_policy().whole_spec(WEB).obj(), [(make_pod("big")
                                                            .memory("20Gi")
                                                            .cpu("1")
                                                            .obj())], TWO_NODES).status
    satisfied = next(c for c in status["conditions"] if c["type"] == "Satisfied")
    assert "node-a: insufficient capacity: memory" in satisfied["message"]
    assert status["planError"]["message"] == satisfied["message"]


def test_the_oldest_pending_pod_is_the_rounds_shape() -> None:
    pods = [make_pod("late").cpu("8").created("2026-01-02T00:00:00Z").memory("1Gi").obj(),
            make_pod("early").cpu("1").memory("1Gi").obj()]
    assert compute(make_policy().whole_spec(WEB).obj(), pods, TWO_NODES).status["plan"] == {"node-a": 1, "node-b": 1}


def test_node_liveness_by_leases() -> None:
    leases = [o.lease("node-a", "2027-01-15T07:59:50Z"), o.lease("node-b", "2027-01-15T07:00:00Z")]
    status = compute(make_policy().whole_spec(WEB).obj(), [make_pod("w1").cpu("1").memory("1Gi").obj(),
                     make_pod("w2").cpu("1").memory("1Gi").obj()], TWO_NODES, leases).status
    assert status["plan"] == {"node-a": 2}  # node-b's lease is an hour old


# -- invalid policies ------------------------------------------------------------------------------

INVALID = sorted((ROOT / "examples" / "invalid").glob("*.yaml"))


def _expected(path: Path) -> str:
    return next(line.removeprefix("# berth: ") for line in path.read_text().splitlines()
                if line.startswith("# berth: "))


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_invalid_policy_gets_valid_false_with_the_path(path: Path, schema: dict[str, Any]) -> None:
    body = yaml.safe_load(path.read_text())
    body["metadata"].update(namespace=o.NAMESPACE, generation=3)
    outcome = compute(body, [make_pod("w1").on("node-a").cpu("1").memory("1Gi").obj()], TWO_NODES)
    status = outcome.status
    assert outcome.invalid is not None and outcome.policy is None
    message = _expected(path)
    valid = next(c for c in status["conditions"] if c["type"] == "Valid")
    assert (valid["status"], valid["reason"], valid["message"]) == ("False", "InvalidSpec", message)
    assert message.startswith("spec")
    assert conditions(status)["Ready"] == ("False", "InvalidSpec")
    assert conditions(status)["Satisfied"] == ("Unknown", "InvalidSpec")
    assert set(status) == {"observedGeneration", "conditions"}
    assert [(e.type, e.reason, e.message) for e in outcome.events] == [("Warning", "InvalidSpec", message)]
    assert check(schema, status) is None


def test_a_policy_turning_invalid_drops_its_counts_and_back() -> None:
    valid = compute(make_policy().whole_spec(WEB).obj(), [(make_pod("w1")
                                                           .on("node-a")
                                                           .cpu("1")
                                                           .memory("1Gi")
                                                           .obj())], TWO_NODES).status
    broken = make_policy().whole_spec({**WEB, "placementRules": [{"anyOf": []}]}).generation(2).status(valid).obj()
    invalid = compute(broken, [make_pod("w1").on("node-a").cpu("1").memory("1Gi").obj()], TWO_NODES, now=NOW + 60)
    patch = merge_patch(valid, invalid.status)
    assert patch["placed"] is None and patch["selected"] is None
    after = apply_merge_patch(valid, patch)
    assert after == invalid.status
    fixed = compute((make_policy()
                     .whole_spec(WEB)
                     .generation(3)
                     .status(after)
                     .obj()), [make_pod("w1").on("node-a").cpu("1").memory("1Gi").obj()], TWO_NODES, now=NOW + 120)
    assert conditions(fixed.status)["Valid"] == ("True", "Validated")
    assert [(e.type, e.reason) for e in fixed.events] == [("Normal", "Validated"), ("Normal", "AllPodsPlaced")]


# -- transitions, idempotence -------------------------------------------------------------------------

def test_recomputing_an_unchanged_policy_changes_nothing() -> None:
    pods = [make_pod("w1").on("node-a").cpu("1").memory("1Gi").obj(), make_pod("w2").cpu("1").memory("1Gi").obj()]
    first = compute(make_policy().whole_spec(WEB).obj(), pods, TWO_NODES)
    again = compute(make_policy().whole_spec(WEB).status(first.status).obj(), pods, TWO_NODES, now=NOW + 300)
    assert again.status == first.status  # lastTransitionTime kept: the status is stable
    assert merge_patch(first.status, again.status) == {}
    assert again.events == []


def test_transition_times_move_only_on_status_changes() -> None:
    first = compute(make_policy().whole_spec(WEB).obj(), [(make_pod("w1")
                                                           .cpu("1")
                                                           .memory("1Gi")
                                                           .obj())], TWO_NODES).status
    second = compute(make_policy().whole_spec(WEB).status(first).obj(), [(make_pod("w1")
                                                                          .on("node-a")
                                                                          .cpu("1")
                                                                          .memory("1Gi")
                                                                          .obj())], TWO_NODES, now=NOW + 30)
    times = {c["type"]: c["lastTransitionTime"] for c in second.status["conditions"]}
    assert times["Valid"] == format_time(NOW)  # still True
    assert times["Satisfied"] == format_time(NOW)  # True (Planned) -> True (NoPendingPods)
    assert times["Ready"] == format_time(NOW + 30)  # False -> True
    assert [(e.type, e.reason) for e in second.events] == [("Normal", "AllPodsPlaced")]


def test_unsatisfiable_then_satisfiable_events() -> None:
    pods = [make_pod("big").cpu("8").memory("1Gi").obj()]
    first = compute(make_policy().whole_spec(WEB).obj(), pods, TWO_NODES)
    assert [(e.type, e.reason) for e in first.events] == [("Warning", "InsufficientResource")]
    bigger = [*TWO_NODES, make_node("node-c").disk(None).cpu("16").obj()]
    second = compute(make_policy().whole_spec(WEB).status(first.status).obj(), pods, bigger, now=NOW + 10)
    assert [(e.type, e.reason) for e in second.events] == [("Normal", "Satisfiable")]


# -- the latest decision ------------------------------------------------------------------------------

def test_latest_decision_is_the_newest_by_time() -> None:
    pods = [
        (make_pod("w1")
         .on("node-a")
         .decision(o.decision("w1", "2026-01-01T00:00:03Z", "node-a"))
         .cpu("1")
         .memory("1Gi")
         .obj()),
        (make_pod("w2")
         .on("node-b")
         .decision(o.decision("w2", "2026-01-01T00:00:09.5Z", "node-b"))
         .cpu("1")
         .memory("1Gi")
         .obj()),
        (make_pod("w3")
         .on("node-a")
         .decision(o.decision("w3", "2026-01-01T00:00:09Z", "node-a"))
         .cpu("1")
         .memory("1Gi")
         .obj()),
        (make_pod("w4")
         .on("node-a")
         .decision(o.decision("w4", "2026-01-01T01:00:00Z", policy_key="shop/other"))
         .cpu("1")
         .memory("1Gi")
         .obj()),
        (make_pod("x")
         .on("node-a")
         .labels({"app": "db"})
         .decision(o.decision("x", "2026-01-02T00:00:00Z"))
         .cpu("1")
         .memory("1Gi")
         .obj()),
    ]
    latest = compute(make_policy().whole_spec(WEB).obj(), pods, TWO_NODES).status["latestDecision"]
    assert latest == {k: v for k, v in o.decision("w2", "2026-01-01T00:00:09.5Z", "node-b").items() if v is not None}
    record = DecisionRecord.model_validate(latest)  # a subset of the record: the same fields
    assert valid_record(record.to_json()) == record
    assert record.pod == "shop/w2" and record.winner == Winner(node="node-b", rank=1, score=10)
    assert record.time == "2026-01-01T00:00:09.5Z" and record.trigger == "bind"
    assert record.considered == ["node-a", "node-b"] and record.considered_count == 2


def test_latest_decision_is_cut_for_the_status(schema: dict[str, Any]) -> None:
    names = [f"node-{i:03d}" for i in range(120)]
    refused = {n: f"insufficient capacity: memory: needs 1.0 GiB, {i} MiB free" for i, n in enumerate(names[1:])}
    decided = o.decision("w1", "2026-01-01T00:00:00Z", "node-000", considered=names, refused=refused)
    pods = [make_pod("w1").on("node-a").decision(decided).cpu("1").memory("1Gi").obj()]
    status = compute(make_policy().whole_spec(WEB).obj(), pods, TWO_NODES).status
    latest = status["latestDecision"]
    assert latest["consideredCount"] == 120 and len(latest["considered"]) == LIST_LIMIT
    assert latest["refusedCount"] == 119
    [group] = latest["refused"]
    assert (group["reason"], group["count"], len(group["nodes"])) == ("insufficient capacity: memory", 119, LIST_LIMIT)
    assert group["details"]["node-001"] == refused["node-001"]
    assert valid_record(DecisionRecord.model_validate(latest).to_json()).refused_count == 119
    assert check(schema, status) is None


def test_the_drains_moving_the_policys_pods_are_listed_by_name(schema: dict[str, Any]) -> None:
    store = store_of(TWO_NODES, [make_pod("w1").on("node-b").cpu("1").memory("1Gi").obj()])
    drains = [{"name": f"drain-{i:02d}", "mode": "Execute", "phase": "Drained", "moved": {"node-b": 1},
               "planned": {}, "blocked": 0} for i in reversed(range(LIST_LIMIT + 5))]
    status = compute_status(make_policy().whole_spec(WEB).obj(), store.records("shop"), lambda: store.view,
                            Settings(), NOW, drains=drains).status
    assert [d["name"] for d in status["drains"]] == [f"drain-{i:02d}" for i in range(LIST_LIMIT)]
    assert check(schema, status) is None
    PolicyStatus.model_validate(status)
    assert "drains" not in compute(make_policy().whole_spec(WEB).obj(),
                                   [make_pod("w1").on("node-b").cpu("1").memory("1Gi").obj()], TWO_NODES).status


def test_latest_decision_from_an_unversioned_annotation_keeps_its_totals(schema: dict[str, Any]) -> None:
    """An annotation berth wrote before the record had a version (its totals beside the cut lists)."""
    record = o.unversioned_decision("w1", "2026-01-01T00:00:00Z", considered=["node-a", "node-b"],
                                    refused={"node-b": "insufficient capacity: cpu: needs 2, 1 free"})
    record.update(consideredTotal=500, refusedTotal=499)
    status = compute(make_policy().whole_spec(WEB).obj(),
                     [make_pod("w1").on("node-a").decision(record).cpu("1").memory("1Gi").obj()], TWO_NODES).status
    latest = status["latestDecision"]
    assert (latest["consideredCount"], latest["refusedCount"]) == (500, 499)
    assert latest["considered"] == ["node-a", "node-b"]
    assert latest["refused"] == [{"reason": "insufficient capacity: cpu", "count": 1, "nodes": ["node-b"],
                                  "details": {"node-b": "insufficient capacity: cpu: needs 2, 1 free"}}]
    assert latest["winner"] == {"node": "node-a"}  # its rank and score were not recorded
    assert valid_record(DecisionRecord.model_validate(latest).to_json()).pod == "shop/w1"
    assert check(schema, status) is None


def test_unreadable_decisions_are_skipped() -> None:
    broken = make_pod("w1").on("node-a").cpu("1").memory("1Gi").obj()
    broken["metadata"]["annotations"] = {"berth.dev/decision": "{not json"}
    no_time = make_pod("w2").on("node-a").decision({"pod": "shop/w2", "winner": "node-a"}).cpu("1").memory("1Gi").obj()
    assert "latestDecision" not in compute(make_policy().whole_spec(WEB).obj(), [broken, no_time], TWO_NODES).status


@pytest.mark.parametrize(("case", "change", "same"), [
    ("the same manifest, a status written", lambda b: b.setdefault("status", {}).update(placedTotal=3), True),
    ("another resourceVersion", lambda b: b["metadata"].update(resourceVersion="99"), True),
    ("another spec", lambda b: b["spec"].update(strategy="Spread"), False),
    ("another generation", lambda b: b["metadata"].update(generation=7), False),
    ("another name", lambda b: b["metadata"].update(name="other"), False),
])
def test_a_policy_is_parsed_once_per_manifest(case: str, change: Any, same: bool) -> None:
    body = make_policy("kept").whole_spec({"selector": {"matchLabels": {"app": "kept"}}}).obj()
    first = parsed_policy(body)
    changed = copy.deepcopy(body)
    change(changed)
    again = parsed_policy(changed)
    assert (again is first) is same, case
    assert (again.name, again.generation, again.strategy_name) == (
        changed["metadata"]["name"], int(changed["metadata"].get("generation") or 0),
        policy_from_manifest(changed).strategy_name)


def test_an_invalid_policy_is_refused_every_time() -> None:
    body = make_policy("bad").whole_spec({"selector": {"matchLabels": {"app": "x"}}, "strategy": "Sideways"}).obj()
    for _ in range(2):
        with pytest.raises(InvalidPolicy, match="strategy"):
            parsed_policy(body)
