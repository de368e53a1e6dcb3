"""What a round is, and every rule about one.

A *round* is the pods of one workload (the pods a PlacementPolicy selects in its namespace)
placed together under Fill or Each. Those strategies choose a node set and a count per node for
the whole round (Fill tops each of ``nodesLimit`` nodes up to ``count``; Each adds ``count`` to
each of ``nodesLimit`` nodes), so the node set cannot change pod by pod: the round's *plan*
(node -> pods, in the order the strategy ranks the nodes) is fixed when the round opens, and the
pods then take its places one by one, each the first node of the plan with a place left that
the pod's own checks (liveness, room, spread, rules) let it have.

**The count rule** (the only one; the extender, the operator's status and ``berth simulate``
all apply it through :func:`open_round`; ``docs/behaviour.md``, "Rounds", says it for users): a
round opened at ``now`` places

    min(the strategy's own round, the pods waiting for a node)

and at least one pod (the pod that asks). *The pods waiting* are the policy's pending pods that
berth has not placed yet, the asking pod included. Fewer waiting than the strategy's round: the
plan is cut to them in plan order, so no place is held for a pod that does not exist (a held
place would keep the round open for pods that come later). More waiting: the round places its
own number and the rest wait for the next round, which opens when this one is used up (Each adds
``count`` again; Fill finds its nodes full and says so). Why this rule: a plan larger than the
waiting pods reserves room nobody takes, and a plan that must hold every waiting pod refuses a
scale-up that one round cannot hold although the round itself places fine; the greedy strategies
have no round size of their own, so their round is every waiting pod, placed pod by pod.

**Its life** (pure functions; the time is always the caller's ``now``):

- :func:`open_round`: plan it for the waiting pods (the count rule); :func:`refused_by_round`:
  what a pod is told when its round cannot open;
- :func:`next_node` / :func:`sequence` / :func:`quota`: where its next pods go;
- :func:`consume` / :func:`release`: a pod takes a place, or gives it back (its bind failed,
  its tentative place lapsed);
- :func:`in_force` / :func:`expired`: a round is in force while it has a place left for the pod
  and was active within ``timeout``; otherwise the next pod opens a new round;
- :func:`judged_in`: a pod placed in a round (chosen by its filter, or nominated) keeps its place
  there until it is bound: its filter again and its bind judge it within that round, while the
  next pods, which found the round used up, are placed in the next one;
- :func:`note` / :func:`resume`: every pod placed in a round carries the round's id
  (:data:`ROUND_ANNOTATION`) and its decision (with its time), and one of them, the round's
  *carrier*, the whole plan (:func:`carried`, :func:`needs_carrier`), so a restarted extender,
  and the operator, rebuild the round from the pods alone while its carrier exists. Why one: a
  plan names every node the round uses (thousands at 5,000 nodes), and recorded on every pod it
  made each Binding, each pod and each watch event of it that much larger.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from berth.core.candidates import Candidate, CandidateSet
from berth.core.decision import DECISION_ANNOTATION, Decision, DecisionRecord, Refusal, Refused
from berth.core.errors import ErrorCode, PlacementError
from berth.core.framework import collect_candidates
from berth.core.index import rounds as kept_rounds
from berth.core.kube import ObjectError, parse_time
from berth.core.model import PodInfo
from berth.core.policy import ROUND_STRATEGIES, PlacementPolicy, Strategy
from berth.core.settings import Settings, index_from_environment
from berth.core.strategies import each, fill
from berth.core.view import ClusterState

ROUND_ANNOTATION = "berth.dev/round"
"""``<policy namespace>/<policy name>@<round opened, epoch ms>`` on every pod berth binds in a round."""

ROUND_TIMEOUT_SECONDS = 120.0
"""A round left idle this long closes (the extender's ``BERTH_ROUND_TIMEOUT_SECONDS`` default)."""

SPREAD_WARNING = ("the round's plan is made from capacity; topologySpreadConstraints are checked pod by pod "
                  "and may hold back planned pods")


# -- the model ---------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Round:
    """One round of a Fill or Each policy: its plan, fixed when it opened, and the pods placed in
    it so far (tentatively, bound, or as the pods' annotations show)."""

    policy: str  # namespace/name of the policy
    opened: float  # epoch seconds
    plan: Mapping[str, int]  # node -> pods, in the plan's order (the order the pods take them)
    active: float  # the last time a pod took a place in it (epoch seconds)
    placed: Mapping[str, str] = field(default_factory=dict)  # pod uid -> node
    closed: bool = False  # its policy changed: it takes no more pods
    carrier: str | None = None  # the pod whose decision records the plan (None: the next bind records it)
    # what the index keeps on the round (berth.core.index.rounds): its places left; always None with
    # the index off
    index: dict[str, int] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def id(self) -> str:
        return round_id(self.policy, self.opened)

    @property
    def size(self) -> int:
        return sum(self.plan.values())


@dataclass(frozen=True, slots=True)
class RoundMark:
    """What one pod's annotations record of the round it was placed in."""

    round_id: str
    plan: Mapping[str, int] | None  # the decision's plan (None: no readable decision)
    time: float | None  # the decision's time (epoch seconds)


@dataclass(frozen=True, slots=True)
class Opening:
    """What :func:`open_round` made: the round, or (``round`` None) the decision saying why none
    opens (``decision.error``)."""

    round: Round | None
    decision: Decision
    waiting: int  # the pods waiting when it opened (the count rule's second term)

    @property
    def error(self) -> PlacementError | None:
        return self.decision.error


def round_id(policy: str, opened: float) -> str:
    return f"{policy}@{int(opened * 1000)}"


def opening_time(previous: Round | None, now: float) -> float:
    """When a round of the policy of ``previous`` (its round before) opening at ``now`` is recorded
    as opened: a round's id names the millisecond it opened in, and a round opened within the
    millisecond of the one before would share its id (rounds can open pod after pod when each
    holds one place), so one millisecond after it at least."""
    if previous is None:
        return now
    return max(now, (int(previous.opened * 1000) + 1) / 1000)


def parse_round_id(text: str) -> tuple[str, float] | None:
    """(policy key, opened) of a round id; None for text that is not one."""
    key, sep, millis = text.rpartition("@")
    if not sep or "/" not in key or not millis.isdigit():
        return None
    return key, int(millis) / 1000.0


# -- open ------------------------------------------------------------------------------------

def round_size(whole: int, waiting: int) -> int:
    """The count rule: the pods a round places when the strategy's own round holds ``whole`` and
    ``waiting`` pods wait for a node (the asking pod among them)."""
    return min(whole, max(waiting, 1))


@dataclass
class RoundPlan:
    """The strategy's own plan of a round (:func:`plan_fixed_round`)."""

    plan: dict[str, int]  # node -> pods, in the plan's order
    candidates: CandidateSet  # the first pod's judgement
    error: PlacementError | None


def plan_fixed_round(state: ClusterState, pod: PodInfo, policy: PlacementPolicy, strategy: Strategy,
                     settings: Settings, now: float, count: int | None, *,
                     nodes: Sequence[str] | None = None, enough: int | None = None) -> RoundPlan:
    """Fill's or Each's own plan for pods shaped like ``pod``, cut to the first ``count`` places in
    plan order (None: uncut; more than the plan holds is an error); ``nodes`` limits where they may
    go (default: every node). ``settings`` carry the policy's overrides already. ``enough``: a
    caller that takes no more than that many places of the plan may get only its first places,
    at least that many when the plan has them (:func:`_own_plan`)."""
    result = collect_candidates(state, pod, policy, settings, now, nodes=nodes, strategy=strategy,
                                require_fit=False, lazy=enough is not None)
    if policy.spread_constraints:
        result.warnings.append(SPREAD_WARNING)
    if result.error is not None:
        return RoundPlan({}, result, result.error)
    planned = _own_plan(result, strategy, policy, enough)
    if isinstance(planned, PlacementError):
        return RoundPlan({}, result, planned)
    if count is None:
        return RoundPlan(planned, result, None)
    total = sum(planned.values())
    if count > total:
        return RoundPlan({}, result, PlacementError(
            ErrorCode.INSUFFICIENT_RESOURCE,
            f"{strategy.value}: the plan places {total} pods ({_describe(planned)}); {count} requested"))
    return RoundPlan(take(planned, count), result, None)


class _RoundStrategy(Protocol):
    """What a strategy with a round of its own (:mod:`~berth.core.strategies.fill`,
    :mod:`~berth.core.strategies.each`) gives the round planner."""

    def key(self, c: Candidate, /) -> tuple[object, ...]: ...

    def reach(self, c: Candidate, /) -> tuple[object, ...]: ...

    def every_reaches(self, lowest: Candidate | None, count: int, /) -> bool: ...

    def plan(self, ordered: Iterable[Candidate], size: int, count: int, limit: int, *,
             enough: int | None = None) -> dict[str, int] | PlacementError: ...


def _own_plan(result: CandidateSet, strategy: Strategy, policy: PlacementPolicy,
              enough: int | None) -> dict[str, int] | PlacementError:
    """Fill's or Each's plan of ``result``'s candidates. With ``enough``, and every candidate able
    to take its part of the policy's count (read off the least ``reach`` of the view's kept
    order), a walk of the kept order that stops once the plan holds ``enough`` pods; else the
    whole plan."""
    own: _RoundStrategy = fill if strategy is Strategy.FILL else each
    if enough is not None:
        walk, by_reach = result.walk_by(own.key), result.walk_by(own.reach)
        if walk is not None and by_reach is not None and own.every_reaches(next(by_reach, None), policy.count):
            return own.plan(walk, result.count, policy.count, policy.nodes_limit, enough=enough)
    ordered = result.sorted_by(own.key)
    return own.plan(ordered, len(ordered), policy.count, policy.nodes_limit)


def open_round(state: ClusterState, pod: PodInfo, policy: PlacementPolicy, settings: Settings, now: float,
               waiting: int, *, judged_at: float | None = None) -> Opening:
    """Open a round of ``policy`` at ``now`` for ``waiting`` pods shaped like ``pod`` (the count
    rule: :func:`round_size`). ``settings`` are the cluster's (the policy's overrides are applied
    here); ``judged_at`` is the time node liveness is judged at (default ``now``)."""
    settings = settings.for_policy(policy)
    strategy = policy.strategy
    if strategy not in ROUND_STRATEGIES:
        raise ValueError(f"{policy.strategy_name} places pod by pod: it has no round")
    # the round takes at most the waiting pods' places (round_size): the plan's first ones will do
    fixed = plan_fixed_round(state, pod, policy, strategy, settings, now if judged_at is None else judged_at, None,
                             enough=max(waiting, 1))
    first, error = fixed.candidates, fixed.error
    plan = take(fixed.plan, round_size(sum(fixed.plan.values()), waiting)) if error is None else {}
    decision = Decision(pod=pod.key, policy=policy.key, strategy=strategy.value, considered=first.considered,
                        refused=Refused(first.refused), warnings=list(first.warnings), trigger="plan",
                        plan=None if error is not None else dict(plan), error=error)
    rnd = Round(policy.key, now, plan, now) if error is None else None
    return Opening(rnd, decision, waiting)


def refused_by_round(failed: Decision, nodes: Sequence[str]) -> Decision:
    """The decision for a pod whose round cannot open (``failed``: :attr:`Opening.decision`):
    each of ``nodes`` refused for the round's reason, resolvable when the round lacks room
    (preemption may make it), and the round's error and warnings."""
    error = failed.error or PlacementError(ErrorCode.INSUFFICIENT_RESOURCE, "the round cannot be planned")
    refusal = Refusal(f"{error.code.value}: {error.message}", error.code is ErrorCode.INSUFFICIENT_RESOURCE)
    return Decision(pod=failed.pod, policy=failed.policy, strategy=failed.strategy, considered=list(nodes),
                    refused=Refused(dict.fromkeys(nodes, refusal)), warnings=list(failed.warnings), error=error)


# -- next, consume, release --------------------------------------------------------------------

def quota(rnd: Round, exclude_uid: str = "") -> dict[str, int]:
    """The places left, node -> pods, in plan order; ``exclude_uid``'s own place counts as free
    (the pod asking again)."""
    own = rnd.placed.get(exclude_uid) if exclude_uid else None
    # the round's functions take no settings: the index's switch is read from the environment
    if index_from_environment():  # kept on the round by the index, read without a walk of the plan
        return kept_rounds.quota(rnd, own, counted_left, with_place)
    left = counted_left(rnd)
    if own is not None and own in left:
        left = {**left, own: left[own] + 1}
    return with_place(left)


def with_place(left: Mapping[str, int]) -> dict[str, int]:
    """The nodes of ``left`` (node -> places left) with a place left, in its order."""
    return {node: n for node, n in left.items() if n > 0}


def counted_left(rnd: Round) -> dict[str, int]:
    """Node -> the plan's count minus the round's pods placed there, for every node of the plan,
    in its order: counted from the round's pods."""
    used: dict[str, int] = {}
    for node in rnd.placed.values():
        used[node] = used.get(node, 0) + 1
    return {node: count - used.get(node, 0) for node, count in rnd.plan.items()}


def _moved(rnd: Round, changed: Round, took: str | None, gave: str | None) -> Round:
    """``changed``: ``rnd`` with one pod's place taken on ``took`` and one given back on ``gave``;
    with the index on, its counts left are kept, derived from ``rnd``'s."""
    if index_from_environment():
        kept_rounds.moved(rnd, changed, took, gave, counted_left)
    return changed


def remaining(rnd: Round, exclude_uid: str = "") -> int:
    return sum(quota(rnd, exclude_uid).values())


def next_node(rnd: Round, exclude_uid: str = "", passing: Container[str] | None = None) -> str | None:
    """The node the round's next pod takes: the first of the plan with a place left (among
    ``passing``, the nodes the pod's own checks let it have); None when none is left."""
    for node in quota(rnd, exclude_uid):
        if passing is None or node in passing:
            return node
    return None


def sequence(rnd: Round, exclude_uid: str = "") -> list[str]:
    """The node each of the round's next pods takes, in order, when their own checks refuse none."""
    return [node for node, left in quota(rnd, exclude_uid).items() for _ in range(left)]


def consume(rnd: Round, uid: str, node: str, now: float) -> Round:
    """The round after pod ``uid`` took a place on ``node`` at ``now`` (a pod placed again moves)."""
    return _placing(rnd, uid, node, max(rnd.active, now))


def _placing(rnd: Round, uid: str, node: str, active: float) -> Round:
    return _moved(rnd, replace(rnd, placed={**rnd.placed, uid: node}, active=active), node, rnd.placed.get(uid))


def release(rnd: Round, uid: str) -> Round:
    """The round after pod ``uid`` gave its place back (its tentative place lapsed, its bind failed);
    a carrier that gives its place back carries the plan no more."""
    node = rnd.placed.get(uid)
    if node is None:
        return uncarried(rnd, uid)
    placed = dict(rnd.placed)
    del placed[uid]
    return _moved(rnd, replace(rnd, placed=placed, carrier=None if rnd.carrier == uid else rnd.carrier), None, node)


def needs_carrier(rnd: Round) -> bool:
    """Whether the next pod bound in the round records its whole plan: no pod does yet, or the one
    that did is gone."""
    return rnd.carrier is None


def carried(rnd: Round, uid: str) -> Round:
    """The round once pod ``uid``'s decision records its whole plan (its bind is under way)."""
    return rnd if rnd.carrier == uid else replace(rnd, carrier=uid)


def uncarried(rnd: Round, uid: str) -> Round:
    """The round once pod ``uid`` is gone (deleted, or its bind failed): when it carried the plan,
    the next pod bound records it again."""
    return replace(rnd, carrier=None) if rnd.carrier == uid else rnd


def close(rnd: Round) -> Round:
    """The round after its policy changed: it takes no more pods; the next pod opens a new one."""
    return replace(rnd, closed=True)


# -- expire ------------------------------------------------------------------------------------

def expired(rnd: Round, now: float, timeout: float = ROUND_TIMEOUT_SECONDS) -> bool:
    """Idle for longer than ``timeout`` at ``now``."""
    return now - rnd.active > timeout


def in_force(rnd: Round | None, now: float, timeout: float = ROUND_TIMEOUT_SECONDS, uid: str = "") -> bool:
    """Whether pod ``uid`` is placed within ``rnd`` at ``now``: the round is open, active within
    ``timeout`` and has a place left for it. Otherwise the pod opens the next round."""
    return places_left(rnd, now, timeout, uid) is not None


def places_left(rnd: Round | None, now: float, timeout: float = ROUND_TIMEOUT_SECONDS, uid: str = ""
                ) -> dict[str, int] | None:
    """The round's places left for pod ``uid`` (:func:`quota`) when the round is in force for it at
    ``now`` (:func:`in_force`), else None: one count of the round's pods where asking whether it is
    in force and then for its quota would make two (a round's count grows with its pods, and a
    pod's filter and bind each ask both)."""
    if rnd is None or rnd.closed or expired(rnd, now, timeout):
        return None
    return quota(rnd, uid) or None


def judged_in(placed_in: Round | None, book: Round | None, now: float, timeout: float = ROUND_TIMEOUT_SECONDS,
              uid: str = "") -> tuple[Round, dict[str, int]] | None:
    """The round pod ``uid`` is judged in at ``now`` and its places left for it: ``placed_in``, the
    round it holds a place in (not bound yet), while that round is in force for it, even when
    ``book``, the policy's latest round, has moved on because later pods found ``placed_in`` used
    up; else ``book`` while in force; None: the pod opens the next round. Why: a round's pods take
    its places before any of them is bound (kube-scheduler binds a pod while it judges the next,
    and a nomination takes a place long before); judged within the next round, a pod would find
    its own place not part of it."""
    same = placed_in is None or (book is not None and placed_in.id == book.id)
    for rnd in (book,) if same else (placed_in, book):
        left = places_left(rnd, now, timeout, uid)
        if left is not None and rnd is not None:
            return rnd, left
    return None


# -- resume from recorded decisions -------------------------------------------------------------

def recorded_mark(annotations: Mapping[str, Any]) -> RoundMark | None:
    """The round a pod's annotations record: its id (:data:`ROUND_ANNOTATION`, else the one in the
    decision), and the plan and time of the decision berth recorded beside it, read as a
    :class:`DecisionRecord` (of this version, or one berth wrote before it); None when they record
    no round. A pod with no round annotation whose record says it has no round (every pod berth
    binds outside Fill and Each) is told without reading the record: the watch asks for every
    bound pod it sees."""
    raw = annotations.get(DECISION_ANNOTATION)
    text = annotations.get(ROUND_ANNOTATION)
    if not isinstance(text, str) and (not isinstance(raw, str | bytes) or _names_no_round(raw)):
        return None
    record = DecisionRecord.read_json(raw) if isinstance(raw, str | bytes) else None
    if not isinstance(text, str) and record is not None and record.round is not None:
        text = record.round.id
    if not isinstance(text, str) or parse_round_id(text) is None:
        return None
    if record is None:
        return RoundMark(text, None, None)
    plan = dict(record.round.plan) if record.round is not None and record.round.plan is not None else None
    try:
        when: float | None = parse_time(record.time)
    except ObjectError:
        when = None
    return RoundMark(text, plan, when)


def _names_no_round(raw: str | bytes) -> bool:
    """Whether a record's JSON has ``"round":null`` (as berth writes a record of no round: every
    field present, no spaces); JSON's escaping keeps the text from matching inside a string."""
    return (b'"round":null' in raw) if isinstance(raw, bytes) else ('"round":null' in raw)


def note(rnd: Round | None, mark: RoundMark, uid: str, node: str) -> Round | None:
    """The round of a policy after a pod recorded as placed on ``node`` in round ``mark`` is
    seen: a newer round than ``rnd`` replaces it when the mark records its plan (the pod is its
    carrier; a newer round's other pods change nothing until its carrier is seen: the caller
    notes them again then), the same round counts the pod (and the decision's time as
    activity), an older one changes nothing."""
    parsed = parse_round_id(mark.round_id)
    if parsed is None or not node:
        return rnd
    policy, opened = parsed
    if rnd is None or opened > rnd.opened:
        if mark.plan is None:
            return rnd
        rnd = Round(policy, opened, dict(mark.plan), opened, carrier=uid)
    elif mark.round_id != rnd.id:
        return rnd
    elif mark.plan is not None and rnd.carrier is None:
        rnd = carried(rnd, uid)
    active = rnd.active if mark.time is None else max(rnd.active, mark.time)
    if rnd.placed.get(uid) == node and active == rnd.active:
        return rnd
    return _placing(rnd, uid, node, active)


def resume(placed: Iterable[tuple[str, str, RoundMark]]) -> dict[str, Round]:
    """Each policy's latest round, rebuilt from the pods recorded in it: (uid, node, mark) of
    every placed pod (:func:`recorded_mark`), in any order: the marks recording a plan are read
    first. Whether the round is still in force is :func:`in_force`'s to say at the caller's ``now``."""
    book: dict[str, Round] = {}
    for uid, node, mark in sorted(placed, key=lambda item: item[2].plan is None):
        parsed = parse_round_id(mark.round_id)
        if parsed is None:
            continue
        found = note(book.get(parsed[0]), mark, uid, node)
        if found is not None:
            book[parsed[0]] = found
    return book


# -- helpers -----------------------------------------------------------------------------------

def take(plan: Mapping[str, int], count: int) -> dict[str, int]:
    """The first ``count`` places of ``plan``, in its order."""
    taken: dict[str, int] = {}
    left = count
    for node, n in plan.items():
        if left <= 0:
            break
        taken[node] = min(n, left)
        left -= taken[node]
    return taken


def _describe(plan: Mapping[str, int]) -> str:
    return ", ".join(f"{node}: {n}" for node, n in plan.items())
