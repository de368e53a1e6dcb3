"""The extender's verbs on the cluster store: every judgement is the core's (``evaluate_pod``,
``open_round``, ``capacity_table``, ``node_allocations``); this module only decides *when* to
ask the core, which nodes and quota to hand it, and what to count where.

- **filter** / **prioritize**: one evaluation per pod (prioritize reuses filter's when the
  scheduler asks about the same pod and nodes right after), the winner counted on its node at
  once (*tentative* assumption) so that the scheduler's next pod sees it.
- **bind**: under the store's lock, a recheck of that one node against bound + assumed pods and
  the assumption made *bound* (the reservation); then, with no lock held, the Binding with the
  decision annotation (a failed one releases the reservation); the Event is queued.
- Pods no PlacementPolicy selects pass through (all nodes, equal scores of 0), unless a cluster
  default strategy is configured.
- Fill / Each policies run in *rounds* (:mod:`berth.core.round`: what a round is, its count
  rule, when it is in force): the store keeps the book of rounds, and each pod is judged within
  its round's places left (``quota``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from berth.core import (
    DECISION_ANNOTATION,
    NO_STEER,
    ROUND_ANNOTATION,
    ROUND_STRATEGIES,
    ClusterView,
    Decision,
    DecisionRecord,
    Evaluation,
    NodeInfo,
    ObjectError,
    Overlay,
    PlacementPolicy,
    PodInfo,
    Refused,
    Round,
    Settings,
    Steer,
    Strategy,
    Winner,
    bind_record_data,
    evaluate_pod,
    format_time,
    honour_target,
    pod_from_object,
    prepare_index,
    ranked_score,
    round_plan,
    rounds,
)
from berth.extender.binder import Binder
from berth.extender.binding import Bindings
from berth.extender.metrics import Metrics
from berth.extender.replies import failed_nodes, filter_reply, priorities
from berth.extender.request_nodes import NodeEcho, RequestNodes, read_request_nodes
from berth.extender.settings import ExtenderSettings
from berth.extender.store import ClusterStore, nominated_node
from berth.extender.wire import (
    ExtenderArgs,
    ExtenderBindingArgs,
    ExtenderPreemptionArgs,
    meta_victims,
    meta_victims_from_full,
    scheduler_text,
)

log = logging.getLogger("berth.extender")

RECORD_LIMIT = 100
"""Nodes listed in a recorded decision's ``considered`` and ``refused`` (the totals are kept)."""

ANNOTATION_LIMIT = 20
"""The same in the pod annotation: a pod's metadata must stay small whatever the size of the cluster."""

NOMINATIONS_KEPT = 20000
"""Nominations whose filter has not come yet, remembered to count hits and misses."""

REUSE_SECONDS = 2.0
"""prioritize reuses filter's evaluation of the same pod and nodes made this recently (with the
index on: the reuse is there for speed only, so ``BERTH_INDEX=off`` judges every prioritize)."""


class PodUnreadable(ValueError):
    """The request's Pod cannot be read by the core (answered with the protocol's Error)."""


@dataclass(slots=True)
class _Recent:
    uid: str
    resource_version: str
    nodes: tuple[str, ...]
    ranking: Sequence[str]
    at: float


EVENT_LIMIT = 1024
"""The longest Event message the API server keeps."""


def refused_message(record: DecisionRecord) -> str:
    """The BerthRefused Event of a pod no node takes: the nodes refused and why, each with its own
    figures (``node-a: insufficient capacity: memory: needs ...``), nodes refused for the very same
    text named together, cut to what an Event holds."""
    head = (f"berth found no node for the pod (strategy {record.strategy}"
            + (f", policy {record.policy}" if record.policy else "")
            + f"; {record.considered_count} nodes considered, {record.refused_count} refused)")
    by_reason: dict[str, list[str]] = {}
    listed = 0
    for group in record.refused:
        for node in group.nodes:
            by_reason.setdefault(group.refusal_of(node), []).append(node)
        listed += len(group.nodes)
    parts = [f"{', '.join(nodes)}: {reason}" for reason, nodes in by_reason.items()]
    if record.refused_count > listed:
        parts.append(f"and {record.refused_count - listed} more nodes")
    if not parts and record.error is not None:
        parts.append(f"{record.error.code.value}: {record.error.message}")
    message = f"{head}: {'; '.join(parts)}"
    return message if len(message) <= EVENT_LIMIT else message[:EVENT_LIMIT - 4] + " ..."


class Extender:
    def __init__(self, store: ClusterStore, settings: ExtenderSettings, binder: Binder,
                 metrics: Metrics | None = None, *, clock: Callable[[], float] | None = None,
                 eval_clock: Callable[[], float] | None = None) -> None:
        self.store = store
        self.settings = settings
        self.core_settings: Settings = settings.core()
        # the index made now, not by the first filter (a walk of every pod of a large cluster)
        prepare_index(store.view, self.core_settings)
        self.binder = binder
        self.metrics = metrics or Metrics(store)
        self.clock = clock or time.time
        self.eval_clock = eval_clock or self.clock
        self.bindings = Bindings(store, binder, self.metrics, self._recheck)
        self.events = self.bindings.events
        # not for speed: bind records the judgement filter made of the pod with its own
        self._filter_decisions: OrderedDict[str, bytes] = OrderedDict()
        # for speed only, so kept with the index alone: prioritize reuses filter's evaluation
        self._reuses = self.core_settings.indexed
        self._recent: _Recent | None = None
        self._read: tuple[str, str, PodInfo] | None = None  # (uid, resourceVersion, the pod read): read_pod
        self._echo = NodeEcho(store, kept=self._reuses)
        self._refusals_told: OrderedDict[str, str] = OrderedDict()  # pod uid -> its last BerthRefused message
        self.nominations: OrderedDict[str, str] = OrderedDict()  # pod uid -> the node berth nominated
        # pod uid -> berth's nomination already counted hit, missed or late (by this replica)
        self._nominations_counted: OrderedDict[str, str] = OrderedDict()
        self.on_stale_nomination: Callable[[PodInfo, str], None] | None = None  # the nominator withdraws it
        self._tasks: set[asyncio.Task[None]] = set()
        self.metrics.cache_sizes = lambda: {"binds_in_flight": len(self.bindings),
                                            "events_queued": self.events.queued(),
                                            "filter_decisions": len(self._filter_decisions),
                                            "encoded_nodes": len(self._echo),
                                            "refusals_told": len(self._refusals_told),
                                            "nominations": len(self.nominations),
                                            "nominations_counted": len(self._nominations_counted)}

    # -- helpers ---------------------------------------------------------------------------

    def read_pod(self, raw: Mapping[str, Any]) -> PodInfo:
        """The request's Pod as the core reads it. With the index on, the pod read last is reused
        when the same pod comes again at the same resourceVersion (prioritize right after filter:
        the API server's same object, read once); ``BERTH_INDEX=off`` reads every request's."""
        if self._reuses:
            uid, version = _identity(raw)
            last = self._read
            if last is not None and uid and version and last[0] == uid and last[1] == version:
                return last[2]
            pod = self._read_pod(raw)
            self._read = (uid, version, pod) if uid and version else None
            return pod
        return self._read_pod(raw)

    def _read_pod(self, raw: Mapping[str, Any]) -> PodInfo:
        try:
            pod = pod_from_object(raw)
        except ObjectError as exc:
            raise PodUnreadable(f"berth cannot read the pod: {exc}") from None
        except (TypeError, ValueError, AttributeError) as exc:
            raise PodUnreadable(f"berth cannot read the pod: {exc}") from None
        return pod

    def _state(self, overrides: Mapping[str, NodeInfo]) -> ClusterView | RequestNodes:
        view = self.store.view
        if not overrides:
            return view
        return RequestNodes(view, overrides)

    def governing(self, pod: PodInfo) -> tuple[PlacementPolicy | None, Strategy | None, bool]:
        """The pod's governing policy, the strategy override for evaluate_pod (the cluster's default
        strategy when no policy selects the pod), and whether berth governs the pod at all."""
        policy = self.store.policy_for(pod)
        if policy is not None:
            return policy, None, True
        default = self.core_settings.default_strategy
        return None, default, default is not None

    def _remember_filter_decision(self, uid: str, record: bytes) -> None:
        """filter's judgement of a pod (compact, encoded), for the decision its bind records."""
        store = self._filter_decisions
        store[uid] = record
        store.move_to_end(uid)
        while len(store) > 2000:
            store.popitem(last=False)

    def _stamp(self, decision: Decision, trigger: str) -> Decision:
        decision.trigger = trigger
        decision.time = format_time(self.clock(), digits=3)
        return decision

    # -- rounds (Fill, Each) ---------------------------------------------------------------

    def round_in_force(self, state: ClusterView | RequestNodes, pod: PodInfo, policy: PlacementPolicy | None,
               now: float, eval_now: float, *, open_new: bool = True, placed_in: str | None = None
               ) -> tuple[Round | None, dict[str, int] | None, Decision | None]:
        """The round the pod is judged in (:func:`berth.core.round.judged_in`: ``placed_in``, the id
        of the round it held a place in before this judgement, else the one in force for its policy,
        opening one if needed and ``open_new``) and its places left for the pod
        (:func:`berth.core.round.quota`), or the decision of a round that cannot open."""
        if policy is None or policy.strategy not in ROUND_STRATEGIES:
            return None, None, None
        store = self.store
        judged = rounds.judged_in(store.round_of(placed_in) if placed_in is not None else None,
                                  store.rounds.get(policy.key), now, self.settings.round_timeout_seconds, pod.uid)
        if judged is not None:
            return judged[0], judged[1], None
        if not open_new:
            return None, None, None
        # the pods waiting: the policy's pending pods not placed yet, this one included
        waiting = store.pending_governed(policy) + (0 if pod.uid in store.pending else 1)
        opened = rounds.opening_time(store.rounds.get(policy.key), now)
        opening = rounds.open_round(state, pod, policy, self.core_settings, opened, waiting, judged_at=eval_now)
        if opening.round is None:
            return None, None, opening.decision
        store.open_round(opening.round)
        log.info("opened round %s of %s for %d waiting pods: plan %s", opening.round.id, policy.key, waiting,
                 dict(opening.round.plan))
        return opening.round, rounds.quota(opening.round, pod.uid), None

    def _evaluate(self, state: ClusterView | RequestNodes, pod: PodInfo, policy: PlacementPolicy | None,
                  strategy: Strategy | None, names: Sequence[str] | None, now: float, eval_now: float,
                  sent: Sequence[str] = (), placed_in: str | None = None) -> tuple[Evaluation, Round | None]:
        """``names``: the nodes judged (None: every node of the view); ``sent``: the nodes the
        scheduler sent, which a round that cannot be planned refuses (default: ``names``);
        ``placed_in``: the round the pod held a place in (:meth:`round_in_force`)."""
        rnd, left, failed_plan = self.round_in_force(state, pod, policy, now, eval_now, placed_in=placed_in)
        if failed_plan is not None:
            return Evaluation(rounds.refused_by_round(failed_plan, sent or names or ())), None
        ev = evaluate_pod(state, pod, policy, self.core_settings, eval_now,
                          nodes=names, quota=left, strategy=strategy)
        if rnd is not None:
            ev.decision.plan, ev.decision.round_id = rnd.plan, rnd.id  # type: ignore[assignment]  # read only
        return ev, rnd

    # -- filter ----------------------------------------------------------------------------

    def filter(self, args: ExtenderArgs, started: float | None = None) -> dict[str, Any]:
        """``started``: when the request arrived (its decoding counts in the latency metric)."""
        started = time.perf_counter() if started is None else started
        names, overrides, bad_nodes, raw_nodes = read_request_nodes(args, self.store)
        cache_capable = args.NodeNames is not None
        try:
            pod = self.read_pod(args.Pod)
        except PodUnreadable as exc:
            self.metrics.observe("filter", time.perf_counter() - started, "bad_pod")
            return filter_reply(cache_capable, [], {}, {}, raw_nodes, self._echo, error=str(exc))
        store = self.store
        with store.lock:
            now = self.clock()
            self.expire_assumptions(now)
            placed_in = store.placed_round(pod.uid)  # its place in a round is its own: judged there again
            released = store.release_tentative(pod.uid)  # a new attempt for this pod voids the last one
            store.remember_pod(pod)
            steered = store.drain_steer(pod, now) if store.holds or store.drained_workloads else NO_STEER
            policy, strategy, governed = self.governing(pod)
            judged = [n for n in names if n not in bad_nodes] if bad_nodes else names
            kept_off: dict[str, str] = {}
            if steered is not NO_STEER:
                judged, kept_off = self._steered(steered, judged)
            if not governed:
                store.placed_again(released, None)
                self.metrics.observe("filter", time.perf_counter() - started, "passthrough")
                told = ({**{n: scheduler_text(bad_nodes[n]) for n in names if n in bad_nodes}, **kept_off}
                        if bad_nodes else kept_off)
                return filter_reply(cache_capable, list(judged), {}, told, raw_nodes, self._echo)
            eval_now = self.eval_clock()
            state = self._state(overrides)
            # kube-scheduler tries a pod's nominated node alone first: berth still judges the whole
            # cluster and passes that node only if it is the one its strategy ranks first
            nominated = (judged[0] if len(judged) == 1 and not overrides and steered is NO_STEER
                         and judged[0] == nominated_node(args.Pod) else None)
            if nominated is None and self._berths_nomination_once(pod.uid) is not None:
                # kube-scheduler's cycle began before it saw berth's nomination, or its own filters refused the node
                self.metrics.nominations.labels("late").inc()
            ev, rnd = self._evaluate(state, pod, policy, strategy, judged if nominated is None else None, now,
                                     eval_now, names, placed_in)
            if steered.hold is not None:
                honour_target(state, pod, steered.hold, ev)  # type: ignore[arg-type]
            decision = self._stamp(ev.decision, "filter")
            winner = decision.winner
            winner_alone = winner is not None and self.settings.filter_winner_only
            if nominated is None:
                # With the winner alone kube-scheduler binds it and reads no refusal (it keeps them for
                # a pod no node passes); the pod's record keeps them all. Under Fill at 5,000 nodes
                # they are 4,999 reasons, a reply of about 300 kB, a pod.
                failed, unresolvable = ({}, {}) if winner_alone else failed_nodes(decision.refused)
                passing = ev.passing
            else:
                failed, unresolvable, passing = self._judge_nominated(nominated, decision, pod)
            unresolvable.update((n, scheduler_text(r)) for n, r in bad_nodes.items())
            unresolvable.update(kept_off)
            if winner is not None:  # a candidate, so among the passing nodes
                store.assume(pod, winner, bound=False, deadline=now + self.settings.tentative_ttl_seconds,
                             round_id=rnd.id if rnd is not None else None)
            store.placed_again(released, winner)
            if self._reuses:
                self._recent = _Recent(pod.uid, _resource_version(args.Pod), tuple(passing), ev.decision.ranking,
                                       time.monotonic())
            # encoded straight from the decision's data: the record model is made only to tell a refusal
            encoded = store.keep_decision(pod.key, orjson.dumps(decision.record_data(limit=RECORD_LIMIT,
                                                                                      whole_plan=False)))
            self._remember_filter_decision(pod.uid, encoded)
        if not passing:
            self._tell_refusal(pod, DecisionRecord.model_validate_json(encoded))
        else:
            self._refusals_told.pop(pod.uid, None)
        result = "placed" if passing else (decision.error.code.value if decision.error else "no_node")
        self.metrics.observe("filter", time.perf_counter() - started, result)
        if winner_alone and winner is not None:
            # One feasible node: kube-scheduler binds it without scoring or asking prioritize.
            passing = [winner]
        return filter_reply(cache_capable, passing, failed, unresolvable, raw_nodes, self._echo)

    def _judge_nominated(self, node: str, decision: Decision, pod: PodInfo
                         ) -> tuple[dict[str, str], dict[str, str], list[str]]:
        """filter's answer, (FailedNodes, FailedAndUnresolvableNodes, passing), when kube-scheduler
        sent the pod's nominated node alone and ``decision`` judged the whole cluster: the node
        passes only if it is the one berth's strategy ranks first; otherwise it is refused (for
        its own refusal, or because berth now prefers another node), and kube-scheduler goes on to
        filter every node, so a stale nomination costs a round trip and never a placement. A
        nomination of berth's it no longer stands by is withdrawn (:attr:`on_stale_nomination`):
        kube-scheduler keeps a nomination of a pod it cannot place, and reserves its room there."""
        berths = self._berths_nomination_once(pod.uid) == node
        if decision.winner == node:
            if berths:
                self.metrics.nominations.labels("hit").inc()
            return {}, {}, [node]
        if berths:
            self.metrics.nominations.labels("missed").inc()
            if self.on_stale_nomination is not None:
                self.on_stale_nomination(pod, node)
        refusal = decision.refused.get(node)
        if refusal is not None:
            failed, unresolvable = failed_nodes(Refused({node: refusal}))
            return failed, unresolvable, []
        if decision.winner is not None:
            why = f"berth: its strategy now ranks {decision.winner} first"
        else:
            why = f"berth: {decision.error.message}" if decision.error is not None else "berth: no node takes the pod"
        return {node: scheduler_text(why)}, {}, []

    def _berths_nomination_once(self, uid: str) -> str | None:
        """The node berth nominated for pod ``uid``, the first time its filter asks (None after,
        until another node is nominated): the caller counts it hit, missed or late, and it is
        marked counted here. This replica's nomination, or one the pod's managedFields show written
        by berth (:attr:`ClusterStore.berth_nominated`: another replica's, or this one's before a
        restart), so that whichever replica filters the pod counts it, once."""
        node = self.nominations.pop(uid, None) or self.store.berth_nominated.get(uid)
        counted = self._nominations_counted
        if node is None or counted.get(uid) == node:
            return None
        counted[uid] = node
        counted.move_to_end(uid)
        while len(counted) > NOMINATIONS_KEPT:
            counted.popitem(last=False)
        return node

    def nominated(self, uid: str, node: str) -> None:
        """The nominator set the pod's nominated node: its filter counts a hit or a miss."""
        kept = self.nominations
        kept[uid] = node
        kept.move_to_end(uid)
        while len(kept) > NOMINATIONS_KEPT:
            kept.popitem(last=False)

    @staticmethod
    def _steered(steered: Steer, judged: Sequence[str]) -> tuple[list[str], dict[str, str]]:
        """The nodes an executing drain lets the pod be judged on, and why the others are not: the
        claimed hold's destination alone (kube-scheduler adds an extender's scores to its own
        plugins' scores, so only the filter sends the pod there for sure), or every node but the
        drained nodes its workload left."""
        kept = steered.nodes(judged)
        if len(kept) == len(judged):
            return list(judged), {}
        hold = steered.hold
        why = (f"berth: the pod replaces a pod drained by NodeDrain {hold.drain}: its room is held on "
               f"{hold.destination}" if hold is not None else "berth: drained: its workload left this node")
        allowed = set(kept)
        return kept, {n: scheduler_text(why) for n in judged if n not in allowed}

    def _tell_refusal(self, pod: PodInfo, record: DecisionRecord) -> None:
        """A BerthRefused Event on a pod no node takes, written in the background (filter never waits
        for the API server), and only when its message differs from the last one the pod got: the
        scheduler retries a pending pod again and again."""
        message = refused_message(record)
        told = self._refusals_told
        if told.get(pod.uid) == message:
            return
        told[pod.uid] = message
        told.move_to_end(pod.uid)
        while len(told) > 10000:
            told.popitem(last=False)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # called outside the app (a test, a script): nothing to write it with
            return
        task = loop.create_task(self._record_refused(pod, message))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _record_refused(self, pod: PodInfo, message: str) -> None:
        try:
            await self.binder.record_refused(pod, message)
        except Exception as exc:  # informative only: the explain API holds the decision
            log.warning("cannot record a BerthRefused Event on pod %s: %s", pod.key, exc)

    # -- prioritize ------------------------------------------------------------------------

    def prioritize(self, args: ExtenderArgs, started: float | None = None) -> orjson.Fragment:
        started = time.perf_counter() if started is None else started
        names, overrides, bad_nodes, _ = read_request_nodes(args, self.store)
        pod = self.read_pod(args.Pod)  # PodUnreadable: answered 400 (a prioritize failure is only logged)
        store = self.store
        with store.lock:
            now = self.clock()
            self.expire_assumptions(now)
            store.remember_pod(pod)
            steered = store.drain_steer(pod, now) if store.holds or store.drained_workloads else NO_STEER
            policy, strategy, governed = self.governing(pod)
            if not governed:
                self.metrics.observe("prioritize", time.perf_counter() - started, "passthrough")
                return priorities(names, steered.nodes(names) if steered.hold is not None else ())
            recent = self._recent
            judged = tuple(n for n in names if n not in bad_nodes) if bad_nodes else tuple(names)
            if steered is not NO_STEER:
                judged = tuple(steered.nodes(judged))
            if (recent is not None and recent.uid == pod.uid and recent.nodes == judged
                    and recent.resource_version == _resource_version(args.Pod)
                    and time.monotonic() - recent.at <= REUSE_SECONDS):
                ranking = recent.ranking
                result = "reused"
            else:
                placed_in = store.placed_round(pod.uid)
                released = store.release_tentative(pod.uid)
                eval_now = self.eval_clock()
                state = self._state(overrides)
                ev, rnd = self._evaluate(state, pod, policy, strategy, judged, now, eval_now, placed_in=placed_in)
                if steered.hold is not None:
                    honour_target(state, pod, steered.hold, ev)  # type: ignore[arg-type]
                ranking = ev.decision.ranking
                winner = ev.decision.winner
                if winner is not None:  # a candidate, so among the judged nodes
                    store.assume(pod, winner, bound=False, deadline=now + self.settings.tentative_ttl_seconds,
                                 round_id=rnd.id if rnd is not None else None)
                store.placed_again(released, winner)
                if self._reuses:
                    self._recent = _Recent(pod.uid, _resource_version(args.Pod), judged, ranking, time.monotonic())
                record = self._stamp(ev.decision, "prioritize").record_data(limit=RECORD_LIMIT, whole_plan=False)
                self._remember_filter_decision(pod.uid, store.keep_decision(pod.key, orjson.dumps(record)))
                result = "scored"
        self.metrics.observe("prioritize", time.perf_counter() - started, result)
        return priorities(names, ranking)

    # -- bind ------------------------------------------------------------------------------

    async def bind(self, args: ExtenderBindingArgs, started: float | None = None) -> dict[str, str]:
        """kube-scheduler's bind: the recheck and reservation here (:meth:`_recheck`), the Binding and
        the Event against the API server (:class:`berth.extender.binding.Bindings`)."""
        return await self.bindings.bind(args, started)

    def _recheck(self, pod: PodInfo, node: str) -> tuple[dict[str, str], str] | str:
        """Under the store lock: judge ``node`` alone against bound + assumed pods and, when it still
        takes the pod, count the pod there as bound. Returns (annotations, event message) or the
        reason of the refusal."""
        store = self.store
        with store.lock:
            now = self.clock()
            self.expire_assumptions(now)
            shown = store.view.pod(pod.uid)
            if shown is not None and shown.node_name and not store.view.is_assumed(pod.uid):
                # The watch shows the pod bound already (a retried or a second scheduler's bind): it
                # keeps its room there, and the API server would refuse the Binding anyway.
                return f"berth: pod {pod.key} is already bound to node {shown.node_name}"
            placed_in = store.placed_round(pod.uid)  # the round its filter placed it in
            # its place (maybe on another node) must not count twice: a tentative one, or a bound one
            # (a bind retried while the first is in flight)
            released = store.release_tentative(pod.uid) or store.release(pod.uid)
            policy, strategy, governed = self.governing(pod)
            if not governed:
                store.assume(pod, node, bound=True, deadline=now + self.settings.assume_ttl_seconds)
                store.placed_again(released, node)
                return {}, ""
            eval_now = self.eval_clock()
            state = self._state(self._known_request_node(node))
            rnd, left, failed_plan = self.round_in_force(state, pod, policy, now, eval_now, placed_in=placed_in)
            if failed_plan is not None:
                store.placed_again(released, None)
                message = failed_plan.error.message if failed_plan.error else "the round cannot be planned"
                return f"berth: {node}: {message}"
            ev = evaluate_pod(state, pod, policy, self.core_settings, eval_now,
                              nodes=[node], quota=left, strategy=strategy)
            hold = store.claimed_hold(pod.uid) if store.holds else None
            if hold is not None and hold.destination == node:
                honour_target(state, pod, hold, ev)  # type: ignore[arg-type]
            refusal = ev.decision.refused.get(node)
            earlier_encoded = self._filter_decisions.pop(pod.uid, None)
            if rnd is not None:
                ev.decision.plan, ev.decision.round_id = rnd.plan, rnd.id  # type: ignore[assignment]  # read only
            decision = self._stamp(ev.decision, "bind")
            if refusal is not None or node not in decision.ranking:
                reason = refusal.reason if refusal is not None else (
                    decision.error.message if decision.error else "refused by the recheck")
                decision.warnings.append(f"bind recheck refused {node}: {reason}")
                store.record_decision(pod.key, decision.record(limit=RECORD_LIMIT, whole_plan=False))
                store.placed_again(released, None)
                return f"berth: {node}: {reason}"
            store.assume(pod, node, bound=True, deadline=now + self.settings.assume_ttl_seconds,
                         round_id=rnd.id if rnd is not None else None)
            store.placed_again(released, node)
            # one pod of the round records its whole plan (berth.core.round: the carrier)
            whole_plan = rnd is not None and store.carry_plan(rnd.id, pod.uid)
            if earlier_encoded is not None and self.core_settings.indexed:
                # filter's record changed as JSON data, not read into the model and encoded again
                data = bind_record_data(node, orjson.loads(earlier_encoded), decision,
                                                      whole_plan=whole_plan, limit=ANNOTATION_LIMIT)
                encoded = store.keep_decision(pod.key, orjson.dumps(data))
                told = (data["strategy"], data["policy"], data["consideredCount"], data["refusedCount"],
                        data["warnings"])
            else:
                earlier = (DecisionRecord.model_validate_json(earlier_encoded)
                           if earlier_encoded is not None else None)
                record = _bind_record(node, earlier, decision, whole_plan=whole_plan)
                encoded = store.record_decision(pod.key, record)
                told = (record.strategy, record.policy, record.considered_count, record.refused_count,
                        record.warnings)
        annotations = {DECISION_ANNOTATION: encoded.decode()}
        if rnd is not None:
            annotations[ROUND_ANNOTATION] = rnd.id
        strategy_name, policy_key, considered_count, refused_count, warnings = told
        message = (f"berth placed the pod on {node} (strategy {strategy_name}"
                   + (f", policy {policy_key}" if policy_key else "")
                   + f"; {considered_count} nodes considered, {refused_count} refused)")
        if warnings:
            message += "; warnings: " + "; ".join(warnings[:3])
        return annotations, message

    def _known_request_node(self, node: str) -> dict[str, NodeInfo]:
        """In ``nodeCacheCapable: false`` mode the node may be known only from the scheduler's requests."""
        if node in self.store.view.nodes:
            return {}
        hit = self.store.request_nodes.get(node)
        return {node: hit[1]} if hit is not None else {}

    # -- preempt ---------------------------------------------------------------------------

    def preempt(self, args: ExtenderPreemptionArgs, started: float | None = None) -> dict[str, Any]:
        """Of the scheduler's candidate nodes, each with the victims its own preemption chose, keep
        those where the pod would pass berth's filter once the victims are gone, victims as given.
        A node berth would refuse anyway (node filter, liveness, rules, spread, the round's plan,
        or still no room) is dropped, so that no pod is evicted for a place berth will not give."""
        started = time.perf_counter() if started is None else started
        given: dict[str, dict[str, Any]] = {}
        if args.NodeNameToMetaVictims is not None:
            for node, meta in args.NodeNameToMetaVictims.items():
                given[node] = meta_victims(meta)
        if args.NodeNameToVictims is not None:
            for node, full in args.NodeNameToVictims.items():
                given.setdefault(node, meta_victims_from_full(full))
        pod = self.read_pod(args.Pod)  # PodUnreadable: answered 400
        store = self.store
        with store.lock:
            now = self.clock()
            self.expire_assumptions(now)
            policy, strategy, governed = self.governing(pod)
            if not governed:
                self.metrics.observe("preempt", time.perf_counter() - started, "as_given")
                return {"NodeNameToMetaVictims": given}
            view = store.view
            eval_now = self.eval_clock()
            # The round in force (Fill, Each) limits where the pod may go; preemption never opens one.
            _, left, _ = self.round_in_force(view, pod, policy, now, eval_now, open_new=False)
            kept: dict[str, dict[str, Any]] = {}
            for node, chosen in given.items():
                ev = evaluate_pod(self._without(view, pod.uid, node, chosen), pod, policy, self.core_settings,
                                  eval_now, nodes=[node], quota=left, strategy=strategy)
                if ev.passing:
                    kept[node] = chosen
                else:
                    refusal = ev.decision.refused.get(node)
                    log.info("preemption on %s for %s dropped: %s", node, pod.key,
                             refusal.reason if refusal is not None else ev.decision.error)
        self.metrics.observe("preempt", time.perf_counter() - started, "judged")
        return {"NodeNameToMetaVictims": kept}

    @staticmethod
    def _without(view: ClusterView, uid: str, node: str, victims: Mapping[str, Any]) -> Overlay:
        """The view as the pod ``uid`` would find ``node`` after preemption: the victims gone, and the
        pod itself counted nowhere (a preemptor may already hold its nominated node)."""
        overlay = Overlay(view)
        preemptor = view.pod(uid)
        if preemptor is not None:
            overlay.remove(preemptor)
        for entry in victims.get("Pods") or ():
            victim = view.pod(entry["UID"])
            if victim is not None and victim.node_name == node:  # as the scheduler listed it
                overlay.remove(victim)
        return overlay

    # -- assumptions -----------------------------------------------------------------------

    def expire_assumptions(self, now: float) -> None:
        """Forget the assumptions whose deadline has passed (each counted), before a verb judges."""
        for entry in self.store.expire(now):
            self.metrics.assumptions_expired.labels("bound" if entry.bound else "tentative").inc()


def _bind_record(node: str, earlier: DecisionRecord | None, recheck: Decision, *,
                 whole_plan: bool = False) -> DecisionRecord:
    """What the bind records (the pod's annotation): filter's judgement of every node, with the node
    kube-scheduler bound the pod to as the winner, at its place in berth's ranking. ``recheck`` is
    the bind's own judgement of that node (stamped), recorded alone when filter's is not known.
    A round is recorded by its id, size and the node's places, and with its whole plan when
    ``whole_plan`` (the round's carrier)."""
    base = earlier if earlier is not None else recheck.record(limit=ANNOTATION_LIMIT, whole_plan=False)
    position = base.ranking.index(node) if node in base.ranking else None
    warnings = list(dict.fromkeys([*base.warnings, *recheck.warnings]))
    if earlier is not None and earlier.ranking and earlier.ranking[0] != node:
        warnings.append(f"kube-scheduler chose {node}; berth ranked {earlier.ranking[0]} first")
    winner = Winner(node=node, rank=None if position is None else position + 1,
                    score=None if position is None else ranked_score(position, max(base.ranking_count, position + 1)))
    plan = recheck.plan
    return base.model_copy(update={
        "trigger": "bind", "time": recheck.time, "winner": winner, "warnings": warnings, "error": None,
        "round": round_plan(recheck.round_id, plan, node, whole=whole_plan) if plan is not None else base.round,
    }).cut(ANNOTATION_LIMIT)


def _identity(raw: Mapping[str, Any]) -> tuple[str, str]:
    """(uid, resourceVersion) of a Pod as sent, empty where missing or unreadable."""
    meta = raw.get("metadata") if isinstance(raw, Mapping) else None
    if not isinstance(meta, Mapping):
        return "", ""
    return str(meta.get("uid") or ""), str(meta.get("resourceVersion") or "")


def _resource_version(raw: Mapping[str, Any]) -> str:
    meta = raw.get("metadata")
    return str(meta.get("resourceVersion") or "") if isinstance(meta, Mapping) else ""
