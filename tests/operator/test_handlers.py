"""The Kopf wiring (what is registered, the timer without a finalizer), the watch-fed store the
handlers read, the policies a pod change marks, a refresh that patches only what changed and never
loops on its own write, and the bound on status writes."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import kopf
import pytest

from berth.core.settings import INDEX_VARIABLE
from berth.operator import drain
from berth.operator.cluster import OperatorStore
from berth.operator.handlers import (
    TIMER_ID,
    TIMER_SECONDS,
    WRITES_IN_FLIGHT,
    Freshness,
    OperatorConfig,
    OperatorState,
    WriteBudget,
    _selecting,
    build_registry,
)
from berth.operator.main import PROGRESS_PREFIX, operator_settings
from berth.operator.patches import apply_merge_patch, merge_patch
from berth.operator.reconcile import parsed_policy, plan_waiting
from tests.builders import make_node, make_pod, make_policy
from tests.operator import objects as o
from tests.operator.objects import store_of


def test_registered_handlers() -> None:
    registry, _ = build_registry(OperatorConfig())
    indexes = {h.id for h in registry._indexing.get_all_handlers()}
    assert indexes == {drain.POLICIES_INDEX, drain.DRAINS_INDEX}  # the cluster is the store's, not Kopf's
    watched = {h.selector.any_name for h in registry._watching.get_all_handlers() if h.selector}
    assert watched == {"placementpolicies", "nodedrains"}
    changing = {h.id for h in registry._changing.get_all_handlers()}
    assert {"status-on-create", "status-on-update/spec", "status-on-resume"} <= changing
    assert {"nodedrain-on-create", "nodedrain-on-update/spec", "nodedrain-on-resume"} <= changing
    timers = {h.id: h for h in registry._spawning.get_all_handlers()}
    assert set(timers) == {TIMER_ID, drain.TIMER_ID}
    assert not any(timer.requires_finalizer for timer in timers.values())
    assert not any(getattr(h, "requires_finalizer", False) for h in registry._changing.get_all_handlers())
    assert registry._webhooks.get_all_handlers() == []  # webhook off: Kopf would refuse to start otherwise
    assert registry._activities.get_all_handlers()  # login


def test_kopf_talks_to_the_api_server_over_a_bounded_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    from berth.operator import handlers

    info = kopf.ConnectionInfo(server="https://127.0.0.1:6443", scheme="Bearer", token="secret",
                               default_namespace="berth", priority=3)
    monkeypatch.setattr(kopf, "login_via_client", lambda **_: info)

    async def logged_in() -> tuple[Any, int, str | None]:
        made = await handlers.login(logger=None, settings=None)
        assert isinstance(made, kopf.AiohttpSession)
        session = made.aiohttp_session
        try:
            return made, session.connector.limit, session.headers.get("Authorization")
        finally:
            await session.close()

    made, limit, authorization = asyncio.run(logged_in())
    assert (made.server, made.default_namespace, made.priority) == (info.server, "berth", 3)
    assert limit == handlers.API_CONNECTIONS and authorization == "Bearer secret"
    monkeypatch.setattr(kopf, "login_via_client", lambda **_: None)
    assert asyncio.run(handlers.login(logger=None, settings=None)) is None


def test_kopf_keeps_its_bookkeeping_in_annotations() -> None:
    settings = operator_settings(OperatorConfig())
    assert isinstance(settings.persistence.progress_storage, kopf.AnnotationsProgressStorage)
    assert isinstance(settings.persistence.diffbase_storage, kopf.AnnotationsDiffBaseStorage)
    assert settings.persistence.progress_storage.prefix == PROGRESS_PREFIX
    assert settings.admission.server is None and settings.admission.managed is None


class _NotCopied(dict[str, Any]):
    def __deepcopy__(self, memo: Any) -> Any:
        raise AssertionError("copied")


@pytest.mark.parametrize(("case", "extra_fields"), [
    ("no handler on a field", None),
    ("a handler on the spec", {("spec",)}),
    ("a handler on the labels", {("metadata", "labels")}),
    ("a handler on a status field", {("status", "placedTotal")}),
])
def test_kopfs_essence_of_a_policy_is_kopfs_own_made_without_copying_the_status(
        case: str, extra_fields: set[tuple[str, ...]] | None) -> None:
    """Every watch event of a policy is compared with its last handled essence; a status the
    operator writes is an event too, and copying it (and the managed fields) to drop it cost most."""
    storage = operator_settings(OperatorConfig()).persistence.diffbase_storage
    kopfs = kopf.AnnotationsDiffBaseStorage(prefix=PROGRESS_PREFIX, key="last-handled-configuration")
    body = make_policy("web").whole_spec(WEB).status({"placedTotal": 2, "placed": {"node-a": 2}}).obj()
    body["metadata"].update(labels={"team": "a"}, annotations={
        "note": "kept", f"{PROGRESS_PREFIX}/last-handled-configuration": "{}",
        "kubectl.kubernetes.io/last-applied-configuration": "{}"},
        managedFields=[{"manager": "berth", "fieldsV1": {"f:status": {"f:placed": {"f:node-a": {}}}}}])
    assert storage.build(body=kopf.Body(body), extra_fields=extra_fields) == \
        kopfs.build(body=kopf.Body(body), extra_fields=extra_fields), case
    if extra_fields is None or all(field[0] == "spec" for field in extra_fields):
        lean = {**body, "status": _NotCopied(body["status"]),
                "metadata": {**body["metadata"], "managedFields": [_NotCopied()]}}
        storage.build(body=kopf.Body(lean), extra_fields=extra_fields)


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, str]]:
    posted: list[tuple[str, str, str]] = []

    def event(obj: Any, *, type: str, reason: str, message: str = "") -> None:
        posted.append((type, reason, message))

    monkeypatch.setattr(kopf, "event", event)
    return posted


@pytest.fixture
def plans(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many pods each plan the handlers make is for, in order: what is planned, and when a
    plan is shared or made again."""
    from berth.operator import handlers

    counts: list[int] = []

    def counted(view: Any, pod: Any, policy: Any, settings: Any, now: float, count: int) -> Any:
        counts.append(count)
        return plan_waiting(view, pod, policy, settings, now, count)

    monkeypatch.setattr(handlers, "plan_waiting", counted)
    return counts


def refresh(state: OperatorState, body: dict[str, Any], now: float | None = None,
            drains: dict[str, Any] | None = None) -> kopf.Patch:
    """One refresh of ``body``; the status written (Kopf's patch, or with a status writer the
    writer's) is applied to it, as the watch would bring it back."""
    patch = kopf.Patch()
    asyncio.run(state.refresh(kopf.Body(body), patch, now=now, drains=drains))
    sent = state._sent.get(body["metadata"]["uid"])
    if patch:
        body["status"] = apply_merge_patch(body.get("status"), dict(patch["status"]))
    elif sent is not None:
        body["status"] = apply_merge_patch(body.get("status"), merge_patch(body.get("status"), sent))
    return patch


def test_refresh_patches_only_what_changed(events: list[tuple[str, str, str]]) -> None:
    store = store_of([make_node("node-a").disk(None).obj(),
                      make_node("node-b").disk(None).obj()], [make_pod("w1").on("node-a").cpu("1").memory("1Gi").obj(),
                      make_pod("w2").cpu("1").memory("1Gi").obj()])
    state = OperatorState(OperatorConfig(track_leases=False), store)
    body = make_policy().obj()
    patch = refresh(state, body)
    assert state.writes == 1
    status = dict(patch["status"])
    assert status["pending"] == 1 and status["placed"] == {"node-a": 1}
    assert events == []

    # The status is written; the watch brings the object back: nothing to do, no event, no loop.
    assert not refresh(state, body) and state.writes == 1

    # The pending pod lands (a pod event): only the changed fields are patched, a removed map
    # entry is nulled.
    store.apply_pod(make_pod("w2").on("node-b").cpu("1").memory("1Gi").obj())
    changed = dict(refresh(state, body)["status"])
    assert changed["placed"] == {"node-b": 1} and changed["pending"] == 0 and changed["plan"] is None
    assert "observedGeneration" not in changed
    assert [e[:2] for e in events] == [("Normal", "AllPodsPlaced")]


def test_a_policys_status_names_the_drains_that_move_its_pods(events: list[tuple[str, str, str]]) -> None:
    """The NodeDrains' index (what each drain does to each policy's pods) is an input of the
    status: a drain's progress is written on an otherwise unchanged policy, and a drain gone is
    removed."""
    store = store_of([make_node("node-a").disk(None).obj(), make_node("node-b").disk(None).obj()],
                     [make_pod("w1").on("node-b").cpu("1").memory("1Gi").obj()])
    state = OperatorState(OperatorConfig(track_leases=False), store)
    body = make_policy().obj()
    assert "drains" not in refresh(state, body)["status"]
    moving = {"name": "drain-a", "mode": "Execute", "phase": "Draining", "moved": {}, "planned": {"node-b": 1},
              "blocked": 0}
    other = {"name": "drain-0", "mode": "Plan", "moved": {}, "planned": {}, "blocked": 2}
    index = {"shop/web": [moving, other], "shop/db": [{**moving, "name": "drain-z"}]}
    assert refresh(state, body, drains=index)["status"]["drains"] == [other, moving]
    assert not refresh(state, body, drains=index)  # unchanged: nothing to write
    moved = {**moving, "phase": "Drained", "moved": {"node-b": 1}, "planned": {}}
    assert refresh(state, body, drains={"shop/web": [moved]})["status"]["drains"] == [moved]
    assert refresh(state, body, drains={})["status"]["drains"] is None  # the drain deleted: removed
    assert "drains" not in body["status"]


def test_nothing_is_computed_before_the_store_is_listed() -> None:
    store = OperatorStore(leases_tracked=False)
    store.replace("nodes", [make_node("node-a").disk(None).obj()])  # pods not listed yet
    state = OperatorState(OperatorConfig(track_leases=False), store)
    assert not refresh(state, make_policy().obj()) and state.computations == 0
    store.replace("pods", [make_pod("w1").on("node-a").cpu("1").memory("1Gi").obj()])
    store.replace("leases", [])
    assert refresh(state, make_policy().obj())["status"]["placedTotal"] == 1


def test_statuses_are_computed_off_the_event_loop_one_at_a_time(monkeypatch: pytest.MonkeyPatch,
                                                                  events: list[tuple[str, str, str]]) -> None:
    state = OperatorState(OperatorConfig(track_leases=False), store_of([(make_node("node-a")
                                                                         .disk(None)
                                                                         .obj())], [(make_pod("w1")
                                                                                                                 .cpu("1")
                                                                                                                 .memory("1Gi")
                                                                                                                 .obj())]))
    compute = state.compute
    seen: list[str] = []
    running = 0

    def watched(body: Any, now: float | None = None, drains: Any = ()) -> Any:
        nonlocal running
        running += 1
        assert running == 1  # never two plans at once
        seen.append(threading.current_thread().name)
        time.sleep(0.01)
        running -= 1
        return compute(body, now, drains)

    monkeypatch.setattr(state, "compute", watched)

    async def many() -> None:
        bodies = [make_policy(f"web-{i}").obj() for i in range(5)]
        for body in bodies:
            body["metadata"]["uid"] = body["metadata"]["name"]
        await asyncio.gather(*(state.refresh(kopf.Body(b), kopf.Patch()) for b in bodies))

    asyncio.run(many())
    assert len(seen) == 5 and all(name.startswith("berth-status") for name in seen)


def test_a_policy_already_queued_is_not_computed_twice(events: list[tuple[str, str, str]]) -> None:
    state = OperatorState(OperatorConfig(track_leases=False), store_of([(make_node("node-a")
                                                                         .disk(None)
                                                                         .obj())], [(make_pod("w1")
                                                                                                                 .cpu("1")
                                                                                                                 .memory("1Gi")
                                                                                                                 .obj())]))
    body = make_policy().obj()

    async def create_and_tick() -> list[bool]:
        patches = [kopf.Patch(), kopf.Patch()]  # the create handler and the timer's first tick, at once
        await asyncio.gather(*(state.refresh(kopf.Body(body), p) for p in patches))
        return [bool(p) for p in patches]

    assert asyncio.run(create_and_tick()) == [True, False]
    assert state.computations == 1


def test_handlers_wait_for_the_first_full_list_behind_one_poller() -> None:
    store = OperatorStore(leases_tracked=False)
    state = OperatorState(OperatorConfig(track_leases=False), store)

    async def resume_many() -> int:
        waiters = [asyncio.create_task(state.wait_ready(poll=0.01)) for _ in range(50)]
        await asyncio.sleep(0.05)
        assert not any(w.done() for w in waiters)
        for kind in ("nodes", "pods", "leases"):
            store.replace(kind, [])
        await asyncio.wait_for(asyncio.gather(*waiters), 2)
        return sum(1 for t in asyncio.all_tasks() if "_poll_ready" in repr(t.get_coro()))

    assert asyncio.run(resume_many()) == 0 and state._poller is not None and state._poller.done()


def test_refresh_recomputes_only_when_an_input_changed(events: list[tuple[str, str, str]]) -> None:
    store = store_of([make_node("node-a").disk(None).obj()], [make_pod("w1").on("node-a").cpu("1").memory("1Gi").obj()])
    state = OperatorState(OperatorConfig(track_leases=False, plan_period=10.0), store)
    body = make_policy().obj()

    refresh(state, body, 100.0)
    assert state.computations == 1
    refresh(state, body, 101.0)
    store.apply_node(make_node("node-b").disk(None).obj())  # a node changed: no pending pod here, no plan to redo
    refresh(state, body, 500.0)
    assert state.computations == 1
    store.apply_pod(make_pod("x1").on("node-a").namespace("other").cpu("1").memory("1Gi").obj())  # another namespace
    store.apply_pod(make_pod("db1").on("node-a").labels({"app": "db"}).cpu("1").memory("1Gi").obj())  # not selected
    refresh(state, body, 501.0)
    assert state.computations == 1
    store.apply_pod(make_pod("w1").on("node-b").cpu("1").memory("1Gi").obj())  # a selected pod moved
    refresh(state, body, 502.0)
    assert state.computations == 2

    store.apply_pod(make_pod("w2").cpu("1").memory("1Gi").obj())
    refresh(state, body, 503.0)
    assert state.computations == 3 and body["status"]["pending"] == 1
    refresh(state, body, 504.0)
    assert state.computations == 3
    store.apply_node(make_node("node-c")
                      .disk(None)
                      .obj())  # with a pending pod, node changes are caught up with every period
    refresh(state, body, 505.0)
    assert state.computations == 3
    refresh(state, body, 513.0)
    assert state.computations == 4
    refresh(state, body, 530.0)  # nothing changed since: no plan again
    assert state.computations == 4

    body["status"]["pending"] = 7  # someone else wrote the status: the truth is restored
    refresh(state, body, 531.0)
    assert state.computations == 5 and body["status"]["pending"] == 1
    body["metadata"]["generation"] = 2  # a new spec
    refresh(state, body, 532.0)
    assert state.computations == 6 and body["status"]["observedGeneration"] == 2


def test_a_pod_change_updates_the_counts_at_once_and_the_plan_at_most_every_period(
        plans: list[int], events: list[tuple[str, str, str]]) -> None:
    store = store_of([make_node("node-a").disk(None).obj(),
                      make_node("node-b").disk(None).obj()], [make_pod("p1").cpu("1").memory("1Gi").obj(),
                      make_pod("w1").on("node-a").cpu("1").memory("1Gi").obj()])
    state = OperatorState(OperatorConfig(track_leases=False, plan_period=10.0), store)
    body = make_policy().obj()
    refresh(state, body, 100.0)
    store.apply_pod(make_pod("w2")
                     .on("node-b")
                     .cpu("1")
                     .memory("1Gi")
                     .obj())  # placed: the counts change, the round (one pending pod) does not
    refresh(state, body, 101.0)
    assert body["status"]["placedTotal"] == 2 and plans == [1]
    store.apply_pod(make_pod("w3").on("node-b").cpu("1").memory("1Gi").obj())
    refresh(state, body, 111.0)  # the plan is a period old: planned again
    assert body["status"]["placedTotal"] == 3 and plans == [1, 1]
    store.apply_pod(make_pod("p2")
                     .created("2026-01-01T00:00:05Z")
                     .cpu("1")
                     .memory("1Gi")
                     .obj())  # a new round: two pending pods
    refresh(state, body, 112.0)
    assert body["status"]["pending"] == 2 and plans == [1, 1, 2]


# (case, the second policy's spec, plans made for the two)
SHARING: list[tuple[str, dict[str, Any], int]] = [
    ("policies alike but for their selectors share one plan", {"selector": {"matchLabels": {"app": "api"}}}, 1),
    ("a strategy that counts the workload plans each policy",
     {"selector": {"matchLabels": {"app": "api"}}, "strategy": "Auto"}, 2),
    ("another strategy plans again", {"selector": {"matchLabels": {"app": "api"}}, "strategy": "BestFit"}, 2),
]


def web_and_api(spec: dict[str, Any]) -> tuple[OperatorStore, OperatorState, dict[str, Any], dict[str, Any]]:
    """Two nodes and the policies web (in shop) and api (``spec``, in other) with a pending pod
    each, refreshed once each, web first: the store, the state and the two policies' bodies."""
    store = store_of([make_node("node-a").disk(None).obj(), make_node("node-b").disk(None).obj()],
                     [make_pod("p1").cpu("1").memory("1Gi").obj(),
                      make_pod("q1").namespace("other").labels({"app": "api"}).cpu("1").memory("1Gi").obj()])
    state = OperatorState(OperatorConfig(track_leases=False, plan_period=10.0), store)
    web = make_policy("web").obj()
    api = make_policy("api").whole_spec(spec).namespace("other").obj()
    refresh(state, web, 100.0)
    refresh(state, api, 101.0)
    return store, state, web, api


@pytest.mark.parametrize(("case", "spec", "made"), SHARING, ids=[c[0] for c in SHARING])
def test_policies_alike_share_a_plan_within_the_period(case: str, spec: dict[str, Any], made: int,
                                                       plans: list[int],
                                                       events: list[tuple[str, str, str]]) -> None:
    store, state, web, api = web_and_api(spec)
    assert len(plans) == made
    assert api["status"]["plan"] == web["status"]["plan"] and api["status"]["selected"] == 1
    store.apply_node(make_node("node-c")
                      .disk(None)
                      .obj())  # a node added: planned afresh, once a period is over for each
    refresh(state, web, 111.0)
    refresh(state, api, 112.0)
    assert len(plans) == 2 * made


@pytest.mark.parametrize(("case", "spec", "made"), SHARING, ids=[c[0] for c in SHARING])
def test_policies_alike_share_no_plan_with_the_index_off_and_show_the_same(
        monkeypatch: pytest.MonkeyPatch, case: str, spec: dict[str, Any], made: int, plans: list[int],
        events: list[tuple[str, str, str]]) -> None:
    """Sharing a plan is for speed alone: with ``BERTH_INDEX=off`` each policy plans for itself,
    and the statuses are those the shared plan gives."""
    statuses = []
    for index in ("on", "off"):
        monkeypatch.setenv(INDEX_VARIABLE, index)
        plans.clear()
        _, _, web, api = web_and_api(spec)
        assert len(plans) == (made if index == "on" else 2)
        statuses.append([{k: v for k, v in body["status"].items() if k != "conditions"} for body in (web, api)])
    assert statuses[0] == statuses[1]
    assert statuses[0][0]["plan"]


WEB = {"selector": {"matchLabels": {"app": "web"}}}
DB = {"selector": {"matchLabels": {"app": "db"}}}
INVALID = {"selector": {"matchLabels": {"app": "web"}},
           "placementRules": [{"resource": "Node", "operator": "Has", "labels": {"a": "b"}, "within": "rack"}]}

# (case, the pod before (None: new), the pod after (None: deleted), the policies marked)
MARKS: list[tuple[str, dict[str, Any] | None, dict[str, Any] | None, set[str]]] = [
    ("a new pod marks the policies that select it", None, (make_pod("n1")
                                                           .on("node-a")
                                                           .cpu("1")
                                                           .memory("1Gi")
                                                           .obj()), {"web"}),
    ("a deleted pod marks the policies that selected it", (make_pod("w1")
                                                           .on("node-a")
                                                           .cpu("1")
                                                           .memory("1Gi")
                                                           .obj()), None, {"web"}),
    ("a pod relabelled marks the policies before and after",
     make_pod("w1").on("node-a").cpu("1").memory("1Gi").obj(),
     make_pod("w1").on("node-a").labels({"app": "db"}).cpu("1").memory("1Gi").obj(), {"web", "db"}),
    ("a pod of another namespace marks none", None, (make_pod("n1")
                                                     .on("node-a")
                                                     .namespace("other")
                                                     .cpu("1")
                                                     .memory("1Gi")
                                                     .obj()), set()),
    ("a pod no policy selects marks none", None, (make_pod("n1")
                                                  .on("node-a")
                                                  .labels({"app": "cache"})
                                                  .cpu("1")
                                                  .memory("1Gi")
                                                  .obj()), set()),
    ("an event that changes nothing berth reads marks none", make_pod("w1").on("node-a").cpu("1").memory("1Gi").obj(),
                                                             (make_pod("w1")
                                                              .on("node-a")
                                                              .cpu("1")
                                                              .memory("1Gi")
                                                              .obj()), set()),
    ("a new decision on a pod marks its policies", make_pod("w1").on("node-a").cpu("1").memory("1Gi").obj(),
     (make_pod("w1")
      .on("node-a")
      .decision(o.decision("w1", "2026-01-01T00:00:01Z"))
      .cpu("1")
      .memory("1Gi")
      .obj()), {"web"}),
    ("a pending pod bound marks its policies", make_pod("p1").cpu("1").memory("1Gi").obj(),
                                               make_pod("p1").on("node-a").cpu("1").memory("1Gi").obj(), {"web"}),
]


@pytest.mark.parametrize(("case", "before", "after", "marked"), MARKS, ids=[c[0] for c in MARKS])
def test_a_pod_change_marks_only_the_policies_it_touches(case: str, before: dict[str, Any] | None,
                                                         after: dict[str, Any] | None, marked: set[str],
                                                         events: list[tuple[str, str, str]]) -> None:
    store = store_of([make_node("node-a").disk(None).obj()], [before] if before is not None else [])
    state = OperatorState(OperatorConfig(track_leases=False), store)
    bodies = {name: (make_policy(name)
                     .whole_spec(spec)
                     .obj()) for name, spec in (("web", WEB), ("db", DB), ("broken", INVALID))}
    for body in bodies.values():
        refresh(state, body)
    counted = state.computations
    if after is not None:
        store.apply_pod(after)
    elif before is not None:
        store.delete_pod(before)
    for body in bodies.values():
        refresh(state, body)
    again = {name for name, body in bodies.items() if state._memo[body["metadata"]["uid"]].changes}
    assert again == marked
    assert state.computations == counted + len(marked)


def test_a_relist_without_a_pod_marks_its_policies() -> None:
    store = store_of([make_node("node-a").disk(None).obj()], [make_pod("w1").on("node-a").cpu("1").memory("1Gi").obj(),
                      make_pod("w2").on("node-a").cpu("1").memory("1Gi").obj()])
    state = OperatorState(OperatorConfig(track_leases=False), store)
    body = make_policy().obj()
    refresh(state, body)
    store.replace("pods", [(make_pod("w1")
                            .on("node-a")
                            .cpu("1")
                            .memory("1Gi")
                            .obj())])  # w2 went while the watch was down
    assert refresh(state, body)["status"]["placedTotal"] == 1


def test_the_store_keeps_what_a_status_reads() -> None:
    decided = o.decision("w1", "2026-01-01T00:00:01Z")
    store = store_of([make_node("node-a").disk(None).obj()], [(make_pod("w1")
                                                               .on("node-a")
                                                               .decision(decided)
                                                               .cpu("1")
                                                               .memory("1Gi")
                                                               .obj()),
                                          make_pod("p1").created("2026-01-01T00:00:09Z").cpu("1").memory("1Gi").obj(),
                                          make_pod("gone").on("node-a").phase("Succeeded").cpu("1").memory("1Gi").obj(),
                                          make_pod("x1").on("node-a").namespace("other").cpu("1").memory("1Gi").obj()])
    with store.lock:
        records = {r.info.name: r for r in store.records("shop")}
    assert set(records) == {"w1", "p1"}
    assert records["w1"].decision is not None and records["w1"].placed and records["w1"].created == ""
    assert records["p1"].pending and records["p1"].created == "2026-01-01T00:00:09Z"
    store.delete_pod(make_pod("w1").on("node-a").cpu("1").memory("1Gi").obj())
    assert "uid-shop-w1" not in store.extras  # bounded: nothing kept of a pod that went


def test_refresh_of_an_invalid_policy_posts_a_warning(events: list[tuple[str, str, str]]) -> None:
    state = OperatorState(OperatorConfig(track_leases=False), store_of([make_node("node-a").disk(None).obj()], []))
    body = make_policy().whole_spec(INVALID).obj()
    valid = refresh(state, body)["status"]["conditions"][0]
    assert (valid["type"], valid["status"], valid["reason"]) == ("Valid", "False", "InvalidSpec")
    assert events == [("Warning", "InvalidSpec", "spec.placementRules[0].within: is only allowed on Pod rules")]


def test_status_writes_never_exceed_their_rate_even_after_a_quiet_spell() -> None:
    budget = WriteBudget(100.0)

    async def write_times(n: int) -> list[float]:
        times = []
        for _ in range(n):
            await budget.acquire()
            times.append(time.monotonic())
        return times

    time.sleep(0.3)  # a quiet spell saves up no burst
    times = asyncio.run(write_times(60))
    assert times[-1] - times[0] >= 0.5  # 60 writes at 100 a second: 59 gaps of 10 ms, none at once


def test_urgent_status_writes_go_before_the_others_waiting() -> None:
    budget = WriteBudget(50.0)
    order: list[str] = []

    async def write(name: str, urgent: bool) -> None:
        await budget.acquire(urgent)
        order.append(name)

    async def burst() -> None:
        for _ in range(50):
            await budget.acquire()  # the second's worth spent
        await asyncio.gather(*(write(f"plan-{i}", False) for i in range(5)), write("pod-change", True),
                             *(write(f"plan-{i}", False) for i in range(5, 8)))

    asyncio.run(burst())
    assert order == ["pod-change", *(f"plan-{i}" for i in range(8))]


@pytest.mark.parametrize("rate", [0.0, 0.5, 1001.0, -3.0])
def test_a_write_bound_out_of_range_is_refused(rate: float) -> None:
    with pytest.raises(ValueError, match="status writes per second must be between 1 and 1000"):
        OperatorConfig(status_writes_per_second=rate)


def test_includes_naming_a_missing_node_is_said_until_the_node_appears(events: list[tuple[str, str, str]]) -> None:
    """The Valid condition names the nodes of nodeFilter.includes the cluster does not have (a
    typo narrows the policy silently), and is recomputed once such a node appears, with no pod
    event in the namespace."""
    store = store_of([make_node("node-a").disk(None).obj()], [])
    state = OperatorState(OperatorConfig(track_leases=False), store)
    body = make_policy().whole_spec({"nodeFilter": {"includes": ["node-a", "node-z"]}}).obj()

    def valid() -> tuple[str, str, str]:
        refresh(state, body)
        c = body["status"]["conditions"][0]
        return c["status"], c["reason"], c["message"]

    said = "the spec is valid; nodeFilter.includes names 1 node berth has not seen: node-z"
    assert valid() == ("True", "IncludesUnknownNodes", said)
    assert events == [("Warning", "IncludesUnknownNodes", said)]
    store.apply_node(make_node("node-z").disk(None).obj())
    assert valid() == ("True", "Validated", "the spec is valid")


def test_pod_changes_are_followed_by_one_loop_rather_than_by_the_timers(
        events: list[tuple[str, str, str]]) -> None:
    written: list[tuple[str, str, dict[str, Any]]] = []

    async def write_on_the_loop(namespace: str, name: str, diff: dict[str, Any]) -> None:
        asyncio.get_running_loop()  # (raises off the loop)
        written.append((namespace, name, diff))

    config = OperatorConfig(track_leases=False, status_api=lambda: write_on_the_loop)
    assert config.timer_seconds == TIMER_SECONDS and OperatorConfig(resync_seconds=2.0).timer_seconds == 2.0
    store = store_of([make_node("node-a").disk(None).obj()], [make_pod("w1").on("node-a").cpu("1").memory("1Gi").obj()])
    state = OperatorState(config, store)
    bodies = [make_policy("web").whole_spec(WEB).obj(), make_policy("db").whole_spec(DB).obj()]
    for body in bodies:
        state.seen(body)
        refresh(state, body)  # a Kopf handler: the first status, and the proof that Kopf works here
        state.seen(body)  # the watch brings the status back
    # the handlers' statuses went the writer's way too (one writer a policy): Kopf patched none
    assert [(name, diff["placedTotal"]) for _, name, diff in written] == [("web", 1), ("db", 0)]
    written.clear()

    store.apply_pod(make_pod("w2").on("node-a").cpu("1").memory("1Gi").obj())
    assert asyncio.run(state.follow_once(time.monotonic(), sweep=False)) == 1
    [(namespace, name, diff)] = written
    assert (namespace, name, diff["placedTotal"], diff["selected"]) == (o.NAMESPACE, "web", 2, 2)
    assert asyncio.run(state.follow_once(time.monotonic(), sweep=True)) == 0  # written: not again
    status = apply_merge_patch(bodies[0]["status"], diff)  # as the API server keeps it
    state.seen(make_policy("web").whole_spec(WEB).status({**status, "placedTotal": 7}).obj())
    assert asyncio.run(state.follow_once(time.monotonic(), sweep=True)) == 1  # someone else's write is undone
    assert written[-1][2] == {"placedTotal": 2}


def test_a_replica_kopf_does_not_work_for_writes_nothing_of_its_own_accord(
        events: list[tuple[str, str, str]]) -> None:
    async def write(namespace: str, name: str, diff: dict[str, Any]) -> None:
        pass

    config = OperatorConfig(track_leases=False, status_api=lambda: write)
    store = store_of([make_node("node-a").disk(None).obj()], [])
    state = OperatorState(config, store)
    handled, unseen = make_policy("web").whole_spec(WEB).obj(), make_policy("db").whole_spec(DB).obj()
    for body in (handled, unseen):
        state.seen(body)
    refresh(state, handled)
    store.apply_pod(make_pod("w1").on("node-a").cpu("1").memory("1Gi").obj())
    store.apply_pod(make_pod("d1").on("node-a").labels({"app": "db"}).cpu("1").memory("1Gi").obj())
    uid = handled["metadata"]["uid"]
    now = time.monotonic()
    step = state.next_marked(now)
    assert isinstance(step, tuple) and step[0] == uid
    assert state.next_marked(now) is None  # never handled here: the other is not due
    assert state.sweep_list(now) == [uid]
    store.apply_pod(make_pod("w2").on("node-a").cpu("1").memory("1Gi").obj())
    later = time.monotonic() + 2.5 * config.timer_seconds + 1  # no timer ticked since: paused by peering
    assert state.next_marked(later) is None and state.sweep_list(later) == []


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


@pytest.mark.parametrize("timeout", [120.0, 30.0])
def test_the_status_is_planned_again_once_the_round_it_shows_is_over(timeout: float,
                                                                     events: list[tuple[str, str, str]]) -> None:
    """A Fill or Each round stops being in force after its idle timeout without any change in the
    cluster: the status then shows the next round's plan, as the extender would place the pod."""
    decided = o.decision("w1", "1970-01-01T00:16:40Z", plan={"node-a": 1, "node-b": 1})
    bound = make_pod("w1").on("node-a").decision(decided).cpu("1").memory("1Gi").obj()
    bound["metadata"]["annotations"]["berth.dev/round"] = "shop/web@1000000"  # opened at 1000 s
    store = store_of([make_node("node-a").disk(None).cpu("8").obj(),
                      make_node("node-b").disk(None).cpu("2").obj()], [bound,
                      make_pod("p1").cpu("1").memory("1Gi").obj()])
    state = OperatorState(OperatorConfig(track_leases=False, plan_period=10.0, round_timeout_seconds=timeout),
                          store)
    body = (make_policy()
            .whole_spec({"selector": {"matchLabels": {"app": "web"}}, "strategy": "Each", "count": 1, "nodesLimit": 2})
            .obj())
    refresh(state, body, 1001.0)
    assert body["status"]["plan"] == {"node-b": 1} and state.computations == 1  # the round's place left
    refresh(state, body, 1000.0 + timeout - 1)
    assert state.computations == 1  # nothing changed, the round still in force
    refresh(state, body, 1000.0 + timeout + 1)
    assert state.computations == 2 and body["status"]["plan"] == {"node-a": 1}  # the next round: most room first


# -- the loop's order: oldest mark first, coalesced, before the periodic pass ---------------------

def _loop_state(apps: list[str], answered: Callable[[], Awaitable[Any]] | None = None, **config: Any,
                ) -> tuple[OperatorState, OperatorStore, dict[str, str], list[tuple[str, str, dict[str, Any]]]]:
    """A state with a status writer, a coroutine function as the operator's (each write is noted
    when sent, and answered once ``answered`` is) and one handled policy per app (``policy-<app>``
    selecting ``app: <app>``): (state, store, app -> uid, the writes made)."""
    written: list[tuple[str, str, dict[str, Any]]] = []
    set_up: list[bool] = []  # the handlers' first statuses are answered at once

    async def write(namespace: str, name: str, diff: dict[str, Any]) -> None:
        written.append((namespace, name, diff))
        if answered is not None and set_up:
            await answered()

    state = OperatorState(OperatorConfig(track_leases=False, status_api=lambda: write, **config),
                          store_of([make_node("node-a").disk(None).cpu("64").memory("256Gi").obj()], []))
    uids = {}
    for app in apps:
        body = make_policy(f"policy-{app}").whole_spec({"selector": {"matchLabels": {"app": app}}}).obj()
        state.seen(body)
        refresh(state, body)
        state.seen(body)
        uids[app] = body["metadata"]["uid"]
    written.clear()  # the handlers' first statuses
    set_up.append(True)
    return state, state.store, uids, written


def _placed(store: OperatorStore, name: str, app: str) -> None:
    store.apply_pod(make_pod(name).labels({"app": app}).on("node-a").obj())


# (case, apps whose pods change, in order; the order the loop takes their policies)
MARK_ORDER: list[tuple[str, list[str], list[str]]] = [
    ("one change each: in the order they came", ["c", "a", "b"], ["c", "a", "b"]),
    ("a policy marked again keeps its first place", ["a", "b", "a", "c", "a"], ["a", "b", "c"]),
    ("many changes of one policy come after the one marked before them", ["b", "a", "a", "a"], ["b", "a"]),
]


@pytest.mark.parametrize(("case", "changes", "order"), MARK_ORDER, ids=[c[0] for c in MARK_ORDER])
def test_the_loop_takes_the_policy_marked_first_first(case: str, changes: list[str], order: list[str],
                                                      events: list[tuple[str, str, str]]) -> None:
    state, store, uids, _ = _loop_state(["a", "b", "c"])
    for i, app in enumerate(changes):
        _placed(store, f"{app}-{i}", app)
    now = time.monotonic()
    taken = []
    while isinstance(step := state.next_marked(now), tuple):
        taken.append(step[0])
    assert taken == [uids[app] for app in order]


# (case, seconds after the loop took the policy when its pod changes again, whether it is due)
COALESCED: list[tuple[str, float, bool]] = [
    ("changed again at once: waits out the interval", 0.1, False),
    ("changed again within the interval: still waits", 0.9, False),
    ("changed again after the interval: due at once", 1.5, True),
]


@pytest.mark.parametrize(("case", "after", "due"), COALESCED, ids=[c[0] for c in COALESCED])
def test_a_policy_follows_its_pod_changes_at_most_every_coalesce_seconds(
        case: str, after: float, due: bool, events: list[tuple[str, str, str]]) -> None:
    state, store, uids, _ = _loop_state(["a"], coalesce_seconds=1.0)
    _placed(store, "a-1", "a")
    taken = time.monotonic()
    assert state.next_marked(taken) == (uids["a"], pytest.approx(taken, abs=1.0))
    _placed(store, "a-2", "a")
    step = state.next_marked(taken + after)
    if due:
        assert isinstance(step, tuple) and step[0] == uids["a"]
    else:
        assert step == pytest.approx(taken + 1.0)  # when it is due: the loop sleeps until then


def test_status_writes_waiting_go_oldest_change_first() -> None:
    budget = WriteBudget(50.0)
    order: list[str] = []

    async def write(name: str, since: float, urgent: bool = True) -> None:
        await budget.acquire(urgent, since)
        order.append(name)

    async def burst() -> None:
        await budget.acquire()  # the token spent: the others wait
        await asyncio.gather(write("changed at 30", 30.0), write("plan", 1.0, urgent=False),
                             write("changed at 10", 10.0), write("changed at 20", 20.0))

    asyncio.run(burst())
    assert order == ["changed at 10", "changed at 20", "changed at 30", "plan"]


def test_a_pod_change_goes_before_the_rest_of_a_periodic_pass(monkeypatch: pytest.MonkeyPatch,
                                                              events: list[tuple[str, str, str]]) -> None:
    """The periodic pass computes one policy at a time: a policy a pod change marks meanwhile is
    the next computed, not the last after every other."""
    apps = [f"app-{i}" for i in range(30)]
    state, store, uids, written = _loop_state(apps, plan_period=0.05, coalesce_seconds=0.0)
    computed: list[str] = []
    compute = state.compute

    def slow(body: Any, now: float | None = None, drains: Any = ()) -> Any:
        computed.append(body["metadata"]["uid"])
        time.sleep(0.01)
        return compute(body, now, drains)

    monkeypatch.setattr(state, "compute", slow)
    for body in list(state._bodies.values()):  # every status written by someone else: the pass redoes them all
        state.seen({**body, "status": {**body["status"], "placedTotal": 99}})

    async def run() -> int:
        state._follow()
        while len(computed) < 5:  # the pass is under way
            await asyncio.sleep(0.005)
        _placed(store, "late", "app-29")  # the last policy of the pass
        at = len(computed)
        while not any(name == "policy-app-29" and "selected" in diff for _, name, diff in written):
            await asyncio.sleep(0.005)
        assert state._follower is not None
        state._follower.cancel()
        return computed.index(uids["app-29"]) - at

    assert asyncio.run(asyncio.wait_for(run(), 10)) <= 1  # at most the computation under way before it


def test_a_slow_api_server_holds_the_loop_rather_than_a_queue_of_writes(
        events: list[tuple[str, str, str]]) -> None:
    """The loop sends at most WRITES_IN_FLIGHT writes the API server has not answered; meanwhile
    it computes nothing, and a policy changed again is written once when its turn comes."""
    answer = asyncio.Event()
    apps = [f"app-{i}" for i in range(WRITES_IN_FLIGHT + 4)]
    state, store, _, written = _loop_state(apps, answered=answer.wait, coalesce_seconds=0.0)
    for app in apps:
        _placed(store, f"{app}-1", app)
    computed = state.computations

    async def run() -> None:
        state._follow()
        while len(written) < WRITES_IN_FLIGHT:
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.1)
        assert len(written) == WRITES_IN_FLIGHT and state.computations == computed + WRITES_IN_FLIGHT
        for app in apps[-4:]:  # not written yet: changed again
            _placed(store, f"{app}-2", app)
        answer.set()
        while len(written) < len(apps):
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.1)
        assert state._follower is not None
        state._follower.cancel()

    asyncio.run(asyncio.wait_for(run(), 10))
    assert len(written) == len(apps)  # each policy once, its two changes in one write
    assert [diff["placedTotal"] for _, name, diff in written if name == f"policy-{apps[-1]}"] == [2]


def test_no_second_holds_more_of_the_loops_writes_than_the_bound_however_slow_the_answers(
        events: list[tuple[str, str, str]]) -> None:
    """A write takes 0.3 s to be answered: writes sent 1/rate apart would have the API server hold
    more than the rate in a second (those in flight and those answered); the loop sends the next
    only while fewer than the rate were in flight or answered within the last second."""
    rate = 20
    spans: list[tuple[float, float]] = []

    async def slow() -> None:
        sent = time.monotonic()
        await asyncio.sleep(0.3)
        spans.append((sent, time.monotonic()))

    apps = [f"app-{i}" for i in range(40)]
    state, store, _, _ = _loop_state(apps, answered=slow, coalesce_seconds=0.0, status_writes_per_second=rate)
    for app in apps:
        _placed(store, f"{app}-1", app)

    async def run() -> None:
        state._follow()
        while len(spans) < len(apps):
            await asyncio.sleep(0.01)
        assert state._follower is not None
        state._follower.cancel()

    asyncio.run(asyncio.wait_for(run(), 20))
    for start, _ in spans:  # every second from a write's sending: the writes it overlaps
        assert sum(1 for sent, answered in spans if sent < start + 1.0 and answered > start) <= rate


def test_a_pod_change_made_while_a_handler_computes_the_policy_is_served_at_once(
        monkeypatch: pytest.MonkeyPatch, events: list[tuple[str, str, str]]) -> None:
    """The loop leaves a policy a Kopf handler is computing marked; once the handler is done, the
    loop serves the mark at once rather than at the next periodic pass (an hour away here)."""
    state, store, uids, written = _loop_state(["a"], plan_period=3600.0, coalesce_seconds=0.0)
    entered, release = threading.Event(), threading.Event()
    compute = state.compute

    def held(body: Any, now: float | None = None, drains: Any = ()) -> Any:
        outcome = compute(body, now, drains)
        entered.set()
        release.wait(5)  # the status is computed: a pod change now is not in it
        return outcome

    monkeypatch.setattr(state, "compute", held)
    body = state._bodies[uids["a"]]
    changed = {**body, "metadata": {**body["metadata"], "generation": 2}}  # its spec changed: Kopf's handler

    async def run() -> None:
        state._follow()
        handler = asyncio.create_task(state.refresh(kopf.Body(changed), kopf.Patch()))
        assert await asyncio.to_thread(entered.wait, 5)
        _placed(store, "a-1", "a")  # a pod change while the handler computes
        await asyncio.sleep(0.1)  # the loop woke, found the policy computing and went back to sleep
        release.set()
        await handler
        while not any(diff.get("placedTotal") == 1 for _, _, diff in written):
            await asyncio.sleep(0.01)
        assert state._follower is not None
        state._follower.cancel()

    state.seen(changed)
    asyncio.run(asyncio.wait_for(run(), 5))


def test_a_pod_change_wakes_the_loop_at_once(events: list[tuple[str, str, str]]) -> None:
    state, store, _, written = _loop_state(["a"], plan_period=3600.0)

    async def run() -> float:
        state._follow()
        await asyncio.sleep(0.05)  # the loop sleeps: nothing marked, the next pass in an hour
        changed = time.monotonic()
        await asyncio.to_thread(_placed, store, "a-1", "a")  # from the store's watch thread
        while not written:
            await asyncio.sleep(0.005)
        assert state._follower is not None
        state._follower.cancel()
        return time.monotonic() - changed

    assert asyncio.run(asyncio.wait_for(run(), 5)) < 0.5
    assert written[0][1] == "policy-a" and written[0][2]["placedTotal"] == 1


def test_the_timer_leaves_the_work_to_the_loop_when_there_is_one(events: list[tuple[str, str, str]]) -> None:
    state, store, uids, _ = _loop_state(["a"])
    body = state._bodies[uids["a"]]
    state._handled.clear()
    computed = state.computations
    _placed(store, "a-1", "a")
    asyncio.run(state.tick(kopf.Body(body), kopf.Patch()))
    assert state.computations == computed  # the tick computes nothing
    assert state.sweep_list(time.monotonic()) == [uids["a"]]  # but says Kopf works for the policy here
    timers = OperatorState(OperatorConfig(track_leases=False), store)  # no status writer: the timer refreshes
    asyncio.run(timers.tick(kopf.Body(make_policy("policy-a").whole_spec({"selector": {"matchLabels": {"app": "a"}}})
                                      .obj()), kopf.Patch()))
    assert timers.computations == 1


# (case, (total, turn, compute, budget, write) per write, the line; None: no line)
FRESHNESS: list[tuple[str, list[tuple[float, ...]], str | None]] = [
    ("no write: no line", [], None),
    ("one write", [(2.0, 1.0, 0.5, 0.25, 0.25)],
     "1 status write(s) for pod changes: seconds from the change to the write median 2.00, p90 2.00, worst 2.00; "
     "medians of the parts: turn 1.00, compute 0.50, budget 0.25, write 0.25"),
    ("ten writes: the 90th percentile is the ninth", [(float(t), 0.0, 0.0, 0.0, 0.0) for t in range(10, 0, -1)],
     "10 status write(s) for pod changes: seconds from the change to the write median 5.50, p90 9.00, worst 10.00; "
     "medians of the parts: turn 0.00, compute 0.00, budget 0.00, write 0.00"),
]


@pytest.mark.parametrize(("case", "samples", "line"), FRESHNESS, ids=[c[0] for c in FRESHNESS])
def test_the_writes_for_pod_changes_are_timed_in_parts(case: str, samples: list[tuple[float, ...]],
                                                       line: str | None) -> None:
    clock = [100.0]
    freshness = Freshness(every=30.0, clock=lambda: clock[0])
    for sample in samples:
        freshness.add(*sample)
    assert not freshness.due()
    clock[0] += 30.0
    assert freshness.due()
    assert freshness.summary() == line
    assert freshness.summary() is None and not freshness.due()  # afresh


def test_the_loop_times_its_writes_from_the_pod_change(events: list[tuple[str, str, str]]) -> None:
    state, store, _, _ = _loop_state(["a", "b"])
    _placed(store, "a-1", "a")
    _placed(store, "b-1", "b")
    assert asyncio.run(state.follow_once(time.monotonic(), sweep=False)) == 2
    assert len(state.freshness.samples) == 2
    for total, *parts in state.freshness.samples:
        assert all(part >= 0 for part in parts) and total == pytest.approx(sum(parts), abs=0.05)


# (case, a pod of another namespace placed elsewhere in the cluster, the plan the status shows after)
ELSEWHERE: list[tuple[str, dict[str, Any], dict[str, int]]] = [
    ("the plan stays: the status is neither computed nor written again",
     make_pod("x1").namespace("other").on("node-b").cpu("100m").memory("1Mi").obj(), {"node-a": 1}),
    ("the plan moves: the status says so",
     make_pod("x1").namespace("other").on("node-a").cpu("8").memory("1Mi").obj(), {"node-b": 1}),
]


@pytest.mark.parametrize(("case", "elsewhere", "plan"), ELSEWHERE, ids=[c[0] for c in ELSEWHERE])
def test_a_change_elsewhere_recomputes_a_status_only_when_its_plan_changes(
        case: str, elsewhere: dict[str, Any], plan: dict[str, int], events: list[tuple[str, str, str]]) -> None:
    store = store_of([make_node("node-a").disk(None).cpu("8").obj(), make_node("node-b").disk(None).cpu("4").obj()],
                     [make_pod("p1").cpu("1").memory("1Gi").obj()])
    state = OperatorState(OperatorConfig(track_leases=False, plan_period=10.0), store)
    body = make_policy().obj()
    refresh(state, body, 100.0)
    assert body["status"]["plan"] == {"node-a": 1} and (state.computations, state.writes) == (1, 1)
    store.apply_pod(elsewhere)
    refresh(state, body, 111.0)  # a period later: the plan is made again
    moved = plan != {"node-a": 1}
    assert body["status"]["plan"] == plan and state.plans_checked == 1
    assert (state.computations, state.writes) == ((2, 2) if moved else (1, 1))
    refresh(state, body, 112.0)  # nothing changed since: not even the plan is made again
    assert state.plans_checked == 1 and state.computations == (2 if moved else 1)


@pytest.mark.parametrize(("case", "selector"), [
    ("one label", {"matchLabels": {"app": "web"}}),
    ("two labels", {"matchLabels": {"app": "web", "tier": "front"}}),
    ("an expression", {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "db"]}]}),
    ("a label and an expression", {"matchLabels": {"app": "web"},
                                   "matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}),
])
def test_a_status_selects_the_pods_its_policy_governs(case: str, selector: dict[str, Any]) -> None:
    policy = parsed_policy(make_policy("p").whole_spec({"selector": selector}).obj())
    selects = _selecting(policy)
    for labels in ({"app": "web"}, {"app": "web", "tier": "front"}, {"app": "db"}, {"app": "webs"}, {},
                   {"tier": "front"}):
        pod = make_pod("w").labels(labels).info()
        assert selects(pod) == policy.governs(pod.namespace, labels), (case, labels)


def test_a_plan_shared_by_policies_alike_is_checked_on_the_loop_once_made(events: list[tuple[str, str, str]]) -> None:
    """The periodic pass hands the computing thread the one policy whose check makes the shared plan
    again; the others alike compare with it on the event loop."""
    store = store_of([make_node("node-a").disk(None).cpu("8").obj(), make_node("node-b").disk(None).cpu("4").obj()],
                     [make_pod(f"p-{app}").labels({"app": app}).cpu("1").memory("1Gi").obj() for app in ("a", "b")])
    state = OperatorState(OperatorConfig(track_leases=False, plan_period=10.0), store)
    bodies = [make_policy(f"policy-{app}").whole_spec({"selector": {"matchLabels": {"app": app}}}).obj()
              for app in ("a", "b")]
    for body in bodies:
        refresh(state, body, 100.0)
    uids = [body["metadata"]["uid"] for body in bodies]
    store.apply_pod(make_pod("elsewhere").on("node-b").cpu("1").memory("1Gi").obj())
    assert [state.plan_unchanged(uid, 111.0, make=False) for uid in uids] == [None, None]  # none made yet
    assert state.plan_unchanged(uids[0], 111.0) is True  # (the computing thread's check makes it)
    assert state.plan_unchanged(uids[1], 111.0, make=False) is True
    assert state.plans_checked == 2


# -- one writer a policy: an older status never lands after a newer one -------------------------------

class StatusServer:
    """The API server's copy of each policy's status: a write is applied when it is answered, after
    ``delays`` (one per write, in the order sent; 0 once they run out), so writes sent at once on
    two connections are applied in the order they are answered."""

    def __init__(self, delays: list[float] | None = None) -> None:
        self.delays = list(delays or [])
        self.status: dict[str, dict[str, Any]] = {}

    async def write(self, namespace: str, name: str, diff: dict[str, Any]) -> None:
        delay = self.delays.pop(0) if self.delays else 0.0
        if delay:
            await asyncio.sleep(delay)
        self.status[name] = apply_merge_patch(self.status.get(name), diff)


def _served_state(server: StatusServer) -> tuple[OperatorState, OperatorStore, dict[str, Any]]:
    """A state whose status writer is ``server``, with one handled policy (``policy-a``, pods
    ``app: a``) whose first status the server holds; (state, store, the policy as the watch shows it)."""
    state = OperatorState(OperatorConfig(track_leases=False, status_api=lambda: server.write, coalesce_seconds=0.0),
                          store_of([make_node("node-a").disk(None).cpu("64").memory("256Gi").obj()], []))
    body = make_policy("policy-a").whole_spec({"selector": {"matchLabels": {"app": "a"}}}).obj()
    state.seen(body)
    refresh(state, body)
    state.seen(body)
    assert server.status["policy-a"] == body["status"]
    return state, state.store, body


def test_a_handlers_status_never_lands_after_a_newer_one_the_loop_wrote(events: list[tuple[str, str, str]]) -> None:
    """A Kopf handler computes the status (one pod placed); a pod change after it has the loop write
    a newer one (two). Kopf applies a handler's patch once the handler is done, which may be after
    the loop's write: the handler's status goes the status writer's way instead, in turn."""
    server = StatusServer()
    state, store, body = _served_state(server)

    async def run() -> kopf.Patch:
        state._follow()
        _placed(store, "a-1", "a")
        patch = kopf.Patch()
        await state.refresh(kopf.Body(body), patch)  # the handler (e.g. its spec changed)
        _placed(store, "a-2", "a")
        while server.status["policy-a"].get("placedTotal") != 2:
            await asyncio.sleep(0.005)
        assert state._follower is not None
        state._follower.cancel()
        return patch

    patch = asyncio.run(asyncio.wait_for(run(), 5))
    if patch:  # Kopf applies the handler's patch after the handler returned: after the loop's write
        server.status["policy-a"] = apply_merge_patch(server.status["policy-a"], dict(patch["status"]))
    assert server.status["policy-a"]["placedTotal"] == 2


def test_a_policys_writes_are_applied_in_the_order_its_statuses_were_computed(
        events: list[tuple[str, str, str]]) -> None:
    """The loop sends a write and computes on: a policy changed again while its first write is slow
    to be answered is written again, and that write must not overtake the first."""
    server = StatusServer(delays=[0.3])  # the first write after set-up is answered late
    state, store, _ = _served_state(server)
    sent: list[int] = []
    answered: list[int] = []
    write = server.write

    async def noted(namespace: str, name: str, diff: dict[str, Any]) -> None:
        sent.append(diff["placedTotal"])
        await write(namespace, name, diff)
        answered.append(diff["placedTotal"])

    state._writer = noted

    async def run() -> None:
        state._follow()
        _placed(store, "a-1", "a")
        while not sent:
            await asyncio.sleep(0.005)
        _placed(store, "a-2", "a")  # while placedTotal 1 is on its way
        while len(answered) < 2:
            await asyncio.sleep(0.005)
        assert state._follower is not None
        state._follower.cancel()

    asyncio.run(asyncio.wait_for(run(), 5))
    assert sent == [1, 2]
    assert server.status["policy-a"]["placedTotal"] == 2


def test_a_late_watch_event_of_an_older_status_does_not_hide_what_the_newer_one_set(
        events: list[tuple[str, str, str]]) -> None:
    """The loop wrote placedTotal 1, then 2; the watch then brings the first write back. A status
    with placedTotal 1 again must still be written: the API server holds 2."""
    server = StatusServer()
    state, store, body = _served_state(server)
    first = dict(body)

    async def step(now: float) -> None:
        await state.follow_once(now, sweep=False)

    now = time.monotonic()
    _placed(store, "a-1", "a")
    asyncio.run(step(now))
    first = {**body, "status": dict(server.status["policy-a"])}  # placedTotal 1, as its watch event shows it
    _placed(store, "a-2", "a")
    asyncio.run(step(now + 1))
    assert server.status["policy-a"]["placedTotal"] == 2
    state.seen(first)  # the watch event of the first write, late
    store.delete_pod(make_pod("a-2").labels({"app": "a"}).on("node-a").obj())
    asyncio.run(step(now + 2))
    assert server.status["policy-a"]["placedTotal"] == 1
