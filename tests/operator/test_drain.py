"""The NodeDrain in the operator: Plan mode's status (each pod's source, destination, state and a
blocked pod's refusals; phase, counts, conditions, Events), its admission check, and the Kopf
handlers that serve both."""

from __future__ import annotations

import asyncio
from typing import Any

import kopf
import pytest

from berth.core.policy import policy_from_manifest
from berth.core.settings import Settings
from berth.core.view import ClusterView
from berth.operator import drain
from berth.operator.admission import REFUSAL_CODE
from berth.operator.drain_status import REFUSED_LIMIT
from berth.operator.handlers import OperatorConfig, build_registry
from berth.operator.webhook import WebhookOptions
from tests.builders import make_node, make_pod, make_policy
from tests.operator.objects import NOW, RS, api_pod, no_policy, nodedrain, store_of, view

SHORT = "insufficient capacity: cpu: needs 3, 2 free of 2 allocatable (short by 1)"


def cluster() -> ClusterView:
    """node-a (drained) holds two web pods and a 3-CPU api pod; node-b and node-c have 2 CPUs."""
    return view([make_node("node-a").disk(None).cpu("8").obj(),
                 make_node("node-b").disk(None).cpu("2").obj(),
                 make_node("node-c").disk(None).cpu("2").obj()],
                [make_pod("w1").on("node-a").owner(RS).cpu("1").memory("1Gi").obj(),
                 make_pod("w2").on("node-a").owner(RS).cpu("1").memory("1Gi").obj(),
                 api_pod()])


def compute(spec: dict[str, Any], state: ClusterView | None = None, **kw: Any) -> drain.DrainOutcome:
    return drain.compute_drain_status(nodedrain(spec, **kw), state or cluster(), no_policy, Settings(), NOW)


def test_plan_mode_status_lists_each_pods_destination_and_the_blocked_pods_refusals() -> None:
    outcome = compute({"nodes": ["node-a"], "anyDestination": True})
    status = outcome.status
    assert (status["phase"], status["planned"], status["blocked"], status["moved"], status["left"]) == \
        ("Blocked", 2, 1, 0, 0)
    assert (status["nodes"], status["destinations"], status["observedGeneration"]) == (["node-a"], 2, 1)
    pods = {p["pod"]: p for p in status["pods"]}
    assert pods["shop/api"] == {"pod": "shop/api", "source": "node-a", "state": "Blocked",
                                "workload": "ReplicaSet/api-1", "reason": pods["shop/api"]["reason"],
                                "code": "insufficient_resource", "refused": {"node-b": SHORT, "node-c": SHORT},
                                "refusedCount": 2}
    assert {pods[p]["destination"] for p in ("shop/w1", "shop/w2")} == {"node-b", "node-c"}
    conditions = {c["type"]: c for c in status["conditions"]}
    assert (conditions["Valid"]["status"], conditions["Planned"]["status"]) == ("True", "False")
    assert conditions["Planned"]["reason"] == "PodsBlocked" and "shop/api" in conditions["Planned"]["message"]
    assert [(e.type, e.reason) for e in outcome.events] == [("Warning", "PodsBlocked")]


def test_every_pod_planned_is_phase_planned_and_an_event_when_it_was_blocked() -> None:
    blocked = compute({"nodes": ["node-a"], "anyDestination": True}).status
    bigger = view([make_node("node-a").disk(None).cpu("8").obj(),
                   make_node("node-b").disk(None).cpu("8").obj(),
                   make_node("node-c").disk(None).cpu("2").obj()],
                  [make_pod("w1").on("node-a").owner(RS).cpu("1").memory("1Gi").obj(), api_pod()])
    outcome = compute({"nodes": ["node-a"], "anyDestination": True}, bigger, status=blocked)
    assert (outcome.status["phase"], outcome.status["planned"], outcome.status["blocked"]) == ("Planned", 2, 0)
    planned = next(c for c in outcome.status["conditions"] if c["type"] == "Planned")
    assert (planned["status"], planned["reason"]) == ("True", "AllPodsPlanned")
    assert [(e.type, e.reason) for e in outcome.events] == [("Normal", "AllPodsPlanned")]


def test_a_spec_the_cluster_cannot_plan_is_invalid_naming_the_field() -> None:
    outcome = compute({"nodes": ["node-z"], "anyDestination": True})
    assert outcome.status["phase"] == "Invalid"
    valid = next(c for c in outcome.status["conditions"] if c["type"] == "Valid")
    assert (valid["status"], valid["message"]) == ("False", "spec.nodes: unknown node 'node-z'")
    assert [(e.type, e.reason, e.message) for e in outcome.events] == [
        ("Warning", "InvalidSpec", "spec.nodes: unknown node 'node-z'")]


def test_refusals_in_the_status_are_capped_with_their_count() -> None:
    nodes = [make_node("node-a").disk(None).cpu("8").obj()] + [(make_node(f"node-{i:02d}")
                                                                .disk(None)
                                                                .cpu("2")
                                                                .obj()) for i in range(REFUSED_LIMIT + 4)]
    state = view(nodes, [api_pod()])
    (entry,) = compute({"nodes": ["node-a"], "anyDestination": True}, state).status["pods"]
    assert len(entry["refused"]) == REFUSED_LIMIT and entry["refusedCount"] == REFUSED_LIMIT + 4


def test_each_pod_is_planned_under_its_placement_policy() -> None:
    policy = policy_from_manifest(make_policy().whole_spec({"selector": {"matchLabels": {"app": "web"}},
                                            "nodeFilter": {"excludes": ["node-b"]}}).obj())
    status = drain.compute_drain_status(nodedrain({"nodes": ["node-a"], "anyDestination": True}), cluster(),
                                        lambda p: policy if policy.governs(p.namespace, p.labels) else None,
                                        Settings(), NOW).status
    web = [p for p in status["pods"] if p["pod"].startswith("shop/w")]
    assert [(p["destination"], p["policy"]) for p in web] == [("node-c", "shop/web"), ("node-c", "shop/web")]


@pytest.mark.parametrize(("name", "new", "old", "operation", "problem"), [
    ("invalid_create_refused", nodedrain({"nodes": ["node-a"]}), None, "CREATE",
     "spec.destinations: no destination: name the destinations or allow any destination"),
    ("drained_destination_refused", nodedrain({"nodes": ["node-a"], "destinations": ["node-a"]}), None, "UPDATE",
     "spec.destinations: node-a is drained: a drained node is never a destination"),
    ("valid_create_allowed", nodedrain({"nodes": ["node-a"], "anyDestination": True}), None, "CREATE", None),
    ("update_keeping_the_spec_allowed", nodedrain({"nodes": ["node-a"]}), nodedrain({"nodes": ["node-a"]}),
     "UPDATE", None),
    ("another_kind_not_judged", {**nodedrain({}), "kind": "Other"}, None, "CREATE", None),
    ("delete_not_judged", nodedrain({}), None, "DELETE", None),
], ids=lambda v: v if isinstance(v, str) else "")
def test_admission(name: str, new: dict[str, Any], old: dict[str, Any] | None, operation: str,
                   problem: str | None) -> None:
    assert drain.admission_problem(new, old, operation) == problem


def test_kopf_plan_handler_patches_the_status_under_the_indexed_policy() -> None:
    store = store_of([make_node("node-a").disk(None).cpu("8").obj(),
                      make_node("node-b").disk(None).obj(),
                      make_node("node-c").disk(None).obj()],
                     [make_pod("w1").on("node-a").owner(RS).cpu("1").memory("1Gi").obj()])
    registry, _ = build_registry(OperatorConfig(track_leases=False), store)
    handler = next(h for h in registry._changing.get_all_handlers() if h.id == "nodedrain-on-create")
    policy = policy_from_manifest(make_policy().whole_spec({"selector": {"matchLabels": {"app": "web"}},
                                            "nodeFilter": {"excludes": ["node-b"]}}).obj())
    kwargs: dict[str, Any] = {}
    kwargs[drain.POLICIES_INDEX] = {"shop": [policy]}
    patch = kopf.Patch()
    asyncio.run(handler.fn(body=kopf.Body(nodedrain({"nodes": ["node-a"], "anyDestination": True})), patch=patch,
                           **kwargs))
    (pod,) = patch["status"]["pods"]
    assert (pod["destination"], pod["policy"], patch["status"]["phase"]) == ("node-c", "shop/web", "Planned")


def test_kopf_plan_handler_plans_again_only_when_an_input_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    posted: list[str] = []
    monkeypatch.setattr(kopf, "event", lambda obj, *, type, reason, message="": posted.append(reason))
    computed: list[int] = []
    real = drain.compute_drain_status

    def counted(*args: Any) -> drain.DrainOutcome:
        computed.append(1)
        return real(*args)

    monkeypatch.setattr(drain, "compute_drain_status", counted)
    store = store_of([make_node("node-a").disk(None).cpu("8").obj(),
                      make_node("node-b").disk(None).obj()], [(make_pod("w1")
                                                               .on("node-a")
                                                               .owner(RS)
                                                               .cpu("1")
                                                               .memory("1Gi")
                                                               .obj())])
    registry, _ = build_registry(OperatorConfig(track_leases=False), store)
    handler = next(h for h in registry._spawning.get_all_handlers() if h.id == drain.TIMER_ID)
    kwargs: dict[str, Any] = {}
    body = nodedrain({"nodes": ["node-a"], "anyDestination": True})

    def tick() -> kopf.Patch:
        patch = kopf.Patch()
        asyncio.run(handler.fn(body=kopf.Body(body), patch=patch, **kwargs))
        return patch

    first = tick()
    assert first["status"]["planned"] == 1
    body["status"] = dict(first["status"])
    assert tick() == {} and len(computed) == 1  # nothing changed: no plan, no patch
    kwargs[drain.POLICIES_INDEX] = {"shop": [policy_from_manifest(make_policy().whole_spec({
        "selector": {"matchLabels": {"app": "web"}}, "nodeFilter": {"excludes": ["node-b"]}}).obj())]}
    blocked = tick()  # a policy changed: planned again, now node-b is excluded
    assert blocked["status"]["phase"] == "Blocked" and posted == ["PodsBlocked"] and len(computed) == 2


def test_policy_index_keeps_valid_policies_by_namespace() -> None:
    registry, _ = build_registry(OperatorConfig())
    index = next(h for h in registry._indexing.get_all_handlers() if h.id == drain.POLICIES_INDEX)
    found = asyncio.run(index.fn(body=kopf.Body(make_policy().obj()), namespace="shop"))
    assert list(found) == ["shop"] and found["shop"].key == "shop/web"
    broken = make_policy().whole_spec({"strategy": "Sideways"}).obj()
    assert asyncio.run(index.fn(body=kopf.Body(broken), namespace="shop")) == {}


def test_kopf_webhook_refuses_an_invalid_drain_with_422() -> None:
    registry, _ = build_registry(OperatorConfig(webhook=WebhookOptions(mode="dev")))
    handler = next(h for h in registry._webhooks.get_all_handlers() if h.id == drain.WEBHOOK_ID)
    assert handler.operations == ["CREATE", "UPDATE"]
    with pytest.raises(kopf.AdmissionError) as refused:
        asyncio.run(handler.fn(body=kopf.Body(nodedrain({"nodes": ["node-a"]})), old=None, operation="CREATE"))
    assert refused.value.code == REFUSAL_CODE
    assert str(refused.value).startswith("spec.destinations: no destination")
    valid = nodedrain({"nodes": ["node-a"], "anyDestination": True})
    assert asyncio.run(handler.fn(body=kopf.Body(valid), old=None, operation="CREATE")) is None


def _entry(pod: str, state: str, destination: str | None = None, policy: str | None = "shop/web") -> dict[str, Any]:
    out = {"pod": f"shop/{pod}", "source": "node-a", "state": state, "policy": policy, "destination": destination}
    return {k: v for k, v in out.items() if v is not None}


POLICY_DRAINS: list[tuple[str, dict[str, Any], list[dict[str, Any]], dict[str, Any]]] = [
    ("no status yet", {"mode": "Execute"}, [], {}),
    ("an executing drain: moved and planned per destination, blocked counted", {"mode": "Execute"}, [
        _entry("w1", "Moved", "node-b"), _entry("w2", "Moved", "node-b"), _entry("w3", "Evicting", "node-c"),
        _entry("w4", "Planned", "node-c"), _entry("w5", "Blocked"), _entry("w6", "Left")],
     {"shop/web": {"name": "d", "mode": "Execute", "phase": "Draining", "moved": {"node-b": 2},
                   "planned": {"node-c": 2}, "blocked": 1}}),
    ("a plan: its destinations, nothing moved", {}, [_entry("w1", "Planned", "node-b")],
     {"shop/web": {"name": "d", "mode": "Plan", "phase": "Draining", "moved": {}, "planned": {"node-b": 1},
                   "blocked": 0}}),
    ("one entry per policy; pods without a policy and left pods are not counted", {"mode": "Execute"}, [
        _entry("w1", "Moved", "node-b"), _entry("d1", "Moved", "node-c", policy="shop/db"),
        _entry("x", "Moved", "node-c", policy=None), _entry("ds", "Left", policy="shop/agents")],
     {"shop/web": {"name": "d", "mode": "Execute", "phase": "Draining", "moved": {"node-b": 1}, "planned": {},
                   "blocked": 0},
      "shop/db": {"name": "d", "mode": "Execute", "phase": "Draining", "moved": {"node-c": 1}, "planned": {},
                  "blocked": 0}}),
]


@pytest.mark.parametrize(("name", "spec", "entries", "expected"), POLICY_DRAINS, ids=[c[0] for c in POLICY_DRAINS])
def test_what_a_drain_does_to_each_policys_pods(name: str, spec: dict[str, Any], entries: list[dict[str, Any]],
                                                expected: dict[str, Any]) -> None:
    body = nodedrain({"nodes": ["node-a"], "anyDestination": True, **spec},
                     status={"phase": "Draining", "pods": entries} if entries else None)
    body["metadata"]["name"] = "d"
    assert drain.policy_drains(body) == expected
