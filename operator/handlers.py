"""The Kopf handlers of the operator, registered on a registry of their own by
:func:`build_registry` (nothing is registered at import time).

- The cluster (Nodes, Pods, node Leases) is not Kopf's: it is the extender's watch-fed store
  (:mod:`berth.operator.cluster`), listed and watched on threads of its own. A pod change marks
  only the policies of its namespace whose selector matches the pod before or after the change.
- ``on.create`` / ``on.update`` (of the spec) / ``on.resume`` of a PlacementPolicy (once the
  store is listed) and a ``timer`` every ``resync_seconds`` compute the policy's status
  (:mod:`.reconcile`) when one of its inputs changed, and patch only what differs from the status
  the object has (a status patch is no essence change for Kopf, so it triggers no handler: the
  operator never loops on its own writes). With a status writer of the operator's own (the loop,
  :class:`OperatorState`), the handlers' statuses are written through it too, one write of a
  policy at a time: one writer a policy, so an older status never lands after a newer one. The
  timer is the per-policy debounce: however many
  pods changed, a policy is recomputed at most once per tick. Status writes of all policies share
  one budget per second (:class:`WriteBudget`).
- The timer needs no finalizer (deleting a policy must not wait for the operator): it is
  registered without one and stopped by its ``when`` filter once the policy's DELETED event is
  seen.
- The validating admission webhook (``on.validate``), when a webhook server is configured.
- NodeDrains (Plan and Execute mode) and their admission check (:mod:`.drain`,
  :mod:`.drain_execute`), planned on the same view;
  their re-plan timer has no finalizer either.

Every handler is a coroutine: Kopf would run plain functions in a thread pool.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import functools
import heapq
import inspect
import itertools
import logging
import math
import statistics
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Container, Hashable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import kopf

from berth.core import (
    API_GROUP,
    CRD_VERSION,
    POLICY_PLURAL,
    ROUND_TIMEOUT_SECONDS,
    ClusterView,
    InvalidPolicy,
    PlacementError,
    PlacementPolicy,
    PodInfo,
    Settings,
    shared_plan_key,
)
from berth.operator import drain
from berth.operator.admission import REFUSAL_CODE, admission_problem
from berth.operator.cluster import OperatorStore
from berth.operator.drain_execute import DrainApi
from berth.operator.patches import merge_patch
from berth.operator.reconcile import Outcome, compute_status, parsed_policy, plan_waiting
from berth.operator.webhook import WEBHOOK_ID, WebhookOptions

log = logging.getLogger("berth.operator")

TIMER_ID = "status-refresh"
POLICY = (API_GROUP, CRD_VERSION, POLICY_PLURAL)

TIMER_SECONDS = 30.0
"""Each policy's Kopf timer when the operator writes statuses of its own accord too: a safety net
(a status written by someone else is restored), and the proof that Kopf works here (not paused in
favour of another replica), without which the operator writes nothing of its own accord."""

StatusWriter = Callable[[str, str, dict[str, Any]], Awaitable[None]]
"""(namespace, name, a merge patch of the status): writes a policy's status, awaited on the
operator's event loop."""

STATUS_WRITES_PER_SECOND = 100.0
STATUS_WRITES_BOUNDS = (1.0, 1000.0)
"""Status writes per second, all policies together: the default and the allowed range."""


@dataclass(frozen=True)
class OperatorConfig:
    settings: Settings = field(default_factory=Settings)
    resync_seconds: float = 5.0  # each policy's timer: a status is at most this stale after a change
    track_leases: bool = True  # node liveness by kube-node-lease Leases, as the extender judges it
    plan_period: float = 10.0  # with pending pods, the plan is redone at most this often for changes elsewhere
    coalesce_seconds: float = 1.0  # a policy's status follows its pod changes at most this often (the loop)
    round_timeout_seconds: float = ROUND_TIMEOUT_SECONDS  # an idle Fill/Each round closes, as in the extender
    status_writes_per_second: float = STATUS_WRITES_PER_SECOND  # all policies together
    webhook: WebhookOptions = field(default_factory=WebhookOptions)
    drain_api: Callable[[], DrainApi] | None = None  # what an executing NodeDrain cordons and evicts with
    status_api: Callable[[], StatusWriter] | None = None  # statuses written on pod changes (None: by the timers)
    # one namespace's policies and pods (tests), None the whole cluster; a namespaced operator
    # judges no other namespace's policy in its webhook and leaves the cluster-wide NodeDrains alone
    namespace: str | None = None

    @property
    def timer_seconds(self) -> float:
        """Each policy's Kopf timer: every ``resync_seconds`` when it is what follows the changes,
        else (a status writer of the operator's own follows them) :data:`TIMER_SECONDS`."""
        return self.resync_seconds if self.status_api is None else max(self.resync_seconds, TIMER_SECONDS)

    def __post_init__(self) -> None:
        low, high = STATUS_WRITES_BOUNDS
        if not low <= self.status_writes_per_second <= high:
            raise ValueError(f"status writes per second must be between {low:g} and {high:g}, "
                             f"not {self.status_writes_per_second:g}")


class WriteBudget:
    """Status writes paced ``1/rate`` apart, so that no second holds more than ``rate`` of them
    (a bucket of one token: a burst would let a second after a quiet one hold twice the bound the
    user set, which the API server and its other clients would feel). Writers wait in turn: the
    urgent ones (a pod change, a new spec) before the others (a plan redone for changes elsewhere
    in the cluster), and within each the one whose change is oldest first (``since``, a
    :func:`time.monotonic` time; default: when it asks), so that no policy's write waits behind
    writes of changes that came after its own."""

    def __init__(self, rate: float, clock: Any = time.monotonic) -> None:
        self.rate = rate
        self.capacity = 1.0
        self._tokens = self.capacity
        self._clock = clock
        self._at = clock()
        # a heap: (0 urgent / 1, since, turn, waiter)
        self._waiting: list[tuple[int, float, int, asyncio.Future[None]]] = []
        self._turns = itertools.count()
        self._server: asyncio.Task[None] | None = None

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self.capacity, self._tokens + (now - self._at) * self.rate)
        self._at = now

    async def acquire(self, urgent: bool = False, since: float | None = None) -> None:
        self._refill()
        if not self._waiting and self._tokens >= 1.0:
            self._tokens -= 1.0
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (0 if urgent else 1, self._clock() if since is None else since,
                                       next(self._turns), waiter))
        if self._server is None or self._server.done():
            self._server = asyncio.create_task(self._serve())
        await waiter

    async def _serve(self) -> None:
        while self._waiting:
            self._refill()
            if self._tokens < 1.0:
                await asyncio.sleep((1.0 - self._tokens) / self.rate)
                continue
            *_, waiter = heapq.heappop(self._waiting)
            if not waiter.done():  # (a waiter cancelled meanwhile takes no write)
                self._tokens -= 1.0
                waiter.set_result(None)


class Freshness:
    """How long the statuses written for pod changes took, from the change reaching the store to
    the write's answer, and where the time went: waiting for the policy's turn, computing (the
    executor's queue and the computation), waiting for the write budget, writing. Kept as a few
    floats per write and logged as one line every ``every`` seconds with writes, so that a slow
    status can be told from a slow API server without a profiler."""

    PARTS = ("turn", "compute", "budget", "write")

    def __init__(self, every: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.every = every
        self._clock = clock
        self._since = clock()
        self.samples: list[tuple[float, ...]] = []  # (total, *PARTS) per write since the last line

    def add(self, total: float, *parts: float) -> None:
        self.samples.append((total, *parts))

    def summary(self) -> str | None:
        """The line for the writes since the last one (and start afresh); None without writes."""
        samples, self.samples = self.samples, []
        self._since = self._clock()
        if not samples:
            return None
        totals = sorted(s[0] for s in samples)
        parts = ", ".join(f"{name} {statistics.median(s[i + 1] for s in samples):.2f}"
                          for i, name in enumerate(self.PARTS))
        return (f"{len(samples)} status write(s) for pod changes: seconds from the change to the write "
                f"median {statistics.median(totals):.2f}, p90 {_quantile(totals, 0.9):.2f}, "
                f"worst {totals[-1]:.2f}; medians of the parts: {parts}")

    def due(self) -> bool:
        return self._clock() - self._since >= self.every


def _quantile(ordered: list[float], q: float) -> float:
    """The ``q`` quantile of a sorted list, the nearest rank."""
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


_Plan = tuple[dict[str, int], PlacementError | None]

WRITES_IN_FLIGHT = 32
"""The loop's status writes awaiting the API server's answer, at most: when the API server answers
slower than the budget allows, the loop waits before computing the next status, so that the changes
pile up as marks (a policy marked again is written once) rather than as writes queued behind each
other (each of them stale by the time it is sent). 32, as many as Kopf's connections: a write that
takes 0.25 s under load still lets the budget's 100 a second through (8 held it to about 30)."""

STALE = "stale"
PLAN_STALE = "plan"


@dataclass(frozen=True)
class _Memo:
    generation: object
    changes: int
    status: dict[str, Any]
    pending: bool
    cluster: int  # the view's node change token when the plan was made
    at: float
    includes: tuple[bool, ...]  # which nodes of nodeFilter.includes existed
    round_expires: float | None = None  # the plan's round in force stops being so then
    drains: tuple[Mapping[str, Any], ...] = ()  # what NodeDrains do to the policy's pods


class OperatorState:
    """What the handlers share: the configuration, the store, the policies each namespace holds
    (to mark them on pod changes), the last status computed per policy, the write budget, and the
    policies whose DELETED event was seen (their timers stop).

    A policy's status is recomputed only when its inputs may have changed: its generation, a pod
    it selects (before or after the change), or its status written by someone else; and, while it
    has pending pods (their plan reads the whole cluster), a change of any node or of what is
    placed on one, at most every ``plan_period`` seconds. Otherwise a tick costs a dict
    comparison.

    With a status writer (``config.status_api``), the changes are followed by one loop rather than
    by a Kopf timer per policy (a thousand timers ticking every few seconds cost more than the
    statuses), from the bodies the policies' watch events bring: a pod change wakes it, and it
    recomputes the marked policies in the order they were first marked, each at most every
    ``coalesce_seconds``; when none is due, it looks at every policy, a pass every ``plan_period``
    (:meth:`_follow_changes`). Every status written for a pod change is timed from the change
    (:class:`Freshness`, logged every half minute). The timers then tick every :data:`TIMER_SECONDS`
    as the proof that Kopf works for the policy here: the loop works only for the policies whose
    Kopf handlers ran lately, so a replica that Kopf paused (peering) writes nothing."""

    DELETED_KEPT = 10000
    SHARED_PLANS_KEPT = 1024

    def __init__(self, config: OperatorConfig, store: OperatorStore | None = None) -> None:
        self.config = config
        self.store = store or OperatorStore(leases_tracked=config.track_leases)
        self.store.on_pod_change = self.pod_changed
        self.budget = WriteBudget(config.status_writes_per_second)
        self._marks = threading.Lock()  # pod changes arrive on the store's watch thread
        self._policies: dict[str, dict[str, PlacementPolicy | None]] = {}  # namespace -> uid -> policy
        self._changes: dict[str, int] = {}  # uid -> pod changes that touched the policy
        self._memo: dict[str, _Memo] = {}
        self._deleted: OrderedDict[str, None] = OrderedDict()
        self.writes = 0  # status patches made, for tests and logs
        self.computations = 0
        self.plans_checked = 0  # plans made again and compared, the status not computed (plan_unchanged)
        self._listed: asyncio.Event | None = None
        self._computer = ThreadPoolExecutor(1, thread_name_prefix="berth-status")
        self._computing: set[str] = set()  # policies whose computation is queued or running
        self._plans: dict[str, tuple[object, float, _Plan]] = {}  # uid -> (round, when, (plan, error))
        # uid -> (generation, shape, policy, count, plan): what the last status's plan was made from
        self._planned: dict[str, tuple[object, PodInfo, PlacementPolicy, int, _Plan]] = {}
        self._shared_plans: OrderedDict[Hashable, tuple[float, _Plan]] = OrderedDict()  # see planner
        self._poller: asyncio.Task[None] | None = None
        self._bodies: dict[str, dict[str, Any]] = {}  # uid -> the policy as its latest watch event showed it
        # uid -> when a pod change first marked it since the loop last computed it (monotonic); a dict
        # keeps its insertion order, and a policy marked again keeps its place: oldest mark first
        self._dirty: dict[str, float] = {}
        self._served: dict[str, float] = {}  # uid -> when the loop last computed it for a pod change (monotonic)
        self._handled: dict[str, float] = {}  # uid -> when a Kopf handler last refreshed it (monotonic)
        self._follower: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wakeup: asyncio.Event | None = None  # set when a policy is marked: the loop may have work
        self._in_flight: set[asyncio.Future[None]] = set()  # the loop's writes not answered yet
        # uid -> its latest status write not answered yet: the next one is sent once it is (one writer
        # a policy, its writes in the order their statuses were computed)
        self._sending: dict[str, asyncio.Future[None]] = {}
        self._sent: dict[str, dict[str, Any]] = {}  # uid -> the status its latest write sets
        self._answered: collections.deque[float] = collections.deque()  # when its writes were answered (monotonic)
        self.freshness = Freshness()
        self._writer: StatusWriter | None = None
        self._drains: Mapping[str, Any] | None = None  # Kopf's index of the NodeDrains (see refresh)

    # -- marks -------------------------------------------------------------------------------

    def pod_changed(self, namespace: str, before: Mapping[str, str] | None,
                    after: Mapping[str, str] | None) -> None:
        """A pod of ``namespace`` changed (labels ``before`` and ``after``; None: absent): mark the
        policies that select it either way (a policy already marked keeps its first mark: the loop
        serves the oldest first), and wake the loop."""
        now: float | None = None
        wake = False
        with self._marks:
            for uid, policy in self._policies.get(namespace, {}).items():
                if policy is None:
                    continue  # an invalid policy's status reads no pod
                if (before is not None and policy.governs(namespace, before)) or \
                        (after is not None and policy.governs(namespace, after)):
                    self._changes[uid] = self._changes.get(uid, 0) + 1
                    if uid not in self._dirty:
                        wake = True
                        self._dirty[uid] = now = time.monotonic() if now is None else now
        if wake:
            self._wake()

    def _wake(self) -> None:
        """Wake the loop (from any thread)."""
        loop, wakeup = self._loop, self._wakeup
        if loop is not None and wakeup is not None and not wakeup.is_set():
            with contextlib.suppress(RuntimeError):  # the loop is closed: the operator is stopping
                loop.call_soon_threadsafe(wakeup.set)

    def _known(self, uid: str, namespace: str, policy: PlacementPolicy | None) -> None:
        with self._marks:
            self._policies.setdefault(namespace, {})[uid] = policy

    def forget(self, uid: str) -> None:
        with self._marks:
            for policies in self._policies.values():
                policies.pop(uid, None)
            self._changes.pop(uid, None)
            self._dirty.pop(uid, None)
        self._served.pop(uid, None)
        self._memo.pop(uid, None)
        self._bodies.pop(uid, None)
        self._handled.pop(uid, None)
        self._sent.pop(uid, None)
        self._plans.pop(uid, None)
        self._planned.pop(uid, None)
        self._deleted[uid] = None
        while len(self._deleted) > self.DELETED_KEPT:
            self._deleted.popitem(last=False)

    def is_live(self, uid: str | None) -> bool:
        return uid not in self._deleted

    def seen(self, body: Mapping[str, Any]) -> None:
        """A policy as a watch event shows it (what the loop recomputes from)."""
        raw = _plain(body)
        uid = str((raw.get("metadata") or {}).get("uid") or "")
        if uid and self.is_live(uid):
            self._bodies[uid] = raw

    async def wait_ready(self, poll: float = 0.1) -> None:
        """Until the store's first full list: one poller for every waiting handler (a thousand
        policies resuming at start must not poll a thousand times)."""
        if self.store.ready:
            return
        if self._listed is None:
            self._listed = asyncio.Event()
            self._poller = asyncio.create_task(self._poll_ready(self._listed, poll))
        await self._listed.wait()

    async def _poll_ready(self, listed: asyncio.Event, poll: float) -> None:
        while not self.store.ready:
            await asyncio.sleep(poll)
        listed.set()

    # -- status ------------------------------------------------------------------------------

    def compute(self, body: Mapping[str, Any], now: float | None = None,
                drains: tuple[Mapping[str, Any], ...] = ()) -> Outcome:
        meta = body.get("metadata") or {}
        namespace = str(meta.get("namespace") or "default")
        uid = str(meta.get("uid") or "")
        store = self.store
        now = time.time() if now is None else now

        self._planned.pop(uid, None)  # (a round in force makes the plan without the planner)

        def planner(shape: PodInfo, policy: PlacementPolicy, count: int) -> _Plan:
            made = self._plan(uid, meta.get("generation"), shape, policy, count, now)
            self._planned[uid] = (meta.get("generation"), shape, policy, count, made)
            return made

        try:
            selects: Callable[[PodInfo], bool] | None = _selecting(parsed_policy(body, default_namespace=namespace))
        except InvalidPolicy:
            selects = None  # (its status reads no pod)

        with store.lock:
            return compute_status(body, store.records(namespace, selects), lambda: store.view, self.config.settings,
                                  now, round_timeout=self.config.round_timeout_seconds,
                                  planner=planner, drains=drains)

    def _plan(self, uid: str, generation: object, shape: PodInfo, policy: PlacementPolicy, count: int,
              now: float) -> _Plan:
        """The plan of ``count`` pods shaped like ``shape`` for the policy. A plan of the same round
        (generation, shape, count) younger than ``plan_period`` is reused: pods placed elsewhere in
        a busy namespace update the counts at once, and the plan, which reads the whole cluster, at
        most every period. So is a plan younger than that of another policy whose plan does not
        depend on the pods it selects (:func:`shared_plan_key`): a thousand policies alike but for
        their selectors cost one plan, not a thousand. Call under the store's lock."""
        shared = self._shared_key(shape, policy, count)
        kept = self._kept_plan(uid, generation, shape, count, shared, now)
        if kept is not None:
            return kept
        made = (now, plan_waiting(self.store.view, shape, policy, self.config.settings, now, count))
        if shared is not None:
            self._share(shared, made)
        self._plans[uid] = ((generation, shape.uid, count), made[0], made[1])
        return made[1]

    def _kept_plan(self, uid: str, generation: object, shape: PodInfo, count: int, shared: Hashable | None,
                   now: float) -> _Plan | None:
        """The plan :meth:`_plan` would reuse (the policy's own, or the one shared under ``shared``,
        :meth:`_shared_key`), None when it would make one. Reads no view, so the event loop may ask
        it without the store's lock."""
        key = (generation, shape.uid, count)
        period = self.config.plan_period
        kept = self._plans.get(uid)
        if kept is not None and kept[0] == key and now - kept[1] < period:
            return kept[2]
        made = self._shared_plans.get(shared) if shared is not None else None
        if made is None or not 0 <= now - made[0] < period:
            return None
        self._plans[uid] = (key, made[0], made[1])
        return made[1]

    def _shared_key(self, shape: PodInfo, policy: PlacementPolicy, count: int) -> Hashable | None:
        """The key the plan is shared under by the policies alike, None when it is not shared: when
        the plan reads the policy's own pods, or with the index off (the sharing is for speed only,
        and the naive path plans each policy)."""
        if not self.config.settings.indexed:
            return None
        shared = shared_plan_key(shape, policy, count)
        # a node added, changed or gone: planned afresh
        return (shared, self.store.view.nodes_version) if shared is not None else None

    def plan_unchanged(self, uid: str, now: float, make: bool = True) -> bool | None:
        """Whether the plan the policy's last status shows is still the plan, when nothing but the
        cluster elsewhere changed since (its own pods did not: a change of them marks it): planned
        again from the same inputs (or another policy's plan shared) and compared. Then the status
        is what it was: neither computed again nor written. Called on the computing thread; with
        ``make`` False, from the event loop: only a plan kept or shared is compared, None when a
        plan would have to be made (a thousand policies alike share one plan: the periodic pass
        then hands the computing thread one of them, not a thousand)."""
        planned = self._planned.get(uid)
        if planned is None:
            return False
        generation, shape, policy, count, made = planned
        try:
            if not make:
                again = self._kept_plan(uid, generation, shape, count, self._shared_key(shape, policy, count), now)
                if again is None:
                    return None
            else:
                with self.store.lock:
                    again = self._plan(uid, generation, shape, policy, count, now)
        except Exception:  # the full computation says what failed
            return False
        self.plans_checked += 1
        return again == made

    def _share(self, key: Hashable, made: tuple[float, _Plan]) -> None:
        """Keep a plan for the policies alike (the least recently made go first)."""
        plans = self._shared_plans
        plans[key] = made
        plans.move_to_end(key)
        while len(plans) > self.SHARED_PLANS_KEPT:
            plans.popitem(last=False)

    def _stale(self, memo: _Memo | None, raw: Mapping[str, Any], uid: str, current: Mapping[str, Any],
               now: float, drains: tuple[Mapping[str, Any], ...]) -> str | None:
        """Why the policy's status must be looked at again: :data:`STALE` (an input changed),
        :data:`PLAN_STALE` (only the cluster elsewhere: the plan may differ), None (nothing)."""
        meta = raw.get("metadata") or {}
        if memo is None or memo.generation != meta.get("generation") or memo.status != current \
                or memo.drains != drains:
            return STALE
        if memo.changes != self._changes.get(uid, 0) or memo.includes != _includes_seen(raw, self.store.view.nodes):
            return STALE
        if memo.round_expires is not None and now > memo.round_expires:
            return STALE  # the round the plan shows is over: the next one plans anew
        if memo.pending and memo.cluster != self.store.view.cluster_version \
                and now - memo.at >= self.config.plan_period:
            return PLAN_STALE
        return None

    async def refresh(self, body: kopf.Body, patch: kopf.Patch, now: float | None = None,
                      drains: Mapping[str, Any] | None = None) -> Outcome | None:
        """Compute the status of the policy ``body`` (a Kopf handler's), patch what changed (within
        the write budget) and post the Events. None when the store is not listed yet or nothing the
        status depends on changed since the status it has was computed. ``drains``: the NodeDrains'
        index (:data:`berth.operator.drain.DRAINS_INDEX`: policy key to what each drain does to its
        pods), which Kopf keeps up to date: the loop reads it too."""
        raw = _plain(body)
        uid = str((raw.get("metadata") or {}).get("uid") or "")
        self._handled[uid] = time.monotonic()
        if drains is not None:
            self._drains = drains
        self._follow()

        async def write(diff: dict[str, Any], times: tuple[float, ...]) -> None:
            if self._writer is None:
                patch.status.update(diff)  # no status writer: Kopf's patch is the policy's one writer
                return
            # With a status writer, the loop writes statuses too: Kopf's patch, applied once the
            # handler is done, could land after a newer status the loop wrote and undo it until the
            # next pass. The handler's status goes the loop's way, in turn with its writes.
            meta = raw.get("metadata") or {}
            await self._send(uid, str(meta.get("namespace") or "default"), str(meta.get("name") or ""), diff)

        return await self._refresh(raw, write, now, urgent=True)

    async def tick(self, body: kopf.Body, patch: kopf.Patch, drains: Mapping[str, Any] | None = None) -> None:
        """The policy's Kopf timer. With a status writer, the loop follows every change and sweeps
        every policy each ``plan_period``: the tick only says that Kopf works for the policy here
        (the loop writes only such policies) and computes nothing (a thousand timers computing
        would go before the statuses that pod changes call for). Without one, the tick is what
        refreshes the status."""
        if self.config.status_api is None:
            await self.refresh(body, patch, drains=drains)
            return
        raw = _plain(body)
        uid = str((raw.get("metadata") or {}).get("uid") or "")
        self._handled[uid] = time.monotonic()
        if drains is not None:
            self._drains = drains
        self.seen(body)
        self._follow()

    async def _refresh(self, raw: dict[str, Any], write: Callable[[dict[str, Any], tuple[float, ...]], Awaitable[None]],
                       now: float | None = None, *, urgent: bool = False,
                       since: float | None = None) -> Outcome | None:
        """``since``: when the change this refresh follows reached the store (monotonic; default
        now): the write budget serves the oldest change first. ``write`` is given the diff and the
        times (since, computation asked, computed, write allowed)."""
        if not self.store.ready:
            return None
        now = time.time() if now is None else now
        meta = raw.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        namespace = str(meta.get("namespace") or "default")
        current = raw.get("status") or {}
        mine = tuple(sorted(((self._drains or {}).get(f"{namespace}/{meta.get('name')}") or ()),
                            key=lambda d: str(d.get("name"))))
        memo = self._memo.get(uid)
        stale = self._stale(memo, raw, uid, current, now, mine)
        if uid in self._computing or stale is None:
            return None  # (a computation of this policy is queued or running: it writes the status)
        changes = self._changes.get(uid, 0)
        cluster = self.store.view.cluster_version
        includes = _includes_seen(raw, self.store.view.nodes)
        # On a thread of its own, one policy at a time: a plan over thousands of nodes must not hold
        # the event loop (peering, the webhook, the patches of statuses already computed).
        self._computing.add(uid)
        asked = time.monotonic()
        since = asked if since is None else since
        try:
            if stale == PLAN_STALE and memo is not None:
                unchanged = self.plan_unchanged(uid, now, make=False)
                if unchanged is None:
                    unchanged = await asyncio.get_running_loop().run_in_executor(
                        self._computer, self.plan_unchanged, uid, now)
                if unchanged:
                    self._memo[uid] = dataclasses.replace(memo, cluster=cluster, at=now)
                    return None
            outcome = await asyncio.get_running_loop().run_in_executor(self._computer, self.compute, raw, now, mine)
            computed = time.monotonic()
            self.computations += 1
            self._known(uid, namespace, outcome.policy)
            diff = merge_patch(current, outcome.status)
            sent = self._sent.get(uid)
            if sent is not None and self._writer is not None:
                # the status as the API server will hold it once the writes sent are applied, which
                # ``current`` (a watch event, Kopf's body) may not show yet: the patch makes either one
                # the new status
                diff = merged_patches(diff, merge_patch(sent, outcome.status))
            if diff:
                await self.budget.acquire(urgent, since)
                await write(diff, (since, asked, computed, time.monotonic()))
                self.writes += 1
                if self._writer is not None:
                    self._sent[uid] = outcome.status
                seen = self._bodies.get(uid)
                if seen is not None:  # what the watch will show: the loop does not write it again meanwhile
                    self._bodies[uid] = {**seen, "status": outcome.status}
        finally:
            self._computing.discard(uid)
            with self._marks:
                marked = uid in self._dirty
            if marked:  # a pod change came meanwhile: the loop skipped it and waits for no other wake
                self._wake()
        self._memo[uid] = _Memo(meta.get("generation"), changes, outcome.status,
                                bool(outcome.status.get("pending")), cluster, now, includes, outcome.round_expires,
                                mine)
        for event in outcome.events:
            kopf.event(raw, type=event.type, reason=event.reason, message=event.message)  # type: ignore[arg-type]
        return outcome

    # -- the loop that follows the changes ------------------------------------------------------

    def _follow(self) -> None:
        """Start the loop (once, with a status writer), from a Kopf handler: it inherits the
        context Kopf posts Events from."""
        loop = asyncio.get_running_loop()
        if self.config.status_api is None or (self._follower is not None and self._loop is loop
                                              and not self._follower.done()):
            return
        if self._writer is None:
            self._writer = self.config.status_api()
        self._loop = loop
        self._wakeup = asyncio.Event()
        self._follower = asyncio.create_task(self._follow_changes(), name="berth-status-follower")

    async def close(self) -> None:
        """Close what the status writer holds open (its connections), when it says how."""
        close = getattr(self._writer, "close", None)
        if close is not None and inspect.iscoroutinefunction(close):
            await close()

    def _ours(self, uid: str, now: float) -> bool:
        """Whether the loop writes the policy: known from its watch events, and refreshed by a Kopf
        handler within the last two and a half timer periods (Kopf works for it here: a replica
        that peering paused writes nothing)."""
        return uid in self._bodies and self._handled.get(uid, -math.inf) >= now - 2.5 * self.config.timer_seconds

    def next_marked(self, now: float) -> tuple[str, float] | float | None:
        """The policy a pod change marked longest ago that is due at ``now``, with its first mark
        (it is unmarked); else when the next one is due, or None when none is marked. A policy is
        due ``coalesce_seconds`` after the loop last computed it for a pod change (the changes in
        between make one status); one being computed (by a handler) stays marked; one that is not
        the loop's to write (:meth:`_ours`) is dropped."""
        interval = self.config.coalesce_seconds
        soonest: float | None = None
        dropped: list[str] = []
        picked: tuple[str, float] | None = None
        with self._marks:
            for uid, mark in self._dirty.items():
                if not self._ours(uid, now):
                    dropped.append(uid)
                    continue
                if uid in self._computing:
                    continue
                ready = self._served.get(uid, -math.inf) + interval
                if ready <= now:
                    picked = (uid, mark)
                    break
                soonest = ready if soonest is None else min(soonest, ready)
            for uid in dropped:
                del self._dirty[uid]
            if picked is not None:
                del self._dirty[picked[0]]
                self._served[picked[0]] = now
        return picked if picked is not None else soonest

    def sweep_list(self, now: float) -> list[str]:
        """Every policy the loop writes (:meth:`_ours`), for the periodic pass: a plan redone for
        changes elsewhere in the cluster, a round over, a status someone else wrote."""
        return [uid for uid in self._bodies if self._ours(uid, now)]

    async def _serve(self, uid: str, *, urgent: bool, since: float, wall: float | None = None) -> None:
        raw = self._bodies.get(uid)
        if raw is None:
            return
        try:
            await self._refresh(raw, functools.partial(self._write, raw, urgent), wall, urgent=urgent, since=since)
        except Exception as exc:  # one policy's failure must not stop the others'
            meta = raw.get("metadata") or {}
            log.warning("status of policy %s/%s: %s", meta.get("namespace"), meta.get("name"), exc)

    async def _follow_changes(self) -> None:
        """The loop: the policies pod changes marked, oldest mark first, one at a time; between
        them, when none is due, the periodic pass over every policy (:meth:`sweep_list`), started
        every ``plan_period``. One policy computed at a time, each write sent while the next is
        computed (at most :data:`WRITES_IN_FLIGHT` of them): a policy's status waits behind at most
        one computation of the periodic pass, never behind all of it."""
        assert self._wakeup is not None
        period = self.config.plan_period
        sweep: collections.deque[str] = collections.deque()
        swept = time.monotonic()
        while True:
            try:
                self._wakeup.clear()
                now = time.monotonic()
                if not sweep and now - swept >= period:
                    sweep.extend(self.sweep_list(now))
                    swept = now
                crowded = self._crowded(now)
                if crowded is not None:
                    if self._in_flight:
                        await asyncio.wait(self._in_flight, timeout=crowded, return_when=asyncio.FIRST_COMPLETED)
                    else:
                        await asyncio.sleep(crowded)
                    continue
                step = self.next_marked(now)
                if isinstance(step, tuple):
                    await self._serve(step[0], urgent=True, since=step[1])
                elif sweep:
                    await self._serve(sweep.popleft(), urgent=False, since=swept)
                else:
                    wait = swept + period - now if step is None else min(step, swept + period) - now
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wakeup.wait(), max(wait, 0.01))
                if self.freshness.due():
                    line = self.freshness.summary()
                    if line is not None:
                        log.info("%s", line)
                await asyncio.sleep(0)  # a pass over policies with nothing to do must not hold the loop
            except asyncio.CancelledError:
                raise
            except Exception:  # the loop must outlive a bug in one step
                log.exception("the status loop")
                await asyncio.sleep(1.0)

    def _crowded(self, now: float) -> float | None:
        """None when the loop may send a write now; else how long to wait at most. Writes in flight
        are at most :data:`WRITES_IN_FLIGHT`, and together with those answered within the last
        second fewer than the budget's rate: then no second of the API server's holds more than the
        rate of the loop's writes, however their answers bunch (the budget spaces the sending only,
        and a slow API server answers a backlog at once)."""
        answered = self._answered
        while answered and answered[0] <= now - 1.0:
            answered.popleft()
        busy = len(self._in_flight)
        if busy < WRITES_IN_FLIGHT and busy + len(answered) + 1 <= self.budget.rate:
            return None
        return max(0.001, answered[0] + 1.0 - now) if answered else 1.0

    async def follow_once(self, now: float, sweep: bool, wall: float | None = None) -> int:
        """What the loop does at ``now``, until nothing is left: every marked policy that is due,
        oldest mark first, then (``sweep``) the periodic pass; the statuses written (answered)."""
        written = self.writes
        while isinstance(step := self.next_marked(now), tuple):
            await self._serve(step[0], urgent=True, since=step[1], wall=wall)
        for uid in self.sweep_list(now) if sweep else ():
            await self._serve(uid, urgent=False, since=now, wall=wall)
        if self._in_flight:
            await asyncio.gather(*self._in_flight, return_exceptions=True)
        return self.writes - written

    async def _write(self, raw: Mapping[str, Any], urgent: bool, diff: dict[str, Any],
                     times: tuple[float, ...]) -> None:
        """Send the write and return: the loop computes the next status while it is answered (the
        budget has already paced it)."""
        meta = raw.get("metadata") or {}
        namespace, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
        sent = time.monotonic()
        done = self._send(str(meta.get("uid") or ""), namespace, name, diff)
        self._in_flight.add(done)

        def answered(future: asyncio.Future[None]) -> None:
            self._in_flight.discard(future)
            self._answered.append(time.monotonic())
            if future.cancelled():
                return
            if (exc := future.exception()) is not None:
                log.warning("status of policy %s/%s: %s", namespace, name, exc)
            elif urgent:
                since, asked, computed, allowed = times
                now = time.monotonic()
                self.freshness.add(now - since, asked - since, computed - asked, allowed - computed, now - sent)

        done.add_done_callback(answered)

    def _send(self, uid: str, namespace: str, name: str, diff: dict[str, Any]) -> asyncio.Future[None]:
        """Send a status write of the policy once its previous one is answered: its writes reach the
        API server in the order their statuses were computed, so an older status never lands after
        a newer one (writes sent at once on two connections may be applied in either order)."""
        writer = self._writer
        assert writer is not None
        previous = self._sending.get(uid)

        async def send() -> None:
            if previous is not None:
                await asyncio.wait([previous])  # (its failure is its own: logged by its sender)
            await writer(namespace, name, diff)

        done = asyncio.ensure_future(send())
        self._sending[uid] = done

        def settled(future: asyncio.Future[None]) -> None:
            if self._sending.get(uid) is future:
                del self._sending[uid]

        done.add_done_callback(settled)
        return done


def merged_patches(first: Mapping[str, Any], second: Mapping[str, Any]) -> dict[str, Any]:
    """One merge patch doing what two patches towards the same status do (each from its own base):
    applied to either base, it gives that status."""
    out = dict(first)
    for key, value in second.items():
        mine = out.get(key)
        out[key] = merged_patches(mine, value) if isinstance(mine, Mapping) and isinstance(value, Mapping) else value
    return out


def _selecting(policy: PlacementPolicy) -> Callable[[PodInfo], bool]:
    """Whether the policy governs a pod of its own namespace (the pods asked about are): its
    selector's matcher, made once. A status is computed for nearly every pod change, each time over
    every pod of the namespace."""
    matches = policy.selector.matcher()
    return lambda pod: matches(pod.labels)


def _includes_seen(raw: Mapping[str, Any], nodes: Container[str] | None) -> tuple[bool, ...]:
    """Which nodes of the policy's ``nodeFilter.includes`` exist: its Valid condition says which do not."""
    spec = raw.get("spec")
    node_filter = spec.get("nodeFilter") if isinstance(spec, Mapping) else None
    includes = node_filter.get("includes") if isinstance(node_filter, Mapping) else None
    if nodes is None or not isinstance(includes, list):
        return ()
    return tuple(isinstance(name, str) and name in nodes for name in includes)


def _plain(body: Mapping[str, Any]) -> dict[str, Any]:
    """A Kopf body as plain dicts (its views compare and serialise like the raw object)."""
    return {key: body[key] for key in body}


API_CONNECTIONS = 32
"""Connections to the API server that Kopf keeps at most (its watches, status patches, Events).
Kopf's own session opens one per request in flight, without bound: a thousand policies resuming at
once opened a thousand TLS connections, each with its buffers (about 110 MiB at 400 policies)."""


async def login(**kwargs: Any) -> kopf.AiohttpSession | None:
    """Kopf's login from the kubernetes client's configuration (in-cluster service account, else
    ``KUBECONFIG``), on a session of at most :data:`API_CONNECTIONS` connections."""
    info = kopf.login_via_client(**kwargs)
    if info is None:
        return None
    return kopf.AiohttpSession(server=info.server, default_namespace=info.default_namespace, priority=info.priority,
                               expiration=info.expiration, aiohttp_session=pooled_session(info))


def pooled_session(info: kopf.ConnectionInfo, limit: int = API_CONNECTIONS) -> aiohttp.ClientSession:
    """The session Kopf would make from ``info`` (TLS, the token or basic auth in the headers), with a
    bounded pool."""
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=limit, ssl=info.as_ssl_context()),
        headers=info.as_http_headers(), proxy=info.proxy_url, trust_env=info.trust_env)


def build_registry(config: OperatorConfig, store: OperatorStore | None = None,
                   ) -> tuple[kopf.OperatorRegistry, OperatorState]:
    registry = kopf.OperatorRegistry()
    state = OperatorState(config, store)

    kopf.on.login(registry=registry)(login)

    @kopf.on.cleanup(registry=registry)
    async def close(**_: Any) -> None:
        await state.close()

    # -- the policies ---------------------------------------------------------------------------

    @kopf.on.event(*POLICY, registry=registry)
    async def policy_event(type: str | None, uid: str | None, body: kopf.Body | None = None, **_: Any) -> None:
        if type == "DELETED" and uid:
            state.forget(uid)
        elif type is not None and body is not None:
            state.seen(body)

    def still_there(uid: str | None, **_: Any) -> bool:
        return state.is_live(uid)

    async def refresh_when_listed(body: kopf.Body, patch: kopf.Patch, **kwargs: Any) -> None:
        await state.wait_ready()
        await state.refresh(body, patch, drains=kwargs.get(drain.DRAINS_INDEX))

    async def tick(body: kopf.Body, patch: kopf.Patch, **kwargs: Any) -> None:
        await state.tick(body, patch, drains=kwargs.get(drain.DRAINS_INDEX))

    kopf.on.resume(*POLICY, id="status-on-resume", registry=registry)(refresh_when_listed)
    kopf.on.create(*POLICY, id="status-on-create", registry=registry)(refresh_when_listed)
    kopf.on.update(*POLICY, id="status-on-update", field="spec", registry=registry)(refresh_when_listed)
    kopf.timer(*POLICY, id=TIMER_ID, interval=config.timer_seconds, initial_delay=config.resync_seconds,
               when=still_there, registry=registry)(tick)
    _without_finalizer(registry, TIMER_ID)

    # -- admission ------------------------------------------------------------------------------

    if config.webhook.enabled:
        @kopf.on.validate(*POLICY, id=WEBHOOK_ID, operations=["CREATE", "UPDATE"],
                          ignore_failures=not config.webhook.fail_closed, registry=registry)
        async def validate(body: kopf.Body, old: kopf.Body | None = None, operation: str | None = None,
                           namespace: str | None = None, **_: Any) -> None:
            if config.namespace is not None and namespace != config.namespace:
                return  # Kopf's webhook is called for every namespace: another's policy is not ours to judge
            problem = admission_problem(_plain(body), _plain(old) if old is not None else None, operation or "")
            if problem is not None:
                raise kopf.AdmissionError(problem, code=REFUSAL_CODE)

    # -- NodeDrains (Plan mode): their own module, planned on the same view --------------------

    if config.namespace is not None:
        # A NodeDrain is cluster-wide, and so would a namespaced Kopf operator serve it: planned on
        # one namespace's pods and contested with the cluster's operator. Left to that operator.
        return registry, state

    def cluster_view(kwargs: Mapping[str, Any]) -> ClusterView:
        return state.store.view

    made: list[DrainApi] = []

    def drain_api() -> DrainApi:  # made once, on the first executing drain
        if not made:
            if config.drain_api is None:
                raise kopf.PermanentError("Execute mode needs the Kubernetes API: none was configured")
            made.append(config.drain_api())
        return made[0]

    drain.register(registry, settings=config.settings, resync_seconds=config.resync_seconds, view_of=cluster_view,
                   webhook=config.webhook.enabled, fail_closed=config.webhook.fail_closed, api=drain_api,
                   guard=state.store.lock, listed=state.wait_ready)
    _without_finalizer(registry, drain.TIMER_ID)
    return registry, state


def _without_finalizer(registry: kopf.OperatorRegistry, handler_id: str) -> None:
    """Kopf gives every timer a finalizer so that it is stopped before its object goes; this one
    is stopped by its ``when`` filter instead, and a policy must be deletable while the operator
    is down. (Kopf has no public switch for it: the registered handler is replaced.)"""
    spawning = registry._spawning
    handlers = spawning._handlers
    for i, handler in enumerate(handlers):
        if handler.id == handler_id:
            handlers[i] = dataclasses.replace(handler, requires_finalizer=False)
            return
    raise LookupError(f"no spawning handler {handler_id!r}")
