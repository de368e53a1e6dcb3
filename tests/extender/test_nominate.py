"""berth nominates pending pods' nodes before kube-scheduler's cycle (extender/nominator.py), and
its filter, sent a pod's nominated node alone, still judges the whole cluster."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import pytest
import uvloop

from berth.core.round import ROUND_ANNOTATION, quota
from berth.extender import nominator as nominator_module
from berth.extender.binder import BindError
from berth.extender.nominator import Nominator
from tests.builders import make_node, make_pod, make_policy
from tests.extender.helpers import NODES, Harness, counted, nominating, pending


def plan_queued(nominator: Nominator) -> dict[str, str]:
    """What the nominator's task plans for the pods queued now: pod name -> node."""
    return {pod.name: node for pod, node in nominator.plan(nominator.take(1000))}


# -- the nominator --------------------------------------------------------------------------------

def test_nominates_each_pod_the_node_filter_would_choose_in_turn() -> None:
    h, nominator = nominating([*NODES, make_policy("web").strategy("Spread").obj()])
    for i in range(3):
        h.store.apply_pod(pending(f"web-{i}"))
    planned = plan_queued(nominator)
    assert planned == {"web-0": "a", "web-1": "b", "web-2": "c"}
    entry = h.store.assumed["uid-shop-web-1"]
    assert entry.nominated and entry.pod.node_name == "b"  # counted there until bound or renominated
    # kube-scheduler tries each nominated node alone: berth passes it (a hit) and binds there
    for i, node in enumerate("abc"):
        pod = pending(f"web-{i}", nominated=node)
        assert h.filter(pod, [node])["NodeNames"] == [node]
        assert h.bind(pod, node) == ""
    assert counted(h, "hit") == 3
    assert counted(h, "missed") == 0


SKIPPED = [
    # (name, pod, policy objects)
    ("a pod no policy selects", {"labels": {"app": "other"}}, [make_policy("web").obj()]),
    ("a pod of another scheduler", {"scheduler": "default-scheduler"}, [make_policy("web").obj()]),
    ("a pod already nominated", {"nominated": "b"}, [make_policy("web").obj()]),
    ("a bound pod", {"on": "b"}, [make_policy("web").obj()]),
]


@pytest.mark.parametrize(("pod_kw", "objects"), [r[1:] for r in SKIPPED], ids=[r[0] for r in SKIPPED])
def test_skips_pods_berth_may_not_nominate(pod_kw: dict[str, Any], objects: list[dict[str, Any]]) -> None:
    h, nominator = nominating([*NODES, *objects])
    h.store.apply_pod(pending("web-0", **pod_kw))
    assert plan_queued(nominator) == {}


def test_skips_a_pod_bound_while_it_waited_in_the_queue() -> None:
    h, nominator = nominating([*NODES, make_policy("web").obj()])
    h.store.apply_pod(pending("web-0"))
    h.store.apply_pod(pending("web-0", on="c"))
    assert nominator.queued() == 1
    assert plan_queued(nominator) == {}


def test_skips_a_pod_whose_filter_already_came() -> None:
    h, nominator = nominating([*NODES, make_policy("web").strategy("Spread").obj()])
    pod = pending("web-0")
    h.store.apply_pod(pod)
    h.filter(pod)  # kube-scheduler's cycle came first: berth's winner counts there already
    assert plan_queued(nominator) == {}


def test_a_full_queue_drops_and_counts() -> None:
    h, nominator = nominating([*NODES, make_policy("web").obj()], nominate_queue=2)
    for i in range(5):
        h.store.apply_pod(pending(f"web-{i}"))
    assert nominator.queued() == 2
    assert counted(h, "dropped") == 3
    assert set(plan_queued(nominator)) == {"web-0", "web-1"}


WAITS = [
    # (name, seconds the pod waits, kube-scheduler's filter came meanwhile, what is planned)
    ("a pod kube-scheduler has not reached after the wait is nominated", 0.2, False, {"web-0": "a"}),
    ("a pod that came less than the wait ago is not taken yet", 0.05, False, {}),
    ("a pod kube-scheduler reached within the wait is not nominated", 0.2, True, {}),
]


@pytest.mark.parametrize(("waited", "reached", "expected"), [w[1:] for w in WAITS], ids=[w[0] for w in WAITS])
def test_a_pod_is_nominated_only_once_it_has_waited_unreached(waited: float, reached: bool,
                                                              expected: dict[str, str]) -> None:
    h, nominator = nominating([*NODES, make_policy("web").strategy("Spread").obj()], nominate_after_seconds=0.1)
    pod = pending("web-0")
    h.store.apply_pod(pod)
    if reached:
        h.filter(pod)
    h.clock.advance(waited)
    assert plan_queued(nominator) == expected
    assert nominator.queued() == (1 if waited < 0.1 else 0)  # a pod too young stays queued, in its place


BEHIND = [
    # (name, the first pod reached by kube-scheduler's cycle, what is planned once it has waited)
    ("a pod behind an unreached one is planned with it though younger", False, {"web-0": "a", "web-1": "b"}),
    ("a pod behind one kube-scheduler reached waits its own turn", True, {}),
]


@pytest.mark.parametrize(("reached", "expected"), [b[1:] for b in BEHIND], ids=[b[0] for b in BEHIND])
def test_the_pods_behind_an_unreached_one_are_taken_with_it(reached: bool, expected: dict[str, str]) -> None:
    h, nominator = nominating([*NODES, make_policy("web").strategy("Spread").obj()], nominate_after_seconds=0.1)
    first = pending("web-0")
    h.store.apply_pod(first)
    if reached:
        h.filter(first)
    h.clock.advance(0.05)
    h.store.apply_pod(pending("web-1"))
    h.clock.advance(0.05)
    assert plan_queued(nominator) == expected


ARRIVALS = [
    # (name, pods created at each tick of 50 ms, pods kube-scheduler's cycle reaches a tick, nominations, hits)
    ("pods one by one at the rate kube-scheduler keeps up with: no write", [1] * 8, 1, 0, 0),
    ("a burst kube-scheduler is behind: every pod after the first two wait is nominated, each a hit",
     [10], 1, 8, 8),
    ("a burst after paced pods: only the burst's backlog is nominated", [1, 1, 1, 6], 1, 4, 4),
]


@pytest.mark.parametrize(("created", "reached", "nominations", "hits"), [a[1:] for a in ARRIVALS],
                         ids=[a[0] for a in ARRIVALS])
def test_nominations_are_written_only_while_kube_scheduler_is_behind(created: list[int], reached: int,
                                                                      nominations: int, hits: int) -> None:
    """kube-scheduler takes the pods first in, first out, ``reached`` a tick; the nominator takes
    those that have waited 100 ms (two ticks): a paced arrival is never written, a burst's backlog
    always, and each of those nominations is where kube-scheduler's filter then places the pod."""
    nodes = [make_node(n).cpu("64").obj() for n in "abc"]
    h, nominator = nominating([*nodes, make_policy("web").strategy("Spread").obj()], nominate_after_seconds=0.1)
    names: list[str] = []
    planned: dict[str, str] = {}
    queue: list[str] = []  # kube-scheduler's, first in, first out
    for tick in range(len(created) + 20):
        for _ in range(created[tick] if tick < len(created) else 0):
            names.append(f"web-{len(names)}")
            h.store.apply_pod(pending(names[-1]))
            queue.append(names[-1])
        planned |= plan_queued(nominator)
        for name in queue[:reached]:
            node = planned.get(name)
            pod = pending(name, nominated=node) if node else pending(name)
            assert h.filter(pod, [node] if node else ["a", "b", "c"])["NodeNames"]
        del queue[:reached]
        h.clock.advance(0.05)
    assert not queue
    assert len(planned) == nominations
    assert (counted(h, "hit"), counted(h, "missed"), counted(h, "late")) == (hits, 0, 0)


def test_a_stale_nomination_is_refused_and_the_pod_placed_where_berth_decides() -> None:
    h, nominator = nominating([*NODES, make_policy("web").strategy("Spread").obj()])
    h.store.apply_pod(pending("web-0"))
    assert plan_queued(nominator) == {"web-0": "a"}
    h.store.apply_node(make_node("a").cpu("4").cordoned().obj())  # the nominated node is cordoned meanwhile
    pod = pending("web-0", nominated="a")
    first = h.filter(pod, ["a"])
    assert first["NodeNames"] == []
    assert counted(h, "missed") == 1
    # kube-scheduler falls back to filtering every node: berth's winner is placed
    assert h.schedule(pod, ["a", "b", "c"]) == "b"


def test_a_filter_sent_every_node_for_a_nominated_pod_counts_late() -> None:
    h, nominator = nominating([*NODES, make_policy("web").strategy("Spread").obj()])
    h.store.apply_pod(pending("web-0"))
    plan_queued(nominator)
    assert h.schedule(pending("web-0"), ["a", "b", "c"]) == "a"
    assert counted(h, "late") == 1


def test_rounds_are_planned_within_the_round() -> None:
    h, nominator = nominating([*NODES, make_policy("web").strategy("Fill").count(2).obj()])
    for i in range(4):
        h.store.apply_pod(pending(f"web-{i}"))
    planned = plan_queued(nominator)
    assert sorted(planned.values()).count(planned["web-0"]) == 2  # Fill: two on a node, as the round plans
    assert len(set(planned.values())) == 2
    for name, node in planned.items():
        pod = pending(name, nominated=node)
        assert h.filter(pod, [node])["NodeNames"] == [node]
        assert h.bind(pod, node) == ""
    assert counted(h, "hit") == 4


def test_the_task_writes_nominations_and_a_failed_write_releases_the_place(caplog: pytest.LogCaptureFixture) -> None:
    h, nominator = nominating([*NODES, make_policy("web").strategy("Spread").obj()])
    written: dict[str, str] = {}

    async def write(pod: Any, node: str) -> None:
        if pod.name in ("web-1", "web-3"):
            raise RuntimeError("409 Conflict")
        written[pod.name] = node

    nominator.write = write

    async def run() -> None:
        nominator.start()
        try:
            for i in range(4):
                h.store.apply_pod(pending(f"web-{i}"))
            for _ in range(200):
                if counted(h, "made") + counted(h, "failed") >= 4:
                    break
                await asyncio.sleep(0.01)
        finally:
            await nominator.stop()

    with caplog.at_level(logging.WARNING, logger="berth.extender.nominator"):
        asyncio.run(run())
    assert written == {"web-0": "a", "web-2": "c"}
    assert counted(h, "made") == 2
    assert counted(h, "failed") == 2
    # a kind of failure is logged once as a warning, not once a pod
    assert [r.getMessage().split(":")[0] for r in caplog.records] == ["cannot nominate b for pod shop/web-1"]
    assert "uid-shop-web-1" not in h.store.assumed  # its place on b is free again
    assert h.store.assumed["uid-shop-web-2"].pod.node_name == "c"


def test_a_write_of_a_batch_that_fails_frees_its_pods_place_at_once_and_the_others_keep_theirs() -> None:
    """The API server applies every status patch of a batch but one, which it fails: as soon as the
    batch's writes are done, with no event of the pod since, that pod's place is free, on its node
    and in its round, and its filter would count no hit nor miss; the pods written keep theirs."""
    h, nominator = nominating([*NODES, make_policy("web").strategy("Fill").count(2).obj()], round_timeout_seconds=60)
    patched: dict[str, str] = {}
    failed_on: list[str] = []

    async def write(pod: Any, node: str) -> None:  # the API server's answers to the status patches
        await asyncio.sleep(0)
        if pod.name == "web-1":
            failed_on.append(node)
            raise BindError(f"cannot nominate {node} for pod {pod.key}: Internal error (500)")
        patched[pod.name] = node

    nominator.write = write
    for i in range(4):
        h.store.apply_pod(pending(f"web-{i}"))

    async def run() -> None:
        nominator.start()
        try:
            for _ in range(300):
                if counted(h, "made") + counted(h, "failed") >= 4:
                    break
                await asyncio.sleep(0.01)
        finally:
            await nominator.stop()

    asyncio.run(run())
    assert (counted(h, "made"), counted(h, "failed")) == (3, 1)
    [node] = failed_on
    rnd = h.store.rounds["shop/web"]
    assert "uid-shop-web-1" not in h.store.assumed and "uid-shop-web-1" not in rnd.placed
    assert "uid-shop-web-1" not in h.app.state.engine.nominations
    assert h.store.view.pod("uid-shop-web-1") is None  # counted on no node
    assert quota(rnd) == {node: 1}  # the round's one place left is web-1's
    for name, on in patched.items():
        entry = h.store.assumed[f"uid-shop-{name}"]
        assert entry.nominated and entry.pod.node_name == on and rnd.placed[f"uid-shop-{name}"] == on
    h.store.apply_pod(pending("web-4"))
    assert plan_queued(nominator) == {"web-4": node}  # the next pod takes it in the same round


def test_a_plan_that_fails_midway_holds_no_place_it_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fault while a batch is planned (the task logs it and goes on) writes none of the batch's
    nominations, so the places it counted before the fault, of an earlier policy's pods and of the
    pods placed as it came, are given back at once, not held until each pod's next event."""
    h, nominator = nominating([*NODES, make_policy("web").strategy("Spread").obj(),
                               make_policy("db").match({"app": "db"}).strategy("Spread").obj()])
    real = nominator_module.place_in_turn

    def failing(view: Any, pods: list[Any], *args: Any, **kw: Any) -> Any:
        placed = real(view, pods, *args, **kw)  # each pod counted where it goes
        if pods[0].name.startswith("db"):
            raise RuntimeError("a fault of the placer")
        return placed

    monkeypatch.setattr(nominator_module, "place_in_turn", failing)
    for name, app in (("web-0", "web"), ("web-1", "web"), ("db-0", "db")):
        h.store.apply_pod(pending(name, labels={"app": app}))
    rooms = h.store.room_changes
    with pytest.raises(RuntimeError):
        plan_queued(nominator)
    assert h.store.assumed == {}
    assert all(h.store.view.pod(f"uid-shop-{name}") is None for name in ("web-0", "web-1", "db-0"))
    assert h.store.room_changes > rooms  # pods waiting for a place look again
    assert not h.app.state.engine.nominations


@pytest.mark.parametrize("new_loop", [asyncio.new_event_loop, uvloop.new_event_loop], ids=["asyncio", "uvloop"])
def test_the_task_takes_each_wave_of_pods_once_it_has_waited(new_loop: Callable[[], asyncio.AbstractEventLoop]
                                                             ) -> None:
    """The task sleeps until the oldest queued pod has waited, wave after wave, on the loop the
    extender serves on (uvloop) as on asyncio's. The clock moves on at each read, so a pod too
    young when the task looks has waited by the time it sets its timer: a wake-up due at once
    (uvloop makes it a plain handle) must not stop the next wave's timer."""
    h, nominator = nominating([*NODES, make_policy("web").strategy("Spread").obj()], nominate_after_seconds=0.05)
    written: dict[str, str] = {}

    def ticking() -> float:
        h.clock.advance(0.03)
        return h.clock.now

    async def write(pod: Any, node: str) -> None:
        written[pod.name] = node

    nominator.write = write
    nominator.engine.clock = ticking

    async def run() -> None:
        nominator.start()
        try:
            for wave in range(3):
                h.store.apply_pod(pending(f"web-{wave}"))
                for _ in range(200):
                    if len(written) > wave:
                        break
                    await asyncio.sleep(0.005)
        finally:
            await nominator.stop()

    with asyncio.Runner(loop_factory=new_loop) as runner:
        runner.run(run())
    assert sorted(written) == ["web-0", "web-1", "web-2"]


def test_a_missed_wake_up_delays_a_nomination_and_never_stops_the_task() -> None:
    h, nominator = nominating([*NODES, make_policy("web").strategy("Spread").obj()])
    written: dict[str, str] = {}

    async def write(pod: Any, node: str) -> None:
        written[pod.name] = node

    nominator.write = write

    async def run() -> None:
        nominator.start()
        await asyncio.sleep(0.05)  # the task sleeps, its queue empty
        nominator._signal = lambda: None  # type: ignore[method-assign]  # the next wake-up is lost
        h.store.apply_pod(pending("web-0"))
        for _ in range(300):
            if written:
                break
            await asyncio.sleep(0.01)
        await nominator.stop()

    asyncio.run(run())
    assert written == {"web-0": "a"}


def test_a_task_ended_by_a_fault_says_so(caplog: pytest.LogCaptureFixture) -> None:
    h, nominator = nominating([*NODES, make_policy("web").strategy("Spread").obj()])

    def broken(limit: int) -> list[Any]:
        raise RuntimeError("broken queue")

    nominator.take = broken  # type: ignore[method-assign]

    async def run() -> None:
        nominator.start()
        h.store.apply_pod(pending("web-0"))
        for _ in range(200):
            if nominator._task is not None and nominator._task.done():
                break
            await asyncio.sleep(0.005)
        await nominator.stop()

    with caplog.at_level(logging.ERROR, logger="berth.extender.nominator"):
        asyncio.run(run())
    assert [r.getMessage() for r in caplog.records] == ["the nominator stopped: pods are no longer nominated"]
    assert "broken queue" in caplog.text


WAVES: list[tuple[str, list[int]]] = [
    # name, how many pods come before the nominator plans, wave after wave
    ("two_then_two", [2, 2]),
    ("one_at_a_time", [1, 1, 1, 1]),
    ("three_then_one", [3, 1]),
]


@pytest.mark.parametrize("strategy", ["Fill", "Each"])
@pytest.mark.parametrize(("name", "waves"), WAVES, ids=[w[0] for w in WAVES])
def test_the_next_round_opens_once_nominations_use_one_up_and_every_nomination_hits(strategy: str, name: str,
                                                                                      waves: list[int]) -> None:
    """Pods come in waves and each wave's round is cut to the pods waiting then (the count rule):
    the pods of the next wave open the next round at once, before any pod is bound, and
    kube-scheduler, trying each nominated node alone and binding a pod while it judges the next,
    finds every nomination where its filter places the pod."""
    h, nominator = nominating([*NODES, make_policy("web").strategy(strategy).count(2).obj()])
    planned: dict[str, str] = {}
    names: list[str] = []
    for size in waves:
        for _ in range(size):
            names.append(f"web-{len(names)}")
            h.store.apply_pod(pending(names[-1]))
        wave = plan_queued(nominator)
        assert list(wave) == names[-size:]  # the whole wave nominated as it comes, none left waiting
        planned |= wave
    assert list(planned) == names  # every pod nominated before kube-scheduler reaches it
    assert len({entry.round_id for entry in h.store.assumed.values()}) == len(waves)  # a round a wave
    earlier: tuple[dict[str, Any], str] | None = None
    for pod_name, node in planned.items():
        pod = pending(pod_name, nominated=node)
        assert h.filter(pod, [node])["NodeNames"] == [node]
        if earlier is not None:  # bound while the next pod is judged
            assert h.bind(*earlier) == ""
        earlier = (pod, node)
    assert earlier is not None and h.bind(*earlier) == ""
    assert (counted(h, "hit"), counted(h, "missed"), counted(h, "late")) == (len(names), 0, 0)
    bound_rounds = {a[ROUND_ANNOTATION] for a in h.app.state.engine.binder.annotations.values()}
    assert len(bound_rounds) == len(waves)


def test_a_pod_no_place_left_in_its_round_takes_waits_unnominated_until_a_round_plans_for_it() -> None:
    """The round in force still has a place, but not one this pod's own checks let it have (it
    asks for a node the round's plan leaves out): filter would refuse it every node, so it is not
    nominated (a miss is worse than none) and waits; once the round lapses, the next round is
    planned for it, and filter passes its nomination."""
    nodes = [make_node("a").cpu("4").obj(), make_node("b").cpu("4").obj(),
             make_node("c").cpu("4").label("disk", "ssd").obj()]
    h, nominator = nominating([*nodes, make_policy("web").strategy("Fill").count(2).obj()], round_timeout_seconds=60)
    choosy = pending("web-1")
    choosy["spec"]["nodeSelector"] = {"disk": "ssd"}
    h.store.apply_pod(pending("web-0"))
    h.store.apply_pod(choosy)
    planned = plan_queued(nominator)
    assert list(planned) == ["web-0"] and planned["web-0"] != "c"
    assert "uid-shop-web-1" not in h.store.assumed
    h.clock.advance(61)  # the round lapses
    assert plan_queued(nominator) == {"web-1": "c"}  # it waited with the nominator, not dropped
    assert plan_queued(nominator) == {}
    choosy["status"]["nominatedNodeName"] = "c"
    assert h.filter(choosy, ["c"])["NodeNames"] == ["c"]
    assert counted(h, "hit") == 1


CHOOSY_NODES = [make_node("a").cpu("4").obj(), make_node("b").cpu("4").obj(),
                make_node("c").cpu("4").label("disk", "ssd").obj()]


def _label_ssd(h: Harness, node: str) -> None:
    h.store.apply_node(make_node(node).cpu("4").label("disk", "ssd").obj())


def watched_plans() -> tuple[Harness, Nominator, dict[str, str], list[list[str]]]:
    """A Fill policy of rounds of two over CHOOSY_NODES, its pods web-0 and web-1 pending (web-1
    takes only a node labelled disk=ssd), and its nominator, with what it writes (pod name -> node)
    and the pods of each plan it makes (names)."""
    h, nominator = nominating([*CHOOSY_NODES, make_policy("web").strategy("Fill").count(2).obj()],
                              round_timeout_seconds=60)
    written: dict[str, str] = {}
    plans: list[list[str]] = []
    real_plan = nominator.plan

    def counting(pods: list[Any]) -> list[tuple[Any, str]]:
        plans.append([p.name for p in pods])
        return real_plan(pods)

    async def write(pod: Any, node: str) -> None:
        written[pod.name] = node

    nominator.plan = counting  # type: ignore[method-assign]
    nominator.write = write
    choosy = pending("web-1")
    choosy["spec"]["nodeSelector"] = {"disk": "ssd"}
    h.store.apply_pod(pending("web-0"))
    h.store.apply_pod(choosy)
    return h, nominator, written, plans


HELPS: list[tuple[str, Callable[[Harness, str], None], str | None]] = [
    # name, the change (given the harness and web-0's node), the node web-1 is then nominated
    # (None: the node web-0 got, whose round place is left)
    ("the_node_of_its_round_becomes_one_it_may_take", _label_ssd, None),
    ("its_round_lapses", lambda h, _: h.clock.advance(61), "c"),
    ("its_policy_changes", lambda h, _: h.store.apply_policy(make_policy("web").strategy("Fill").count(3).obj()),
     "c"),
]


@pytest.mark.parametrize(("name", "change", "expected"), HELPS, ids=[c[0] for c in HELPS])
def test_a_pod_no_place_suits_is_planned_again_only_once_the_view_changes_in_a_way_that_can_help(
        name: str, change: Callable[[Harness, str], None], expected: str | None) -> None:
    """A plan is a walk of the whole view (milliseconds at 5,000 nodes, on the event loop, under
    the lock filter takes): while nothing changes, the pod would find what it found, so it is not
    planned again; a change that can give it a place (a node changed, a pod or a place freed, a
    round opened or lapsed, its policy changed) has it planned again at once."""
    h, nominator, written, plans = watched_plans()

    async def run() -> None:
        nominator.start()
        try:
            await asyncio.sleep(0.6)  # nothing changes: six retries' time
            assert list(written) == ["web-0"]
            assert [p for p in plans if "web-1" in p] == [["web-0", "web-1"]]  # planned once
            change(h, written["web-0"])
            for _ in range(100):
                if "web-1" in written:
                    break
                await asyncio.sleep(0.01)
        finally:
            await nominator.stop()

    asyncio.run(run())
    assert written["web-1"] == (expected or written["web-0"])


def test_a_change_that_came_while_other_pods_were_planned_still_has_the_waiting_pods_planned_again() -> None:
    """The nominator checks for a change before it takes pods and parks the unplaced ones of its
    plan after: a change between the two (a watch thread) that can give the pods already waiting a
    place has them planned again, although the pods parked with it were planned after it."""
    h, nominator = nominating([*CHOOSY_NODES, make_policy("web").strategy("Fill").count(2).obj()],
                              round_timeout_seconds=60)
    ssd, nvme = pending("web-1"), pending("web-2")
    ssd["spec"]["nodeSelector"] = {"disk": "ssd"}
    nvme["spec"]["nodeSelector"] = {"disk": "nvme"}
    h.store.apply_pod(pending("web-0"))
    h.store.apply_pod(ssd)
    assert list(plan_queued(nominator)) == ["web-0"]  # web-1 waits: its round has no ssd place left
    h.store.apply_pod(nvme)
    taken = nominator.take(10)
    assert [pod.name for pod in taken] == ["web-2"]
    _label_ssd(h, h.store.assumed["uid-shop-web-0"].pod.node_name)  # web-1 may take the round's place left
    assert nominator.plan(taken) == []  # web-2 waits too: no nvme node
    assert [pod.name for pod in nominator.take(10)] == ["web-1", "web-2"]


def nvme(name: str) -> dict[str, Any]:
    """A pending pod that takes only a node labelled disk=nvme, which CHOOSY_NODES has none of."""
    pod = pending(name)
    pod["spec"]["nodeSelector"] = {"disk": "nvme"}
    return pod


def one_waiting(queue: int) -> tuple[Harness, Nominator]:
    """A Fill policy's round of two places over CHOOSY_NODES, web-0 nominated in it and web-1, which
    no node suits, waiting for a place, with a nominator of ``queue`` pods at most."""
    h, nominator = nominating([*CHOOSY_NODES, make_policy("web").strategy("Fill").count(2).obj()],
                              round_timeout_seconds=60, nominate_queue=queue)
    h.store.apply_pod(pending("web-0"))
    h.store.apply_pod(nvme("web-1"))
    assert list(plan_queued(nominator)) == ["web-0"]
    assert nominator.queued() == 1  # web-1 waits: the round's place left does not suit it
    return h, nominator


def test_pods_waiting_for_a_place_count_against_the_queue_size() -> None:
    """Pods no place suits wait with the nominator, and the queue's size bounds them with the queued
    ones: pods that never find a place do not grow what the nominator holds; the pods beyond it are
    dropped and counted, and kube-scheduler schedules them the usual way."""
    h, nominator = one_waiting(3)
    for i in range(2, 12):
        h.store.apply_pod(nvme(f"web-{i}"))
        assert plan_queued(nominator) == {}  # no place suits it either: it waits
        assert nominator.queued() <= 3
    assert nominator.queued() == 3
    assert counted(h, "dropped") == 8


def test_pods_offered_while_a_batch_is_planned_leave_room_for_its_pods_that_wait() -> None:
    """The pods a plan takes out of the queue still hold their room: those of them that wait take
    it back, and the pods offered meanwhile that leave the nominator over its queue size are
    dropped, the latest first (the queue would have refused them, the plan's pods counted)."""
    h, nominator = one_waiting(3)
    h.store.apply_pod(nvme("web-2"))
    taken = nominator.take(10)
    assert [pod.name for pod in taken] == ["web-2"]
    for i in range(3, 6):
        h.store.apply_pod(nvme(f"web-{i}"))  # offered while web-2 is planned: web-5 finds no room
    assert counted(h, "dropped") == 1
    assert nominator.plan(taken) == []  # web-2 waits: web-4, the latest, makes room for it
    assert nominator.queued() == 3
    assert counted(h, "dropped") == 2
    h.clock.advance(61)  # the round lapses: the waiting pods are planned again, ahead of web-3
    assert [pod.name for pod in nominator.take(10)] == ["web-1", "web-2", "web-3"]


def test_a_pod_offered_again_while_it_is_planned_waits_once() -> None:
    """A pod that changes while its plan runs is offered again: if it then waits, it waits once,
    as it is now, and holds one place of the queue's size."""
    h, nominator = one_waiting(3)
    h.store.apply_pod(nvme("web-2"))
    taken = nominator.take(10)
    changed = nvme("web-2")
    changed["metadata"]["labels"]["tier"] = "front"
    h.store.apply_pod(changed)  # offered again while it is planned
    assert nominator.plan(taken) == []
    assert nominator.queued() == 2
    assert counted(h, "dropped") == 0
    h.clock.advance(61)  # the round lapses: the waiting pods are planned again
    assert [(pod.name, pod.labels.get("tier")) for pod in nominator.take(10)] == [("web-1", None), ("web-2", "front")]


def test_a_standby_lets_go_of_the_waiting_pods_first() -> None:
    """A replica that stops leading keeps the pods that waited for a place within its queue's size;
    the pods offered while it stands by take their room, the oldest, the waiting ones, let go of
    first (their uids kept for when it leads)."""
    h, nominator = one_waiting(2)
    nominator.lead(False)
    h.store.apply_pod(nvme("web-2"))
    h.store.apply_pod(nvme("web-3"))
    assert nominator.queued() == 2
    assert list(nominator._evicted) == ["uid-shop-web-1"]
    assert counted(h, "dropped") == 0


JUDGED_AGAIN: list[tuple[str, Callable[[Harness, dict[str, Any]], None], bool]] = [
    # name, what kube-scheduler asks once filter placed web-0 on a, whether room came free
    ("a_filter_placing_it_where_it_was", lambda h, pod: h.filter(pod, ["a"]), False),
    ("a_prioritize_placing_it_where_it_was", lambda h, pod: h.prioritize(pod, ["a", "b"]), False),
    ("its_bind_on_the_node_filter_chose", lambda h, pod: h.bind(pod, "a"), False),
    ("a_filter_placing_it_elsewhere", lambda h, pod: h.filter(pod, ["b", "c"]), True),
    ("its_bind_on_another_node", lambda h, pod: h.bind(pod, "b"), True),
    ("its_bind_refused_by_the_recheck", lambda h, pod: h.bind(pod, "gone"), True),
]


@pytest.mark.parametrize(("name", "judge", "freed"), JUDGED_AGAIN, ids=[c[0] for c in JUDGED_AGAIN])
def test_a_judgement_frees_room_only_when_it_moves_the_pod_off_its_place(
        name: str, judge: Callable[[Harness, dict[str, Any]], None], freed: bool) -> None:
    """Each judgement of a pod gives its place up first; only one that does not place it there
    again frees room, which has the nominator plan again the pods no place suited (a plan walks
    the whole view): under a storm of hits and binds, the others would have them planned again
    every 0.1 s."""
    h, _ = nominating([*NODES, make_policy("web").strategy("Spread").obj()])
    pod = pending("web-0")
    h.store.apply_pod(pod)
    assert h.filter(pod)["NodeNames"] == ["a", "b", "c"]
    assert h.store.assumed["uid-shop-web-0"].pod.node_name == "a"
    before = h.store.room_changes
    judge(h, pod)
    assert (h.store.room_changes != before) is freed


ROOM: list[tuple[str, Callable[[Harness], object], bool]] = [
    # name, a change once web-0's filter placed it in a round for web-0 and web-1, whether the nominator
    # plans a waiting pod again for it (the store counts it in room_changes)
    ("a_bound_pod_deleted", lambda h: h.store.delete_pod(make_pod("db-0").on("a").obj()), True),
    ("a_place_released", lambda h: h.store.release("uid-shop-web-0"), True),
    ("a_round_opened", lambda h: [h.filter(pending(f"web-{i}")) for i in (1, 2)], True),
    ("a_policy_deleted", lambda h: h.store.delete_policy(make_policy("web").obj()), True),
    ("a_policy_changed", lambda h: h.store.apply_policy(make_policy("web").strategy("Fill").count(3).obj()), True),
    ("a_place_in_the_round_taken", lambda h: h.filter(pending("web-1")), False),
    ("a_pending_pod_deleted", lambda h: h.store.delete_pod(pending("web-1")), False),
    ("the_policys_status_written", lambda h: h.store.apply_policy(
        make_policy("web").strategy("Fill").count(2).status({"observedGeneration": 1}).obj()), False),
    ("the_watch_showing_the_placed_pod_bound",
     lambda h: h.store.apply_pod(make_pod("web-0").labels({"app": "web"}).on("a").obj()), False),
]


@pytest.mark.parametrize(("name", "change", "counted"), ROOM, ids=[c[0] for c in ROOM])
def test_the_store_counts_the_changes_that_can_give_a_waiting_pod_a_place(
        name: str, change: Callable[[Harness], object], counted: bool) -> None:
    h, _ = nominating([*NODES, make_policy("web").strategy("Fill").count(2).obj(),
                       make_pod("db-0").on("a").obj()])
    for name in ("web-0", "web-1"):
        h.store.apply_pod(pending(name))
    assert h.filter(pending("web-0"))["NodeNames"]  # opens a round with a place for each
    before = h.store.room_changes
    change(h)
    assert (h.store.room_changes != before) is counted


def test_a_pod_no_place_suits_is_not_planned_again_for_judgements_that_place_pods_where_they_were() -> None:
    """Each filter of a nominated pod gives its place up and, a hit, takes it again, and so does its
    bind: under a storm of hits and binds, the pod waiting for a place would otherwise be planned
    again every 0.1 s."""
    h, nominator, written, plans = watched_plans()

    async def run() -> None:
        nominator.start()
        try:
            for _ in range(100):
                if written:
                    break
                await asyncio.sleep(0.01)
            for _ in range(6):  # kube-scheduler asks about web-0 again and again: a hit each time
                node = written["web-0"]
                assert h.filter(pending("web-0", nominated=node), [node])["NodeNames"] == [node]
                await asyncio.sleep(0.1)
            assert h.bind(pending("web-0", nominated=node), node) == ""
            await asyncio.sleep(0.15)
        finally:
            await nominator.stop()

    asyncio.run(run())
    assert [p for p in plans if "web-1" in p] == [["web-0", "web-1"]]  # planned once


def restarted_after_two_rounds(strategy: str, older_listed_first: bool = True,
                               manager: str = "berth-extender") -> tuple[Harness, dict[str, str]]:
    """Two rounds nominated (web-0, web-1 on a; web-2, web-3 on b), the first pod of each bound
    (each round's carrier), then the extender restarted: what it lists shows web-1's and web-3's
    nominations written by ``manager``. Returns it and the nominated nodes."""
    policy = make_policy("web").strategy(strategy).count(2).spec(**({"nodesLimit": 1} if strategy == "Each" else {}))
    h, nominator = nominating([*NODES, policy.obj()])
    planned: dict[str, str] = {}
    for wave in (("web-0", "web-1"), ("web-2", "web-3")):
        for name in wave:
            h.store.apply_pod(pending(name))
        planned |= plan_queued(nominator)
    assert planned == {"web-0": "a", "web-1": "a", "web-2": "b", "web-3": "b"}
    for name in ("web-0", "web-2"):  # kube-scheduler reached and bound each round's first pod
        pod = pending(name, nominated=planned[name])
        assert h.filter(pod, [planned[name]])["NodeNames"] == [planned[name]]
        assert h.bind(pod, planned[name]) == ""
    annotations = h.app.state.engine.binder.annotations
    bound = [make_pod(name).labels({"app": "web"}).uid(f"uid-shop-{name}").on(planned[name])
             .annotations(annotations[f"shop/{name}"]).obj() for name in ("web-0", "web-2")]
    if not older_listed_first:
        bound.reverse()
    restarted, _ = nominating([*NODES, policy.obj(), *bound,
                               *(_written_by(pending(name, nominated=planned[name]), manager)
                                 for name in ("web-1", "web-3"))])
    restarted.clock.now = h.clock.now + 1
    return restarted, planned


@pytest.mark.parametrize("older_listed_first", [True, False],
                         ids=["older_round_listed_first", "newer_round_listed_first"])
@pytest.mark.parametrize("strategy", ["Fill", "Each"])
def test_a_restarted_extender_judges_a_nominated_pod_in_the_round_the_book_moved_past(strategy: str,
                                                                                     older_listed_first: bool) -> None:
    """A nomination records no round: the restarted extender finds each nominated pod's round from
    the rounds its bound pods record, the oldest with a place left on the nominated node, so web-1
    keeps its place in the first round (judged in the latest, it was refused a and took web-3's
    place on b, and web-3 went elsewhere: under Each, a third node with one pod)."""
    restarted, planned = restarted_after_two_rounds(strategy, older_listed_first)
    for name in ("web-1", "web-3"):
        pod = _written_by(pending(name, nominated=planned[name]), "berth-extender")
        assert restarted.filter(pod, [planned[name]])["NodeNames"] == [planned[name]], name
        assert restarted.bind(pod, planned[name]) == "", name


@pytest.mark.parametrize("strategy", ["Fill", "Each"])
def test_a_nomination_berth_did_not_write_takes_no_place_in_a_round_the_book_moved_past(strategy: str) -> None:
    """A pod kube-scheduler's preemption nominated holds no place in any round (its preemption was
    judged within the book's round): it is judged in the book's round, as any pod, and not given a
    place left in a round the book moved past."""
    restarted, _ = restarted_after_two_rounds(strategy, manager="kube-scheduler")
    pod = _written_by(pending("web-1", nominated="a"), "kube-scheduler")
    assert restarted.filter(pod, ["a"])["NodeNames"] == []


@pytest.mark.parametrize("strategy", ["Fill", "Each"])
def test_a_restarted_extender_leaves_a_nominated_pods_lapsed_round_lapsed(strategy: str) -> None:
    """web-0 and web-1 nominated in one round, web-0 bound (the round's carrier), and the round
    then idle past its timeout. The extender restarts and lists the pods only now: web-1 takes up
    its place in the round as of the round's last activity, so its filter opens the next round, as
    the extender that never restarted does, instead of reviving the lapsed round for another
    timeout."""
    policy = make_policy("web").strategy(strategy).count(2).spec(**({"nodesLimit": 1} if strategy == "Each" else {}))
    h, nominator = nominating([*NODES, policy.obj()], round_timeout_seconds=60)
    for name in ("web-0", "web-1"):
        h.store.apply_pod(pending(name))
    planned = plan_queued(nominator)
    lapsed = h.store.assumed["uid-shop-web-1"].round_id
    first = pending("web-0", nominated=planned["web-0"])
    assert h.filter(first, [planned["web-0"]])["NodeNames"] == [planned["web-0"]]
    assert h.bind(first, planned["web-0"]) == ""
    carrier = (make_pod("web-0").labels({"app": "web"}).uid("uid-shop-web-0").on(planned["web-0"])
               .annotations(h.app.state.engine.binder.annotations["shop/web-0"]).obj())
    restarted, _ = nominating([*NODES, policy.obj()], round_timeout_seconds=60)
    h.clock.advance(61)
    restarted.clock.now = h.clock.now
    restarted.store.replace("pods", [carrier, pending("web-1", nominated=planned["web-1"])])
    judged_in: list[str | None] = []
    for extender in (h, restarted):
        extender.filter(pending("web-1", nominated=planned["web-1"]), [planned["web-1"]])
        judged_in.append(extender.store.assumed["uid-shop-web-1"].round_id)
    assert judged_in[1] == judged_in[0] != lapsed


def _written_by(pod: dict[str, Any], manager: str) -> dict[str, Any]:
    """``pod`` as the API server shows it once ``manager`` patched its nominatedNodeName."""
    pod["metadata"]["managedFields"] = [
        {"manager": "kubectl-create", "operation": "Update", "apiVersion": "v1",
         "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:containers": {}}}},
        {"manager": manager, "operation": "Update", "apiVersion": "v1", "subresource": "status",
         "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:nominatedNodeName": {}}}}]
    return pod


NOMINATED_ELSEWHERE: list[tuple[str, str, list[str], dict[str, float]]] = [
    # name, who wrote the nomination of b, the nodes filter is sent, the counts
    ("berths_sent_alone_and_still_the_winner", "berth-extender", ["b"], {"hit": 1, "missed": 0, "late": 0}),
    ("berths_sent_alone_and_no_longer_the_winner", "berth-extender", ["c"], {"hit": 0, "missed": 1, "late": 0}),
    ("berths_sent_with_every_node", "berth-extender", ["a", "b", "c"], {"hit": 0, "missed": 0, "late": 1}),
    ("kube_schedulers_preemption", "kube-scheduler", ["b"], {"hit": 0, "missed": 0, "late": 0}),
]


@pytest.mark.parametrize(("name", "manager", "sent", "expected"), NOMINATED_ELSEWHERE,
                         ids=[c[0] for c in NOMINATED_ELSEWHERE])
def test_a_nomination_berth_wrote_elsewhere_counts_on_the_replica_that_filters_the_pod(
        name: str, manager: str, sent: list[str], expected: dict[str, float]) -> None:
    """A nomination written by another replica (the leader before this one, or this process before
    a restart) counts a hit, a miss or a late nomination where the pod's filter comes, once: the
    pod's managedFields show berth's field manager. A nomination berth did not write counts none."""
    spread = make_policy("web").strategy("Spread").obj()
    nominated_to = sent[0] if len(sent) == 1 else "b"
    pod = _written_by(pending("web-0", nominated=nominated_to), manager)
    # a and b each hold one pod already: Spread ranks c first unless told of web-0 on b
    others = [make_pod(f"db-{n}").labels({"app": "web"}).on(n).obj() for n in ("a", "c")]
    h, _ = nominating([*NODES, spread, *others, pod])
    h.filter(pod, sent)
    h.filter(pod, sent)  # kube-scheduler asks again: counted once
    assert {result: counted(h, result) for result in expected} == expected


def test_a_write_kube_scheduler_overtook_counts_superseded_and_releases_nothing() -> None:
    h, nominator = nominating([*NODES, make_policy("web").strategy("Spread").obj()])
    written: list[str] = []

    async def write(pod: Any, node: str) -> None:
        if pod.name == "web-0":  # kube-scheduler bound it while the write was on its way
            h.store.apply_pod(make_pod("web-0").on("c").obj())
            raise RuntimeError("Invalid: status.nominatedNodeName: Forbidden: may not be set on pods that are "
                               "already bound to a node")
        written.append(pod.name)

    nominator.write = write
    for i in range(2):
        h.store.apply_pod(pending(f"web-{i}"))
    planned = nominator.plan(nominator.take(10))
    assert len(planned) == 2
    h.filter(pending("web-1"))  # web-1's own cycle came before its write

    async def run() -> None:  # the task's write step, pod after pod
        slots = asyncio.Semaphore(1)
        for pod, node in planned:
            await slots.acquire()
            await nominator._nominate(pod, node, slots)

    asyncio.run(run())
    assert written == []  # web-1 is not written: its filter judged it
    assert counted(h, "superseded") == 2
    assert counted(h, "failed") == 0
    assert h.store.view.pod("uid-shop-web-0").node_name == "c"


def test_a_missed_nomination_is_withdrawn() -> None:
    """kube-scheduler keeps a nomination of a pod it cannot place (and reserves its room there):
    berth clears a nomination it no longer stands by."""
    from berth.extender.wire import ExtenderArgs

    h, nominator = nominating([*NODES, make_policy("web").strategy("Spread").obj()])
    withdrawn: list[tuple[str, str]] = []

    async def withdraw(pod: Any, node: str) -> None:
        withdrawn.append((pod.name, node))

    nominator.withdraw_write = withdraw
    engine = h.app.state.engine
    h.store.apply_pod(pending("web-0"))
    h.store.apply_pod(pending("web-1"))
    planned = plan_queued(nominator)
    assert planned == {"web-0": "a", "web-1": "b"}
    h.store.apply_node(make_node("b").cpu("4").cordoned().obj())  # web-1's node is cordoned meanwhile

    async def run() -> None:
        nominator.start()
        try:
            for name, node in planned.items():
                engine.filter(ExtenderArgs.model_validate(
                    {"Pod": pending(name, nominated=node), "Nodes": None, "NodeNames": [node]}))
            for _ in range(100):
                if withdrawn:
                    break
                await asyncio.sleep(0.01)
        finally:
            await nominator.stop()

    asyncio.run(run())
    assert withdrawn == [("web-1", "b")]  # web-0's nomination held (a hit): it stays
    assert counted(h, "withdrawn") == 1
