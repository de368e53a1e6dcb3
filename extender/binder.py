"""Where a bind lands: the API server (Binding with the decision annotations, then an Event) or,
offline, the view itself; and the Event that tells a pod no node takes why (``BerthRefused``).

:class:`KubeBinder` creates the Binding (``pods/binding``), which carries the decision annotation
(and the round annotation) onto the pod, and writes the Event on the pod as a separate step. Its
calls are made on the event loop, on pools of kept-alive connections
(:class:`berth.extender.kube_http.ApiSession`; the Bindings on a pool of their own): no worker
thread, no model classes of the kubernetes client, whose configuration (kubeconfig or in-cluster)
it is built from.

The BerthPlaced Event is off the bind path: the engine hands it to an :class:`EventQueue`, which
writes it in the background at a bounded rate, slower while binds keep coming (an Event is a
second API write per pod, and during a bind storm the API server's time goes to the Bindings
first), and drops it first when the queue is full (``berth_events_dropped_total``). The
Binding's annotation carries the decision on every pod whatever happens to the Event, so a
dropped Event loses the sentence ``kubectl describe`` shows under Events, never the record.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any, Protocol
from urllib.parse import quote

import orjson

from berth.core import API_GROUP, CRD_VERSION, NODEDRAIN_PLURAL, PodInfo, format_time
from berth.extender.kube_http import ApiError, ApiSession, NoConnection
from berth.extender.store import NOMINATION_MANAGER, ClusterStore

log = logging.getLogger("berth.extender.binder")

COMPONENT = "berth-extender"


class BindError(RuntimeError):
    """The API server refused a step of the bind; the message is what kube-scheduler shows."""


class BindingNotSent(BindError):
    """The Binding was never sent (no connection to the API server came free in time): the pod is
    certainly not bound by it."""


class NominationRefused(BindError):
    """The API server refused a nomination as invalid (422): the pod was bound meanwhile, another
    node was nominated first (the write tests that none is), or the pod was recreated."""


class Binder(Protocol):
    async def bind(self, pod: PodInfo, node: str, annotations: Mapping[str, str]) -> None:
        """Place the pod; BindError (or any failure) means it is not placed."""
        ...

    async def record_event(self, pod: PodInfo, node: str, message: str) -> None:
        """Tell the pod's reader why it landed there. Best effort: the engine logs a failure and the
        bind stands (the pod's annotation holds the decision)."""
        ...

    async def record_refused(self, pod: PodInfo, message: str) -> None:
        """Tell the reader of a pod no node takes which nodes berth refused and why (a Warning
        Event, ``BerthRefused``). Best effort, like :meth:`record_event`."""
        ...

    async def fetch_pod(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    async def nominate(self, pod: PodInfo, node: str) -> None:
        """Set the pending pod's ``status.nominatedNodeName`` (:mod:`berth.extender.nominator`)."""
        ...

    async def withdraw_nomination(self, pod: PodInfo, node: str) -> None:
        """Clear the pod's ``status.nominatedNodeName`` if it is still ``node``."""
        ...

    async def fetch_drain(self, name: str) -> dict[str, Any] | None:
        """The NodeDrain ``name`` as the API server has it, or None when there is none."""
        ...


EVENT_QUEUE_CAPACITY = 5000
"""BerthPlaced Events waiting to be written; beyond this a new one is dropped (and counted). Large
enough for a storm of a few thousand binds to have all its Events written once it ends."""
EVENT_RATE_PER_SECOND = 50.0
"""BerthPlaced Events written per second at most, in bursts of up to :data:`EVENT_BURST`: a bind
storm leaves the API server's write capacity to the Bindings (kube-scheduler's own event
recorder rate-limits its Events the same way)."""
EVENT_BURST = 50
EVENT_BUSY_RATE_PER_SECOND = 5.0
"""BerthPlaced Events written per second, without burst, while binds keep coming (a bind began
within :data:`EVENT_QUIET_SECONDS`): the Events of a bind storm wait for its end, except these."""
EVENT_QUIET_SECONDS = 1.0


class EventQueue:
    """BerthPlaced Events written in the background, one at a time, at most :data:`EVENT_RATE_PER_SECOND`
    a second (a token bucket of :data:`EVENT_BURST`), and at most :data:`EVENT_BUSY_RATE_PER_SECOND`
    without burst while binds keep coming (:meth:`bind_started` within ``quiet`` seconds); when
    :data:`EVENT_QUEUE_CAPACITY` Events wait, a new one is dropped and ``dropped`` is called. A failed
    write is logged and forgotten."""

    def __init__(self, write: Callable[[PodInfo, str, str], Awaitable[None]], dropped: Callable[[], None], *,
                 capacity: int = EVENT_QUEUE_CAPACITY, rate: float = EVENT_RATE_PER_SECOND,
                 burst: int = EVENT_BURST, busy_rate: float = EVENT_BUSY_RATE_PER_SECOND,
                 quiet: float = EVENT_QUIET_SECONDS, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.write = write
        self.dropped = dropped
        self.capacity = capacity
        self.rate = rate
        self.burst = burst
        self.busy_rate = busy_rate
        self.quiet = quiet
        self.clock = clock
        self.sleep = sleep
        self._busy_until = float("-inf")
        self._queue: asyncio.Queue[tuple[PodInfo, str, str]] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._worker: asyncio.Task[None] | None = None

    def offer(self, pod: PodInfo, node: str, message: str) -> bool:
        """Queue one Event (from the event loop); False when it was dropped."""
        loop = asyncio.get_running_loop()
        if self._queue is None or self._loop is not loop:
            # An asyncio queue belongs to one loop: the Events of a loop that has gone cannot be
            # written any more, and a new loop (an app served again) gets a queue of its own.
            self._queue, self._loop, self._worker = asyncio.Queue(self.capacity), loop, None
        try:
            self._queue.put_nowait((pod, node, message))
        except asyncio.QueueFull:
            self.dropped()
            return False
        if self._worker is None or self._worker.done():
            self._worker = loop.create_task(self._run(self._queue))
        return True

    def bind_started(self) -> None:
        """A bind began: Events keep to the busy rate until none has begun for ``quiet`` seconds."""
        self._busy_until = self.clock() + self.quiet

    def queued(self) -> int:
        """Events waiting to be written."""
        return self._queue.qsize() if self._queue is not None else 0

    async def drain(self) -> None:
        """Wait until every queued Event has been written (or has failed)."""
        if self._queue is not None:
            await self._queue.join()

    async def _run(self, queue: asyncio.Queue[tuple[PodInfo, str, str]]) -> None:
        tokens, last = float(self.burst), self.clock()
        while True:
            pod, node, message = await queue.get()
            try:
                while True:  # the rate is asked again after each wait: a storm may begin or end meanwhile
                    now = self.clock()
                    busy = now < self._busy_until
                    rate = self.busy_rate if busy else self.rate
                    tokens = min(1.0 if busy else float(self.burst), tokens + (now - last) * rate)
                    last = now
                    if tokens >= 1 - 1e-9:  # (a wait's worth of tokens may fall short by a rounding)
                        break
                    await self.sleep((1 - tokens) / rate)
                tokens = max(tokens - 1, 0.0)
                await self.write(pod, node, message)
            except Exception as exc:  # informative only: the pod is bound and its annotation holds the decision
                log.warning("cannot record an Event on pod %s: %s", pod.key, exc)
            finally:
                queue.task_done()


class MemoryBinder:
    """Offline mode: the bind records the pod as placed in the view; no API server is involved."""

    def __init__(self, store: ClusterStore) -> None:
        self.store = store
        self.annotations: dict[str, dict[str, str]] = {}

    async def bind(self, pod: PodInfo, node: str, annotations: Mapping[str, str]) -> None:
        with self.store.lock:
            self.store.confirm_placed(replace(pod, node_name=node))
            self.annotations[pod.key] = dict(annotations)

    async def record_event(self, pod: PodInfo, node: str, message: str) -> None:
        """Offline there is no pod object to carry an Event: the decision API holds the record."""

    async def record_refused(self, pod: PodInfo, message: str) -> None:
        """Offline: the decision API holds the record."""

    async def fetch_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return None

    async def nominate(self, pod: PodInfo, node: str) -> None:
        """Offline no scheduler reads a nomination: nothing is written."""

    async def withdraw_nomination(self, pod: PodInfo, node: str) -> None:
        """Offline nothing was written."""

    async def fetch_drain(self, name: str) -> dict[str, Any] | None:
        """Offline there is no API server, hence no NodeDrain."""
        return None


BINDING_CONNECTIONS = 64
"""Connections the Bindings keep to the API server at most. kube-scheduler binds each pod in a
goroutine of its own, over HTTP/2 streams it does not bound: a Binding waiting here for a
connection is time berth adds to the bind, so the pool is large enough for the Bindings in flight
at a few hundred binds a second while the API server takes ~100 ms a Binding. Not larger: when
the API server takes seconds a Binding, more connections move the wait into the API server
rather than shorten it, and each new one costs it a TLS handshake at its busiest (measured with
256: four times the handshakes, the binds no faster)."""


BINDING_CONNECTIONS_WARM = BINDING_CONNECTIONS
"""Connections of the Bindings' pool opened ahead of the binds and kept open while the pool is idle
(:meth:`berth.extender.kube_http.ApiSession.warm`), so that no bind of a burst pays a TLS
handshake: the whole pool, which the first binds of a burst open whole when it is cold."""
BINDING_QUEUE_SECONDS = 3.0
"""How long a Binding waits for a free connection of its pool at most; then it is not sent and the
bind fails. kube-scheduler gives up on an extender's bind after its ``httpTimeout`` (5 s by
default) and retries the pod: a Binding sent after that is work for an API server that is already
behind, for a bind nobody waits for, and its retry then only meets Conflict. Failing early instead
sends kube-scheduler's retry of the pod through its backoff, which is what lets a saturated API
server catch up (measured at 5,000 nodes: berth's bind p99 reached 4.9 s with the connection wait
at 1.9 s p50, and on a busier run binds that passed 5 s were retried, 7,377 binds for 5,000 pods)."""
WARM_INTERVAL_SECONDS = 20.0
"""How often an idle pool's connections are used again: well within its keep-alive (60 s), after
which an idle connection is closed."""


class KubeBinder:
    """Creates Bindings and Events, and reads pods and NodeDrains, with berth's own rights, on the
    event loop through two :class:`~berth.extender.kube_http.ApiSession` pools built from the kubernetes
    client's configuration (``api_client.configuration``): the Bindings on a pool of their own
    (``bindings_api``), so that no Binding waits for a connection that a nomination, an Event or a
    read holds; everything else on ``api``."""

    def __init__(self, api_client: Any, *, record_events: bool = True, warm: int = BINDING_CONNECTIONS_WARM,
                 warm_interval: float = WARM_INTERVAL_SECONDS, queue_seconds: float = BINDING_QUEUE_SECONDS) -> None:
        self.api = ApiSession(api_client.configuration)
        self.bindings_api = ApiSession(api_client.configuration, connections=BINDING_CONNECTIONS,
                                       connect_timeout=queue_seconds)
        self.record_events = record_events
        self.warm = warm
        self.warm_interval = warm_interval
        self._warming: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Open ``warm`` connections for the Bindings now and keep them open (the app's start, on
        its event loop): every ``warm_interval`` seconds that finds no Binding under way they are
        used again, and any the API server closed meanwhile is opened again, so that a burst of
        binds after a quiet while finds them ready."""
        if self.warm > 0 and (self._warming is None or self._warming.done()):
            self._warming = asyncio.get_running_loop().create_task(self._keep_warm())

    async def _keep_warm(self) -> None:
        while True:
            try:
                await self.bindings_api.warm(self.warm)
            except Exception as exc:  # a warm connection only spares a later bind its handshake
                log.debug("cannot open the Bindings' connections ahead: %s", exc)
            await asyncio.sleep(self.warm_interval)

    async def close(self) -> None:
        """Stop keeping connections warm and close the connections to the API server (the app's
        shutdown)."""
        warming, self._warming = self._warming, None
        if warming is not None:
            warming.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await warming
        await self.bindings_api.close()
        await self.api.close()

    async def bind(self, pod: PodInfo, node: str, annotations: Mapping[str, str]) -> None:
        # The Binding carries the decision annotation: the API server copies a Binding's annotations
        # onto the pod as it sets spec.nodeName, so one write both binds and records (no PATCH), and
        # metadata.uid makes it a precondition (a recreated pod of the same name is not touched).
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid,
                         "annotations": dict(annotations)},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        try:
            await self.bindings_api.request(
                "POST", f"/api/v1/namespaces/{_seg(pod.namespace)}/pods/{_seg(pod.name)}/binding", body)
        except ApiError as exc:
            raise BindError(f"cannot bind pod {pod.key} to {node}: {_api_reason(exc)}") from None
        except NoConnection as exc:
            raise BindingNotSent(f"cannot bind pod {pod.key} to {node} now: {exc}") from None

    async def nominate(self, pod: PodInfo, node: str) -> None:
        # A nomination is set only where none is (KEP-5278's rule for components other than
        # kube-scheduler), so a second extender replica or kube-scheduler's preemption is never
        # overwritten.
        await self._patch_nomination(pod, [{"op": "test", "path": "/status/nominatedNodeName", "value": None},
                                           {"op": "add", "path": "/status/nominatedNodeName", "value": node}],
                                     f"cannot nominate {node} for pod {pod.key}", refused=(422,))

    async def withdraw_nomination(self, pod: PodInfo, node: str) -> None:
        # Only berth's own nomination is removed: the pod may have been bound, or nominated anew by
        # kube-scheduler's preemption, meanwhile.
        await self._patch_nomination(pod, [{"op": "test", "path": "/status/nominatedNodeName", "value": node},
                                           {"op": "remove", "path": "/status/nominatedNodeName"}],
                                     f"cannot withdraw the nomination of {node} for pod {pod.key}",
                                     refused=(404, 422))

    async def _patch_nomination(self, pod: PodInfo, ops: list[dict[str, Any]], failure: str,
                                refused: tuple[int, ...]) -> None:
        """A JSON patch of the pod's status subresource that tests first that it is the same pod (a
        pod recreated under the same name is not touched), then ``ops``: the API server's refusals
        with a status in ``refused`` raise NominationRefused, any other failure BindError."""
        body = [{"op": "test", "path": "/metadata/uid", "value": pod.uid}, *ops]
        try:
            await self.api.request("PATCH", f"/api/v1/namespaces/{_seg(pod.namespace)}/pods/{_seg(pod.name)}/status"
                                   f"?fieldManager={NOMINATION_MANAGER}", body,
                                   content_type="application/json-patch+json")
        except ApiError as exc:
            error = NominationRefused if exc.status in refused else BindError
            raise error(f"{failure}: {_api_reason(exc)}") from None

    async def record_event(self, pod: PodInfo, node: str, message: str) -> None:
        if self.record_events and message:
            await self._event(pod, "BerthPlaced", "Normal", message)

    async def record_refused(self, pod: PodInfo, message: str) -> None:
        if self.record_events and message:
            await self._event(pod, "BerthRefused", "Warning", message)

    async def _event(self, pod: PodInfo, reason: str, kind: str, message: str) -> None:
        now = format_time(time.time())
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{pod.name}.", "namespace": pod.namespace},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": pod.name, "namespace": pod.namespace,
                               "uid": pod.uid},
            "reason": reason,
            "message": message[:1024],
            "type": kind,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": COMPONENT,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            await self.api.request("POST", f"/api/v1/namespaces/{_seg(pod.namespace)}/events", event)
        except ApiError as exc:  # an Event is informative: its failure does not stop the bind
            log.warning("cannot record an Event on pod %s: %s", pod.key, _api_reason(exc))

    async def fetch_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return await self._fetch(f"/api/v1/namespaces/{_seg(namespace)}/pods/{_seg(name)}", f"pod {namespace}/{name}")

    async def fetch_drain(self, name: str) -> dict[str, Any] | None:
        return await self._fetch(f"/apis/{API_GROUP}/{CRD_VERSION}/{NODEDRAIN_PLURAL}/{_seg(name)}",
                                 f"NodeDrain {name}")

    async def _fetch(self, path: str, what: str) -> dict[str, Any] | None:
        """The object at ``path`` as the API server holds it, None when there is none."""
        try:
            raw = await self.api.request("GET", path)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise BindError(f"cannot read {what}: {_api_reason(exc)}") from None
        data = orjson.loads(raw)
        return data if isinstance(data, dict) else None


def _seg(name: str) -> str:
    """``name`` as one segment of a request path."""
    return quote(name, safe="")


def _api_reason(exc: ApiError) -> str:
    body = exc.body
    if body:
        try:
            status = orjson.loads(body)
            if isinstance(status, dict) and status.get("message"):
                return f"{status.get('reason') or exc.status}: {status['message']}"
        except orjson.JSONDecodeError:
            pass
    return f"{exc.status} {exc.reason}".strip()
