"""One extender replica nominates: the holder of a coordination.k8s.io/v1 Lease
(extender/leader.py), elected as client-go elects kube-scheduler's leader."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest

from berth.extender.kube_http import ApiError, ApiUnreachable
from berth.extender.leader import LeaseElector, LeaseTimes, Outcome
from berth.extender.nominator import Nominator
from berth.extender.settings import ExtenderSettings
from tests.builders import make_pod, make_policy
from tests.extender.helpers import NODES, counted, nominating, pending

NS, NAME = "berth-system", "berth-extender-nominator"
PATH = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{NAME}"
TIMES = LeaseTimes(lease_duration=15, renew_deadline=10.0, retry_period=2.0)
WALL = datetime(2026, 1, 1, 12, 0, 0, 123456, tzinfo=UTC)


@dataclass
class FakeLeases:
    """The API server's leases endpoint for one Lease: create (409 if it exists), get (404 if not),
    update (409 unless the resourceVersion is the stored one)."""

    lease: dict[str, Any] | None = None
    version: int = 0
    down: bool = False  # no answer at all
    before_update: Callable[[FakeLeases], None] | None = None  # another writer, between read and update
    calls: list[str] = field(default_factory=list)

    def put(self, spec: dict[str, Any]) -> None:
        self.version += 1
        self.lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                      "metadata": {"name": NAME, "namespace": NS, "resourceVersion": str(self.version)},
                      "spec": spec}

    async def request(self, method: str, path: str, body: Any = None, *,
                      content_type: str = "application/json") -> bytes:
        self.calls.append(method)
        await asyncio.sleep(0)  # other candidates' requests interleave, as on a real connection
        if self.down:
            raise ApiUnreachable(f"cannot reach the API server for {method} {path}")
        if method == "POST":
            assert path == PATH.rsplit("/", 1)[0]
            if self.lease is not None:
                raise ApiError(409, "Conflict", b'{"reason":"AlreadyExists"}')
            self.put(copy.deepcopy(body["spec"]))
            return orjson.dumps(self.lease)
        assert path == PATH
        if self.lease is None:
            raise ApiError(404, "Not Found", b"{}")
        if method == "GET":
            return orjson.dumps(self.lease)
        assert method == "PUT"
        if self.before_update is not None:
            self.before_update(self)
        if body["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", b'{"reason":"Conflict"}')
        self.put(copy.deepcopy(body["spec"]))
        return orjson.dumps(self.lease)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def elector(api: FakeLeases, clock: Clock, identity: str = "extender-a",
            on_change: Callable[[bool], None] | None = None, times: LeaseTimes = TIMES) -> LeaseElector:
    return LeaseElector(api, namespace=NS, name=NAME, identity=identity, times=times, on_change=on_change,
                        clock=clock, wall=lambda: WALL, jitter=lambda: 0.0)


def held_by(holder: str | None, *, transitions: int = 3) -> dict[str, Any]:
    return {"holderIdentity": holder, "leaseDurationSeconds": 15, "acquireTime": "2026-01-01T11:00:00.000000Z",
            "renewTime": "2026-01-01T11:59:59.000000Z", "leaseTransitions": transitions}


STAMP = "2026-01-01T12:00:00.123456Z"

TRIES = [
    # (name, the Lease before, seconds since this replica first saw it, outcome, holder after, transitions after,
    #  acquireTime after)
    ("acquire: no Lease yet, it is created", None, 0, Outcome.HELD, "extender-a", 0, STAMP),
    ("renew: this replica's Lease", held_by("extender-a"), 0, Outcome.HELD, "extender-a", 3,
     "2026-01-01T11:00:00.000000Z"),
    ("another holder's unexpired Lease is left alone", held_by("extender-b"), 14.9, Outcome.OTHER, "extender-b", 3,
     "2026-01-01T11:00:00.000000Z"),
    ("another holder's Lease unchanged for its whole duration is taken", held_by("extender-b"), 15, Outcome.HELD,
     "extender-a", 4, STAMP),
    ("a released Lease (no holder) is taken at once", held_by(None), 0, Outcome.HELD, "extender-a", 4, STAMP),
]


@pytest.mark.parametrize(("before", "seen_for", "outcome", "holder", "transitions", "acquired"),
                         [t[1:] for t in TRIES], ids=[t[0] for t in TRIES])
def test_a_try_takes_or_renews_the_lease_only_when_it_may(before: dict[str, Any] | None, seen_for: float,
                                                          outcome: Outcome, holder: str, transitions: int,
                                                          acquired: str) -> None:
    api, clock = FakeLeases(), Clock()
    if before is not None:
        api.put(before)
    e = elector(api, clock)
    if seen_for:  # this replica has seen the Lease unchanged since then
        assert asyncio.run(e.try_acquire_or_renew()) is Outcome.OTHER
        clock.now += seen_for
    assert asyncio.run(e.try_acquire_or_renew()) is outcome
    assert api.lease is not None
    spec = api.lease["spec"]
    assert (spec["holderIdentity"], spec["leaseTransitions"], spec["acquireTime"]) == (holder, transitions, acquired)
    if outcome is Outcome.HELD:
        assert spec["renewTime"] == STAMP and spec["leaseDurationSeconds"] == 15
    assert e.holder == holder


def test_another_holders_renewals_keep_its_lease_unexpired() -> None:
    """Expiry is judged by when the record last changed on this replica's clock, not by the renew
    time the holder wrote (clocks differ)."""
    api, clock = FakeLeases(), Clock()
    api.put(held_by("extender-b"))
    e = elector(api, clock)
    for _ in range(10):
        assert asyncio.run(e.try_acquire_or_renew()) is Outcome.OTHER
        clock.now += 10
        api.put({**held_by("extender-b"), "renewTime": f"2026-01-01T12:00:{int(clock.now) % 60:02d}.000000Z"})
    assert api.lease is not None and api.lease["spec"]["holderIdentity"] == "extender-b"


FAILURES = [
    # (name, set-up, outcome)
    ("another candidate updated the Lease between read and update (409)",
     lambda api: setattr(api, "before_update", lambda a: a.put(held_by("extender-b"))), Outcome.FAILED),
    ("no answer from the API server", lambda api: setattr(api, "down", True), Outcome.FAILED),
]


@pytest.mark.parametrize(("setup", "outcome"), [f[1:] for f in FAILURES], ids=[f[0] for f in FAILURES])
def test_a_refused_or_unanswered_write_does_not_lead(setup: Callable[[FakeLeases], None], outcome: Outcome) -> None:
    api, clock = FakeLeases(), Clock()
    api.put(held_by(None))
    setup(api)
    assert asyncio.run(elector(api, clock).try_acquire_or_renew()) is outcome


def test_two_candidates_creating_the_lease_at_once_one_holds_it() -> None:
    api, clock = FakeLeases(), Clock()
    a, b = elector(api, clock, "extender-a"), elector(api, clock, "extender-b")

    async def both() -> list[Outcome]:
        return list(await asyncio.gather(a.try_acquire_or_renew(), b.try_acquire_or_renew()))

    outcomes = asyncio.run(both())
    assert sorted(o.value for o in outcomes) == ["failed", "held"]
    assert api.lease is not None
    assert api.lease["spec"]["holderIdentity"] == ("extender-a" if outcomes[0] is Outcome.HELD else "extender-b")


# -- the loop: acquire, renew, lose, release -------------------------------------------------------

FAST = LeaseTimes(lease_duration=5, renew_deadline=0.3, retry_period=0.05)
PATIENT = LeaseTimes(lease_duration=60, renew_deadline=30.0, retry_period=0.05)  # a deadline never reached here


def test_the_loop_leads_renews_loses_when_it_cannot_renew_and_leads_again() -> None:
    api = FakeLeases()
    changes: list[bool] = []
    e = LeaseElector(api, namespace=NS, name=NAME, identity="extender-a", times=FAST, on_change=changes.append)

    async def run() -> None:
        e.start()
        await wait(lambda: e.leading)
        renewals = api.version
        await wait(lambda: api.version > renewals + 2)  # renewed every retry period
        api.down = True  # no renewal gets through: it stops leading within the renew deadline
        down_at = asyncio.get_running_loop().time()
        await wait(lambda: not e.leading, timeout=FAST.lease_duration)
        # before another replica may take the Lease over
        assert asyncio.get_running_loop().time() - down_at < FAST.lease_duration
        api.down = False
        await wait(lambda: e.leading)  # its own Lease: taken again at once
        await e.stop()

    asyncio.run(run())
    assert changes == [True, False, True, False]
    assert api.lease is not None
    assert api.lease["spec"]["holderIdentity"] is None  # released at stop
    assert api.lease["spec"]["leaseDurationSeconds"] == 1


def test_the_loop_stops_leading_at_once_when_another_holds_the_lease() -> None:
    api = FakeLeases()
    e = LeaseElector(api, namespace=NS, name=NAME, identity="extender-a", times=PATIENT)

    async def run() -> None:
        e.start()
        await wait(lambda: e.leading)
        api.put(held_by("extender-b"))  # e.g. this replica's renewals were lost and another took over
        await wait(lambda: not e.leading, timeout=5)  # at its next renewal, not at the renew deadline (30 s)
        await asyncio.sleep(3 * PATIENT.retry_period)
        assert not e.leading  # extender-b's Lease has not expired: it stays a candidate
        await e.stop()

    asyncio.run(run())
    assert api.lease is not None and api.lease["spec"]["holderIdentity"] == "extender-b"  # not released by a


async def wait(condition: Callable[[], bool], timeout: float = 2.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.01)


# -- settings -------------------------------------------------------------------------------------

LEASE_SETTINGS = [
    # (name, settings, environment, (duration, deadline, retry), namespace, identity)
    ("kube-scheduler's defaults; the pod's name and namespace", {}, {"POD_NAME": "ext-0", "POD_NAMESPACE": "ns"},
     (15, 10.0, 2.0), "ns", "ext-0"),
    ("set explicitly", {"leader_lease_duration_seconds": 30, "leader_renew_deadline_seconds": 20,
                        "leader_retry_period_seconds": 4, "leader_lease_namespace": "x", "leader_identity": "me"},
     {"POD_NAME": "ext-0", "POD_NAMESPACE": "ns"}, (30, 20.0, 4.0), "x", "me"),
    ("a renew deadline not below the duration: the defaults", {"leader_renew_deadline_seconds": 15}, {},
     (15, 10.0, 2.0), None, None),
    ("a retry period not below the renew deadline: the defaults", {"leader_retry_period_seconds": 9}, {},
     (15, 10.0, 2.0), None, None),
]


@pytest.mark.parametrize(("overrides", "env", "times", "namespace", "identity"), [s[1:] for s in LEASE_SETTINGS],
                         ids=[s[0] for s in LEASE_SETTINGS])
def test_lease_settings(monkeypatch: pytest.MonkeyPatch, overrides: dict[str, Any], env: dict[str, str],
                        times: tuple[int, float, float], namespace: str | None, identity: str | None) -> None:
    for key in ("POD_NAME", "POD_NAMESPACE"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    settings = ExtenderSettings(**overrides)
    got = settings.lease_times()
    assert (got.lease_duration, got.renew_deadline, got.retry_period) == times
    if namespace is not None:
        assert settings.lease_namespace() == namespace
    if identity is not None:
        assert settings.lease_identity() == identity
    else:  # two processes on one host are two candidates
        assert settings.lease_identity() != ExtenderSettings(**overrides).lease_identity()


# -- the nominator follows the election ------------------------------------------------------------

def test_a_replica_that_does_not_lead_plans_nothing_until_it_leads() -> None:
    h, nominator = nominating([*NODES, make_policy("web").strategy("Spread").obj()])
    nominator.lead(False)
    leading = lambda: h.app.state.metrics.registry.get_sample_value("berth_nominator_leading")  # noqa: E731
    assert leading() == 0
    for i in range(3):
        h.store.apply_pod(pending(f"web-{i}"))
    assert nominator.plan(nominator.take(100)) == []
    assert not h.store.assumed  # nothing counted anywhere
    nominator.lead(True)
    assert leading() == 1
    planned = {pod.name: node for pod, node in nominator.plan(nominator.take(100))}
    assert planned == {"web-0": "a", "web-1": "b", "web-2": "c"}  # the pods that came while it stood by


def test_a_standby_keeps_the_latest_pods_without_counting_drops() -> None:
    h, nominator = nominating([*NODES, make_policy("web").obj()], nominate_queue=2)
    nominator.lead(False)
    for i in range(5):
        h.store.apply_pod(pending(f"web-{i}"))
    assert nominator.queued() == 2
    assert counted(h, "dropped") == 0
    nominator.lead(True)
    assert {pod.name for pod in nominator.take(10)} == {"web-3", "web-4"}


def test_a_new_leader_nominates_the_pods_its_queue_let_go_of_while_it_stood_by() -> None:
    """A standby's full queue keeps the latest pods; the older ones it let go of are still pending
    and governed, so the replica nominates them too once it leads and its queue has room, all but
    those kube-scheduler or another nomination reached meanwhile."""
    h, nominator = nominating([*NODES, make_policy("web").strategy("Spread").obj()], nominate_queue=2)
    nominator.lead(False)
    for i in range(6):
        h.store.apply_pod(pending(f"web-{i}"))
    h.store.apply_pod(make_pod("web-1").on("a").obj())  # kube-scheduler bound one meanwhile
    h.store.apply_pod(pending("web-2", nominated="b"))  # and nominated another (preemption)
    nominator.lead(True)
    planned: list[str] = []
    for _ in range(4):
        planned += [pod.name for pod, _ in nominator.plan(nominator.take(10))]
    assert planned == ["web-4", "web-5", "web-0", "web-3"]  # the queue's pods, then the older ones
    assert counted(h, "dropped") == 0


def test_a_standbys_record_of_the_pods_it_let_go_of_stays_within_the_pending_pods() -> None:
    """Every pod a standby's full queue lets go of is recorded, to be nominated once it leads; pods
    bound meanwhile are forgotten whenever the record doubles, so pods that come and go while it
    stands by do not grow it without end."""
    h, nominator = nominating([*NODES, make_policy("web").strategy("Spread").obj()], nominate_queue=2)
    nominator.lead(False)
    for i in range(200):
        h.store.apply_pod(pending(f"web-{i}"))
        h.store.apply_pod(make_pod(f"web-{i}").on("a").obj())  # kube-scheduler bound it
    assert len(h.store.pending) == 0
    assert len(nominator._evicted) <= 2 * 2 * 2  # twice the queue, doubled at most once more


def test_losing_the_lease_abandons_the_nominations_not_written_yet() -> None:
    h, nominator = nominating([*NODES, make_policy("web").strategy("Spread").obj()])
    written: list[str] = []

    async def write(pod: Any, node: str) -> None:
        written.append(pod.name)

    nominator.write = write
    for i in range(2):
        h.store.apply_pod(pending(f"web-{i}"))
    planned = nominator.plan(nominator.take(10))
    nominator.lead(False)  # the Lease is lost before the writes' turn

    async def run() -> None:
        slots = asyncio.Semaphore(1)
        for pod, node in planned:
            await slots.acquire()
            await nominator._nominate(pod, node, slots)

    asyncio.run(run())
    assert written == []
    assert counted(h, "abandoned") == 2
    assert not h.store.assumed  # their places are free again


def test_without_an_election_the_nominator_leads() -> None:
    h, nominator = nominating([*NODES])
    assert isinstance(nominator, Nominator) and nominator.leading
    assert h.app.state.metrics.registry.get_sample_value("berth_nominator_leading") == 1
