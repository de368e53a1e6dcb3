"""berth nominates the node of a pending pod it governs before kube-scheduler's cycle reaches the
pod, through ``status.nominatedNodeName``.

kube-scheduler tries a pod's nominated node first (``findNodesThatFitPod`` ->
``evaluateNominatedNode``): its Filter plugins and the extenders' filter on that one node, and
when it passes, that node without looking at any other and, one feasible node, without scoring.
berth's filter, sent the pod's nominated node alone, still judges the whole cluster from its own
view and passes the node only if its strategy ranks it first
(:meth:`berth.extender.engine.Extender.filter`); otherwise kube-scheduler filters every node as
before. So a nomination changes how fast a pod is placed, never where: at 5,000 nodes a hit
spares kube-scheduler its in-tree filters of 4,999 nodes and berth the decoding of their names.

A nomination is worth its write (a patch of the pod's status, as costly to the API server as a
Binding) only when it lands before kube-scheduler's cycle reaches the pod, that is when
kube-scheduler is behind. When it keeps up (pods arriving one by one at a rate it binds), its
cycle reaches a new pod within milliseconds, before a nomination could be planned and written: a
write then comes late, is superseded or is refused because the pod is bound, and only adds load
to the path that makes binds slow. So the nominator takes a pod only once it has waited
``after_seconds`` (``BERTH_NOMINATE_AFTER_SECONDS``) in the queue, longer than kube-scheduler takes
to reach a pod when idle; a pod whose filter came meanwhile (berth counts its winner there) or
that was bound is skipped unwritten. A pod still unreached by then is behind a backlog in
kube-scheduler's queue, which is where a nomination wins, and so are the pods queued after it,
which are taken with it however young (a round policy's pods that came together are planned
together): in a burst every pod after the first
few waits that long, so the wait costs a burst nothing but the nominations of those few (its
first ``after_seconds`` of binds). A backlog count was the other rule considered; the wait needs no
record of which pods kube-scheduler has tried (a pod it could not place stays pending without
being ahead of anyone) and adapts by itself to how fast kube-scheduler is.

How: the store hands each new pending pod to :meth:`Nominator.offer` (a bounded queue, which the
pods waiting for a place count against: beyond it a pod is dropped and counted, and kube-scheduler
schedules it the usual way). A task on the event loop takes the pods in the order they came
(kube-scheduler's queue is first in, first out among pods of equal priority) once they have waited
``after_seconds``, keeps those berth governs that are still pending with no node, no nomination and
no assumption, plans runs of pods of one policy in turn with the core's placer
(:func:`berth.core.place_in_turn`, each pod counted on its node before the next is placed, as
filter counts them; a Fill or Each policy's pods within its round, the next round opening as soon
as they use one up, as it opens for the pod after a round's last in filter), counts each on its
node as a nominated pod (as the store counts a preemptor on its nominated node), and writes the
nominations at a bounded rate. A write that fails releases the pod's place.

kube-scheduler reserves a nominated pod's room on its node for pods of equal or lower priority,
which is what berth's plan means; the API server clears ``nominatedNodeName`` when it binds the
pod (v1.35+), and refuses a nomination of a pod already bound. ``berth_nominations_total{result}``
counts made, hit, missed, late, superseded (kube-scheduler's cycle for the pod, or another
nomination, came before the write: not written, or refused because the pod was bound or a node
was nominated first; the write tests that none is, so extender replicas never overwrite each
other), dropped, failed and withdrawn nominations (filter refused it: berth clears it, as the
component that set it, since kube-scheduler keeps the nomination of a pod it cannot place), and
abandoned ones (planned, not written: the replica stopped leading).

With several extender replicas one nominates, the holder of a Lease
(:mod:`berth.extender.leader`, :meth:`Nominator.lead`); the others plan nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING

from berth.core import NO_STEER, ROUND_STRATEGIES, PodInfo, place_in_turn
from berth.extender.binder import NominationRefused

if TYPE_CHECKING:
    from berth.extender.engine import Extender

log = logging.getLogger("berth.extender.nominator")

BATCH = 32
"""Pods planned at once (under the store's lock, which filter also takes)."""

IN_FLIGHT = 16
"""Nominations being written at once."""

RETRY_SECONDS = 0.1
"""How often pods no place left in their policy's round suited look for a change that may give
them one (a comparison of two counters; they are planned again only after such a change)."""

RECHECK_SECONDS = 5.0
"""How long such pods wait at most to be planned again without a change seen: some the nominator
does not watch for (a node's Lease renewed, which makes it live again)."""

IDLE_SECONDS = 1.0
"""How long the task sleeps at most without a wake-up, so that one missed never stops it."""

Write = Callable[[PodInfo, str], Awaitable[None]]
"""Writes a pod's ``status.nominatedNodeName`` (:meth:`berth.extender.binder.KubeBinder.nominate`)."""


class Nominator:
    """The queue of pods to nominate and the task that plans and writes their nominations."""

    def __init__(self, engine: Extender, write: Write, *, schedulers: Iterable[str], queue_size: int,
                 per_second: float, withdraw: Write | None = None, after_seconds: float = 0.0) -> None:
        self.engine = engine
        self.write = write
        self.withdraw_write = withdraw
        self.schedulers = frozenset(schedulers)
        self.queue_size = queue_size
        self.per_second = per_second
        self.after_seconds = after_seconds
        self._queue: OrderedDict[str, tuple[PodInfo, float]] = OrderedDict()  # uid -> (pod, when it came)
        self._queue_lock = threading.Lock()  # offer runs on the watch threads
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._writes: set[asyncio.Task[None]] = set()
        self._next_write = 0.0
        # pods no place left in their policy's round suited (:meth:`_park`): uid -> pod, planned
        # again once the view changed in a way that can give them one, or their round lapsed
        self._waiting: OrderedDict[str, PodInfo] = OrderedDict()
        self._waiting_room: tuple[int, int] = (0, 0)  # the view's changes when they were parked ...
        self._waiting_until = float("inf")  # ... and when they are planned again at the latest
        # pods a standby's full queue let go of (uids, oldest first): taken back once it leads and
        # its queue has room, those still pending with no node nor nomination
        self._evicted: OrderedDict[str, None] = OrderedDict()
        self._failures_told: set[str] = set()
        self.leading = True  # False on a replica that does not hold the nominator's Lease (:meth:`lead`)
        engine.metrics.leading.set(1)

    # -- the queue (any thread) ------------------------------------------------------------

    def offer(self, pod: PodInfo, scheduler: str | None) -> None:
        """A pending pod with no nominated node, as the store sees it (under its lock): queued if
        one of berth's schedulers schedules it; dropped and counted when the nominator holds
        ``queue_size`` pods already (:meth:`queued`)."""
        if scheduler not in self.schedulers:
            return
        with self._queue_lock:
            if pod.uid in self._waiting:
                self._waiting[pod.uid] = pod  # it waits for a place with the others
                return
            queue = self._queue
            if pod.uid in queue:
                queue[pod.uid] = (pod, queue[pod.uid][1])  # it keeps its place and its wait
                return
            if len(queue) + len(self._waiting) >= self.queue_size:
                if self.leading:
                    self.engine.metrics.nominations.labels("dropped").inc()
                    return
                # a standby keeps the latest pods for when it leads, and the others' uids: the
                # waiting ones were taken before any still queued came
                if self._waiting:
                    self._evict(self._waiting.popitem(last=False)[0])
                else:
                    self._evict(queue.popitem(last=False)[0])
            was_empty = not queue
            queue[pod.uid] = (pod, self.engine.clock())
        if was_empty:
            self._signal()

    def queued(self) -> int:
        """The pods the nominator holds, queued or waiting for a place (:meth:`_park`): at most
        ``queue_size``, whatever the cluster sends."""
        with self._queue_lock:
            return len(self._queue) + len(self._waiting)

    def _evict(self, uid: str) -> None:
        """Remember an evicted pod (under the store's lock, which offer runs under): those no longer
        pending are forgotten whenever the record doubles, so it stays within the pending pods."""
        evicted = self._evicted
        evicted[uid] = None
        if len(evicted) >= 2 * self.queue_size and len(evicted) & (len(evicted) - 1) == 0:
            pending = self.engine.store.pending
            for gone in [u for u in evicted if u not in pending]:
                del evicted[gone]

    def _take_back(self) -> None:
        """Queue again, ahead of the others (they came first), the pods evicted while this replica
        stood by that are still pending with no node nor nomination, as many as the queue has room
        for: a pod kube-scheduler has not placed is nominated by whichever replica leads."""
        store = self.engine.store
        with store.lock, self._queue_lock:
            room = self.queue_size - len(self._queue) - len(self._waiting)
            back: list[PodInfo] = []
            while self._evicted and len(back) < room:
                uid, _ = self._evicted.popitem(last=False)
                pod = store.pending.get(uid)
                if (pod is not None and uid not in store.assumed and uid not in self._queue
                        and uid not in self._waiting):
                    back.append(pod)
        self.requeue(back)

    def _signal(self) -> None:
        loop, wake = self._loop, self._wake
        if loop is None or wake is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(wake.set)

    def take(self, limit: int) -> list[PodInfo]:
        """Up to ``limit`` of the oldest queued pods that have waited ``after_seconds``, and, when one
        of them is still unreached by kube-scheduler's cycle (it is behind), the pods queued after it
        too: they are behind it in kube-scheduler's queue (and a round policy's pods that came
        together are planned together)."""
        if not self.leading:
            return []
        if self._evicted and self.queued() < self.queue_size:
            self._take_back()
        if self._waiting and self._may_help():
            self.requeue(self._unpark())
        ready = self.engine.clock() - self.after_seconds
        taken = self._pop(limit, ready)
        if taken and len(taken) < limit and self.after_seconds > 0 and self._behind(taken):
            taken += self._pop(limit - len(taken), float("inf"))
        return taken

    def _pop(self, limit: int, came_by: float) -> list[PodInfo]:
        with self._queue_lock:
            taken: list[PodInfo] = []
            while self._queue and len(taken) < limit:
                uid, (pod, came) = next(iter(self._queue.items()))
                if came > came_by:
                    break  # it and the pods after it came later
                del self._queue[uid]
                taken.append(pod)
            return taken

    def _behind(self, pods: list[PodInfo]) -> bool:
        """Whether one of ``pods`` is still pending with no node and not judged by filter (not under
        the queue's lock: the store offers pods under its own)."""
        store = self.engine.store
        with store.lock:
            for pod in pods:
                current = store.pending.get(pod.uid)
                if current is not None and not current.node_name and pod.uid not in store.assumed:
                    return True
        return False

    def wait_left(self) -> float | None:
        """Seconds until the oldest queued pod has waited ``after_seconds`` (None: the queue is empty)."""
        with self._queue_lock:
            if not self._queue:
                return None
            _, came = next(iter(self._queue.values()))
        return max(0.0, came + self.after_seconds - self.engine.clock())

    def lead(self, leading: bool) -> None:
        """This replica starts or stops nominating (:class:`berth.extender.leader.LeaseElector`).

        A replica that does not lead plans nothing: it keeps the latest pending pods in its queue
        (the oldest make room, uncounted, their uids kept) and plans those still pending, not
        nominated meanwhile, when it leads, and the older ones as its queue empties. One that
        stops leading writes none of the nominations it planned and has not written yet
        (``abandoned``; a write already sent may still land, and the write's test op keeps it from
        overwriting another replica's)."""
        self.leading = leading
        self.engine.metrics.leading.set(1 if leading else 0)
        if leading:
            self._signal()

    # -- the task (the event loop) ----------------------------------------------------------

    def start(self) -> None:
        """Start the task on the running loop (the app's lifespan)."""
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._task = self._loop.create_task(self._run())
        self._task.add_done_callback(_tell_end)
        if self._queue:
            self._wake.set()

    async def stop(self) -> None:
        tasks = [t for t in (self._task, *self._writes) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._task = None

    async def _run(self) -> None:
        assert self._wake is not None
        slots = asyncio.Semaphore(IN_FLIGHT)
        while True:
            # Woken by a pod offered to an empty queue or by the election, and in any case once
            # the oldest queued pod has waited (or, idle, every IDLE_SECONDS): a wake-up missed
            # can delay a nomination, never stop the nominator.
            left = self.wait_left() if self.leading else None
            timeout = IDLE_SECONDS if left is None else min(left, IDLE_SECONDS)
            if self._waiting and self.leading:  # a change of the view may give them a place
                timeout = min(timeout, RETRY_SECONDS)
            if timeout > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout)
            self._wake.clear()
            while batch := self.take(BATCH):
                try:
                    planned = self.plan(batch)
                except Exception:  # a fault of one batch must not end the nominator
                    log.exception("cannot plan the nominations of %d pods", len(batch))
                    continue
                for pod, node in planned:
                    await slots.acquire()
                    await self._pace()
                    task = asyncio.get_running_loop().create_task(self._nominate(pod, node, slots))
                    self._writes.add(task)
                    task.add_done_callback(self._writes.discard)

    async def _pace(self) -> None:
        """At most ``per_second`` writes a second."""
        now = time.monotonic()
        wait = self._next_write - now
        if wait > 0:
            await asyncio.sleep(wait)
            now = time.monotonic()
        self._next_write = max(now, self._next_write) + 1.0 / self.per_second

    async def _nominate(self, pod: PodInfo, node: str, slots: asyncio.Semaphore) -> None:
        counted = self.engine.metrics.nominations
        try:
            if not self._still_nominated(pod, node):
                counted.labels("superseded").inc()  # its filter came while the write waited its turn
                return
            if not self.leading:
                counted.labels("abandoned").inc()  # this replica lost the Lease while the write waited
                self._release(pod, node)
                return
            await self.write(pod, node)
        except Exception as exc:
            if isinstance(exc, NominationRefused) or self._superseded(pod):
                # bound meanwhile, or nominated first by another (a second replica, preemption)
                counted.labels("superseded").inc()
                self._release(pod, node)
                return
            reason = str(exc).removeprefix(f"cannot nominate {node} for pod {pod.key}: ")
            self._tell_failure(f"cannot nominate {node} for pod {pod.key}: {reason}",
                               f"{type(exc).__name__}: {reason.split(':')[0]}")
            counted.labels("failed").inc()
            self._release(pod, node)
        else:
            counted.labels("made").inc()
        finally:
            slots.release()

    def _still_nominated(self, pod: PodInfo, node: str) -> bool:
        """Whether the pod still counts on ``node`` as berth's nomination (no cycle of kube-scheduler
        has judged it since)."""
        store = self.engine.store
        with store.lock:
            entry = store.assumed.get(pod.uid)
            return entry is not None and entry.nominated and entry.pod.node_name == node

    def _superseded(self, pod: PodInfo) -> bool:
        """Whether kube-scheduler's cycle for the pod came first: berth chose or bound its node since,
        or the view shows it bound."""
        store = self.engine.store
        with store.lock:
            entry = store.assumed.get(pod.uid)
            shown = store.view.pod(pod.uid)
            return (entry is not None and not entry.nominated) or (shown is not None and bool(shown.node_name)
                                                                   and not store.view.is_assumed(pod.uid))

    def withdraw(self, pod: PodInfo, node: str) -> None:
        """berth no longer stands by its nomination of ``node`` for the pod (its filter refused it):
        clear it in the background, as KEP-5278 asks of the component that set it, so that a pod
        kube-scheduler cannot place does not keep room reserved there. A pod bound or nominated
        anew meanwhile is left alone."""
        loop = self._loop
        if self.withdraw_write is None or loop is None or loop.is_closed():
            return
        task = loop.create_task(self._withdraw(pod, node))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _withdraw(self, pod: PodInfo, node: str) -> None:
        assert self.withdraw_write is not None
        try:
            await self.withdraw_write(pod, node)
        except NominationRefused:
            return  # bound, or nominated anew: nothing of berth's to clear
        except Exception as exc:
            self._tell_failure(f"cannot withdraw the nomination of {node} for pod {pod.key}: {exc}",
                               f"withdraw {type(exc).__name__}")
            return
        self.engine.metrics.nominations.labels("withdrawn").inc()

    def _tell_failure(self, message: str, kind: str) -> None:
        """A failed write logged as a warning the first time its kind of failure is seen (a storm
        would otherwise flood the log), then at debug level; each is counted."""
        if kind in self._failures_told or len(self._failures_told) >= 64:
            log.debug("%s", message)
            return
        self._failures_told.add(kind)
        log.warning("%s (further failures like it are logged at debug level)", message)

    def _release(self, pod: PodInfo, node: str) -> None:
        store = self.engine.store
        with store.lock:
            entry = store.assumed.get(pod.uid)
            if entry is not None and entry.nominated and entry.pod.node_name == node:
                store.release(pod.uid)
            self.engine.nominations.pop(pod.uid, None)

    # -- planning (under the store's lock) ---------------------------------------------------

    def plan(self, pods: list[PodInfo]) -> list[tuple[PodInfo, str]]:
        """The node of each of ``pods`` berth still governs and may nominate, planned in turn and
        counted there as nominated: runs of pods of one policy go through the core's placer together,
        round after round for a Fill or Each policy (:meth:`_place`). Pods of such a policy whose
        own checks refuse every place left in the round in force wait (:meth:`_park`): places may
        come free (a nomination that failed) before the round lapses."""
        engine = self.engine
        store = engine.store
        planned: list[tuple[PodInfo, str]] = []
        deferred: list[PodInfo] = []
        lapse = [float("inf")]
        tried: list[str] = []  # the pods it may count as nominated: none of them was counted anywhere
        with store.lock:
            try:
                now = engine.clock()
                engine.expire_assumptions(now)
                eval_now = engine.eval_clock()
                run: list[PodInfo] = []
                run_key: object = None
                for pod in pods:
                    current = store.pending.get(pod.uid)
                    if current is None or current.node_name or pod.uid in store.assumed:
                        continue  # bound, gone, or already counted somewhere (filter's winner, a nomination)
                    if (store.holds or store.drained_workloads) and store.drain_steer(current, now) is not NO_STEER:
                        continue  # a drain's replacement: its filter steers it
                    policy, strategy, governed = engine.governing(current)
                    if not governed:
                        continue
                    key = (policy.key if policy is not None else None, strategy)
                    if run and key != run_key:
                        planned += self._place(run, now, eval_now, deferred, lapse)
                        run = []
                    run_key = key
                    run.append(current)
                    tried.append(current.uid)
                if run:
                    planned += self._place(run, now, eval_now, deferred, lapse)
            except BaseException:
                # a fault midway writes none of the batch: no place it counted stays held unwritten
                for uid in tried:
                    if uid in store.assumed:
                        store.release(uid)
                raise
            for pod, node in planned:
                engine.nominated(pod.uid, node)
            if deferred:
                self._park(deferred, min(lapse[0], now + RECHECK_SECONDS))
        return planned

    def _place(self, pods: list[PodInfo], now: float, eval_now: float, deferred: list[PodInfo],
               lapse: list[float]) -> list[tuple[PodInfo, str]]:
        """Place ``pods`` (one policy) in turn over the whole view, each counted as nominated. A
        Fill or Each policy's pods take the places of the round in force, and when they use it up
        the next round opens for the rest at once (:meth:`Extender.round_in_force`, the core's
        count rule): a nominated pod holds its place in its round as a pod its filter placed does,
        and its filter judges it there although the next round has opened
        (:func:`berth.core.round.judged_in`). Pods none of the round's places left suits go to
        ``deferred``, and ``lapse`` keeps the earliest time a round they found lapses."""
        engine = self.engine
        store = engine.store
        policy, _, _ = engine.governing(pods[0])
        settings = engine.core_settings  # the cluster's (a pod no policy selects gets its default strategy from them)
        if policy is None or policy.strategy not in ROUND_STRATEGIES:
            def put(pod: PodInfo, node: str) -> None:
                store.assume(pod, node, bound=False, deadline=float("inf"), nominated=True)

            placed = place_in_turn(store.view, pods, policy, settings, eval_now, put=put)
            return [(pod, node) for pod, node in zip(pods, placed.nodes, strict=False) if node is not None]
        planned: list[tuple[PodInfo, str]] = []
        rest = pods
        while rest:
            rnd, quota, _ = engine.round_in_force(store.view, rest[0], policy, now, eval_now)
            if rnd is None or not quota:
                break  # no round can open: filter tells each pod why
            size = sum(quota.values())
            turn, rest = rest[:size], rest[size:]  # the pods the round has places for; the rest try the next

            def put_in(pod: PodInfo, node: str, round_id: str = rnd.id) -> None:
                store.assume(pod, node, bound=False, deadline=float("inf"), round_id=round_id, nominated=True)

            placed = place_in_turn(store.view, turn, policy, settings, eval_now, put=put_in, quota=quota)
            for pod, node in zip(turn, placed.nodes, strict=False):
                if node is None:  # its own checks refuse the round's places left: tried again later
                    deferred.append(pod)
                    lapse[0] = min(lapse[0], rnd.active + engine.settings.round_timeout_seconds)
                else:
                    planned.append((pod, node))
        return planned

    def _room(self) -> tuple[int, int]:
        """Counters of the view's changes that can give a pod a place it lacked: a node added or
        changed; a pod gone or released from its node, a policy changed, a round opened or a place
        in one freed (:attr:`ClusterStore.room_changes`)."""
        store = self.engine.store
        return store.view.nodes_version, store.room_changes

    def _park(self, pods: list[PodInfo], until: float) -> None:
        """``pods`` wait until :meth:`_may_help`: planned again at once, each would find what it
        found now, a plan over the whole view each time (about 9 ms a pod at 5,000 nodes).

        They count against ``queue_size`` with the queued pods, as they did before the plan took
        them: pods offered while they were planned that leave the nominator over it are dropped,
        the latest first (offered with the plan's pods counted, they would have been refused)."""
        with self._queue_lock:
            if not self._waiting:
                self._waiting_until = until
                # pods already waiting keep the view's changes as they found them: one that came
                # after take() looked for it and before this plan would otherwise be missed by them
                self._waiting_room = self._room()
            self._waiting_until = min(self._waiting_until, until)
            for pod in pods:
                again = self._queue.pop(pod.uid, None)  # offered again while it was planned
                self._waiting[pod.uid] = again[0] if again is not None else pod
            # the pods offered while the plan ran are the queue's last: the plan's came out of
            # it, and the waiting ones go back to its head
            over = min(len(self._queue), len(self._queue) + len(self._waiting) - self.queue_size)
            for _ in range(over):
                self._queue.popitem(last=True)
            if over > 0:
                self.engine.metrics.nominations.labels("dropped").inc(over)

    def _may_help(self) -> bool:
        """Whether the view changed since the waiting pods were parked in a way that can give them a
        place, or their round lapsed (the next one opens for them), or they waited RECHECK_SECONDS."""
        return self._room() != self._waiting_room or self.engine.clock() >= self._waiting_until

    def _unpark(self) -> list[PodInfo]:
        with self._queue_lock:
            pods = list(self._waiting.values())
            self._waiting.clear()
            return pods

    def requeue(self, pods: list[PodInfo]) -> None:
        """Put ``pods`` back at the head of the queue, in their order."""
        with self._queue_lock:
            for pod in reversed(pods):
                if pod.uid not in self._queue:
                    self._queue[pod.uid] = (pod, float("-inf"))  # it has waited already
                    self._queue.move_to_end(pod.uid, last=False)


def _tell_end(task: asyncio.Task[None]) -> None:
    """A nominator task that ended by a fault says so: nothing else would, and the pods it would
    have nominated go kube-scheduler's usual way without a word."""
    if not task.cancelled() and task.exception() is not None:
        log.error("the nominator stopped: pods are no longer nominated", exc_info=task.exception())
