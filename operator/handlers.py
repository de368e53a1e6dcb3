"""The Kopf handlers of the operator, registered on a registry of their own by
:func:`build_registry` (nothing is registered at import time).

- The cluster (Nodes, Pods, node Leases) is not Kopf's: it is the extender's watch-fed store
  (:mod:`berth.operator.cluster`), listed and watched on threads of its own. A pod change marks
  only the policies of its namespace whose selector matches the pod before or after the change.
- ``on.create`` / ``on.update`` (of the spec) / ``on.resume`` of a PlacementPolicy (once the
  store is listed) and a ``timer`` every ``resync_seconds`` compute the policy's status
  (:mod:`.reconcile`) when one of its inputs changed, and patch only what differs from the status
  the object has (a status patch is no essence change for Kopf, so it triggers no handler: the
  operator never loops on its own writes). The timer is the per-policy debounce: however many
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
import dataclasses
import functools
import heapq
import itertools
import logging
import math
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
from berth.operator.reconcile import Outcome, compute_status, plan_waiting
from berth.operator.webhook import WEBHOOK_ID, WebhookOptions

log = logging.getLogger("berth.operator")

TIMER_ID = "status-refresh"
POLICY = (API_GROUP, CRD_VERSION, POLICY_PLURAL)

TIMER_SECONDS = 30.0
"""Each policy's Kopf timer when the operator writes statuses of its own accord too: a safety net
(a status written by someone else is restored), and the proof that Kopf works here (not paused in
favour of another replica), without which the operator writes nothing of its own accord."""

StatusWriter = Callable[[str, str, dict[str, Any]], None]
"""(namespace, name, a merge patch of the status): writes a policy's status; called on a thread."""

STATUS_WRITES_PER_SECOND = 100.0
STATUS_WRITES_BOUNDS = (1.0, 1000.0)
"""Status writes per second, all policies together: the default and the allowed range."""


@dataclass(frozen=True)
class OperatorConfig:
    settings: Settings = field(default_factory=Settings)
    resync_seconds: float = 5.0  # each policy's timer: a status is at most this stale after a change
    track_leases: bool = True  # node liveness by kube-node-lease Leases, as the extender judges it
    plan_period: float = 10.0  # with pending pods, the plan is redone at most this often for changes elsewhere
    round_timeout_seconds: float = ROUND_TIMEOUT_SECONDS  # an idle Fill/Each round closes, as in the extender
    status_writes_per_second: float = STATUS_WRITES_PER_SECOND  # all policies together
    webhook: WebhookOptions = field(default_factory=WebhookOptions)
    drain_api: Callable[[], DrainApi] | None = None  # what an executing NodeDrain cordons and evicts with
    status_api: Callable[[], StatusWriter] | None = None  # statuses written on pod changes (None: by the timers)

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
    user set, which the API server and its other clients would feel). Writers wait in turn, the
    urgent ones (a pod change, a new spec) before the others (a plan redone for changes elsewhere
    in the cluster), first come first served within each."""

    def __init__(self, rate: float, clock: Any = time.monotonic) -> None:
        self.rate = rate
        self.capacity = 1.0
        self._tokens = self.capacity
        self._clock = clock
        self._at = clock()
        self._waiting: list[tuple[int, int, asyncio.Future[None]]] = []  # a heap: (0 urgent / 1, turn, waiter)
        self._turns = itertools.count()
        self._server: asyncio.Task[None] | None = None

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self.capacity, self._tokens + (now - self._at) * self.rate)
        self._at = now

    async def acquire(self, urgent: bool = False) -> None:
        self._refill()
        if not self._waiting and self._tokens >= 1.0:
            self._tokens -= 1.0
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (0 if urgent else 1, next(self._turns), waiter))
        if self._server is None or self._server.done():
            self._server = asyncio.create_task(self._serve())
        await waiter

    async def _serve(self) -> None:
        while self._waiting:
            self._refill()
            if self._tokens < 1.0:
                await asyncio.sleep((1.0 - self._tokens) / self.rate)
                continue
            _, _, waiter = heapq.heappop(self._waiting)
            if not waiter.done():  # (a waiter cancelled meanwhile takes no write)
                self._tokens -= 1.0
                waiter.set_result(None)


_Plan = tuple[dict[str, int], PlacementError | None]


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
    statuses): every ``resync_seconds`` it recomputes the policies a pod change marked, and every
    ``plan_period`` it looks at every policy, from the bodies the policies' watch events bring. The
    timers then tick every :data:`TIMER_SECONDS` as a safety net, and the loop works only for the
    policies whose Kopf handlers ran lately: a replica that Kopf paused (peering) writes nothing."""

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
        self._listed: asyncio.Event | None = None
        self._computer = ThreadPoolExecutor(1, thread_name_prefix="berth-status")
        self._computing: set[str] = set()  # policies whose computation is queued or running
        self._plans: dict[str, tuple[object, float, _Plan]] = {}  # uid -> (round, when, (plan, error))
        self._shared_plans: OrderedDict[Hashable, tuple[float, _Plan]] = OrderedDict()  # see planner
        self._poller: asyncio.Task[None] | None = None
        self._bodies: dict[str, dict[str, Any]] = {}  # uid -> the policy as its latest watch event showed it
        self._dirty: set[str] = set()  # policies a pod change marked since the loop's last pass
        self._handled: dict[str, float] = {}  # uid -> when a Kopf handler last refreshed it (monotonic)
        self._follower: asyncio.Task[None] | None = None
        self._writer: StatusWriter | None = None
        self._drains: Mapping[str, Any] | None = None  # Kopf's index of the NodeDrains (see refresh)
        self._writers = ThreadPoolExecutor(8, thread_name_prefix="berth-status-write")

    # -- marks -------------------------------------------------------------------------------

    def pod_changed(self, namespace: str, before: Mapping[str, str] | None,
                    after: Mapping[str, str] | None) -> None:
        """A pod of ``namespace`` changed (labels ``before`` and ``after``; None: absent): mark the
        policies that select it either way."""
        with self._marks:
            for uid, policy in self._policies.get(namespace, {}).items():
                if policy is None:
                    continue  # an invalid policy's status reads no pod
                if (before is not None and policy.governs(namespace, before)) or \
                        (after is not None and policy.governs(namespace, after)):
                    self._changes[uid] = self._changes.get(uid, 0) + 1
                    self._dirty.add(uid)

    def _known(self, uid: str, namespace: str, policy: PlacementPolicy | None) -> None:
        with self._marks:
            self._policies.setdefault(namespace, {})[uid] = policy

    def forget(self, uid: str) -> None:
        with self._marks:
            for policies in self._policies.values():
                policies.pop(uid, None)
            self._changes.pop(uid, None)
            self._dirty.discard(uid)
        self._memo.pop(uid, None)
        self._bodies.pop(uid, None)
        self._handled.pop(uid, None)
        self._plans.pop(uid, None)
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

        def planner(shape: PodInfo, policy: PlacementPolicy, count: int) -> _Plan:
            """A plan of the same round (generation, shape, count) younger than ``plan_period`` is
            reused: pods placed elsewhere in a busy namespace update the counts at once, and the
            plan, which reads the whole cluster, at most every period. So is a plan younger than
            that of another policy whose plan does not depend on the pods it selects
            (:func:`shared_plan_key`): a thousand policies alike but for their selectors cost one
            plan, not a thousand."""
            key = (meta.get("generation"), shape.uid, count)
            period = self.config.plan_period
            kept = self._plans.get(uid)
            if kept is not None and kept[0] == key and now - kept[1] < period:
                return kept[2]
            shared = shared_plan_key(shape, policy, count)
            if shared is not None:
                shared = (shared, store.view.nodes_version)  # a node added, changed or gone: planned afresh
            made = self._shared_plans.get(shared) if shared is not None else None
            if made is None or not 0 <= now - made[0] < period:
                made = (now, plan_waiting(store.view, shape, policy, self.config.settings, now, count))
                if shared is not None:
                    self._share(shared, made)
            self._plans[uid] = (key, made[0], made[1])
            return made[1]

        with store.lock:
            return compute_status(body, store.records(namespace), lambda: store.view, self.config.settings, now,
                                  round_timeout=self.config.round_timeout_seconds,
                                  planner=planner, drains=drains)

    def _share(self, key: Hashable, made: tuple[float, _Plan]) -> None:
        """Keep a plan for the policies alike (the least recently made go first)."""
        plans = self._shared_plans
        plans[key] = made
        plans.move_to_end(key)
        while len(plans) > self.SHARED_PLANS_KEPT:
            plans.popitem(last=False)

    def _stale(self, memo: _Memo | None, raw: Mapping[str, Any], uid: str, current: Mapping[str, Any],
               now: float, drains: tuple[Mapping[str, Any], ...]) -> bool:
        meta = raw.get("metadata") or {}
        if memo is None or memo.generation != meta.get("generation") or memo.status != current \
                or memo.drains != drains:
            return True
        if memo.changes != self._changes.get(uid, 0) or memo.includes != _includes_seen(raw, self.store.view.nodes):
            return True
        if memo.round_expires is not None and now > memo.round_expires:
            return True  # the round the plan shows is over: the next one plans anew
        return memo.pending and memo.cluster != self.store.view.cluster_version \
            and now - memo.at >= self.config.plan_period

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

        async def write(diff: dict[str, Any]) -> None:
            patch.status.update(diff)

        return await self._refresh(raw, write, now, urgent=True)

    async def _refresh(self, raw: dict[str, Any], write: Callable[[dict[str, Any]], Awaitable[None]],
                       now: float | None = None, *, urgent: bool = False) -> Outcome | None:
        if not self.store.ready:
            return None
        now = time.time() if now is None else now
        meta = raw.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        namespace = str(meta.get("namespace") or "default")
        current = raw.get("status") or {}
        mine = tuple(sorted(((self._drains or {}).get(f"{namespace}/{meta.get('name')}") or ()),
                            key=lambda d: str(d.get("name"))))
        if uid in self._computing or not self._stale(self._memo.get(uid), raw, uid, current, now, mine):
            return None  # (a computation of this policy is queued or running: it writes the status)
        changes = self._changes.get(uid, 0)
        cluster = self.store.view.cluster_version
        includes = _includes_seen(raw, self.store.view.nodes)
        # On a thread of its own, one policy at a time: a plan over thousands of nodes must not hold
        # the event loop (peering, the webhook, the patches of statuses already computed).
        self._computing.add(uid)
        try:
            outcome = await asyncio.get_running_loop().run_in_executor(self._computer, self.compute, raw, now, mine)
            self.computations += 1
            self._known(uid, namespace, outcome.policy)
            diff = merge_patch(current, outcome.status)
            if diff:
                await self.budget.acquire(urgent)
                await write(diff)
                self.writes += 1
                seen = self._bodies.get(uid)
                if seen is not None:  # what the watch will show: the loop does not write it again meanwhile
                    self._bodies[uid] = {**seen, "status": outcome.status}
        finally:
            self._computing.discard(uid)
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
        if self.config.status_api is None or self._follower is not None:
            return
        self._writer = self.config.status_api()
        self._follower = asyncio.create_task(self._follow_changes(), name="berth-status-follower")

    def due(self, now: float, sweep: bool) -> list[tuple[str, bool]]:
        """The policies the loop refreshes now, each with whether its write is urgent: those a pod
        change marked (urgent), then (``sweep``) every other one; only those a Kopf handler
        refreshed within the last two and a half timer periods (Kopf works for them here). A marked
        policy whose refresh is still under way stays marked for the next pass."""
        with self._marks:
            marked, self._dirty = self._dirty, set()
            busy = marked & self._computing
            self._dirty |= busy
        marked -= busy
        others = [uid for uid in self._bodies if uid not in marked and uid not in self._computing] if sweep else []
        since = now - 2.5 * self.config.timer_seconds
        return [(uid, urgent) for uid, urgent in (*((uid, True) for uid in marked), *((uid, False) for uid in others))
                if uid in self._bodies and self._handled.get(uid, -math.inf) >= since]

    async def _follow_changes(self) -> None:
        swept = time.monotonic()
        while True:
            await asyncio.sleep(self.config.resync_seconds)
            now = time.monotonic()
            sweep = now - swept >= self.config.plan_period
            if sweep:
                swept = now
            await self.follow_once(now, sweep)

    async def follow_once(self, now: float, sweep: bool, wall: float | None = None) -> int:
        """One pass of the loop (:meth:`due`); the statuses written. The policies are computed one
        at a time, in order (the marked ones first), and each status is written while the next ones
        are computed."""
        written = self.writes

        async def one(raw: dict[str, Any], urgent: bool) -> None:
            try:
                await self._refresh(raw, functools.partial(self._write, raw), wall, urgent=urgent)
            except Exception as exc:  # one policy's failed write must not stop the others'
                meta = raw.get("metadata") or {}
                log.warning("status of policy %s/%s: %s", meta.get("namespace"), meta.get("name"), exc)

        await asyncio.gather(*(one(raw, urgent) for uid, urgent in self.due(now, sweep)
                               if (raw := self._bodies.get(uid))))
        return self.writes - written

    async def _write(self, raw: Mapping[str, Any], diff: dict[str, Any]) -> None:
        meta = raw.get("metadata") or {}
        assert self._writer is not None
        await asyncio.get_running_loop().run_in_executor(
            self._writers, self._writer, str(meta.get("namespace") or "default"), str(meta.get("name") or ""), diff)


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

    async def refresh(body: kopf.Body, patch: kopf.Patch, **kwargs: Any) -> None:
        await state.refresh(body, patch, drains=kwargs.get(drain.DRAINS_INDEX))

    kopf.on.resume(*POLICY, id="status-on-resume", registry=registry)(refresh_when_listed)
    kopf.on.create(*POLICY, id="status-on-create", registry=registry)(refresh_when_listed)
    kopf.on.update(*POLICY, id="status-on-update", field="spec", registry=registry)(refresh_when_listed)
    kopf.timer(*POLICY, id=TIMER_ID, interval=config.timer_seconds, initial_delay=config.resync_seconds,
               when=still_there, registry=registry)(refresh)
    _without_finalizer(registry, TIMER_ID)

    # -- admission ------------------------------------------------------------------------------

    if config.webhook.enabled:
        @kopf.on.validate(*POLICY, id=WEBHOOK_ID, operations=["CREATE", "UPDATE"],
                          ignore_failures=not config.webhook.fail_closed, registry=registry)
        async def validate(body: kopf.Body, old: kopf.Body | None = None, operation: str | None = None,
                     **_: Any) -> None:
            problem = admission_problem(_plain(body), _plain(old) if old is not None else None, operation or "")
            if problem is not None:
                raise kopf.AdmissionError(problem, code=REFUSAL_CODE)

    # -- NodeDrains (Plan mode): their own module, planned on the same view --------------------

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
                   guard=state.store.lock)
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
