"""One extender replica nominates: a ``coordination.k8s.io/v1`` Lease elects it.

Every replica answers filter, prioritize and bind, but only one plans and writes nominations
(:mod:`berth.extender.nominator`): two planners would both place the same pending pods and race
for their ``status.nominatedNodeName`` (the write's test op keeps the first, so the other's plan is
wasted work and a wrong count on its nodes until its write is refused).

The election is client-go's (``tools/leaderelection``), which kube-scheduler and the controllers
run, on the extender's event loop with its asyncio API client (:mod:`berth.extender.kube_http`):

- a candidate reads the Lease every ``retry_period``; it takes it when there is none, when it
  names no holder, or when its record has not changed for ``lease_duration`` as this replica's
  clock measures it (the holder's renew time is not compared with this clock: clocks differ);
- the holder renews it every ``retry_period``; when no renewal has succeeded for
  ``renew_deadline`` (less than ``lease_duration``, so it stops before another may take over), or
  a read shows another holder, it stops leading and becomes a candidate again;
- every write is an update of the version read (``metadata.resourceVersion``): of two candidates
  writing at once the API server keeps one and answers the other 409;
- at shutdown the holder releases the Lease (no holder, one second long) so a standby takes over
  at its next retry rather than after ``lease_duration``.

A write of a nomination already in flight when leadership is lost may still land after another
replica leads: the write's test op (no node nominated yet) keeps it from overwriting anything.
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import orjson

from berth.extender.kube_http import ApiError, ApiSession, ApiUnreachable

if TYPE_CHECKING:
    from berth.extender.settings import ExtenderSettings

log = logging.getLogger("berth.extender.leader")

JITTER = 1.2
"""A candidate waits ``retry_period`` times a random factor in [1, 1.2] between tries, as client-go
does, so that candidates started together do not keep colliding."""

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


class Requester(Protocol):
    """What the elector needs of :class:`berth.extender.kube_http.ApiSession`."""

    async def request(self, method: str, path: str, body: Any = None, *,
                      content_type: str = "application/json") -> bytes: ...


@runtime_checkable
class Closing(Protocol):
    async def close(self) -> None: ...


CONNECTIONS = 2
"""The elector's own connections to the API server: renewals never wait behind binds."""


class Outcome(Enum):
    """What one try to acquire or renew the Lease found."""

    HELD = "held"  # this replica holds the Lease (taken or renewed)
    OTHER = "other"  # another holder's Lease has not expired
    FAILED = "failed"  # the API server refused or did not answer (a conflict, a timeout, ...)


@dataclass(frozen=True)
class LeaseTimes:
    """client-go's three durations (kube-scheduler's defaults 15 s, 10 s, 2 s)."""

    lease_duration: int  # seconds a Lease not renewed keeps others off (whole seconds: the Lease's field)
    renew_deadline: float  # the holder stops leading when it could not renew for this long
    retry_period: float  # between tries, to acquire or to renew

    def __post_init__(self) -> None:
        if not self.lease_duration > self.renew_deadline > JITTER * self.retry_period > 0:
            raise ValueError(f"the leader election's durations must satisfy lease duration "
                             f"({self.lease_duration}s) > renew deadline ({self.renew_deadline:g}s) > "
                             f"{JITTER:g} x retry period ({self.retry_period:g}s) > 0")


def micro_time(when: datetime) -> str:
    """A Kubernetes MicroTime (RFC 3339 with microseconds, UTC)."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def default_identity() -> str:
    """The pod's name (``POD_NAME``, the chart sets it) is the usual identity; without one, the
    host name and a random suffix, as kube-scheduler makes it, so that two processes on one host
    are two candidates."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def default_namespace() -> str:
    """The namespace of the pod's service account when running in a cluster, else ``default``."""
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or "default"
    except OSError:
        return "default"


class LeaseElector:
    """Holds or waits for the Lease ``namespace/name`` as ``identity``; :attr:`leading` says whether
    it holds it now, and ``on_change`` is called (on the loop) each time that changes."""

    def __init__(self, api: Requester, *, namespace: str, name: str, identity: str, times: LeaseTimes,
                 on_change: Callable[[bool], None] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], datetime] = lambda: datetime.now(UTC),
                 jitter: Callable[[], float] = random.random) -> None:
        self.api = api
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.times = times
        self.on_change = on_change
        self.clock = clock
        self.wall = wall
        self.jitter = jitter
        self.leading = False
        self.holder: str | None = None  # the holder the last read showed
        self._observed: tuple[Any, ...] | None = None  # the Lease's spec as last seen ...
        self._observed_at = 0.0  # ... and when it last changed, by this replica's clock
        self._task: asyncio.Task[None] | None = None
        self._warned = ""

    @property
    def path(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases/{self.name}"

    # -- one try -------------------------------------------------------------------------------

    async def try_acquire_or_renew(self) -> Outcome:
        """Read the Lease and take or renew it if this replica may (client-go's
        ``tryAcquireOrRenew``)."""
        now, stamp = self.clock(), micro_time(self.wall())
        try:
            lease = orjson.loads(await self.api.request("GET", self.path))
        except ApiError as exc:
            if exc.status != 404:
                return self._failed(f"cannot read the Lease {self.namespace}/{self.name}", exc)
            return await self._create(now, stamp)
        except ApiUnreachable as exc:
            return self._failed("cannot read the Lease", exc)
        spec = lease.get("spec") or {}
        self._observe(spec, now)
        holder = spec.get("holderIdentity") or ""
        duration = spec.get("leaseDurationSeconds") or self.times.lease_duration
        if holder and holder != self.identity and self._observed_at + duration > now:
            return Outcome.OTHER
        ours = holder == self.identity
        transitions = int(spec.get("leaseTransitions") or 0)
        spec = {**spec, "holderIdentity": self.identity, "leaseDurationSeconds": self.times.lease_duration,
                "renewTime": stamp, "acquireTime": spec.get("acquireTime") if ours else stamp,
                "leaseTransitions": transitions if ours else transitions + 1}
        lease["spec"] = spec  # metadata.resourceVersion kept: the update applies to the version read
        try:
            await self.api.request("PUT", self.path, lease)
        except (ApiError, ApiUnreachable) as exc:  # 409: another candidate wrote first
            return self._failed(f"cannot {'renew' if ours else 'take'} the Lease {self.namespace}/{self.name}", exc)
        self._observe(spec, now)
        return Outcome.HELD

    async def _create(self, now: float, stamp: str) -> Outcome:
        spec = {"holderIdentity": self.identity, "leaseDurationSeconds": self.times.lease_duration,
                "acquireTime": stamp, "renewTime": stamp, "leaseTransitions": 0}
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace}, "spec": spec}
        try:
            await self.api.request("POST", self.path.rsplit("/", 1)[0], body)
        except (ApiError, ApiUnreachable) as exc:  # 409: another candidate made it first
            return self._failed(f"cannot create the Lease {self.namespace}/{self.name}", exc)
        self._observe(spec, now)
        return Outcome.HELD

    def _observe(self, spec: dict[str, Any], now: float) -> None:
        record = tuple(spec.get(k) for k in ("holderIdentity", "leaseDurationSeconds", "acquireTime", "renewTime",
                                             "leaseTransitions"))
        if record != self._observed:
            self._observed, self._observed_at = record, now
        self.holder = spec.get("holderIdentity") or None
        self._warned = ""

    def _failed(self, what: str, exc: Exception) -> Outcome:
        """A conflict (another candidate wrote first) is the election at work: logged at debug
        level. Anything else (refused by RBAC, no answer) is a warning, once until it changes."""
        text = f"{what}: {exc}"
        if isinstance(exc, ApiError) and exc.status == 409:
            log.debug("%s", text)
        elif text != self._warned:
            self._warned = text
            log.warning("%s (tried again every %gs)", text, self.times.retry_period)
        return Outcome.FAILED

    # -- the loop ------------------------------------------------------------------------------

    def start(self) -> None:
        """Run the election on the running loop until :meth:`stop`."""
        self._task = asyncio.get_running_loop().create_task(self.run())

    async def stop(self) -> None:
        """Stop, and release the Lease if this replica holds it."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if self.leading:
            self._set(False)
            await self.release()
        if isinstance(self.api, Closing):
            await self.api.close()

    async def run(self) -> None:
        times = self.times
        while True:
            while await self.try_acquire_or_renew() is not Outcome.HELD:
                await asyncio.sleep(times.retry_period * (1 + (JITTER - 1) * self.jitter()))
            renewed = self.clock()
            self._set(True)
            while True:
                await asyncio.sleep(times.retry_period)
                left = renewed + times.renew_deadline - self.clock()
                try:
                    outcome = await asyncio.wait_for(self.try_acquire_or_renew(), timeout=max(left, 0.001))
                except TimeoutError:
                    outcome = Outcome.FAILED
                if outcome is Outcome.HELD:
                    renewed = self.clock()
                elif outcome is Outcome.OTHER or self.clock() - renewed >= times.renew_deadline:
                    break
            self._set(False)

    async def release(self) -> None:
        """Give the Lease up (no holder, one second long) if this replica still holds it."""
        try:
            lease = orjson.loads(await self.api.request("GET", self.path))
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.identity:
                return
            stamp = micro_time(self.wall())
            lease["spec"] = {**spec, "holderIdentity": None, "leaseDurationSeconds": 1, "renewTime": stamp,
                             "acquireTime": stamp}
            await self.api.request("PUT", self.path, lease)
        except (ApiError, ApiUnreachable, ValueError) as exc:
            log.warning("cannot release the Lease %s/%s (another replica takes over when it expires): %s",
                        self.namespace, self.name, exc)

    def _set(self, leading: bool) -> None:
        if leading == self.leading:
            return
        self.leading = leading
        if leading:
            log.info("%s holds the Lease %s/%s: this replica nominates", self.identity, self.namespace, self.name)
        else:
            log.warning("%s no longer holds the Lease %s/%s: this replica stops nominating", self.identity,
                        self.namespace, self.name)
        if self.on_change is not None:
            self.on_change(leading)



def nominator_elector(settings: ExtenderSettings, configuration: Any) -> LeaseElector | None:
    """The election of the replica that nominates, against the API server of ``configuration`` (a
    ``kubernetes.client.Configuration``), or None when the extender does not nominate or
    ``BERTH_LEADER_ELECT`` is off."""
    if not (settings.nominate and settings.leader_elect):
        return None
    elector = LeaseElector(ApiSession(configuration, connections=CONNECTIONS), namespace=settings.lease_namespace(),
                           name=settings.leader_lease_name, identity=settings.lease_identity(),
                           times=settings.lease_times())
    log.info("nominating only while holding the Lease %s/%s as %s", elector.namespace, elector.name, elector.identity)
    return elector
