"""bind: the recheck against bound + assumed pods and the reservation, the decision recorded, the
Binding created with no lock held (a failed one releases the reservation), the Event queued;
concurrent binds never overcommit a node; assumptions end when the watch shows the pod or when
their time is up."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Mapping
from typing import Any

import httpx
import orjson
import pytest
from fastapi import FastAPI

from berth.core.decision import DECISION_ANNOTATION, Winner
from berth.core.model import PodInfo
from berth.extender.app import create_app
from berth.extender.binder import BindError, BindingNotSent, EventQueue
from berth.extender.settings import ExtenderSettings
from berth.extender.store import ClusterStore
from tests.builders import make_node, make_pod, make_policy
from tests.decision_schema import valid_record
from tests.extender.helpers import Clock, bind_args, harness, make_store

WEB = {"app": "web"}


class RecordingBinder:
    """Stands in for the API server: records Bindings, can be slow, can fail."""

    def __init__(self, *, delay: float = 0.0, fail: str | None = None,
                 event_gates: Mapping[str, asyncio.Event] | None = None, event_fails: bool = False,
                 bind_gates: Mapping[str, asyncio.Event] | None = None, fails: Collection[str] = (),
                 not_sent: bool = False) -> None:
        self.delay = delay
        self.fail = fail
        self.not_sent = not_sent  # every Binding fails before it is sent (no connection came free)
        self.reads: list[str] = []  # the pods read again, by key
        self.bind_gates = bind_gates or {}  # pod key -> its Binding waits for it (a slow API server)
        self.fails = set(fails)  # pod keys whose Binding the API server refuses
        self.in_flight: set[str] = set()
        self.event_gates = event_gates or {}  # pod key -> its Event write waits for it (a slow API server)
        self.event_fails = event_fails
        self.bound: dict[str, str] = {}
        self.annotations: dict[str, Mapping[str, str]] = {}
        self.messages: dict[str, str] = {}
        self.refusals: dict[str, list[str]] = {}  # pod key -> the BerthRefused messages written

    async def bind(self, pod: PodInfo, node: str, annotations: Mapping[str, str]) -> None:
        if self.delay:
            await asyncio.sleep(self.delay)
        gate = self.bind_gates.get(pod.key)
        if gate is not None:
            self.in_flight.add(pod.key)
            await gate.wait()
            self.in_flight.discard(pod.key)
        if self.not_sent:
            raise BindingNotSent(f"cannot bind pod {pod.key} to {node} now: no connection to the API server")
        if self.fail or pod.key in self.fails:
            raise BindError(self.fail or f"cannot bind pod {pod.key} to {node}: InternalError")
        self.bound[pod.key] = node
        self.annotations[pod.key] = annotations

    async def record_event(self, pod: PodInfo, node: str, message: str) -> None:
        gate = self.event_gates.get(pod.key)
        if gate is not None:
            await gate.wait()
        if self.event_fails:
            raise ConnectionError("the API server went away")
        self.messages[pod.key] = message

    async def record_refused(self, pod: PodInfo, message: str) -> None:
        self.refusals.setdefault(pod.key, []).append(message)

    async def fetch_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.reads.append(f"{namespace}/{name}")
        return None


def web_app(binder: RecordingBinder, *nodes: dict[str, Any]) -> tuple[ClusterStore, FastAPI]:
    """A store with ``nodes`` and the web policy, and the app over it that binds through ``binder``."""
    store = make_store([*nodes, make_policy("web").obj()])
    return store, create_app(store, ExtenderSettings(), binder=binder, clock=Clock())


def pending_web(store: ClusterStore, count: int) -> list[dict[str, Any]]:
    """``count`` pending web pods of one CPU each (web-0, web-1, ...), known to ``store``: a bind
    names a pod the store must already know."""
    pods = [make_pod(f"web-{i}").labels(WEB).cpu("1").obj() for i in range(count)]
    for p in pods:
        store.remember_pod(_info(p))
    return pods


def test_bind_records_the_decision_and_counts_the_pod() -> None:
    h = harness([make_node("a").cpu("2").obj(),
                 make_node("b").cpu("2").obj(),
                 make_policy("web").strategy("Spread").obj()])
    p = make_pod("web-1").labels(WEB).cpu("1").obj()
    assert h.schedule(p) in ("a", "b")
    placed = h.store.view.pod(p["metadata"]["uid"])
    assert placed is not None and placed.node_name
    decision = valid_record(h.client.get("/api/v1/decisions/shop/web-1").json())
    assert decision.trigger == "bind"
    assert decision.winner is not None and decision.winner.node == placed.node_name
    assert (decision.winner.rank, decision.winner.score) == (1, 10)
    assert decision.considered == ["a", "b"]
    assert decision.time.endswith("Z")


def test_bind_writes_annotation_and_event_message() -> None:
    binder = RecordingBinder()
    store, app = web_app(binder, make_node("a").cpu("2").obj())

    p = make_pod("web-1").labels(WEB).cpu("1").obj()
    _, bound = _serve(app, ("/filter", {"Pod": p, "NodeNames": ["a"]}), ("/bind", bind_args(p, "a")))
    assert bound == {"Error": ""}
    assert binder.bound == {"shop/web-1": "a"}
    recorded = valid_record(orjson.loads(binder.annotations["shop/web-1"][DECISION_ANNOTATION]))
    assert recorded.trigger == "bind" and recorded.winner == Winner(node="a", rank=1, score=10)
    assert recorded.policy == "shop/web"
    assert "berth placed the pod on a" in binder.messages["shop/web-1"]
    # bound but not yet seen by the watch: an assumption, counted on its node
    assert store.view.is_assumed(p["metadata"]["uid"])
    assert store.view.requested("a")["cpu"] == 1000


def _serve(app: Any, *requests: tuple[str, Any]) -> list[Any]:
    """POST each (path, body) in turn through the app, then let the queued Events be written."""
    async def run() -> list[Any]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://berth") as client:
            replies = [(await client.post(path, content=orjson.dumps(body))).json() for path, body in requests]
        await app.state.engine.events.drain()
        return replies

    return asyncio.run(run())


def test_bind_recheck_refuses_a_node_that_filled_up_meanwhile() -> None:
    h = harness([make_node("a").cpu("2").obj(), make_policy("web").obj()])
    p = make_pod("web-1").labels(WEB).cpu("1500m").obj()
    assert h.filter(p)["NodeNames"] == ["a"]
    # between filter and bind, the watch shows another pod bound on the node
    h.store.apply_pod(make_pod("intruder").labels({}).namespace("other").cpu("1").on("a").obj())
    error = h.bind(p, "a")
    assert error.startswith("berth: a: insufficient capacity: cpu: needs 1500m, 1 free of 2 allocatable")
    assert h.store.view.pod(p["metadata"]["uid"]) is None  # not counted anywhere
    assert h.store.view.requested("a")["cpu"] == 1000
    decision = valid_record(h.client.get("/api/v1/decisions/shop/web-1").json())
    assert decision.trigger == "bind" and decision.winner is None
    text = h.client.get("/metrics").text
    assert 'berth_bind_conflicts_total{reason="recheck"} 1.0' in text


def test_bind_to_another_node_than_berths_winner_moves_the_pod() -> None:
    h = harness([make_node("a").cpu("4").obj(),
                 make_node("b").cpu("2").obj(),
                 make_policy("web").strategy("Spread").obj()])
    p = make_pod("web-1").labels(WEB).cpu("1").obj()
    h.filter(p)
    assert h.store.assumed[p["metadata"]["uid"]].pod.node_name == "a"
    assert h.bind(p, "b") == ""  # kube-scheduler's other plugins may outweigh berth's score
    assert h.store.view.requested("a").get("cpu", 0) == 0
    assert h.store.view.requested("b")["cpu"] == 1000
    decision = valid_record(h.client.get("/api/v1/decisions/shop/web-1").json())
    assert decision.winner == Winner(node="b", rank=2, score=2)  # berth's second of two: 4 * (2 - 1) // 2
    assert decision.ranking == ["a", "b"]  # berth's own ranking, as filter made it
    assert "kube-scheduler chose b; berth ranked a first" in decision.warnings


def test_bind_of_a_pass_through_pod_counts_it() -> None:
    h = harness([make_node("a").cpu("2").obj()])
    p = make_pod("db-1").labels({"app": "db"}).cpu("1").obj()
    h.filter(p)
    assert h.bind(p, "a") == ""
    assert h.store.view.requested("a")["cpu"] == 1000


def test_bind_of_an_unknown_pod_is_refused_with_a_reason() -> None:
    h = harness([make_node("a").obj()])
    error = h.bind(make_pod("ghost").labels({}).obj(), "a")
    assert "is unknown" in error


def test_a_failed_binding_releases_the_pod() -> None:
    store, app = web_app(RecordingBinder(fail="cannot bind: pods \"web-1\" not found"), make_node("a").cpu("2").obj())
    from fastapi.testclient import TestClient

    client = TestClient(app)
    p = make_pod("web-1").labels(WEB).cpu("1").obj()
    client.post("/filter", content=orjson.dumps({"Pod": p, "NodeNames": ["a"]}))
    r = client.post("/bind", content=orjson.dumps(bind_args(p, "a")))
    assert "not found" in r.json()["Error"]
    assert store.view.pod(p["metadata"]["uid"]) is None
    assert store.assumed == {}


@pytest.mark.parametrize(("binder", "read_again"), [
    (RecordingBinder(fail="cannot bind pod shop/web-1 to a: Conflict"), True),
    (RecordingBinder(not_sent=True), False),
], ids=["refused_binding_reads_the_pod_again", "binding_never_sent_adds_no_read"])
def test_a_failed_binding_reads_the_pod_again_only_when_it_was_sent(binder: RecordingBinder,
                                                                     read_again: bool) -> None:
    """A Binding the API server refused may have met one that bound the pod (the pod is read again
    to count it where it is); one never sent bound nothing, and a read would only add to an API
    server too busy to take it."""
    store, app = web_app(binder, make_node("a").cpu("2").obj())
    p = make_pod("web-1").labels(WEB).cpu("1").obj()
    _, bound = _serve(app, ("/filter", {"Pod": p, "NodeNames": ["a"]}), ("/bind", bind_args(p, "a")))
    assert bound["Error"].startswith("cannot bind pod shop/web-1 to a")
    assert binder.reads == (["shop/web-1"] if read_again else [])
    assert store.view.pod(p["metadata"]["uid"]) is None and store.assumed == {}


def test_a_bound_pod_stays_counted_until_the_watch_shows_it_or_its_time_is_up() -> None:
    store = make_store([make_node("a").cpu("4").obj(), make_policy("web").obj()])
    clock = Clock()
    store.clock = clock
    app = create_app(store, ExtenderSettings(assume_ttl_seconds=30), binder=RecordingBinder(), clock=clock)
    from fastapi.testclient import TestClient

    client = TestClient(app)
    p1, p2 = make_pod("web-1").labels(WEB).cpu("1").obj(), make_pod("web-2").labels(WEB).cpu("1").obj()
    for p in (p1, p2):
        client.post("/filter", content=orjson.dumps({"Pod": p, "NodeNames": ["a"]}))
        assert client.post("/bind", content=orjson.dumps(bind_args(p, "a"))).json() == {"Error": ""}
    assert store.view.requested("a")["cpu"] == 2000
    # the watch shows web-1 bound: no longer an assumption, still counted
    store.apply_pod({**p1, "spec": {**p1["spec"], "nodeName": "a"}})
    assert not store.view.is_assumed(p1["metadata"]["uid"])
    # web-2 never shows up bound: released after the TTL
    clock.advance(31)
    client.post("/filter", content=orjson.dumps({"Pod": make_pod("web-3").labels(WEB).obj(), "NodeNames": ["a"]}))
    assert store.view.pod(p2["metadata"]["uid"]) is None
    assert store.view.requested("a")["cpu"] == 1000 + 100  # web-1, and web-3's tentative place
    assert 'berth_assumptions_expired_total{kind="bound"} 1.0' in client.get("/metrics").text


def _bound(store_objects: list[dict[str, Any]], *pods: dict[str, Any], **settings: Any) -> tuple[Any, Clock, Any]:
    """A store, its clock and a test client, with ``pods`` filtered and bound (not yet seen bound)."""
    from fastapi.testclient import TestClient

    store = make_store(store_objects)
    clock = Clock()
    store.clock = clock
    client = TestClient(create_app(store, ExtenderSettings(**settings), binder=RecordingBinder(), clock=clock))
    for p in pods:
        client.post("/filter", content=orjson.dumps({"Pod": p, "NodeNames": ["a"]}))
        assert client.post("/bind", content=orjson.dumps(bind_args(p, "a"))).json() == {"Error": ""}
    return store, clock, client


def test_a_bound_pod_is_held_past_a_lagging_watch_by_default() -> None:
    p1 = make_pod("web-1").labels(WEB).cpu("1").obj()
    store, clock, client = _bound([make_node("a").cpu("4").obj(), make_policy("web").obj()], p1)
    clock.advance(600)  # a watch ten minutes behind
    client.post("/filter", content=orjson.dumps({"Pod": make_pod("web-2").labels(WEB).obj(), "NodeNames": ["a"]}))
    assert store.view.is_assumed(p1["metadata"]["uid"])
    assert store.view.requested("a")["cpu"] == 1000 + 100  # web-1 still counted, and web-2's tentative place
    assert 'berth_assumptions_expired_total{kind="bound"}' not in client.get("/metrics").text


def test_a_bound_pod_lapses_only_after_the_safety_bound_and_is_counted() -> None:
    p1 = make_pod("web-1").labels(WEB).cpu("1").obj()
    store, clock, client = _bound([make_node("a").cpu("4").obj(), make_policy("web").obj()], p1)
    clock.advance(ExtenderSettings().assume_ttl_seconds + 1)
    client.post("/filter", content=orjson.dumps({"Pod": make_pod("web-2").labels(WEB).obj(), "NodeNames": ["a"]}))
    assert store.view.pod(p1["metadata"]["uid"]) is None
    assert 'berth_assumptions_expired_total{kind="bound"} 1.0' in client.get("/metrics").text


def test_a_bound_pod_deleted_before_the_watch_showed_it_is_released() -> None:
    p1 = make_pod("web-1").labels(WEB).cpu("1").obj()
    store, _, _ = _bound([make_node("a").cpu("4").obj(), make_policy("web").obj()], p1)
    store.delete_pod(p1)
    assert store.assumed == {} and store.view.requested("a").get("cpu", 0) == 0


def test_a_full_list_begun_after_the_bind_without_the_pod_releases_it() -> None:
    p1 = make_pod("web-1").labels(WEB).cpu("1").obj()
    store, clock, _ = _bound([make_node("a").cpu("4").obj(), make_policy("web").obj()], p1)
    clock.advance(1)
    store.replace("pods", [])  # the relist after a lost watch: the pod is gone
    assert store.assumed == {} and store.view.requested("a").get("cpu", 0) == 0


def test_a_full_list_showing_the_pod_still_pending_keeps_it() -> None:
    p1 = make_pod("web-1").labels(WEB).cpu("1").obj()
    store, clock, _ = _bound([make_node("a").cpu("4").obj(), make_policy("web").obj()], p1)
    clock.advance(1)
    store.replace("pods", [p1])  # listed while the Binding was still on its way
    assert store.view.is_assumed(p1["metadata"]["uid"])
    assert store.view.requested("a")["cpu"] == 1000


def test_a_full_list_begun_before_the_bind_keeps_it() -> None:
    p1 = make_pod("web-1").labels(WEB).cpu("1").obj()
    store, clock, _ = _bound([make_node("a").cpu("4").obj(), make_policy("web").obj()])

    def listed_then_bound() -> Any:  # the list was read from the API server before the pod was bound
        clock.advance(1)
        store.assume(_info(p1), "a", bound=True, deadline=clock() + 900)
        yield from ()

    store.replace("pods", listed_then_bound())
    assert store.view.is_assumed(p1["metadata"]["uid"])


def test_a_watch_update_of_a_pending_pod_keeps_its_assumption() -> None:
    h = harness([make_node("a").cpu("2").obj(), make_policy("web").obj()])
    p = make_pod("web-1").labels(WEB).cpu("1").obj()
    h.filter(p)
    h.store.apply_pod(p)  # a status update of the still pending pod arrives from the watch
    assert h.store.view.is_assumed(p["metadata"]["uid"])
    assert h.store.view.requested("a")["cpu"] == 1000


# -- concurrency --------------------------------------------------------------------------------

async def _concurrent_binds(count: int, room: int, delay: float) -> tuple[list[str], Any]:
    binder = RecordingBinder(delay=delay)
    store, app = web_app(binder, make_node("a").cpu(str(room)).memory("64Gi").pods("110").obj())
    pods = [make_pod(f"web-{i}").labels(WEB).cpu("1").obj() for i in range(count)]
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://berth") as client:
        # the scheduler's view said the node had room for all of them (a stale cache, other schedulers)
        for p in pods:
            store.remember_pod(store.known_pod(p["metadata"]["uid"]) or _info(p))
        replies = await asyncio.gather(*(client.post("/bind", content=orjson.dumps(bind_args(p, "a")))
                                         for p in pods))
    return [r.json()["Error"] for r in replies], store


def _info(p: dict[str, Any]) -> PodInfo:
    from berth.core.kube import pod_from_object

    return pod_from_object(p)


@pytest.mark.parametrize("delay", [0.0, 0.01])
def test_concurrent_binds_never_overcommit_a_node(delay: float) -> None:
    errors, store = asyncio.run(_concurrent_binds(count=20, room=3, delay=delay))
    assert sum(1 for e in errors if e == "") == 3
    refused = [e for e in errors if e]
    assert len(refused) == 17
    assert all("insufficient capacity: cpu" in e for e in refused)
    assert store.view.requested("a")["cpu"] == 3000


async def _wait_until(check: Callable[[], bool]) -> None:
    for _ in range(2000):
        if check():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("the condition never held")


async def _post_bind(client: httpx.AsyncClient, p: dict[str, Any], node_name: str) -> str:
    r = await client.post("/bind", content=orjson.dumps(bind_args(p, node_name)))
    error: str = r.json()["Error"]
    return error


def test_a_slow_binding_does_not_hold_up_the_next_bind_to_its_node() -> None:
    async def scenario() -> tuple[str, bool, str]:
        gate = asyncio.Event()
        binder = RecordingBinder(bind_gates={"shop/web-0": gate})
        store, app = web_app(binder, make_node("a").cpu("8").obj())
        first, second = pending_web(store, 2)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://berth") as client:
            slow = asyncio.create_task(_post_bind(client, first, "a"))
            await _wait_until(lambda: "shop/web-0" in binder.in_flight)
            fast = await _post_bind(client, second, "a")  # answered while the first Binding is in flight
            still_in_flight = not slow.done()
            gate.set()
            return fast, still_in_flight, await slow

    fast, still_in_flight, slow = asyncio.run(scenario())
    assert (fast, still_in_flight, slow) == ("", True, "")


def test_a_reservation_holds_while_its_binding_is_in_flight_and_a_failed_binding_releases_it() -> None:
    async def scenario() -> tuple[str, str, str, float]:
        gate = asyncio.Event()
        binder = RecordingBinder(bind_gates={"shop/web-0": gate}, fails={"shop/web-0"})
        store, app = web_app(binder, make_node("a").cpu("1").obj())
        pods = pending_web(store, 3)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://berth") as client:
            first = asyncio.create_task(_post_bind(client, pods[0], "a"))
            await _wait_until(lambda: "shop/web-0" in binder.in_flight)
            while_in_flight = await _post_bind(client, pods[1], "a")  # the node's room is reserved
            gate.set()
            failed = await first
            after = await _post_bind(client, pods[2], "a")  # the failed Binding freed the room
        return while_in_flight, failed, after, store.view.requested("a")["cpu"]

    while_in_flight, failed, after, cpu = asyncio.run(scenario())
    assert while_in_flight.startswith("berth: a: insufficient capacity: cpu")
    assert failed == "cannot bind pod shop/web-0 to a: InternalError"
    assert after == "" and cpu == 1000


def test_a_second_bind_of_a_pod_whose_bind_is_in_flight_is_refused() -> None:
    async def scenario() -> tuple[str, str, str]:
        gate = asyncio.Event()
        binder = RecordingBinder(bind_gates={"shop/web-0": gate})
        store, app = web_app(binder, make_node("a").cpu("8").obj(), make_node("b").cpu("8").obj())
        (p,) = pending_web(store, 1)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://berth") as client:
            first = asyncio.create_task(_post_bind(client, p, "a"))
            await _wait_until(lambda: "shop/web-0" in binder.in_flight)
            second = await _post_bind(client, p, "b")
            gate.set()
            text = (await client.get("/metrics")).text
            return await first, second, text

    first, second, metrics = asyncio.run(scenario())
    assert first == ""
    assert second == "berth: a bind of pod shop/web-0 is already in flight"
    assert 'berth_bind_conflicts_total{reason="in_flight"} 1.0' in metrics


def test_bind_answers_before_its_event_is_written() -> None:
    """The BerthPlaced Event is off the bind path: a slow Event write delays no bind."""
    async def scenario() -> tuple[list[str], set[str], set[str]]:
        gate = asyncio.Event()
        binder = RecordingBinder(event_gates={"shop/web-0": gate})
        store, app = web_app(binder, make_node("a").cpu("8").obj())
        first, second = pending_web(store, 2)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://berth") as client:
            replies = [await _post_bind(client, first, "a"), await _post_bind(client, second, "a")]
            written_before = set(binder.messages)
            gate.set()
            await app.state.engine.events.drain()
        return replies, written_before, set(binder.messages)

    replies, written_before, written_after = asyncio.run(scenario())
    assert replies == ["", ""]
    assert written_before == set()
    assert written_after == {"shop/web-0", "shop/web-1"}


def test_events_beyond_the_queues_capacity_are_dropped_and_counted() -> None:
    async def scenario() -> tuple[list[bool], list[str], float]:
        written: list[str] = []
        drops: list[int] = []

        async def write(p: PodInfo, node_name: str, message: str) -> None:
            written.append(p.name)

        queue = EventQueue(write, lambda: drops.append(1), capacity=2)
        pods = [_info(make_pod(f"web-{i}").labels(WEB).obj()) for i in range(3)]
        offered = [queue.offer(p, "a", "placed") for p in pods]  # the writer has not run yet
        await queue.drain()
        return offered, written, float(len(drops))

    offered, written, drops = asyncio.run(scenario())
    assert offered == [True, True, False]
    assert written == ["web-0", "web-1"] and drops == 1


def test_event_writes_keep_to_their_rate() -> None:
    async def scenario() -> list[float]:
        now = [0.0]
        times: list[float] = []

        async def write(p: PodInfo, node_name: str, message: str) -> None:
            times.append(now[0])

        async def sleep(seconds: float) -> None:
            now[0] += seconds

        queue = EventQueue(write, lambda: None, rate=10.0, burst=2, clock=lambda: now[0], sleep=sleep)
        for i in range(5):
            queue.offer(_info(make_pod(f"web-{i}").labels(WEB).obj()), "a", "placed")
        await queue.drain()
        return times

    times = asyncio.run(scenario())
    assert times == pytest.approx([0.0, 0.0, 0.1, 0.2, 0.3])


def test_event_writes_slow_to_the_busy_rate_while_binds_keep_coming() -> None:
    """A bind begins whenever the writer wakes before t=1 (the last at 0.8): until a second after
    it, Events keep to 5 a second without burst; then to 10 a second, with the burst earned since."""
    async def scenario() -> list[float]:
        now = [0.0]
        times: list[float] = []

        async def write(p: PodInfo, node_name: str, message: str) -> None:
            times.append(round(now[0], 3))

        async def sleep(seconds: float) -> None:
            now[0] += seconds
            if now[0] < 1.0:
                queue.bind_started()

        queue = EventQueue(write, lambda: None, rate=10.0, burst=3, busy_rate=5.0, quiet=1.0,
                           clock=lambda: now[0], sleep=sleep)
        queue.bind_started()
        for i in range(13):
            queue.offer(_info(make_pod(f"web-{i}").labels(WEB).obj()), "a", "placed")
        await queue.drain()
        return times

    assert asyncio.run(scenario()) == pytest.approx([0.0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8,
                                                     2.0, 2.0, 2.1])


def test_events_offered_on_a_new_event_loop_are_written_there() -> None:
    written: list[str] = []

    async def write(p: PodInfo, node_name: str, message: str) -> None:
        written.append(p.name)

    queue = EventQueue(write, lambda: None)

    async def offer_and_drain(name: str) -> None:
        queue.offer(_info(make_pod(name).labels(WEB).obj()), "a", "placed")
        await queue.drain()

    asyncio.run(offer_and_drain("web-0"))
    asyncio.run(offer_and_drain("web-1"))  # a second loop: the first loop's queue cannot serve it
    assert written == ["web-0", "web-1"]


def test_the_dropped_events_counter_is_exported() -> None:
    h = harness([make_node("a").cpu("2").obj()])
    assert "berth_events_dropped_total 0.0" in h.client.get("/metrics").text


def test_the_binding_calls_time_is_exported_apart_from_the_binds() -> None:
    pod = make_pod("web-0").labels(WEB).cpu("100m").obj()
    h = harness([make_node("a").cpu("2").obj(), make_policy("web").obj(), pod])
    assert h.schedule(pod) == "a"
    text = h.client.get("/metrics").text
    assert 'berth_api_call_seconds_count{call="binding"} 1.0' in text
    assert 'berth_extender_request_seconds_count{verb="bind"} 1.0' in text


def test_the_binds_own_steps_are_exported_one_observation_a_bind() -> None:
    pod = make_pod("web-0").labels(WEB).cpu("100m").obj()
    h = harness([make_node("a").cpu("2").obj(), make_policy("web").obj(), pod])
    assert h.schedule(pod) == "a"
    text = h.client.get("/metrics").text
    for step in ("pod", "lock_wait", "recheck", "connection_wait", "connect", "answer"):
        assert f'berth_bind_step_seconds_count{{step="{step}"}} 1.0' in text


def test_a_failed_event_write_leaves_the_pod_bound() -> None:
    binder = RecordingBinder(event_fails=True)
    store, app = web_app(binder, make_node("a").cpu("2").obj())
    from fastapi.testclient import TestClient

    p = make_pod("web-1").labels(WEB).cpu("1").obj()
    store.remember_pod(_info(p))
    assert TestClient(app).post("/bind", content=orjson.dumps(bind_args(p, "a"))).json() == {"Error": ""}
    assert binder.bound == {"shop/web-1": "a"}
    assert store.view.requested("a")["cpu"] == 1000


def test_the_annotation_stays_small_on_a_large_cluster() -> None:
    nodes = [make_node(f"n{i:03d}").cpu("1").obj() for i in range(60)] + [make_node("big").cpu("16").obj()]
    binder = RecordingBinder()
    store, app = web_app(binder, *nodes)

    p = make_pod("web-1").labels(WEB).cpu("2").obj()
    result, bound = _serve(app, ("/filter", {"Pod": p, "NodeNames": sorted(store.view.nodes)}),
                           ("/bind", bind_args(p, "big")))
    assert result["NodeNames"] == ["big"] and len(result["FailedNodes"]) == 60
    assert bound == {"Error": ""}
    recorded = valid_record(orjson.loads(binder.annotations["shop/web-1"][DECISION_ANNOTATION]))
    assert len(recorded.considered) == 20 and recorded.considered_count == 61
    assert len(recorded.refusals()) == 20 and recorded.refused_count == 60
    assert [(g.reason, g.count) for g in recorded.refused] == [("insufficient capacity: cpu", 60)]
    assert len(binder.annotations["shop/web-1"][DECISION_ANNOTATION]) < 4096
    assert "61 nodes considered, 60 refused" in binder.messages["shop/web-1"]


# -- the pod's own record when no node takes it -------------------------------------------------------

async def _filter_all(app: Any, *pods: dict[str, Any]) -> list[dict[str, Any]]:
    """Filter each pod over every node, through the app, and let the background Event writes run."""
    replies = []
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://berth") as client:
        for p in pods:
            r = await client.post("/filter", content=orjson.dumps({"Pod": p, "NodeNames": ["a", "b"]}))
            replies.append(r.json())
            for _ in range(5):
                await asyncio.sleep(0)
    return replies


def test_a_pod_no_node_takes_gets_a_berth_refused_event_with_each_nodes_figures() -> None:
    binder = RecordingBinder()
    _, app = web_app(binder, make_node("a").cpu("1").obj(), make_node("b").cpu("2").obj())
    p = make_pod("web-1").labels(WEB).cpu("3").obj()
    [reply] = asyncio.run(_filter_all(app, p))
    assert reply["FailedNodes"] == {"a": "insufficient capacity: cpu", "b": "insufficient capacity: cpu"}
    [message] = binder.refusals["shop/web-1"]
    assert message == ("berth found no node for the pod (strategy Default, policy shop/web; 2 nodes considered, "
                       "2 refused): a: insufficient capacity: cpu: needs 3, 1 free of 1 allocatable (short by 2);"
                       " b: insufficient capacity: cpu: needs 3, 2 free of 2 allocatable (short by 1)")


def test_a_pod_refused_again_for_the_same_reasons_gets_no_second_event() -> None:
    binder = RecordingBinder()
    _, app = web_app(binder, make_node("a").cpu("1").obj(), make_node("b").cpu("2").obj())
    p = make_pod("web-1").labels(WEB).cpu("3").obj()
    asyncio.run(_filter_all(app, p, p))
    assert len(binder.refusals["shop/web-1"]) == 1


def test_a_pod_that_fits_gets_no_berth_refused_event() -> None:
    binder = RecordingBinder()
    _, app = web_app(binder, make_node("a").cpu("1").obj(), make_node("b").cpu("2").obj())
    asyncio.run(_filter_all(app, make_pod("web-1").labels(WEB).cpu("1").obj()))
    assert binder.refusals == {}


def test_the_refused_event_stays_within_an_events_length() -> None:
    nodes = [make_node(f"node-{i:03d}").cpu(str(1 + i % 2)).obj() for i in range(200)]
    binder = RecordingBinder()
    _, app = web_app(binder, *nodes)

    async def run() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://berth") as client:
            names = [f"node-{i:03d}" for i in range(200)]
            await client.post("/filter", content=orjson.dumps({"Pod": make_pod("web-1").labels(WEB).cpu("3").obj(),
                                                               "NodeNames": names}))
            for _ in range(5):
                await asyncio.sleep(0)

    asyncio.run(run())
    [message] = binder.refusals["shop/web-1"]
    assert len(message) <= 1024
    assert message.startswith("berth found no node for the pod")
    # the nodes refused for the same text are named together, each group with its figures
    assert "node-000, node-002, node-004" in message and "node-001, node-003" in message
    assert ": insufficient capacity: cpu: needs 3, 1 free of 1 allocatable (short by 2)" in message
    assert message.endswith(" ...")
