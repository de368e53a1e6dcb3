"""kube-scheduler's bind against the API server: the pod read (from the view, else the API server),
one bind of a pod in flight at a time, the engine's recheck and reservation, the Binding with the
decision's annotations, and, after a failed Binding, the view made to hold what the API server
holds. The BerthPlaced Event is queued and written in the background, once the node's room is
taken, and mostly after a storm of binds (:class:`berth.extender.binder.EventQueue`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from berth.core import HOLD_ANNOTATION, ObjectError, PodInfo, pod_from_object
from berth.extender.binder import Binder, BindError, BindingNotSent, EventQueue
from berth.extender.kube_http import CALL_TIMINGS
from berth.extender.metrics import Metrics
from berth.extender.store import Assumption, ClusterStore
from berth.extender.wire import ExtenderBindingArgs, scheduler_text

log = logging.getLogger("berth.extender")

Reserve = Callable[[PodInfo, str], tuple[dict[str, str], str] | str]
"""The engine's recheck of one node for a pod, counting the pod there as bound when it still fits:
(the Binding's annotations, the Event's message), or why not."""


class Bindings:
    def __init__(self, store: ClusterStore, binder: Binder, metrics: Metrics, reserve: Reserve) -> None:
        self._store = store
        self._binder = binder
        self._metrics = metrics
        self._reserve = reserve
        self._binding: set[str] = set()  # uids of the pods whose bind is in flight
        self.events = EventQueue(binder.record_event, metrics.events_dropped.inc)

    def __len__(self) -> int:
        """Binds in flight."""
        return len(self._binding)

    async def bind(self, args: ExtenderBindingArgs, started: float | None = None) -> dict[str, str]:
        """The bind's reply: ``Error`` empty once the Binding is created, else why not."""
        started = time.perf_counter() if started is None else started
        result, error = await self._bind(args)
        self._metrics.observe("bind", time.perf_counter() - started, result)
        if error:
            log.info("bind of %s/%s to %s refused: %s", args.PodNamespace, args.PodName, args.Node, error)
        return {"Error": scheduler_text(error)}

    async def _bind(self, args: ExtenderBindingArgs) -> tuple[str, str]:
        """The recheck and the reservation happen together under the store's lock (nothing awaits
        between them), so a concurrent bind to the same node sees the reservation; the Binding is
        created without any lock held, and a failed Binding releases the reservation. Binds of the
        same pod do not overlap: a second one while the first is in flight is refused (kube-scheduler
        retries it, and by then the pod is bound or its room is free again). The BerthPlaced Event
        is queued and written in the background (:class:`berth.extender.binder.EventQueue`)."""
        node = args.Node
        metrics = self._metrics
        steps = metrics.bind_steps
        begun = time.perf_counter()
        pod = await self._bind_pod(args)
        metrics.labelled(steps, "pod").observe(time.perf_counter() - begun)
        if pod is None:
            return "unknown_pod", (f"berth: pod {args.PodNamespace}/{args.PodName} ({args.PodUID}) is unknown; "
                                   "it may have been deleted")
        if pod.uid in self._binding:
            self._metrics.bind_conflicts.labels("in_flight").inc()
            return "conflict", f"berth: a bind of pod {pod.key} is already in flight"
        self._binding.add(pod.uid)
        self.events.bind_started()
        try:
            waited = time.perf_counter()
            with self._store.lock:  # held through the recheck, which takes it again (it is reentrant)
                checking = time.perf_counter()
                metrics.labelled(steps, "lock_wait").observe(checking - waited)
                prior = self._store.assumed.get(pod.uid)
                checked = self._reserve(pod, node)
                metrics.labelled(steps, "recheck").observe(time.perf_counter() - checking)
            if isinstance(checked, str):
                self._metrics.bind_conflicts.labels("recheck").inc()
                return "conflict", checked
            annotations, message = checked
            with self._store.lock:
                hold = self._store.claimed_hold(pod.uid) if self._store.holds else None
            if hold is not None and hold.destination == node:  # the pod says which hold it took
                annotations = {**annotations, HOLD_ANNOTATION: hold.pod.uid}
            called = time.perf_counter()
            waits: dict[str, float] = {}  # where the call waited before its request went out
            noting = CALL_TIMINGS.set(waits)
            failed: Exception | None = None
            try:
                await self._binder.bind(pod, node, annotations)
            except Exception as exc:  # kube-scheduler retries the pod
                failed = exc
            finally:
                CALL_TIMINGS.reset(noting)
            metrics.labelled(metrics.api_calls, "binding").observe(time.perf_counter() - called)
            for step in ("connection_wait", "connect", "answer"):
                metrics.labelled(steps, step).observe(waits.get(step, 0.0))
            if failed is not None:
                await self._after_failed_bind(pod, prior, sent=not isinstance(failed, BindingNotSent))
                if isinstance(failed, BindError):  # the API server's refusal, already worded
                    return "bind_failed", str(failed)
                log.error("bind of %s to %s failed", pod.key, node, exc_info=failed)  # the network, or worse
                return "bind_failed", f"berth: bind of {pod.key} to {node} failed: {failed}"
        finally:
            self._binding.discard(pod.uid)
        if message:
            self.events.offer(pod, node, message)
        return "bound", ""

    async def _after_failed_bind(self, pod: PodInfo, prior: Assumption | None, *, sent: bool = True) -> None:
        """After a Binding failed, make the view hold what the API server holds. A refusal does not
        mean the pod runs nowhere: an earlier Binding (whose reply timed out) or another scheduler
        may have bound it, and the API server then answers Conflict while the pod takes room on
        its node. So the pod is read again and counted as the API server shows it. When it cannot
        be read, or the Binding was not ``sent`` at all (no read is added to an API server too busy
        to take the Binding), an earlier bind's assumption is put back (that Binding may have been
        created) and anything else is released."""
        with self._store.lock:
            self._store.release(pod.uid)
        raw = None
        if sent:
            try:
                raw = await self._binder.fetch_pod(pod.namespace, pod.name)
            except Exception as exc:
                log.warning("cannot read pod %s after its failed bind: %s", pod.key, exc)
        with self._store.lock:
            if raw is not None and _uid(raw) == pod.uid:
                self._store.apply_pod(raw)
            elif prior is not None and prior.bound and pod.uid not in self._store.assumed:
                self._store.restore(prior)

    async def _bind_pod(self, args: ExtenderBindingArgs) -> PodInfo | None:
        with self._store.lock:
            pod = self._store.known_pod(args.PodUID)
        if pod is not None:
            return replace(pod, node_name=None)
        raw = await self._binder.fetch_pod(args.PodNamespace, args.PodName)
        if raw is None:
            return None
        try:
            fetched = pod_from_object(raw)
        except ObjectError:
            return None
        if fetched.uid != args.PodUID:
            return None
        return replace(fetched, node_name=None)


def _uid(raw: Mapping[str, Any]) -> str:
    meta = raw.get("metadata")
    return str(meta.get("uid") or "") if isinstance(meta, Mapping) else ""
