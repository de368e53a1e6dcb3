"""The rooms an executing NodeDrain holds for its pods' replacements (``berth.core.drain_hold``):
each evicted pod's destination counts a placeholder until a pending pod of the same workload takes
the hold (its own reservation then takes the placeholder's place) and binds, or the hold lapses.
Kept by :class:`berth.extender.store.ClusterStore` (this is its part that reads NodeDrains), under
its lock.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from berth.core import (
    NO_STEER,
    ClusterView,
    DrainMode,
    Hold,
    InvalidDrain,
    ObjectError,
    Owner,
    PodInfo,
    PodState,
    Steer,
    Workload,
    evicted_from_entry,
    nodedrain_spec,
    parse_time,
    steer,
)

if TYPE_CHECKING:
    from berth.extender.store import Assumption

log = logging.getLogger("berth.extender.drain_holds")

DRAIN_HOLD_SECONDS = 300.0
"""How long a drained pod's destination keeps its room for the replacement at most, from the
moment the extender sees the pod evicted (its eviction accepted, or the pod gone; for a pod gone
before the extender started, from the eviction its entry records). Before that
(an eviction a PodDisruptionBudget keeps refusing) the room is held as long as the drain lists
the pod ``Evicting``."""

GONE_KEPT = 10000
"""Deleted pods whose shape is kept for a drain's status that names them later."""

_HOLDING_STATES = (PodState.PLANNED.value, PodState.EVICTING.value, PodState.MOVED.value)
"""An executing drain's pods whose destination holds room: planned (the operator evicts first and
writes the status after, so the replacement may come before the extender reads ``Evicting``),
evicting, and moved."""


@dataclass
class DrainRecord:
    """What an executing NodeDrain tells the extender: the rooms held for its pods' replacements
    and the nodes its workloads leave."""

    holds: dict[str, Hold]  # evicted pod uid -> hold
    workloads: dict[Workload, frozenset[str]]  # (namespace, controller) -> the drained nodes


class DrainHolds:
    """The drain holds of :class:`berth.extender.store.ClusterStore`: what it reads from the
    NodeDrains, and what a pending pod claims."""

    if TYPE_CHECKING:  # the store's own, which the holds count placeholders with
        lock: threading.RLock
        view: ClusterView
        clock: Callable[[], float]
        assumed: dict[str, Assumption]

        def assume(self, pod: PodInfo, node: str, *, bound: bool, deadline: float,
                   round_id: str | None = None, nominated: bool = False) -> None: ...

        def release(self, uid: str) -> Assumption | None: ...

    def _init_drains(self, hold_seconds: float) -> None:
        # executing NodeDrains (berth.core.drain_hold): the rooms held for replacement pods
        self.drain_hold_seconds = hold_seconds
        self.drains: dict[str, DrainRecord] = {}
        self.holds: dict[str, Hold] = {}  # evicted pod uid -> hold, of every drain
        self.drained_workloads: dict[Workload, frozenset[str]] = {}
        self.hold_claims: dict[str, str] = {}  # evicted pod uid -> the pending pod that took its hold
        self._claimant_of: dict[str, str] = {}  # the reverse
        self._holds_done: OrderedDict[str, None] = OrderedDict()  # evicted pods whose replacement bound
        # controlled pods deleted lately (uid -> pod): a drain's status may name an evicted pod after
        # the watch showed it gone, and its hold needs its shape
        self._gone: OrderedDict[str, PodInfo] = OrderedDict()

    # -- drains ------------------------------------------------------------------------

    def apply_nodedrain(self, obj: Mapping[str, Any]) -> None:
        """A NodeDrain from a list or a watch event. Only an executing drain holds rooms: each pod
        of its status ``Planned``, ``Evicting`` or ``Moved`` (by uid, with a destination) whose shape the view
        knows (it saw the pod, maybe deleted since) gets a hold on its destination, kept while the
        eviction is asked for and, from the first time the extender sees it evicted (``evictedAt``
        or ``Moved``), for ``drain_hold_seconds`` at most. A pod gone before the extender saw it
        (it restarted since) is held from the shape its entry keeps, until ``drain_hold_seconds``
        after the eviction the entry records."""
        name = _name(obj)
        try:
            spec = nodedrain_spec(obj.get("spec"))
        except InvalidDrain as exc:
            log.warning("NodeDrain %s is invalid and ignored: %s", name, exc)
            with self.lock:
                self._drop_drain(name)
            return
        status = obj.get("status")
        status = status if isinstance(status, Mapping) else {}
        entries = status.get("pods")
        nodes = status.get("nodes")
        drained = frozenset(n for n in nodes if isinstance(n, str)) if isinstance(nodes, list) else frozenset()
        explicit = spec.to_request().explicit_target is not None
        with self.lock:
            old = self.drains.get(name)
            holds: dict[str, Hold] = {}
            workloads: dict[Workload, frozenset[str]] = {}
            if spec.mode is DrainMode.EXECUTE and isinstance(entries, list):
                now = self.clock()
                for entry in entries:
                    if not isinstance(entry, Mapping) or entry.get("state") not in _HOLDING_STATES:
                        continue
                    workload = _workload(entry)
                    if workload is not None and drained:
                        workloads[workload] = drained
                    uid, dest = entry.get("uid"), entry.get("destination")
                    if not isinstance(uid, str) or not isinstance(dest, str) or not dest or uid in self._holds_done:
                        continue
                    gone = entry.get("state") == PodState.MOVED.value or bool(entry.get("evictedAt"))
                    deadline = now + self.drain_hold_seconds if gone else float("inf")
                    known = old.holds.get(uid) if old is not None else None
                    if known is not None and known.destination == dest:
                        # the wait starts once, when the extender first sees the pod evicted
                        holds[uid] = known if known.deadline != float("inf") or not gone else \
                            dataclasses.replace(known, deadline=deadline)
                        continue
                    evicted = self.view.pod(uid) or self._gone.get(uid)
                    if evicted is None and gone:
                        # gone before this extender saw it (it restarted since): the status keeps its
                        # shape, and the wait started at its eviction
                        evicted = evicted_from_entry(entry)
                        deadline = _evicted_at(entry, now) + self.drain_hold_seconds
                    if evicted is None or evicted.controller is None or deadline <= now:
                        continue  # its shape is unknown, or its wait is over: nothing to hold
                    holds[uid] = Hold(name, evicted, dest, explicit, deadline)
            if holds or workloads:
                self.drains[name] = DrainRecord(holds, workloads)
            else:
                self.drains.pop(name, None)
            self._sync_drains()

    def delete_nodedrain(self, obj: Mapping[str, Any]) -> None:
        with self.lock:
            self._drop_drain(_name(obj))

    def _drop_drain(self, name: str) -> None:
        if self.drains.pop(name, None) is not None:
            self._sync_drains()

    def _sync_drains(self) -> None:
        """Count a placeholder for every hold no pending pod took yet; release the others'."""
        holds: dict[str, Hold] = {}
        workloads: dict[Workload, frozenset[str]] = {}
        for record in self.drains.values():
            holds.update(record.holds)
            for key, nodes in record.workloads.items():
                workloads[key] = workloads.get(key, frozenset()) | nodes
        for uid, hold in self.holds.items():
            if holds.get(uid) is not hold:
                self.release(hold.placeholder_uid)
                if uid not in holds:
                    claimant = self.hold_claims.pop(uid, None)
                    if claimant is not None:
                        self._claimant_of.pop(claimant, None)
        self.holds = holds
        self.drained_workloads = workloads
        now = self.clock()
        for uid, hold in holds.items():
            if uid not in self.hold_claims and hold.placeholder_uid not in self.assumed and hold.deadline > now:
                self.assume(hold.placeholder(), hold.destination, bound=False, deadline=hold.deadline)

    def drain_steer(self, pod: PodInfo, now: float) -> Steer:
        """Under the lock: what the drains say about pending ``pod`` (``berth.core.drain_hold``).
        A hold it claims stops counting its placeholder: the pod's own reservation takes its place."""
        if not self.holds and not self.drained_workloads:
            return NO_STEER
        taken = {e for e, c in self.hold_claims.items() if c != pod.uid}
        found = steer(pod, self.holds.values(), self.drained_workloads, now, taken)
        hold = found.hold
        if hold is not None:
            evicted = hold.pod.uid
            if self._claimant_of.get(pod.uid, evicted) != evicted:
                self._unclaim(pod.uid)
            self.hold_claims[evicted] = pod.uid
            self._claimant_of[pod.uid] = evicted
            self.release(hold.placeholder_uid)
        return found

    def claimed_hold(self, uid: str) -> Hold | None:
        """The hold the pod ``uid`` took, if any."""
        evicted = self._claimant_of.get(uid)
        return self.holds.get(evicted) if evicted is not None else None

    def _unclaim(self, claimant: str) -> None:
        """The pod that took a hold is gone (or took another): the hold counts its placeholder again."""
        evicted = self._claimant_of.pop(claimant, None)
        if evicted is None:
            return
        self.hold_claims.pop(evicted, None)
        hold = self.holds.get(evicted)
        if hold is not None and hold.deadline > self.clock():
            self.assume(hold.placeholder(), hold.destination, bound=False, deadline=hold.deadline)

    def _hold_fulfilled(self, claimant: str) -> None:
        """The pod that took a hold is bound: the hold is done (for good, whatever the drain's status
        says later)."""
        self._hold_done(self._claimant_of[claimant])

    def _hold_done(self, evicted: str) -> None:
        """The replacement of ``evicted`` is bound (seen binding, or a bound pod's
        ``berth.dev/drain-hold`` annotation after a restart): its hold is done for good."""
        claimant = self.hold_claims.pop(evicted, None)
        if claimant is not None:
            self._claimant_of.pop(claimant, None)
        self._holds_done[evicted] = None
        while len(self._holds_done) > 10000:
            self._holds_done.popitem(last=False)
        hold = self.holds.pop(evicted, None)
        if hold is not None:
            self.release(hold.placeholder_uid)
            record = self.drains.get(hold.drain)
            if record is not None:
                record.holds.pop(evicted, None)


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("name") or "") if isinstance(meta, Mapping) else ""


def _workload(entry: Mapping[str, Any]) -> Workload | None:
    """(namespace, controller) of a NodeDrain status entry (``pod``: namespace/name, ``workload``: Kind/name)."""
    pod, workload = entry.get("pod"), entry.get("workload")
    if not isinstance(pod, str) or not isinstance(workload, str):
        return None
    namespace, sep, _ = pod.partition("/")
    kind, sep2, name = workload.partition("/")
    if not sep or not sep2 or not namespace or not kind or not name:
        return None
    return namespace, Owner(kind, name)


def _evicted_at(entry: Mapping[str, Any], now: float) -> float:
    """When the wait of a drained pod's hold starts: the eviction the entry records (``evictedAt``),
    or ``now`` when it records none or a time to come."""
    when = entry.get("evictedAt")
    if not isinstance(when, str):
        return now
    try:
        return min(parse_time(when), now)
    except ObjectError:
        return now
