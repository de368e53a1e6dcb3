"""The status of a policy computed with the core from given pods and nodes: table-driven over
valid policies and every invalid example (docs/behaviour.md#rule-limits)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import yaml

from berth.core import format_time
from berth.core.settings import Settings
from berth.operator.cluster import store_of
from berth.operator.patches import apply_merge_patch, merge_patch
from berth.operator.reconcile import Outcome, compute_status
from berth.operator.status_model import LIST_LIMIT, PolicyStatus
from tests.crd.schema_check import check
from tests.operator import objects as o

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


TWO_NODES = [o.node("node-a"), o.node("node-b", cpu="2")]
WEB = {"selector": {"matchLabels": {"app": "web"}}}

CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]], dict[str, Any]]] = [
    ("no pods", WEB, [], {
        "conditions": {"Valid": ("True", "Validated"), "Satisfied": ("True", "NoPendingPods"),
                       "Ready": ("True", "AllPodsPlaced")},
        "selected": 0, "placedTotal": 0, "pending": 0, "placed": {}, "plan": None}),
    ("all placed", WEB, [o.pod("w1", "node-a"), o.pod("w2", "node-b"), o.pod("w3", "node-a")], {
        "conditions": {"Satisfied": ("True", "NoPendingPods"), "Ready": ("True", "AllPodsPlaced")},
        "selected": 3, "placedTotal": 3, "placed": {"node-a": 2, "node-b": 1}, "pending": 0}),
    ("pending that fit", WEB, [o.pod("w1", "node-a"), o.pod("w2"), o.pod("w3")], {
        "conditions": {"Satisfied": ("True", "Planned"), "Ready": ("False", "PodsPending")},
        "pending": 2, "plan": {"node-a": 1, "node-b": 1}, "planError": None}),
    ("Auto over two nodes", {**WEB, "strategy": "Auto"}, [o.pod("w1", "node-a"), o.pod("w2"), o.pod("w3")], {
        "strategy": "Auto", "plan": {"node-a": 1, "node-b": 1}}),
    ("insufficient resource", WEB, [o.pod("big", cpu="8")], {
        "conditions": {"Satisfied": ("False", "InsufficientResource"), "Ready": ("False", "PodsPending")},
        "planError.code": "insufficient_resource", "plan": None}),
    ("already filled", {**WEB, "strategy": "Fill", "count": 1},
     [o.pod("w1", "node-a"), o.pod("w2", "node-b"), o.pod("w3")], {
        "conditions": {"Satisfied": ("False", "AlreadyFilled")}, "planError.code": "already_filled"}),
    ("affinity unsatisfied", {**WEB, "placementRules": [
        {"resource": "Node", "operator": "Has", "labels": {"gpu": "a100"}}]}, [o.pod("w1")], {
        "conditions": {"Satisfied": ("False", "AffinityUnsatisfied")}, "planError.code": "affinity_unsatisfied"}),
    ("spread unsatisfied", {**WEB, "topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
         "minDomains": 3}]}, [o.pod("w1", "node-a"), o.pod("w2", "node-b"), o.pod("w3")], {
        "conditions": {"Satisfied": ("False", "SpreadUnsatisfied")}, "planError.code": "spread_unsatisfied"}),
    ("includes naming a missing node", {**WEB, "nodeFilter": {"includes": ["node-a", "node-gone"]}},
     [o.pod("w1", "node-a")], {"conditions": {"Valid": ("True", "IncludesUnknownNodes")}}),
    ("affinity met", {**WEB, "placementRules": [
        {"resource": "Pod", "operator": "HasNot", "labels": {"app": "web"}}]}, [o.pod("w1", "node-a"), o.pod("w2")], {
        "conditions": {"Satisfied": ("True", "Planned")}, "plan": {"node-b": 1}}),
    ("other namespaces, unselected, finished and terminating pods do not count", WEB, [
        o.pod("w1", "node-a"), o.pod("x", "node-a", namespace="other"), o.pod("y", labels={"app": "db"}),
        o.pod("done", "node-b", phase="Succeeded"), o.pod("failed", phase="Failed"),
        o.pod("going", "node-b", terminating=True)], {
        "selected": 1, "placed": {"node-a": 1}, "pending": 0,
        "conditions": {"Ready": ("True", "AllPodsPlaced")}}),
    ("empty selector selects the whole namespace", {}, [o.pod("a", "node-a", labels={}), o.pod("b", labels={"x": "y"})],
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
    outcome = compute(o.policy(spec, generation=7), pods, TWO_NODES)
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
    status = compute(o.policy(WEB), [o.pod("big", memory="20Gi")], TWO_NODES).status
    satisfied = next(c for c in status["conditions"] if c["type"] == "Satisfied")
    assert "node-a: insufficient capacity: memory" in satisfied["message"]
    assert status["planError"]["message"] == satisfied["message"]


def test_the_oldest_pending_pod_is_the_rounds_shape() -> None:
    pods = [o.pod("late", cpu="8", created="2026-01-02T00:00:00Z"), o.pod("early", cpu="1")]
    assert compute(o.policy(WEB), pods, TWO_NODES).status["plan"] == {"node-a": 1, "node-b": 1}


def test_node_liveness_by_leases() -> None:
    leases = [o.lease("node-a", "2027-01-15T07:59:50Z"), o.lease("node-b", "2027-01-15T07:00:00Z")]
    status = compute(o.policy(WEB), [o.pod("w1"), o.pod("w2")], TWO_NODES, leases).status
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
    outcome = compute(body, [o.pod("w1", "node-a")], TWO_NODES)
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
    valid = compute(o.policy(WEB), [o.pod("w1", "node-a")], TWO_NODES).status
    broken = o.policy({**WEB, "placementRules": [{"anyOf": []}]}, generation=2, status=valid)
    invalid = compute(broken, [o.pod("w1", "node-a")], TWO_NODES, now=NOW + 60)
    patch = merge_patch(valid, invalid.status)
    assert patch["placed"] is None and patch["selected"] is None
    after = apply_merge_patch(valid, patch)
    assert after == invalid.status
    fixed = compute(o.policy(WEB, generation=3, status=after), [o.pod("w1", "node-a")], TWO_NODES, now=NOW + 120)
    assert conditions(fixed.status)["Valid"] == ("True", "Validated")
    assert [(e.type, e.reason) for e in fixed.events] == [("Normal", "Validated"), ("Normal", "AllPodsPlaced")]


# -- transitions, idempotence -------------------------------------------------------------------------

def test_recomputing_an_unchanged_policy_changes_nothing() -> None:
    pods = [o.pod("w1", "node-a"), o.pod("w2")]
    first = compute(o.policy(WEB), pods, TWO_NODES)
    again = compute(o.policy(WEB, status=first.status), pods, TWO_NODES, now=NOW + 300)
    assert again.status == first.status  # lastTransitionTime kept: the status is stable
    assert merge_patch(first.status, again.status) == {}
    assert again.events == []


def test_transition_times_move_only_on_status_changes() -> None:
    first = compute(o.policy(WEB), [o.pod("w1")], TWO_NODES).status
    second = compute(o.policy(WEB, status=first), [o.pod("w1", "node-a")], TWO_NODES, now=NOW + 30)
    times = {c["type"]: c["lastTransitionTime"] for c in second.status["conditions"]}
    assert times["Valid"] == format_time(NOW)  # still True
    assert times["Satisfied"] == format_time(NOW)  # True (Planned) -> True (NoPendingPods)
    assert times["Ready"] == format_time(NOW + 30)  # False -> True
    assert [(e.type, e.reason) for e in second.events] == [("Normal", "AllPodsPlaced")]


def test_unsatisfiable_then_satisfiable_events() -> None:
    pods = [o.pod("big", cpu="8")]
    first = compute(o.policy(WEB), pods, TWO_NODES)
    assert [(e.type, e.reason) for e in first.events] == [("Warning", "InsufficientResource")]
    bigger = [*TWO_NODES, o.node("node-c", cpu="16")]
    second = compute(o.policy(WEB, status=first.status), pods, bigger, now=NOW + 10)
    assert [(e.type, e.reason) for e in second.events] == [("Normal", "Satisfiable")]


# -- the latest decision ------------------------------------------------------------------------------

def test_latest_decision_is_the_newest_by_time() -> None:
    pods = [
        o.pod("w1", "node-a", decision=o.decision("w1", "2026-01-01T00:00:03Z", "node-a")),
        o.pod("w2", "node-b", decision=o.decision("w2", "2026-01-01T00:00:09.5Z", "node-b")),
        o.pod("w3", "node-a", decision=o.decision("w3", "2026-01-01T00:00:09Z", "node-a")),
        o.pod("w4", "node-a", decision=o.decision("w4", "2026-01-01T01:00:00Z", policy_key="shop/other")),
        o.pod("x", "node-a", labels={"app": "db"}, decision=o.decision("x", "2026-01-02T00:00:00Z")),
    ]
    latest = compute(o.policy(WEB), pods, TWO_NODES).status["latestDecision"]
    assert latest["pod"] == "shop/w2" and latest["winner"] == "node-b" and latest["trigger"] == "bind"
    assert latest["time"] == "2026-01-01T00:00:09.5Z"
    assert latest["considered"] == ["node-a", "node-b"] and latest["consideredCount"] == 2


def test_latest_decision_is_cut_for_the_status(schema: dict[str, Any]) -> None:
    names = [f"node-{i:03d}" for i in range(120)]
    refused = {n: f"{n}: insufficient capacity" for n in names[1:]}
    pods = [o.pod("w1", "node-a", decision=o.decision("w1", "2026-01-01T00:00:00Z", "node-000",
                                                      considered=names, refused=refused))]
    status = compute(o.policy(WEB), pods, TWO_NODES).status
    latest = status["latestDecision"]
    assert latest["consideredCount"] == 120 and len(latest["considered"]) == LIST_LIMIT
    assert latest["refusedCount"] == 119 and len(latest["refused"]) == LIST_LIMIT
    assert check(schema, status) is None


def test_latest_decision_keeps_the_extenders_totals() -> None:
    record = o.decision("w1", "2026-01-01T00:00:00Z", considered=["node-a", "node-b"],
                        refused={"node-b": "insufficient capacity"})
    record.update(consideredTotal=500, refusedTotal=499)
    latest = compute(o.policy(WEB), [o.pod("w1", "node-a", decision=record)], TWO_NODES).status["latestDecision"]
    assert (latest["consideredCount"], latest["refusedCount"]) == (500, 499)
    assert latest["considered"] == ["node-a", "node-b"]


def test_unreadable_decisions_are_skipped() -> None:
    broken = o.pod("w1", "node-a")
    broken["metadata"]["annotations"] = {"berth.dev/decision": "{not json"}
    no_time = o.pod("w2", "node-a", decision={"pod": "shop/w2", "winner": "node-a"})
    assert "latestDecision" not in compute(o.policy(WEB), [broken, no_time], TWO_NODES).status
