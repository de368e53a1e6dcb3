"""The Kopf handlers of the operator, registered on a registry of their own by
:func:`build_registry` (nothing is registered at import time).

- Indexes of Nodes, Pods and node Leases (``@kopf.index``): the operator's only copy of the
  cluster; nothing lists on events.
- ``on.create`` / ``on.update`` (of the spec) / ``on.resume`` of a PlacementPolicy and a
  ``timer`` every ``resync_seconds`` compute the policy's status (:mod:`.reconcile`) and patch
  only what differs from the status the object has (a status patch is no essence change for
  Kopf, so it triggers no handler: the operator never loops on its own writes).
- The timer needs no finalizer (deleting a policy must not wait for the operator): it is
  registered without one and stopped by its ``when`` filter once the policy's DELETED event is
  seen.
- The validating admission webhook (``on.validate``), when a webhook server is configured.
- NodeDrains (Plan and Execute mode) and their admission check (:mod:`.drain`,
  :mod:`.drain_execute`), planned on the same view;
  their re-plan timer has no finalizer either.

Every handler is a coroutine: Kopf would run plain functions in a thread pool, where they
would read the indexes while the event loop changes them (and pay a thread hop per Pod event).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass, field
from typing import Any

import kopf

from berth.core.settings import Settings
from berth.core.view import ClusterView
from berth.operator import drain
from berth.operator.admission import REFUSAL_CODE, admission_problem
from berth.operator.cluster import LeaseIndex, NodeIndex, PodIndex, ViewCache
from berth.operator.crdgen import GROUP, PLURAL, VERSION
from berth.operator.drain_execute import DrainApi
from berth.operator.patches import merge_patch
from berth.operator.reconcile import Outcome, compute_status
from berth.operator.records import NODE_LEASE_NAMESPACE, lease_record, node_record, pod_record
from berth.operator.webhook import WEBHOOK_ID, WebhookOptions

log = logging.getLogger("berth.operator")

NODES_INDEX = "berth_nodes"
PODS_INDEX = "berth_pods"
LEASES_INDEX = "berth_leases"
TIMER_ID = "status-refresh"
POLICY = (GROUP, VERSION, PLURAL)


@dataclass(frozen=True)
class OperatorConfig:
    settings: Settings = field(default_factory=Settings)
    resync_seconds: float = 5.0  # how often each policy's status is recomputed (pods placed, nodes...)
    track_leases: bool = True  # node liveness by kube-node-lease Leases, as the extender judges it
    view_min_age: float = 1.0  # the shared cluster view is rebuilt at most this often
    plan_period: float = 10.0  # with pending pods, the plan is redone this often for changes elsewhere
    webhook: WebhookOptions = field(default_factory=WebhookOptions)
    drain_api: Callable[[], DrainApi] | None = None  # what an executing NodeDrain cordons and evicts with


@dataclass(frozen=True)
class _Memo:
    inputs: tuple[object, ...]
    status: dict[str, Any]
    pending: bool


class OperatorState:
    """What the handlers share: the configuration, the cluster view cache, change counters, the
    last status computed per policy, and the policies whose DELETED event was seen (their timers
    stop).

    A policy's status is recomputed only when its inputs may have changed: its generation or a pod
    of its namespace; and, while it has pending pods (their plan reads the whole cluster, and a
    Lease ages without events), every ``plan_period`` seconds -- not on every change elsewhere in
    the cluster, which would cost a plan per policy per resync in a busy cluster. Otherwise a
    resync costs a dict comparison."""

    DELETED_KEPT = 10000

    def __init__(self, config: OperatorConfig) -> None:
        self.config = config
        self.views = ViewCache(min_age=config.view_min_age)
        self.namespace_changes: dict[str, int] = {}
        self._memo: dict[str, _Memo] = {}
        self._deleted: OrderedDict[str, None] = OrderedDict()
        self.writes = 0  # status patches made, for tests and logs
        self.computations = 0

    def pod_changed(self, namespace: str | None) -> None:
        key = namespace or "default"
        self.namespace_changes[key] = self.namespace_changes.get(key, 0) + 1
        self.views.changed()

    def forget(self, uid: str) -> None:
        self._memo.pop(uid, None)
        self._deleted[uid] = None
        while len(self._deleted) > self.DELETED_KEPT:
            self._deleted.popitem(last=False)

    def is_live(self, uid: str | None) -> bool:
        return uid not in self._deleted

    def compute(self, body: Mapping[str, Any], indexes: Mapping[str, Any], now: float | None = None) -> Outcome:
        nodes: NodeIndex = indexes[NODES_INDEX]
        pods: PodIndex = indexes[PODS_INDEX]
        leases: LeaseIndex | None = indexes.get(LEASES_INDEX) if self.config.track_leases else None
        namespace = str((body.get("metadata") or {}).get("namespace") or "default")
        return compute_status(body, pods.get(namespace, ()), lambda: self.views.view(nodes, pods, leases),
                              self.config.settings, time.time() if now is None else now, nodes=nodes)

    def _inputs(self, raw: Mapping[str, Any], pending: bool, now: float,
                nodes: Container[str] | None) -> tuple[object, ...]:
        meta = raw.get("metadata") or {}
        namespace = str(meta.get("namespace") or "default")
        cluster = int(now // self.config.plan_period) if pending else None
        return meta.get("generation"), self.namespace_changes.get(namespace, 0), cluster, _includes_seen(raw, nodes)

    def refresh(self, body: kopf.Body, patch: kopf.Patch, indexes: Mapping[str, Any],
                now: float | None = None) -> Outcome | None:
        """Compute the status of the policy ``body``, patch what changed and post the Events.
        None when nothing it depends on changed since the status it has was computed."""
        now = time.time() if now is None else now
        raw = _plain(body)
        meta = raw.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        current = raw.get("status") or {}
        memo = self._memo.get(uid)
        nodes = indexes.get(NODES_INDEX)
        if memo is not None and memo.inputs == self._inputs(raw, memo.pending, now, nodes) and memo.status == current:
            return None
        with_plan, without_plan = self._inputs(raw, True, now, nodes), self._inputs(raw, False, now, nodes)
        outcome = self.compute(raw, indexes, now)
        self.computations += 1
        pending = bool(outcome.status.get("pending"))
        self._memo[uid] = _Memo(with_plan if pending else without_plan, outcome.status, pending)
        diff = merge_patch(current, outcome.status)
        if diff:
            patch.status.update(diff)
            self.writes += 1
        for event in outcome.events:
            kopf.event(body, type=event.type, reason=event.reason, message=event.message)
        return outcome


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


def _indexes(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    return {name: kwargs[name] for name in (NODES_INDEX, PODS_INDEX, LEASES_INDEX) if name in kwargs}


def build_registry(config: OperatorConfig) -> tuple[kopf.OperatorRegistry, OperatorState]:
    registry = kopf.OperatorRegistry()
    state = OperatorState(config)

    kopf.on.login(registry=registry)(kopf.login_via_client)

    # -- the cluster, as indexes ----------------------------------------------------------------

    @kopf.index("v1", "nodes", id=NODES_INDEX, registry=registry)
    async def index_nodes(body: kopf.Body, name: str, **_: Any) -> dict[str, Any]:
        info = node_record(body)
        return {name: info} if info is not None else {}

    @kopf.index("v1", "pods", id=PODS_INDEX, registry=registry)
    async def index_pods(body: kopf.Body, namespace: str | None, **_: Any) -> dict[str, Any]:
        record = pod_record(body)
        return {namespace or "default": record} if record is not None else {}

    @kopf.on.event("v1", "nodes", registry=registry)
    async def node_changed(**_: Any) -> None:
        state.views.changed()

    @kopf.on.event("v1", "pods", registry=registry)
    async def pod_changed(namespace: str | None, **_: Any) -> None:
        state.pod_changed(namespace)

    if config.track_leases:
        def node_lease(namespace: str | None, **_: Any) -> bool:
            return namespace == NODE_LEASE_NAMESPACE

        @kopf.index("coordination.k8s.io", "v1", "leases", id=LEASES_INDEX, when=node_lease, registry=registry)
        async def index_leases(body: kopf.Body, **_: Any) -> dict[str, Any]:
            record = lease_record(body)
            return {record[0]: record[1]} if record is not None else {}

        @kopf.on.event("coordination.k8s.io", "v1", "leases", when=node_lease, registry=registry)
        async def lease_changed(**_: Any) -> None:
            state.views.changed()

    # -- the policies ---------------------------------------------------------------------------

    @kopf.on.event(*POLICY, registry=registry)
    async def policy_event(type: str | None, uid: str | None, **_: Any) -> None:
        if type == "DELETED" and uid:
            state.forget(uid)

    def still_there(uid: str | None, **_: Any) -> bool:
        return state.is_live(uid)

    async def refresh(body: kopf.Body, patch: kopf.Patch, **kwargs: Any) -> None:
        state.refresh(body, patch, _indexes(kwargs))

    kopf.on.resume(*POLICY, id="status-on-resume", registry=registry)(refresh)
    kopf.on.create(*POLICY, id="status-on-create", registry=registry)(refresh)
    kopf.on.update(*POLICY, id="status-on-update", field="spec", registry=registry)(refresh)
    kopf.timer(*POLICY, id=TIMER_ID, interval=config.resync_seconds, initial_delay=config.resync_seconds,
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
        indexes = _indexes(kwargs)
        leases = indexes.get(LEASES_INDEX) if config.track_leases else None
        return state.views.view(indexes[NODES_INDEX], indexes[PODS_INDEX], leases)

    made: list[DrainApi] = []

    def drain_api() -> DrainApi:  # made once, on the first executing drain
        if not made:
            if config.drain_api is None:
                raise kopf.PermanentError("Execute mode needs the Kubernetes API: none was configured")
            made.append(config.drain_api())
        return made[0]

    drain.register(registry, settings=config.settings, resync_seconds=config.resync_seconds, view_of=cluster_view,
                   webhook=config.webhook.enabled, fail_closed=config.webhook.fail_closed, api=drain_api)
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
