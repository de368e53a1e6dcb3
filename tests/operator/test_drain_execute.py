"""A NodeDrain in Execute mode, against a fake API: cordon, evictions bounded by the limit, a
PodDisruptionBudget's refusal retried with backoff, evicted pods moved, blocked pods staying and
planned again, the held destinations, the Kopf handler, and Plan mode evicting nothing."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import kopf
import pytest

from berth.core.settings import Settings
from berth.core.view import ClusterView
from berth.operator import drain, drain_execute
from berth.operator.cluster import OperatorStore
from berth.operator.drain_execute import Evicted, EvictionResult
from berth.operator.handlers import OperatorConfig, build_registry
from berth.operator.patches import apply_merge_patch
from tests.builders import make_node, make_pod
from tests.operator.objects import NOW, RS, api_pod, no_policy, nodedrain, store_of, view

PDB = "Cannot evict pod as it would violate the pod's disruption budget."


@dataclass
class FakeApi:
    """Records cordons and evictions; answers evictions from ``answers`` (pod name: outcome), else accepts."""

    answers: dict[str, EvictionResult] = field(default_factory=dict)
    cordoned: list[str] = field(default_factory=list)
    evicted: list[str] = field(default_factory=list)
    cordon_error: Exception | None = None

    async def cordon(self, node: str) -> None:
        if self.cordon_error is not None:
            raise self.cordon_error
        self.cordoned.append(node)

    async def evict(self, namespace: str, name: str, uid: str) -> EvictionResult:
        assert uid == f"uid-{namespace}-{name}"
        self.evicted.append(name)
        return self.answers.get(name, EvictionResult(Evicted.ACCEPTED))


def nodes(*, cordoned: bool = False, room: str = "8") -> list[dict[str, Any]]:
    drained = make_node("node-a").disk(None).cpu("8").obj()
    if cordoned:
        drained["spec"]["unschedulable"] = True
    return [drained, make_node("node-b").disk(None).cpu(room).obj(), make_node("node-c").disk(None).cpu(room).obj()]


def web(*names: str, terminating: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    return [(make_pod(n)
             .on("node-a")
             .owner(RS)
             .terminating(n in terminating)
             .cpu("1")
             .memory("1Gi")
             .obj()) for n in names]


SPEC = {"nodes": ["node-a"], "anyDestination": True, "mode": "Execute", "maxEvictionsInFlight": 2}


def tick(state: ClusterView, api: FakeApi, status: dict[str, Any] | None = None, *, now: float = NOW,
         spec: dict[str, Any] | None = None) -> drain.DrainOutcome:
    """A tick of the drain; without ``status``, the first tick after the one that published the
    plan (which cordons and evicts nothing: see test_the_first_tick_publishes_the_plan_and_evicts_nothing)."""
    if status is None:
        status = publish(state, spec, now)
    body = nodedrain(spec or SPEC, status=status)
    return asyncio.run(drain_execute.execute(body, state, no_policy, Settings(), now, api))


def publish(state: ClusterView, spec: dict[str, Any] | None = None, now: float = NOW) -> dict[str, Any]:
    """The status of a drain's first tick (on an API of its own: its cordon is not the test's)."""
    first = asyncio.run(drain_execute.execute(nodedrain(spec or SPEC), state, no_policy, Settings(), now, FakeApi()))
    return first.status


def states(status: dict[str, Any]) -> dict[str, str]:
    return {p["pod"].split("/")[1]: p["state"] for p in status["pods"]}


def test_the_first_tick_publishes_the_plan_and_evicts_nothing() -> None:
    """The extender holds each destination for the evicted pod's replacement once it reads the
    plan in the status: nothing is evicted before the plan is published."""
    api = FakeApi()
    outcome = asyncio.run(drain_execute.execute(nodedrain(SPEC), view(nodes(), web("w1", "w2")), no_policy,
                                                Settings(), NOW, api))
    assert api.evicted == [] and states(outcome.status) == {"w1": "Planned", "w2": "Planned"}
    again = tick(view(nodes(), web("w1", "w2")), api, outcome.status)
    assert api.evicted == ["w1", "w2"] and states(again.status) == {"w1": "Evicting", "w2": "Evicting"}


def test_a_pod_whose_destination_changed_is_published_again_before_its_eviction() -> None:
    api = FakeApi()
    published = publish(view(nodes(), web("w1")), {**SPEC, "anyDestination": False, "destinations": ["node-b"]})
    tick(view(nodes(), web("w1")), api, published, spec={**SPEC, "anyDestination": False, "destinations": ["node-c"]})
    assert api.evicted == []


def test_first_tick_cordons_and_evicts_up_to_the_limit() -> None:
    api = FakeApi()
    outcome = tick(view(nodes(), web("w1", "w2", "w3")), api)
    assert api.cordoned == ["node-a"] and api.evicted == ["w1", "w2"]
    assert states(outcome.status) == {"w1": "Evicting", "w2": "Evicting", "w3": "Planned"}
    assert (outcome.status["phase"], outcome.status["evicting"], outcome.status["planned"]) == ("Draining", 2, 1)
    assert [e.reason for e in outcome.events] == ["Cordoned", "Evicting", "Evicting"]
    drained = next(c for c in outcome.status["conditions"] if c["type"] == "Drained")
    assert (drained["status"], drained["reason"]) == ("False", "Evicting")


def test_a_cordoned_node_is_not_cordoned_again() -> None:
    api = FakeApi()
    tick(view(nodes(cordoned=True), web("w1")), api)
    assert api.cordoned == [] and api.evicted == ["w1"]


def test_a_node_that_cannot_be_cordoned_has_nothing_evicted() -> None:
    api = FakeApi(cordon_error=RuntimeError("forbidden"))
    outcome = tick(view(nodes(), web("w1")), api)
    assert api.evicted == [] and [(e.type, e.reason) for e in outcome.events] == [("Warning", "CordonFailed")]


def test_evictions_in_flight_wait_for_their_pods_to_go() -> None:
    api = FakeApi()
    first = tick(view(nodes(cordoned=True), web("w1", "w2", "w3")), api)
    # w1 and w2 are terminating, still there: the limit (2) is reached, w3 waits
    second = tick(view(nodes(cordoned=True), web("w1", "w2", "w3", terminating=("w1", "w2"))), api,
                  first.status, now=NOW + 5)
    assert api.evicted == ["w1", "w2"] and states(second.status)["w3"] == "Planned"
    third = tick(view(nodes(cordoned=True), web("w2", "w3", terminating=("w2",))), api, second.status, now=NOW + 10)
    assert api.evicted == ["w1", "w2", "w3"]
    assert states(third.status) == {"w1": "Moved", "w2": "Evicting", "w3": "Evicting"}
    assert third.status["moved"] == 1


def test_every_pod_moved_finishes_the_drain() -> None:
    api = FakeApi()
    first = tick(view(nodes(cordoned=True), web("w1")), api)
    done = tick(view(nodes(cordoned=True), []), api, first.status, now=NOW + 5)
    assert (done.status["phase"], done.status["moved"], states(done.status)) == ("Drained", 1, {"w1": "Moved"})
    drained = next(c for c in done.status["conditions"] if c["type"] == "Drained")
    assert (drained["status"], drained["reason"]) == ("True", "AllPodsMoved")
    assert [(e.type, e.reason) for e in done.events] == [("Normal", "Drained")]
    (moved,) = done.status["pods"]
    assert moved["destination"] in ("node-b", "node-c") and moved["evictedAt"] == "2026-01-01T00:00:00Z"


def test_a_refused_eviction_is_retried_after_its_backoff() -> None:
    api = FakeApi(answers={"w1": EvictionResult(Evicted.REFUSED, PDB)})
    state = view(nodes(cordoned=True), web("w1"))
    first = tick(state, api)
    (entry,) = first.status["pods"]
    assert (entry["state"], entry["attempts"], entry["refusal"], entry["retryAt"]) == \
        ("Evicting", 1, PDB, "2026-01-01T00:00:05Z")
    assert [(e.type, e.reason) for e in first.events] == [("Warning", "EvictionRefused")]
    early = tick(state, api, first.status, now=NOW + 4)
    assert api.evicted == ["w1"] and early.status["pods"][0]["attempts"] == 1
    again = tick(state, api, early.status, now=NOW + 5)
    assert api.evicted == ["w1", "w1"] and again.status["pods"][0]["attempts"] == 2
    assert again.status["pods"][0]["retryAt"] == "2026-01-01T00:00:15Z" and again.events == []  # one Warning
    api.answers.clear()
    accepted = tick(state, api, again.status, now=NOW + 15)
    (entry,) = accepted.status["pods"]
    assert (entry["state"], "retryAt" in entry, "refusal" in entry) == ("Evicting", False, False)
    assert "evictedAt" in entry


def test_refused_evictions_count_against_the_limit() -> None:
    api = FakeApi(answers={n: EvictionResult(Evicted.REFUSED, PDB) for n in ("w1", "w2")})
    state = view(nodes(cordoned=True), web("w1", "w2", "w3"))
    first = tick(state, api)
    tick(state, api, first.status, now=NOW + 1)
    assert api.evicted == ["w1", "w2"]


@pytest.mark.parametrize(("attempts", "seconds"), [(1, 5), (2, 10), (3, 20), (4, 40), (5, 60), (9, 60)])
def test_backoff_doubles_up_to_a_minute(attempts: int, seconds: float) -> None:
    assert drain_execute.backoff(attempts) == seconds


def test_an_eviction_of_a_pod_already_gone_is_moved() -> None:
    api = FakeApi(answers={"w1": EvictionResult(Evicted.GONE, "not found")})
    outcome = tick(view(nodes(cordoned=True), web("w1")), api)
    assert states(outcome.status) == {"w1": "Moved"} and outcome.status["phase"] == "Drained"


def test_an_eviction_failing_otherwise_is_asked_for_again_later() -> None:
    api = FakeApi(answers={"w1": EvictionResult(Evicted.FAILED, "etcd timeout")})
    outcome = tick(view(nodes(cordoned=True), web("w1")), api)
    (entry,) = outcome.status["pods"]
    assert (entry["state"], entry["refusal"], entry["retryAt"]) == ("Planned", "etcd timeout", "2026-01-01T00:00:05Z")


def test_blocked_pods_stay_and_are_planned_again_when_a_node_is_added() -> None:
    api = FakeApi()
    big = api_pod()
    small = [make_node("node-a").disk(None).cpu("8").obj(), make_node("node-b").disk(None).cpu("2").obj()]
    small[0]["spec"]["unschedulable"] = True
    first = tick(view(small, [big, *web("w1")]), api)
    assert api.evicted == ["w1"] and states(first.status) == {"api": "Blocked", "w1": "Evicting"}
    finished = tick(view(small, [big]), api, first.status, now=NOW + 5)
    assert (finished.status["phase"], states(finished.status)) == ("Blocked", {"api": "Blocked", "w1": "Moved"})
    drained = next(c for c in finished.status["conditions"] if c["type"] == "Drained")
    assert (drained["status"], drained["reason"]) == ("False", "PodsBlocked")
    assert ("Warning", "PodsBlocked") in [(e.type, e.reason) for e in finished.events]
    grown_view = view([*small, make_node("node-c").disk(None).cpu("4").obj()], [big])
    grown = tick(grown_view, api, finished.status, now=NOW + 10)
    assert api.evicted == ["w1"] and states(grown.status)["api"] == "Planned"  # published first
    assert next(p for p in grown.status["pods"] if p["pod"] == "shop/api")["destination"] == "node-c"
    moving = tick(grown_view, api, grown.status, now=NOW + 15)
    assert api.evicted == ["w1", "api"] and states(moving.status)["api"] == "Evicting"


def test_a_pod_on_its_way_keeps_its_destination_and_its_room() -> None:
    # w1 is evicting to node-b, which has room for one pod: w2 is planned elsewhere, not on w1's room
    api = FakeApi()
    state = view([make_node("node-a").disk(None).cpu("8").obj(),
                  make_node("node-b").disk(None).cpu("1").obj(),
                  make_node("node-c").disk(None).cpu("1").obj()],
                 web("w1", "w2", terminating=("w1",)))
    previous = {"pods": [{"pod": "shop/w1", "uid": "uid-shop-w1", "source": "node-a", "state": "Evicting",
                          "destination": "node-b", "evictedAt": "2026-01-01T00:00:00Z"}]}
    outcome = tick(state, api, previous, spec={**SPEC, "maxEvictionsInFlight": 5})
    pods = {p["pod"]: p for p in outcome.status["pods"]}
    assert (pods["shop/w1"]["state"], pods["shop/w1"]["destination"]) == ("Evicting", "node-b")
    assert (pods["shop/w2"]["state"], pods["shop/w2"]["destination"]) == ("Planned", "node-c")
    assert api.evicted == []  # w2's destination is published first
    again = tick(state, api, outcome.status, spec={**SPEC, "maxEvictionsInFlight": 5})
    assert api.evicted == ["w2"] and states(again.status)["w2"] == "Evicting"


def test_a_pod_on_its_way_keeps_the_warnings_of_its_plan() -> None:
    """A held pod is not judged again, so the warnings its plan gave it (an explicit target
    berth's checks refuse) are kept from the status, through Evicting to Moved."""
    api = FakeApi()
    warning = ("node-b: berth's checks refuse it (excluded by nodeFilter.excludes); honoured as the move's "
               "explicit target")
    state = view(nodes(cordoned=True), web("w1"))
    previous = {"pods": [{"pod": "shop/w1", "uid": "uid-shop-w1", "source": "node-a", "state": "Planned",
                          "destination": "node-b", "warnings": [warning]}]}
    evicting = tick(state, api, previous)
    assert api.evicted == ["w1"]
    assert [(p["state"], p.get("warnings")) for p in evicting.status["pods"]] == [("Evicting", [warning])]
    moved = tick(view(nodes(cordoned=True), []), api, evicting.status, now=NOW + 5)
    assert [(p["state"], p.get("warnings")) for p in moved.status["pods"]] == [("Moved", [warning])]


def test_a_pod_on_its_way_keeps_its_shape_once_gone() -> None:
    """The extender holds the destination's room for the replacement from the evicted pod's
    shape; one that restarts after the pod is gone reads that shape from the status."""
    api = FakeApi()
    first = tick(view(nodes(cordoned=True), web("w1")), api)
    shape = {"requests": {"cpu": "1000m", "memory": str(2**30)}, "labels": {"app": "web"}}
    assert [(p["state"], p["requests"], p["labels"]) for p in first.status["pods"]] == \
        [("Evicting", shape["requests"], shape["labels"])]
    moved = tick(view(nodes(cordoned=True), []), api, first.status, now=NOW + 5)
    assert [(p["state"], p["requests"], p["labels"]) for p in moved.status["pods"]] == \
        [("Moved", shape["requests"], shape["labels"])]
    blocked = tick(view([make_node("node-a").disk(None).cpu("8").obj(), make_node("node-b").disk(None).cpu("1").obj()],
                        [make_pod("api").on("node-a").owner(("ReplicaSet", "api-1")).cpu("3").memory("1Gi").obj()]),
                   FakeApi())
    assert "requests" not in blocked.status["pods"][0]  # no destination: nothing to hold


def test_the_status_lists_pods_on_their_way_first_when_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(drain_execute, "PODS_LIMIT", 2)
    previous = {"pods": [{"pod": "shop/w3", "uid": "uid-shop-w3", "source": "node-a", "state": "Evicting",
                          "destination": "node-b", "evictedAt": "2026-01-01T00:00:00Z"}]}
    outcome = tick(view(nodes(cordoned=True), web("w1", "w2", "w3", terminating=("w3",))), FakeApi(), previous,
                   spec={**SPEC, "maxEvictionsInFlight": 1})
    assert states(outcome.status) == {"w1": "Planned", "w3": "Evicting"}
    assert (outcome.status["evicting"], outcome.status["planned"]) == (1, 2)  # the counts cover every pod


@pytest.mark.parametrize("mode", ["Plan", "Execute"])
def test_a_drain_met_while_the_operator_starts_is_planned_once_the_cluster_is_listed(
        monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    """On the view's first full list, not before: on a view still empty the drained node is
    unknown (Invalid), and with nodes listed but no pods yet there is nothing to move (Drained)."""
    posted: list[str] = []
    monkeypatch.setattr(kopf, "event", lambda obj, *, type, reason, message="": posted.append(reason))
    store = OperatorStore(leases_tracked=False)
    api = FakeApi()
    registry, _ = build_registry(OperatorConfig(track_leases=False, drain_api=lambda: api), store)
    handler = next(h for h in registry._changing.get_all_handlers() if h.id == "nodedrain-on-create")
    body = kopf.Body(nodedrain({"nodes": ["node-a"], "anyDestination": True, "mode": mode}))
    patch = kopf.Patch()

    async def start_then_list() -> None:
        planning = asyncio.create_task(handler.fn(body=body, patch=patch))
        store.replace("nodes", [make_node("node-a").disk(None).cpu("8").obj(), make_node("node-b").disk(None).obj()])
        await asyncio.sleep(0.3)
        assert not planning.done() and patch == {}  # nodes listed, pods and leases not yet
        store.replace("pods", [make_pod("w1").on("node-a").owner(RS).cpu("1").memory("1Gi").obj()])
        store.replace("leases", [])
        await asyncio.wait_for(planning, 5)

    asyncio.run(start_then_list())
    assert (patch["status"]["phase"], patch["status"]["planned"]) == ("Draining" if mode == "Execute" else "Planned",
                                                                     1)
    assert "Drained" not in posted and "InvalidSpec" not in posted and api.evicted == []


class Guard:
    """A lock that tells whether it is held."""

    def __init__(self) -> None:
        self.held = False

    def __enter__(self) -> Guard:
        self.held = True
        return self

    def __exit__(self, *exc: object) -> None:
        self.held = False


def test_a_tick_reads_the_view_under_its_guard_and_waits_for_the_api_outside_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The watch threads change the view under its lock: the plan and the step are made on one
    state of the cluster; the cordon and the evictions (API calls) do not hold the watches up."""
    guard, seen = Guard(), []
    real_plan, real_step = drain.compute_drain_status, drain_execute.plan_step

    def planned(*args: Any) -> drain.DrainOutcome:
        seen.append(("plan", guard.held))
        return real_plan(*args)

    def stepped(*args: Any) -> drain_execute.Step:
        seen.append(("step", guard.held))
        return real_step(*args)

    class GuardedApi(FakeApi):
        async def cordon(self, node: str) -> None:
            seen.append(("cordon", guard.held))
            await super().cordon(node)

        async def evict(self, namespace: str, name: str, uid: str) -> EvictionResult:
            seen.append(("evict", guard.held))
            return await super().evict(namespace, name, uid)

    status = publish(view(nodes(), web("w1")))
    monkeypatch.setattr(drain, "compute_drain_status", planned)
    monkeypatch.setattr(drain_execute, "plan_step", stepped)
    api = GuardedApi()
    asyncio.run(drain_execute.execute(nodedrain(SPEC, status=status), view(nodes(), web("w1")), no_policy,
                                      Settings(), NOW, api, guard))
    assert seen == [("plan", True), ("step", True), ("cordon", False), ("evict", False)]
    assert (api.cordoned, api.evicted) == (["node-a"], ["w1"])


def test_the_kopf_handler_executes_under_the_lock_of_the_operators_view(monkeypatch: pytest.MonkeyPatch) -> None:
    guards: list[object] = []

    async def execute(*args: Any) -> drain.DrainOutcome:
        guards.append(args[-1])
        return drain.DrainOutcome({})

    monkeypatch.setattr(drain, "execute", execute)
    store = store_of(nodes(), web("w1"))
    registry, _ = build_registry(OperatorConfig(track_leases=False, drain_api=FakeApi), store)
    handler = next(h for h in registry._spawning.get_all_handlers() if h.id == drain.TIMER_ID)
    asyncio.run(handler.fn(body=kopf.Body(nodedrain(SPEC)), patch=kopf.Patch()))
    assert guards == [store.lock]


S0: dict[str, Any] = {}
S1, S2, S3 = {"phase": "Draining", "n": 1}, {"phase": "Draining", "n": 2}, {"phase": "Draining", "n": 3}
OTHER = {"phase": "Draining", "n": 9}


@pytest.mark.parametrize(("written", "read", "starts_from"), [
    ([], S1, S1),  # nothing written yet (a restart): the body's
    ([S0, S1], S1, S1),  # the latest write came back
    ([S0, S1], S0, S1),  # not yet: the body is the status the write started from
    ([S0, S1, S2], S1, S2),  # one write came back, not the latest
    ([S0, S1], OTHER, OTHER),  # anyone else's status (another replica, a user): the body's
], ids=["nothing_written", "latest_came_back", "latest_not_back", "older_write_back", "someone_elses"])
def test_a_tick_starts_from_the_latest_status_written_when_the_body_lags(
        written: list[dict[str, Any]], read: dict[str, Any], starts_from: dict[str, Any]) -> None:
    assert drain_execute.latest_status(written, read) == starts_from


@pytest.mark.parametrize(("written", "read", "status", "after"), [
    ([], S0, S1, [S0, S1]),
    ([S0, S1], S1, S2, [S1, S2]),
    ([S0, S1], S0, S2, [S0, S1, S2]),
    ([S0, S1, S2], S1, S3, [S1, S2, S3]),
    ([S0, S1], S1, S1, [S1]),  # nothing changed
    ([S0, S1], OTHER, S2, [OTHER, S2]),
], ids=["first", "latest_came_back", "latest_not_back", "older_write_back", "unchanged", "someone_elses"])
def test_the_statuses_written_are_kept_from_the_one_read(written: list[dict[str, Any]], read: dict[str, Any],
                                                         status: dict[str, Any], after: list[dict[str, Any]]) -> None:
    assert drain_execute.written_after(written, read, status) == after


class YieldingApi(FakeApi):
    """Lets the event loop run other tasks during each API call, as a real one does."""

    async def cordon(self, node: str) -> None:
        await asyncio.sleep(0)
        await super().cordon(node)

    async def evict(self, namespace: str, name: str, uid: str) -> EvictionResult:
        await asyncio.sleep(0)
        return await super().evict(namespace, name, uid)


def _timer(api: FakeApi, store: Any) -> Any:
    registry, _ = build_registry(OperatorConfig(track_leases=False, drain_api=lambda: api), store)
    return next(h for h in registry._spawning.get_all_handlers() if h.id == drain.TIMER_ID).fn


def _status_after(handler: Any, status: dict[str, Any] | None) -> dict[str, Any]:
    """The status a tick of ``handler`` leaves when its body shows ``status``."""
    patch = kopf.Patch()
    asyncio.run(handler(body=kopf.Body(nodedrain(SPEC, status=status)), patch=patch))
    return apply_merge_patch(status, patch.get("status") or {})


def test_a_tick_whose_body_lags_behind_the_last_write_goes_on_from_that_write(monkeypatch: pytest.MonkeyPatch) -> None:
    """The timer's next tick does not wait for its patch to come back: a tick that read the status
    before the last write does not evict again, ask again before the backoff, nor lose a pod moved."""
    posted: list[str] = []
    monkeypatch.setattr(kopf, "event", lambda obj, *, type, reason, message="": posted.append(reason))
    api = FakeApi(answers={"w2": EvictionResult(Evicted.REFUSED, PDB)})
    store = store_of(nodes(), web("w1", "w2"))
    tick = _timer(api, store)
    published = _status_after(tick, None)
    evicting = _status_after(tick, published)
    assert api.evicted == ["w1", "w2"] and posted.count("EvictionRefused") == 1
    store.forget_pod("uid-shop-w1")  # its eviction done: gone
    lagging = _status_after(tick, published)  # the watch has not brought `evicting` back
    assert api.evicted == ["w1", "w2"] and posted.count("EvictionRefused") == 1
    pods = {p["pod"].split("/")[1]: p for p in lagging["pods"]}
    assert (pods["w1"]["state"], pods["w2"]["state"], pods["w2"]["attempts"]) == ("Moved", "Evicting", 1)
    assert pods["w2"]["retryAt"] == {p["pod"]: p for p in evicting["pods"]}["shop/w2"]["retryAt"]
    assert lagging["moved"] == 1


def test_two_handlers_of_one_drain_do_not_evict_a_pod_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    """The spec's update handler and the timer run at once for one drain, from the same body."""
    monkeypatch.setattr(kopf, "event", lambda obj, *, type, reason, message="": None)
    api = YieldingApi()
    tick = _timer(api, store_of(nodes(), web("w1", "w2")))
    published = _status_after(tick, None)

    async def both() -> None:
        await asyncio.gather(*(tick(body=kopf.Body(nodedrain(SPEC, status=published)), patch=kopf.Patch())
                               for _ in range(2)))

    asyncio.run(both())
    assert sorted(api.evicted) == ["w1", "w2"]


def handler_tick(spec: dict[str, Any], api: FakeApi) -> kopf.Patch:
    registry, _ = build_registry(OperatorConfig(track_leases=False, drain_api=lambda: api),
                                 store_of(nodes(), web("w1")))
    handler = next(h for h in registry._spawning.get_all_handlers() if h.id == drain.TIMER_ID)
    status = publish(view(nodes(), web("w1")), spec) if spec.get("mode") == "Execute" else None
    patch = kopf.Patch()
    asyncio.run(handler.fn(body=kopf.Body(nodedrain(spec, status=status)), patch=patch))
    if status is not None:  # the patch holds what changed
        patch["status"] = {**status, **patch.get("status", {})}
    return patch


@pytest.mark.parametrize(("mode", "cordoned", "evicted", "phase"), [
    ("Execute", ["node-a"], ["w1"], "Draining"),
    ("Plan", [], [], "Planned"),
])
def test_kopf_handler_evicts_in_execute_mode_only(monkeypatch: pytest.MonkeyPatch, mode: str, cordoned: list[str],
                                                  evicted: list[str], phase: str) -> None:
    monkeypatch.setattr(kopf, "event", lambda obj, *, type, reason, message="": None)
    api = FakeApi()
    patch = handler_tick({**SPEC, "mode": mode}, api)
    assert (api.cordoned, api.evicted, patch["status"]["phase"]) == (cordoned, evicted, phase)


def test_execute_mode_without_an_api_is_a_permanent_error() -> None:
    registry, _ = build_registry(OperatorConfig(track_leases=False), store_of(nodes(), web("w1")))
    handler = next(h for h in registry._spawning.get_all_handlers() if h.id == drain.TIMER_ID)
    with pytest.raises(kopf.PermanentError):
        asyncio.run(handler.fn(body=kopf.Body(nodedrain(SPEC)), patch=kopf.Patch()))
