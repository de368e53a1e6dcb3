"""The extender's memory of the cluster: the core's :class:`ClusterView`, the PlacementPolicies,
the pending pods, the pods berth counts before the API server shows them (assumed), the open
rounds of Fill / Each policies and the latest decisions.

Fed by the watches (:mod:`berth.extender.live_view`) or once from a snapshot
(:mod:`berth.extender.snapshot_view`) through the ``apply_*`` / ``delete_*`` methods, which
take raw Kubernetes JSON. Every read and write happens under :attr:`ClusterStore.lock`.

Assumed pods come in two kinds (docs/behaviour.md#assumed-pods):

- *tentative*: the node filter/prioritize ranked first for a pod, counted there from the moment
  of that decision because kube-scheduler asks about the next pod before the bind of this one
  arrives; released after ``tentative_ttl`` if no bind comes, moved by the bind if the
  scheduler chose another node;
- *bound*: berth created (or is creating) the Binding; counted until the watch shows the pod
  bound or deleted, or a full list begun after the bind shows it bound or leaves it out; released
  after ``assume_ttl`` (a long safety bound) only if none of that ever comes.

Rounds (:mod:`berth.core.round`) are kept here only as a book: the round of each Fill / Each
policy, which the core's functions open, consume, release and judge in force. Nothing here
survives only in memory: pods berth bound carry the decision annotation (with the round's plan)
and the round annotation, so a restarted extender rebuilds bound pods and open rounds from the
API server alone (:func:`berth.core.round.note`).

The rooms executing NodeDrains hold for their pods' replacements are the store's part in
:mod:`berth.extender.drain_holds`.
"""

from __future__ import annotations

import heapq
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from berth.core import (
    HOLD_ANNOTATION,
    HOLD_UID_PREFIX,
    LEASE_NAMESPACE,
    ROUND_STRATEGIES,
    ClusterView,
    DecisionRecord,
    InvalidPolicy,
    NodeInfo,
    ObjectError,
    PlacementPolicy,
    PodInfo,
    Round,
    RoundMark,
    cache_sizes,
    is_terminal,
    lease_renew_seconds,
    node_from_object,
    pod_from_object,
    policy_from_manifest,
    rounds,
)
from berth.extender.drain_holds import DRAIN_HOLD_SECONDS, GONE_KEPT, DrainHolds

_ParsedPod = tuple[PodInfo, RoundMark | None, str | None, str | None, str | None, bool]
"""A pod as read from the API: the pod, the round it records when bound, its nominated node when
pending, when bound the evicted pod whose drain hold it took, when pending its schedulerName, and
whether berth wrote its nomination (:func:`_nominated_by_berth`)."""

NOMINATION_MANAGER = "berth-extender"
"""The field manager of berth's nominations (the patch's ``fieldManager``): a pod's managedFields
show which nominations berth wrote, whichever replica or process wrote them."""

log = logging.getLogger("berth.extender.store")

ROUNDS_KEPT = 4096
"""Rounds in the book at most (the least recently active dropped): rounds rebuilt from pod
annotations are kept per policy key, and any pod's creator can set those annotations."""

KINDS = ("nodes", "pods", "leases", "policies")
"""The kinds a full view needs (``/readyz``); NodeDrains are watched too, but a cluster without
the NodeDrain CRD is still served."""
WATCHED_KINDS = ("policies", "nodes", "leases", "pods", "nodedrains")
"""What the extender's live view lists and watches, in the order its threads start."""

@dataclass(slots=True)
class Assumption:
    pod: PodInfo  # as placed: node_name is the node
    bound: bool  # False: tentative (filter/prioritize winner); True: bind done or in flight
    deadline: float  # wall-clock seconds; released after it unless the watch confirmed it
    round_id: str | None = None  # the round the pod holds a place in (berth.core.round)
    nominated: bool = False  # a preemptor on the node kube-scheduler nominated (status.nominatedNodeName)
    made: float = 0.0  # the store's clock when it was made


class ClusterStore(DrainHolds):
    def __init__(self, *, leases_tracked: bool = True, decisions_kept: int = 5000,
                 clock: Callable[[], float] | None = None, kinds: Iterable[str] = KINDS,
                 drain_hold_seconds: float = DRAIN_HOLD_SECONDS) -> None:
        import time

        self.kinds = frozenset(kinds)  # ready once each of these is listed
        self.lock = threading.RLock()
        self.view = ClusterView(leases_tracked=leases_tracked)
        self.track_leases = leases_tracked
        self.clock = clock or time.time
        self.policies: dict[str, PlacementPolicy] = {}
        self._policies_by_ns: dict[str, list[PlacementPolicy]] = {}
        self.invalid_policies: dict[str, str] = {}
        self.policy_status: dict[str, Mapping[str, Any]] = {}  # key -> the status the operator wrote (the page)
        self.pending: dict[str, PodInfo] = {}
        self._pending_by_ns: dict[str, dict[str, PodInfo]] = {}
        self.assumed: dict[str, Assumption] = {}
        self._deadlines: list[tuple[float, int, str, Assumption]] = []  # min-heap; stale entries skipped
        self._assumptions_made = 0
        self.rounds: dict[str, Round] = {}  # policy key -> its latest round (the book; berth.core.round)
        # round id -> a round the book has moved past whose places pods not bound yet still hold
        # (berth.core.round.judged_in): their filter and bind judge them within it
        self._superseded: OrderedDict[str, Round] = OrderedDict()
        self._holders: dict[str, int] = {}  # superseded round id -> the pods not bound yet placed in it
        # round id -> uid -> (node, mark): pods recorded in a round newer than the book's whose
        # carrier (the pod recording its plan) the list or watch has not shown yet
        self._parked: OrderedDict[str, dict[str, tuple[str, RoundMark]]] = OrderedDict()
        self.decisions: OrderedDict[str, bytes] = OrderedDict()  # pod key -> the latest decision, as JSON
        self.decisions_kept = decisions_kept
        self.seen_pods: OrderedDict[str, PodInfo] = OrderedDict()  # uid -> pod from recent filter requests
        self.request_nodes: dict[str, tuple[str, NodeInfo]] = {}  # name -> (resourceVersion, node) cache
        self.listed: set[str] = set()
        # Objects the list or watch delivered that berth cannot read (and ignores), by kind; the keys are
        # fixed so that a scrape can read the counts while a watch thread adds to them.
        self.unreadable: dict[str, int] = dict.fromkeys(("nodes", "leases", "pods"), 0)
        self.on_confirm: Callable[[str], None] | None = None
        # a pending pod with no nominated node and no assumption, and its schedulerName (the nominator)
        self.on_pending: Callable[[PodInfo, str | None], None] | None = None
        # changes that can give a pending pod a place it lacked (with the view's nodes_version): a
        # pod gone or released from its node, a policy changed, a round opened or a place in one
        # freed; the nominator plans a pod no place suited again only after one
        self.room_changes = 0
        # pending pods whose nomination the list or watch shows written by berth (its managedFields):
        # uid -> the node; their filter counts a hit or a miss on any replica
        self.berth_nominated: dict[str, str] = {}
        self._init_drains(drain_hold_seconds)

    # -- readiness ---------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        return self.listed.issuperset(self.kinds)

    def mark_listed(self, kind: str) -> None:
        with self.lock:
            self.listed.add(kind)

    # -- policies ----------------------------------------------------------------------

    def policy_for(self, pod: PodInfo) -> PlacementPolicy | None:
        """The policy that governs ``pod``: the first by name among those of its namespace that select it."""
        for policy in self._policies_by_ns.get(pod.namespace, ()):
            if policy.governs(pod.namespace, pod.labels):
                return policy
        return None

    def policy_named(self, namespace: str, name: str) -> PlacementPolicy | None:
        return self.policies.get(f"{namespace}/{name}")

    def apply_policy(self, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
        key = f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}"  # type: ignore[union-attr]
        status = obj.get("status")
        with self.lock:
            if isinstance(status, Mapping):
                self.policy_status[key] = status
            else:
                self.policy_status.pop(key, None)
        try:
            policy = policy_from_manifest(obj)
        except InvalidPolicy as exc:
            with self.lock:
                self._drop_policy(key)
                self.invalid_policies[key] = str(exc)
            log.warning("PlacementPolicy %s is invalid and ignored: %s", key, exc)
            return
        with self.lock:
            self.invalid_policies.pop(policy.key, None)
            old = self.policies.get(policy.key)
            self.policies[policy.key] = policy
            self._reindex_policies(policy.namespace)
            rnd = self.rounds.get(policy.key)
            if old is not None and old.spec != policy.spec and rnd is not None:
                self.rounds[policy.key] = rounds.close(rnd)  # a changed policy starts a fresh round
            if old is None or old.spec != policy.spec:  # not its status, which the operator writes often
                self.room_changes += 1

    def delete_policy(self, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        key = f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}"
        with self.lock:
            self._drop_policy(key)
            self.invalid_policies.pop(key, None)
            self.policy_status.pop(key, None)
            self.room_changes += 1

    def _drop_policy(self, key: str) -> None:
        policy = self.policies.pop(key, None)
        self.rounds.pop(key, None)
        if policy is not None:
            self._reindex_policies(policy.namespace)

    def _reindex_policies(self, namespace: str) -> None:
        found = sorted((p for p in self.policies.values() if p.namespace == namespace), key=lambda p: p.name)
        if found:
            self._policies_by_ns[namespace] = found
        else:
            self._policies_by_ns.pop(namespace, None)

    # -- nodes and leases --------------------------------------------------------------

    def apply_node(self, obj: Mapping[str, Any]) -> None:
        try:
            node = node_from_object(obj)
        except ObjectError as exc:
            self.unreadable["nodes"] += 1
            log.warning("ignoring a node berth cannot read: %s", exc)
            return
        with self.lock:
            self.view.upsert_node(node)

    def delete_node(self, obj: Mapping[str, Any]) -> None:
        name = _name(obj)
        if name:
            with self.lock:
                self.view.remove_node(name)

    def apply_lease(self, obj: Mapping[str, Any]) -> None:
        if _namespace(obj) != LEASE_NAMESPACE:
            return
        try:
            node, renewed = lease_renew_seconds(obj)
        except ObjectError as exc:
            self.unreadable["leases"] += 1
            log.warning("ignoring a lease berth cannot read: %s", exc)
            return
        with self.lock:
            self.view.set_lease(node, renewed)

    def delete_lease(self, obj: Mapping[str, Any]) -> None:
        name = _name(obj)
        if name and _namespace(obj) == LEASE_NAMESPACE:
            with self.lock:
                self.view.remove_lease(name)

    # -- pods --------------------------------------------------------------------------

    def apply_pod(self, obj: Mapping[str, Any]) -> None:
        """A pod from a list or a watch event: bound pods count on their node, pending pods are
        remembered for rounds, terminal pods are forgotten. The watch confirming a pod berth
        assumed replaces the assumption."""
        if is_terminal(obj):
            self.delete_pod(obj)
            return
        parsed = self._parse_pod(obj)
        if parsed is None:
            return
        pod, mark, nominated, replaced, scheduler, berths = parsed
        with self.lock:
            self._apply_pod_locked(pod, nominated, scheduler, berths)
            if mark is not None:
                self._note_round(pod, mark)
            if replaced is not None:
                self._hold_done(replaced)

    def _parse_pod(self, obj: Mapping[str, Any]) -> _ParsedPod | None:
        """The pod, its round record (bound pods) and its nominated node (pending pods); None
        (counted and logged) for a pod berth cannot read."""
        try:
            pod = pod_from_object(obj)
        except ObjectError as exc:
            self.unreadable["pods"] += 1
            log.warning("ignoring a pod berth cannot read: %s", exc)
            return None
        if pod.node_name:
            return pod, _round_mark(obj), None, _annotation(obj, HOLD_ANNOTATION), None, False
        nominated = nominated_node(obj)
        return (pod, None, nominated, None, _scheduler_name(obj),
                nominated is not None and _nominated_by_berth(obj))

    def _apply_pod_locked(self, pod: PodInfo, nominated: str | None = None, scheduler: str | None = None,
                          berths: bool = False) -> None:
        uid = pod.uid
        if nominated is not None and berths and not pod.node_name:
            self.berth_nominated[uid] = nominated
        else:
            self.berth_nominated.pop(uid, None)
        if pod.node_name:
            self._pending_remove(uid)
            self.view.upsert_pod(pod)  # replaces an assumption: the API server now shows it
            confirmed = self.assumed.pop(uid, None)
            if confirmed is not None:
                self._unhold(confirmed)
                if self.on_confirm is not None:
                    self.on_confirm(uid)
            if uid in self._claimant_of:
                self._hold_fulfilled(uid)
            return
        if not pod.terminating:
            self.pending[uid] = pod
            self._pending_by_ns.setdefault(pod.namespace, {})[uid] = pod
        else:
            self._pending_remove(uid)
        entry = self.assumed.get(uid)
        if entry is not None and entry.nominated and entry.pod.node_name != nominated:
            self.release(uid)  # the nomination moved or was cleared
            entry = None
        if nominated and not pod.terminating and entry is None:
            # Pods nominated by preemption count on their node, so that the room their
            # victims free is not taken by others meanwhile (as kube-scheduler's own filter does).
            self.assume(pod, nominated, bound=False, deadline=float("inf"), nominated=True)
        elif not self.view.is_assumed(uid):
            self.view.remove_pod(uid)
        if not nominated and not pod.terminating and self.on_pending is not None and uid not in self.assumed:
            self.on_pending(pod, scheduler)

    def delete_pod(self, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid") or f"{meta.get('namespace') or 'default'}/{meta.get('name')}")
        with self.lock:
            self.forget_pod(uid)

    def forget_pod(self, uid: str) -> None:
        if uid in self._claimant_of:
            self._unclaim(uid)
        gone = self.view.pod(uid)
        if gone is not None and gone.node_name:
            self._uncarry(gone)
        if gone is not None and gone.controller is not None and not self.view.is_assumed(uid):
            self._gone[uid] = gone
            while len(self._gone) > GONE_KEPT:
                self._gone.popitem(last=False)
        self._pending_remove(uid)
        self.release(uid)
        self.view.remove_pod(uid)
        if gone is not None:  # off its node (a pending pod counts on none: its deletion frees no room)
            self.room_changes += 1

    def _pending_remove(self, uid: str) -> None:
        self.berth_nominated.pop(uid, None)
        old = self.pending.pop(uid, None)
        if old is not None:
            by_ns = self._pending_by_ns.get(old.namespace)
            if by_ns is not None:
                by_ns.pop(uid, None)
                if not by_ns:
                    del self._pending_by_ns[old.namespace]

    def pending_in(self, namespace: str) -> Iterable[PodInfo]:
        """The pending pods of ``namespace`` (under the lock)."""
        return self._pending_by_ns.get(namespace, {}).values()

    def pending_governed(self, policy: PlacementPolicy) -> int:
        """Pending pods the policy selects that berth has not placed yet (a preemptor on its
        nominated node is waiting; a pod berth nominated within a round is placed in it)."""
        assumed = self.assumed
        return sum(1 for uid, pod in self._pending_by_ns.get(policy.namespace, {}).items()
                   if (uid not in assumed or (assumed[uid].nominated and assumed[uid].round_id is None))
                   and policy.governs(pod.namespace, pod.labels))

    def remember_pod(self, pod: PodInfo) -> None:
        """Keep the pod of a filter/prioritize request so that its bind can be rechecked."""
        seen = self.seen_pods
        seen[pod.uid] = pod
        seen.move_to_end(pod.uid)
        while len(seen) > 10000:
            seen.popitem(last=False)

    def known_pod(self, uid: str) -> PodInfo | None:
        entry = self.assumed.get(uid)
        if entry is not None:
            return entry.pod
        return self.pending.get(uid) or self.seen_pods.get(uid) or self.view.pod(uid)

    # -- assumptions -------------------------------------------------------------------

    def assume(self, pod: PodInfo, node: str, *, bound: bool, deadline: float,
               round_id: str | None = None, nominated: bool = False) -> None:
        """Count ``pod`` on ``node`` now (replacing an earlier assumption of it), and in round
        ``round_id`` when it has one."""
        self._drop(pod.uid)
        placed = self.view.assume(pod, node)
        entry = self.assumed[pod.uid] = Assumption(placed, bound, deadline, round_id, nominated, self.clock())
        if not bound and round_id in self._holders:
            self._holders[round_id] += 1
        self._assumptions_made += 1
        heapq.heappush(self._deadlines, (deadline, self._assumptions_made, pod.uid, entry))
        if len(self._deadlines) > 2 * len(self.assumed) + 1024:  # drop entries of assumptions gone
            self._deadlines = [item for item in self._deadlines if self.assumed.get(item[2]) is item[3]]
            heapq.heapify(self._deadlines)
        if round_id is not None:
            rnd = self.round_of(round_id)
            if rnd is not None:
                self._keep_round(rounds.consume(rnd, pod.uid, node, self.clock()))

    def release(self, uid: str) -> Assumption | None:
        """Stop counting an assumed pod (and free its slot in its round)."""
        entry = self._drop(uid)
        if entry is not None:
            self.room_changes += 1
        return entry

    def _drop(self, uid: str) -> Assumption | None:
        entry = self.assumed.pop(uid, None)
        if entry is None:
            return None
        self._unhold(entry)
        if self.view.is_assumed(uid):
            self.view.remove_pod(uid)
        if entry.round_id is not None:
            rnd = self.round_of(entry.round_id)
            if rnd is not None:
                self._keep_round(rounds.release(rnd, uid))
        return entry

    def restore(self, entry: Assumption) -> None:
        """Count a released assumption again, as it was (its node, kind, deadline and round)."""
        if entry.pod.node_name:
            self.assume(entry.pod, entry.pod.node_name, bound=entry.bound, deadline=entry.deadline,
                        round_id=entry.round_id, nominated=entry.nominated)

    def release_tentative(self, uid: str) -> Assumption | None:
        """Stop counting a pod's place not bound yet, for a new judgement of the pod: not counted
        in :attr:`room_changes` until :meth:`placed_again` says where the judgement put it (each
        filter of a nominated pod releases its place and takes it again)."""
        entry = self.assumed.get(uid)
        if entry is not None and not entry.bound:
            return self._drop(uid)
        return None

    def placed_again(self, released: Assumption | None, node: str | None) -> None:
        """The judgement for which ``released`` (:meth:`release_tentative`) was given up placed the
        pod on ``node`` (None: nowhere): a place given up elsewhere is room that came free."""
        if released is not None and released.pod.node_name != node:
            self.room_changes += 1

    def expire(self, now: float) -> list[Assumption]:
        """Release the assumptions past their deadline."""
        released = []
        heap = self._deadlines
        while heap and heap[0][0] <= now:
            _, _, uid, made = heapq.heappop(heap)
            if self.assumed.get(uid) is not made:
                continue  # released, replaced or confirmed since
            entry = self.release(uid)
            if entry is None:
                continue
            released.append(entry)
            if uid in self._claimant_of:
                self._unclaim(uid)  # the replacement did not bind in time: its hold counts again
            if entry.bound:
                log.warning("released pod %s from node %s: the watch has not shown it bound or deleted "
                            "within the safety bound", entry.pod.key, entry.pod.node_name)
            else:
                log.info("released pod %s from node %s: no bind came in time", entry.pod.key, entry.pod.node_name)
        return released

    def confirm_placed(self, pod: PodInfo) -> None:
        """Offline mode: the bind is the truth; the pod counts as bound, not assumed."""
        round_id = None
        entry = self.assumed.pop(pod.uid, None)
        if entry is not None:
            self._unhold(entry)
            round_id = entry.round_id
        self._pending_remove(pod.uid)
        self.view.upsert_pod(pod)
        if round_id is not None and pod.node_name and (rnd := self.round_of(round_id)) is not None:
            self._keep_round(rounds.consume(rnd, pod.uid, pod.node_name, rnd.active))

    # -- rounds ------------------------------------------------------------------------

    def round_of(self, round_id: str) -> Round | None:
        """The round of id ``round_id``: the book's, or one it has moved past that pods not bound
        yet hold places in; None when neither is kept."""
        rnd = self.rounds.get(round_id.rpartition("@")[0])
        if rnd is not None and rnd.id == round_id:
            return rnd
        return self._superseded.get(round_id)

    def placed_round(self, uid: str) -> str | None:
        """The id of the round pod ``uid`` holds a place in (berth.core.round.judged_in). A nominated
        pod that names no round is first given its place in one (:meth:`_nominated_round`): it
        counts there from now on, as it would had this process planned it."""
        entry = self.assumed.get(uid)
        if entry is None:
            return None
        if entry.round_id is None and entry.nominated and not entry.bound:
            return self._nominated_round(entry)
        return entry.round_id

    def _nominated_round(self, entry: Assumption) -> str | None:
        """The round a pod berth nominated (its managedFields say so) that names none holds its
        place in: the oldest round of its policy kept (the book's, or one it moved past) whose plan
        has a place left on the nominated node; the pod then counts there. A nomination records no
        round (it is a node in the pod's status), so an extender restarted after berth nominated
        pods of a round knows their round only this way, from the rounds its bound pods record
        (their carrier's plan): judged in the latest round instead, a pod of one the book has moved
        past would be refused its place and take one of the next round's (docs/behaviour.md,
        "Rounds")."""
        pod, node = entry.pod, entry.pod.node_name
        if not node or self.berth_nominated.get(pod.uid) != node:
            return None  # kube-scheduler's preemption: judged in the book's round, as its preemption was
        policy = self.policy_for(pod)
        if policy is None or policy.strategy not in ROUND_STRATEGIES:
            return None
        kept = [rnd for rnd in self._superseded.values() if rnd.policy == policy.key]
        book = self.rounds.get(policy.key)
        if book is not None:
            kept.append(book)
        for rnd in sorted(kept, key=lambda r: r.opened):
            if not rnd.closed and rounds.quota(rnd, pod.uid).get(node, 0) > 0:
                # the pod keeps its assumption (its node, its count there) and takes up its place in
                # the round as of the round's last activity: asking is no activity of the round's,
                # so a round that lapsed stays lapsed and the pod's filter opens the next, as it would
                # have before the restart
                entry.round_id = rnd.id
                if not entry.bound and rnd.id in self._holders:
                    self._holders[rnd.id] += 1
                self._keep_round(rounds.consume(rnd, pod.uid, node, rnd.active))
                return rnd.id
        return None

    def _keep_round(self, rnd: Round) -> None:
        """Keep ``rnd``, changed, where its earlier state was kept (the book or the superseded)."""
        book = self.rounds.get(rnd.policy)
        if book is not None and book.id == rnd.id:
            self.rounds[rnd.policy] = rnd
        elif rnd.id in self._superseded:
            self._superseded[rnd.id] = rnd

    def open_round(self, rnd: Round, *, drop_idle: bool = True) -> None:
        """``rnd`` becomes its policy's round in the book. The round it follows stays kept while
        pods placed in it are not bound yet (their filter and bind judge them within it); rounds
        none of whose pods waits any longer are dropped (not with ``drop_idle`` False: a round
        resumed from its pods, whose nominated pods take their places at the list's end)."""
        old = self.rounds.get(rnd.policy)
        self.rounds[rnd.policy] = rnd
        self.room_changes += 1
        if old is not None and old.id != rnd.id:
            assumed = self.assumed
            self._superseded[old.id] = old
            self._holders[old.id] = sum(1 for uid in old.placed if (entry := assumed.get(uid)) is not None
                                        and not entry.bound and entry.round_id == old.id)
        # dropped here, not as their last pod is bound: a pod's filter gives its place back before
        # it is judged within its round again
        for rid in [rid for rid, n in self._holders.items() if n <= 0 and drop_idle]:
            del self._holders[rid], self._superseded[rid]
        while len(self._superseded) > ROUNDS_KEPT:
            del self._holders[self._superseded.popitem(last=False)[0]]

    def _unhold(self, entry: Assumption) -> None:
        """``entry`` no longer holds a place not bound yet in its round."""
        if not entry.bound and entry.round_id in self._holders:
            self._holders[entry.round_id] -= 1

    def _note_round(self, pod: PodInfo, mark: RoundMark) -> None:
        """A bound pod recording the round it was placed in: the book counts it in that round,
        or takes the round up when it is newer than the one the book holds and the pod carries
        its plan. A pod of a round older than the book's counts in it where it is kept (the book
        moved past it), and a carrier of one keeps it there: pods nominated in it may still hold
        places (:meth:`_nominated_round`). A pod of a round whose carrier has not been seen yet (a
        list gives pods in name order) is parked and counted once the carrier comes."""
        parsed = rounds.parse_round_id(mark.round_id)
        if parsed is None or not pod.node_name:
            return
        key = parsed[0]
        old = self.rounds.get(key)
        if old is not None and parsed[1] < old.opened:
            self._note_older_round(mark, pod.uid, pod.node_name)
            return
        new = rounds.note(old, mark, pod.uid, pod.node_name)
        if new is None or new is old:
            if mark.plan is None and (old is None or parsed[1] > old.opened):
                self._park(mark, pod.uid, pod.node_name)
            return
        if old is None or new.id != old.id:
            for uid, (node, parked) in self._parked.pop(new.id, {}).items():
                new = rounds.note(new, parked, uid, node) or new
        if old is not None and new.id != old.id:
            self.open_round(new, drop_idle=False)  # the pods placed in the old round keep their places
        else:
            self.rounds[key] = new
        if old is None and len(self.rounds) > ROUNDS_KEPT:  # the stalest goes: a round resumes only if recent
            del self.rounds[min(self.rounds, key=lambda k: self.rounds[k].active)]

    def _note_older_round(self, mark: RoundMark, uid: str, node: str) -> None:
        kept = self._superseded.get(mark.round_id)
        if kept is None:
            if mark.plan is None:
                self._park(mark, uid, node)
                return
            kept = rounds.note(None, mark, uid, node)
            if kept is None:
                return
            for parked_uid, (parked_node, parked) in self._parked.pop(kept.id, {}).items():
                kept = rounds.note(kept, parked, parked_uid, parked_node) or kept
            self._superseded[kept.id] = kept
            self._holders[kept.id] = 0  # dropped at the next round's opening unless a pod holds a place
            while len(self._superseded) > ROUNDS_KEPT:
                del self._holders[self._superseded.popitem(last=False)[0]]
            return
        self._superseded[mark.round_id] = rounds.note(kept, mark, uid, node) or kept

    def _park(self, mark: RoundMark, uid: str, node: str) -> None:
        parked = self._parked.setdefault(mark.round_id, {})
        parked[uid] = (node, mark)
        self._parked.move_to_end(mark.round_id)
        while len(self._parked) > ROUNDS_KEPT:
            self._parked.popitem(last=False)

    def _uncarry(self, pod: PodInfo) -> None:
        """A bound pod is gone: when it carried its round's plan, the round's next pod carries it."""
        policy = self.policy_for(pod)
        rnd = self.rounds.get(policy.key) if policy is not None else None
        if rnd is not None and rnd.carrier == pod.uid:
            self.rounds[rnd.policy] = rounds.uncarried(rnd, pod.uid)

    def carry_plan(self, round_id: str, uid: str) -> bool:
        """Whether pod ``uid``, being bound in round ``round_id``, records the round's whole plan;
        if so it is the round's carrier from now (its failed bind or its deletion ends that)."""
        rnd = self.round_of(round_id)
        if rnd is None or not rounds.needs_carrier(rnd):
            return rnd is not None and rnd.carrier == uid
        self._keep_round(rounds.carried(rnd, uid))
        return True

    # -- decisions ---------------------------------------------------------------------

    def record_decision(self, pod_key: str, decision: DecisionRecord) -> bytes:
        """Keep ``decision`` for the explain API, encoded: a few KiB each instead of hundreds of
        objects the cyclic collector would scan again and again. Returns the encoding."""
        return self.keep_decision(pod_key, decision.model_dump_json(by_alias=True).encode())

    def keep_decision(self, pod_key: str, encoded: bytes) -> bytes:
        """:meth:`record_decision` of a record already encoded (``Decision.record_data``, as the
        filter and prioritize record theirs). Returns it."""
        if self.decisions_kept <= 0:
            return encoded
        self.decisions[pod_key] = encoded
        self.decisions.move_to_end(pod_key)
        while len(self.decisions) > self.decisions_kept:
            self.decisions.popitem(last=False)
        return encoded

    # -- relists -----------------------------------------------------------------------

    def replace(self, kind: str, objects: Iterable[Mapping[str, Any]], *, chunk: int = 2000) -> None:
        """A full list of ``kind``: apply every object, then forget what the list no longer holds.
        Applied in chunks so that requests are not blocked for the whole of a large list."""
        apply, delete, current = self._ops(kind)
        started = self.clock()
        seen: set[str] = set()
        batch: list[Mapping[str, Any]] = []
        for obj in objects:
            batch.append(obj)
            if len(batch) >= chunk:
                self._apply_batch(kind, batch, apply, seen)
                batch = []
        self._apply_batch(kind, batch, apply, seen)
        with self.lock:
            for ident in [i for i in current() if i not in seen]:
                delete(ident)
            if kind == "pods":
                # a pod counted before the list began and absent from it was deleted: absence confirmed
                # (a drain's placeholder is no pod of the API server: its hold decides its end)
                for uid in [u for u, a in self.assumed.items()
                            if u not in seen and a.made < started and not u.startswith(HOLD_UID_PREFIX)]:
                    self.release(uid)
                # the rounds the list's bound pods record are known now: pods nominated in one take
                # their place there before a round opened meanwhile drops it as idle
                for entry in [a for a in self.assumed.values() if a.nominated and a.round_id is None]:
                    self._nominated_round(entry)
            self.listed.add(kind)

    def _apply_batch(self, kind: str, batch: list[Mapping[str, Any]], apply: Callable[[Mapping[str, Any]], None],
                     seen: set[str]) -> None:
        if not batch:
            return
        if kind == "pods":
            self._apply_pods_batch(batch, seen)
            return
        with self.lock:
            for obj in batch:
                apply(obj)
                seen.add(_identity(kind, obj))

    def _apply_pods_batch(self, batch: list[Mapping[str, Any]], seen: set[str]) -> None:
        """Pods are parsed outside the lock (the costly part of a large list)."""
        parsed: list[_ParsedPod] = []
        terminal: list[Mapping[str, Any]] = []
        for obj in batch:
            if is_terminal(obj):
                terminal.append(obj)
                continue
            one = self._parse_pod(obj)
            if one is not None:
                parsed.append(one)
        with self.lock:
            for pod, mark, nominated, replaced, scheduler, berths in parsed:
                self._apply_pod_locked(pod, nominated, scheduler, berths)
                seen.add(pod.uid)
                if mark is not None:
                    self._note_round(pod, mark)
                if replaced is not None:
                    self._hold_done(replaced)
            for obj in terminal:
                self.delete_pod(obj)

    def _ops(self, kind: str) -> tuple[Callable[[Mapping[str, Any]], None], Callable[[str], None],
                                       Callable[[], Iterable[str]]]:
        if kind == "nodes":
            return self.apply_node, self.view.remove_node, lambda: list(self.view.nodes)
        if kind == "leases":
            return self.apply_lease, self.view.remove_lease, lambda: list(self.view.leases)
        if kind == "nodedrains":
            return self.apply_nodedrain, self._drop_drain, lambda: list(self.drains)
        if kind == "policies":
            return (self.apply_policy, self._forget_policy_key,
                    lambda: [*self.policies, *self.invalid_policies])
        if kind == "pods":
            return (self.apply_pod, self._forget_listed_pod,
                    lambda: [*(p.uid for p in self.view.all_pods() if not self.view.is_assumed(p.uid)),
                             *self.pending])
        raise ValueError(f"unknown kind {kind!r}")

    def _forget_policy_key(self, key: str) -> None:
        self._drop_policy(key)
        self.invalid_policies.pop(key, None)
        self.policy_status.pop(key, None)

    def _forget_listed_pod(self, uid: str) -> None:
        self._pending_remove(uid)
        if not self.view.is_assumed(uid):
            self.view.remove_pod(uid)

    # -- sizes (metrics) ---------------------------------------------------------------

    def sizes(self) -> dict[str, int]:
        """Under the lock (a scrape may come while a watch thread changes the view), and counted, not
        walked: the lock is the one every filter takes."""
        view = self.view
        with self.lock:
            return {
                "nodes": len(view.nodes),
                "pods": view.bound_pod_count(),
                "assumed": len(self.assumed),
                "pending": len(self.pending),
                "policies": len(self.policies),
                "invalid_policies": len(self.invalid_policies),
                "leases": len(view.leases),
                "rounds": len(self.rounds),
                "drain_holds": len(self.holds),
            }

    def cache_sizes(self) -> dict[str, int]:
        """Entries of the store's bounded caches and the view's (metrics)."""
        with self.lock:
            return {**cache_sizes(self.view), "decisions": len(self.decisions), "seen_pods": len(self.seen_pods),
                    "request_nodes": len(self.request_nodes)}

    def iter_policies(self) -> Iterator[PlacementPolicy]:
        return iter(sorted(self.policies.values(), key=lambda p: p.key))


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("name") or "") if isinstance(meta, Mapping) else ""


def _namespace(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("namespace") or "") if isinstance(meta, Mapping) else ""


def _identity(kind: str, obj: Mapping[str, Any]) -> str:
    if kind == "policies":
        return f"{_namespace(obj) or 'default'}/{_name(obj)}"
    return _name(obj)


def nominated_node(obj: Mapping[str, Any]) -> str | None:
    """The pod's ``status.nominatedNodeName`` (the raw object, as the API server or kube-scheduler
    sends it), None when it has none."""
    status = obj.get("status")
    node = status.get("nominatedNodeName") if isinstance(status, Mapping) else None
    return node if isinstance(node, str) and node else None


def _nominated_by_berth(obj: Mapping[str, Any]) -> bool:
    """Whether the pod's managedFields show its ``status.nominatedNodeName`` set by berth
    (:data:`NOMINATION_MANAGER`)."""
    meta = obj.get("metadata")
    entries = meta.get("managedFields") if isinstance(meta, Mapping) else None
    for entry in entries if isinstance(entries, list) else ():
        if not isinstance(entry, Mapping) or entry.get("manager") != NOMINATION_MANAGER:
            continue
        fields = entry.get("fieldsV1")
        status = fields.get("f:status") if isinstance(fields, Mapping) else None
        if isinstance(status, Mapping) and "f:nominatedNodeName" in status:
            return True
    return False


def _scheduler_name(obj: Mapping[str, Any]) -> str | None:
    spec = obj.get("spec")
    name = spec.get("schedulerName") if isinstance(spec, Mapping) else None
    return name if isinstance(name, str) and name else None


def _round_mark(obj: Mapping[str, Any]) -> RoundMark | None:
    """The round a pod berth bound in a round records (:func:`berth.core.round.recorded_mark`)."""
    meta = obj.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    return rounds.recorded_mark(annotations) if isinstance(annotations, Mapping) else None


def _annotation(obj: Mapping[str, Any], key: str) -> str | None:
    meta = obj.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    value = annotations.get(key) if isinstance(annotations, Mapping) else None
    return value if isinstance(value, str) and value else None
