"""The Kopf wiring: what is registered, the timer without a finalizer, the index functions, and a
refresh that patches only what changed and never loops on its own write."""

from __future__ import annotations

import asyncio
from typing import Any

import kopf
import pytest

from berth.operator import drain
from berth.operator.handlers import (
    LEASES_INDEX,
    NODES_INDEX,
    PODS_INDEX,
    TIMER_ID,
    OperatorConfig,
    OperatorState,
    build_registry,
)
from berth.operator.main import PROGRESS_PREFIX, operator_settings
from berth.operator.patches import apply_merge_patch
from berth.operator.records import lease_record, node_record, pod_record
from tests.operator import objects as o


def test_registered_handlers() -> None:
    registry, _ = build_registry(OperatorConfig())
    indexes = {h.id for h in registry._indexing.get_all_handlers()}
    assert indexes == {NODES_INDEX, PODS_INDEX, LEASES_INDEX, drain.POLICIES_INDEX}
    changing = {h.id for h in registry._changing.get_all_handlers()}
    assert {"status-on-create", "status-on-update/spec", "status-on-resume"} <= changing
    assert {"nodedrain-on-create", "nodedrain-on-update/spec", "nodedrain-on-resume"} <= changing
    timers = {h.id: h for h in registry._spawning.get_all_handlers()}
    assert set(timers) == {TIMER_ID, drain.TIMER_ID}
    assert not any(timer.requires_finalizer for timer in timers.values())
    assert not any(getattr(h, "requires_finalizer", False) for h in registry._changing.get_all_handlers())
    assert registry._webhooks.get_all_handlers() == []  # webhook off: Kopf would refuse to start otherwise
    assert registry._activities.get_all_handlers()  # login


def test_without_leases_there_is_no_lease_index() -> None:
    registry, _ = build_registry(OperatorConfig(track_leases=False))
    assert LEASES_INDEX not in {h.id for h in registry._indexing.get_all_handlers()}


def test_kopf_keeps_its_bookkeeping_in_annotations() -> None:
    settings = operator_settings(OperatorConfig())
    assert isinstance(settings.persistence.progress_storage, kopf.AnnotationsProgressStorage)
    assert isinstance(settings.persistence.diffbase_storage, kopf.AnnotationsDiffBaseStorage)
    assert settings.persistence.progress_storage.prefix == PROGRESS_PREFIX
    assert settings.admission.server is None and settings.admission.managed is None


def test_index_records() -> None:
    assert node_record(o.node("node-a")).name == "node-a"  # type: ignore[union-attr]
    record = pod_record(o.pod("w1"))
    assert record is not None and record.pending and not record.placed
    assert lease_record(o.lease("node-a")) == ("node-a", 1767225600.0)
    other = o.lease("kube-scheduler")
    other["metadata"]["namespace"] = "kube-system"
    assert lease_record(other) is None
    assert pod_record({"metadata": {}}) is None  # unreadable objects are skipped, not fatal


class Indexes(dict[str, Any]):
    """The Kopf indexes as the handlers see them: key -> store (an iterable of values)."""


def indexes(nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> dict[str, Any]:
    by_ns: dict[str, list[Any]] = {}
    for p in pods:
        record = pod_record(p)
        assert record is not None
        by_ns.setdefault(record.info.namespace, []).append(record)
    return {NODES_INDEX: {n["metadata"]["name"]: [node_record(n)] for n in nodes}, PODS_INDEX: by_ns}


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, str]]:
    posted: list[tuple[str, str, str]] = []

    def event(obj: Any, *, type: str, reason: str, message: str = "") -> None:
        posted.append((type, reason, message))

    monkeypatch.setattr(kopf, "event", event)
    return posted


def test_refresh_patches_only_what_changed(events: list[tuple[str, str, str]]) -> None:
    state = OperatorState(OperatorConfig(track_leases=False))
    nodes = [o.node("node-a"), o.node("node-b")]
    body = o.policy()
    patch = kopf.Patch()
    state.refresh(kopf.Body(body), patch, indexes(nodes, [o.pod("w1", "node-a"), o.pod("w2")]))
    assert state.writes == 1
    status = dict(patch["status"])
    assert status["pending"] == 1 and status["placed"] == {"node-a": 1}
    assert events == []

    # The status is written; the watch brings the object back: nothing to do, no event, no loop.
    body["status"] = apply_merge_patch({}, status)
    again = kopf.Patch()
    state.refresh(kopf.Body(body), again, indexes(nodes, [o.pod("w1", "node-a"), o.pod("w2")]))
    assert not again and state.writes == 1

    # The pending pod lands (a pod event): only the changed fields are patched, a removed map
    # entry is nulled.
    state.pod_changed("shop")
    later = kopf.Patch()
    state.refresh(kopf.Body(body), later, indexes(nodes, [o.pod("w1", "node-a"), o.pod("w2", "node-b")]))
    changed = dict(later["status"])
    assert changed["placed"] == {"node-b": 1} and changed["pending"] == 0 and changed["plan"] is None
    assert "observedGeneration" not in changed
    assert [e[:2] for e in events] == [("Normal", "AllPodsPlaced")]


def test_refresh_recomputes_only_when_an_input_changed(events: list[tuple[str, str, str]]) -> None:
    state = OperatorState(OperatorConfig(track_leases=False, plan_period=10.0))
    nodes = [o.node("node-a")]
    body = o.policy()
    idle = indexes(nodes, [o.pod("w1", "node-a")])

    def refresh(now: float, index: dict[str, Any]) -> None:
        patch = kopf.Patch()
        state.refresh(kopf.Body(body), patch, index, now=now)
        if patch:
            body["status"] = apply_merge_patch(body.get("status"), dict(patch["status"]))

    refresh(100.0, idle)
    assert state.computations == 1
    refresh(101.0, idle)
    state.views.changed()  # a node elsewhere changed: no pending pod here, no plan to redo
    refresh(500.0, idle)
    assert state.computations == 1
    state.pod_changed("other")
    refresh(501.0, idle)
    assert state.computations == 1
    state.pod_changed("shop")
    refresh(502.0, idle)
    assert state.computations == 2

    busy = indexes(nodes, [o.pod("w1", "node-a"), o.pod("w2")])
    state.pod_changed("shop")
    refresh(503.0, busy)
    assert state.computations == 3 and body["status"]["pending"] == 1
    refresh(504.0, busy)
    assert state.computations == 3
    state.views.changed()  # with a pending pod, changes elsewhere are caught up with every period
    refresh(505.0, busy)
    assert state.computations == 3
    refresh(510.0, busy)  # (a Lease also ages without events)
    assert state.computations == 4

    body["status"]["pending"] = 7  # someone else wrote the status: the truth is restored
    refresh(511.0, busy)
    assert state.computations == 5 and body["status"]["pending"] == 1
    body["metadata"]["generation"] = 2  # a new spec
    refresh(512.0, busy)
    assert state.computations == 6 and body["status"]["observedGeneration"] == 2


def test_refresh_of_an_invalid_policy_posts_a_warning(events: list[tuple[str, str, str]]) -> None:
    state = OperatorState(OperatorConfig(track_leases=False))
    body = o.policy({"placementRules": [{"resource": "Node", "operator": "Has", "labels": {"a": "b"},
                                          "within": "rack"}]})
    patch = kopf.Patch()
    state.refresh(kopf.Body(body), patch, indexes([o.node("node-a")], []))
    valid = patch["status"]["conditions"][0]
    assert (valid["type"], valid["status"], valid["reason"]) == ("Valid", "False", "InvalidSpec")
    assert events == [("Warning", "InvalidSpec", "spec.placementRules[0].within: is only allowed on Pod rules")]


def test_includes_naming_a_missing_node_is_said_until_the_node_appears(events: list[tuple[str, str, str]]) -> None:
    """The Valid condition names the nodes of nodeFilter.includes the cluster does not have (a
    typo narrows the policy silently), and is recomputed once such a node appears, with no pod
    event in the namespace."""
    state = OperatorState(OperatorConfig(track_leases=False))
    body = o.policy({"nodeFilter": {"includes": ["node-a", "node-z"]}})

    def valid(nodes: list[dict[str, Any]]) -> tuple[str, str, str]:
        patch = kopf.Patch()
        state.refresh(kopf.Body(body), patch, indexes(nodes, []))
        if patch:
            body["status"] = apply_merge_patch(body.get("status"), dict(patch["status"]))
        c = body["status"]["conditions"][0]
        return c["status"], c["reason"], c["message"]

    said = "the spec is valid; nodeFilter.includes names 1 node berth has not seen: node-z"
    assert valid([o.node("node-a")]) == ("True", "IncludesUnknownNodes", said)
    assert events == [("Warning", "IncludesUnknownNodes", said)]
    assert valid([o.node("node-a"), o.node("node-z")]) == ("True", "Validated", "the spec is valid")


def test_a_deleted_policy_stops_its_timer() -> None:
    registry, _ = build_registry(OperatorConfig())
    (timer,) = [h for h in registry._spawning.get_all_handlers() if h.id == TIMER_ID]
    assert timer.when is not None
    assert timer.when(uid="uid-policy-web") is True
    (watch,) = [h for h in registry._watching.get_all_handlers()
                if h.selector and h.selector.any_name == "placementpolicies"]
    asyncio.run(watch.fn(type="DELETED", uid="uid-policy-web"))
    assert timer.when(uid="uid-policy-web") is False
    assert timer.when(uid="uid-policy-other") is True


def test_cluster_events_invalidate_the_shared_view() -> None:
    registry, state = build_registry(OperatorConfig())
    before = state.views.changes
    for handler in registry._watching.get_all_handlers():
        if handler.selector and handler.selector.any_name in ("pods", "nodes", "leases"):
            asyncio.run(handler.fn(type="MODIFIED", uid="x", namespace="kube-node-lease"))
    assert state.views.changes == before + 3
