"""A round as the core defines it: opened under the one count rule, its places taken and given
back, expired at the caller's ``now``, and rebuilt from the decisions recorded on its pods."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from unittest import mock

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from berth.core import round as rounds
from berth.core.candidates import Candidate
from berth.core.decision import DECISION_ANNOTATION, Decision
from berth.core.errors import ErrorCode, PlacementError
from berth.core.round import ROUND_ANNOTATION, Round, RoundMark
from berth.core.settings import INDEX_VARIABLE, Settings
from berth.core.strategies import each, fill
from tests.builders import make_node, make_pod, make_policy
from tests.core.builders import NOW, cluster, round_candidate

NODES = [make_node("a").cpu("4").info(), make_node("b").cpu("8").info(), make_node("c").cpu("2").info()]
SHAPE = make_pod("w").cpu("500m").info()


# -- open: the count rule ------------------------------------------------------------------------

OPEN: list[tuple[str, dict[str, Any], int, dict[str, int] | None, str | None]] = [
    # name, policy spec, pods waiting, the round's plan (None: no round), the error code
    ("fill_round_cut_to_the_waiting_pods", {"strategy": "Fill", "count": 2, "nodesLimit": 2}, 3,
     {"b": 2, "a": 1}, None),
    ("fill_round_exactly_its_own_size", {"strategy": "Fill", "count": 2, "nodesLimit": 2}, 4,
     {"b": 2, "a": 2}, None),
    ("more_waiting_than_the_round_holds_the_rest_wait", {"strategy": "Fill", "count": 2, "nodesLimit": 2}, 9,
     {"b": 2, "a": 2}, None),
    ("no_pod_counted_waiting_still_places_the_asking_pod", {"strategy": "Fill", "count": 2, "nodesLimit": 2}, 0,
     {"b": 1}, None),
    ("fill_every_node_round_cut_to_the_waiting_pods", {"strategy": "Fill", "count": 2}, 3,
     {"b": 2, "a": 1}, None),
    ("fill_every_node_round_refused_when_a_node_cannot_reach_count_however_few_wait",
     {"strategy": "Fill", "count": 5}, 1, None, "insufficient_resource"),
    ("fill_every_node_round_of_more_waiting_than_it_holds_is_the_whole_plan", {"strategy": "Fill", "count": 2}, 9,
     {"b": 2, "a": 2, "c": 2}, None),
    ("each_every_node_round_cut_to_the_waiting_pods", {"strategy": "Each", "count": 2}, 3,
     {"b": 2, "a": 1}, None),
    ("each_every_node_round_refused_when_a_node_lacks_room_however_few_wait",
     {"strategy": "Each", "count": 5}, 1, None, "insufficient_resource"),
    ("each_round_cut_to_the_waiting_pods", {"strategy": "Each", "count": 2, "nodesLimit": 3}, 5,
     {"b": 2, "a": 2, "c": 1}, None),
    ("each_round_refused_when_too_few_nodes_take_count", {"strategy": "Each", "count": 9, "nodesLimit": 2}, 1,
     None, "insufficient_resource"),
]


@pytest.mark.parametrize(("name", "spec", "waiting", "plan", "code"), OPEN, ids=[c[0] for c in OPEN])
def test_open_round(name: str, spec: dict[str, Any], waiting: int, plan: dict[str, int] | None,
                    code: str | None) -> None:
    opening = rounds.open_round(cluster(NODES), SHAPE, make_policy().spec(**spec).build(), Settings(), NOW, waiting)
    if plan is None:
        assert opening.round is None and opening.error is not None and opening.error.code.value == code
        return
    assert opening.error is None and opening.round is not None
    assert list(opening.round.plan.items()) == list(plan.items())  # the plan's order is the order pods take it
    assert opening.round.opened == opening.round.active == NOW and opening.round.placed == {}
    assert opening.decision.plan == plan and opening.round.id == f"shop/web@{int(NOW * 1000)}"


@pytest.mark.parametrize("strategy", ["Fill", "Each"])
def test_a_round_for_one_waiting_pod_plans_only_its_place_with_the_index_on(strategy: str, index_path: str) -> None:
    """Fill or Each over every node, one pod waiting: with the index, once the least reach among
    the candidates shows every node can take its part, the walk of the kept order stops at the
    pod's place (a steady stream opens a round a pod); without it, the whole plan is made and cut."""
    planned = {"n0": 1} if index_path == "indexed" else {f"n{i}": 1 for i in range(6)}
    nodes = [make_node(f"n{i}").cpu("4").info() for i in range(6)]
    made: list[object] = []
    own = fill if strategy == "Fill" else each
    whole_plan = own.plan

    def recorded(*args: Any, **kwargs: Any) -> object:
        made.append(whole_plan(*args, **kwargs))
        return made[-1]

    with mock.patch.object(own, "plan", recorded):
        opening = rounds.open_round(cluster(nodes), SHAPE, make_policy().strategy(strategy).count(1).build(),
                                    Settings(), NOW, 1)
    assert opening.round is not None and opening.round.plan == {"n0": 1}
    assert made == [planned]


FILL_WALK = [round_candidate("full", count=2, capacity=3), round_candidate("half", count=1, capacity=3),
             round_candidate("empty", count=0, capacity=3), round_candidate("last", count=0, capacity=3)]
EACH_WALK = [round_candidate(f"n{i}", count=0, capacity=3) for i in range(4)]

WALKS: list[tuple[str, str, list[Candidate], int, int, int | None, dict[str, int] | ErrorCode, list[str]]] = [
    # name, strategy, candidates in its order, count, nodesLimit, enough, the plan (or its error), nodes walked
    ("fill_stops_once_the_plan_holds_enough", "Fill", FILL_WALK, 2, 0, 2, {"half": 1, "empty": 2},
     ["full", "half", "empty"]),
    ("fill_without_enough_walks_every_node", "Fill", FILL_WALK, 2, 0, None, {"half": 1, "empty": 2, "last": 2},
     ["full", "half", "empty", "last"]),
    ("fill_with_a_limit_beyond_the_candidates_walks_every_node_and_fails", "Fill", FILL_WALK, 2, 5, 1,
     ErrorCode.INSUFFICIENT_RESOURCE, ["full", "half", "empty", "last"]),
    ("each_stops_once_the_plan_holds_enough", "Each", EACH_WALK, 2, 0, 3, {"n0": 2, "n1": 2}, ["n0", "n1"]),
    ("each_without_enough_walks_its_limit", "Each", EACH_WALK, 2, 3, None, {"n0": 2, "n1": 2, "n2": 2},
     ["n0", "n1", "n2"]),
]


@pytest.mark.parametrize(("name", "strategy", "candidates", "count", "limit", "enough", "want", "walked"), WALKS,
                         ids=[c[0] for c in WALKS])
def test_a_round_plan_stops_its_walk_at_enough_pods(name: str, strategy: str, candidates: list[Candidate],
                                                    count: int, limit: int, enough: int | None,
                                                    want: dict[str, int] | ErrorCode, walked: list[str]) -> None:
    pulled: list[str] = []

    def walk() -> Iterator[Candidate]:
        for c in candidates:
            pulled.append(c.name)
            yield c

    own = fill if strategy == "Fill" else each
    got = own.plan(walk(), len(candidates), count, limit, enough=enough)
    assert (got.code if isinstance(got, PlacementError) else got) == want
    assert pulled == walked


@pytest.mark.parametrize(("room", "count", "every"), [([3, 2], 2, True), ([3, 1], 2, False), ([], 2, True)])
def test_every_candidate_has_room_for_each_read_off_the_least_room(room: list[int], count: int,
                                                                   every: bool) -> None:
    candidates = [round_candidate(f"n{i}", count=5, capacity=r) for i, r in enumerate(room)]
    assert each.every_reaches(min(candidates, key=each.reach, default=None), count) is every
    assert every == all(c.capacity >= count for c in candidates)


@pytest.mark.parametrize(("counts_and_room", "count", "every"), [
    ([(0, 3), (2, 0)], 2, True),
    ([(0, 3), (1, 0)], 2, False),
    ([], 2, True),
])
def test_every_candidate_reaches_count_read_off_the_least_reach(counts_and_room: list[tuple[int, int]], count: int,
                                                                 every: bool) -> None:
    candidates = [round_candidate(f"n{i}", count=c, capacity=room) for i, (c, room) in enumerate(counts_and_room)]
    lowest = min(candidates, key=fill.reach, default=None)
    assert fill.every_reaches(lowest, count) is every
    assert every == all(max(count - c.count, 0) <= c.capacity for c in candidates)


def test_a_full_fill_round_opens_nothing() -> None:
    full = [make_pod(f"x{i}").on(n).cpu("500m").info() for i, n in enumerate(["a", "a", "b", "b"])]
    opening = rounds.open_round(cluster(NODES, full), SHAPE, (make_policy()
                                                              .strategy("Fill")
                                                              .count(2)
                                                              .nodes_limit(2)
                                                              .build()),
                                Settings(), NOW, 3)
    assert opening.round is None and opening.error is not None and opening.error.code.value == "already_filled"


def test_greedy_strategies_have_no_round() -> None:
    with pytest.raises(ValueError, match="pod by pod"):
        rounds.open_round(cluster(NODES), SHAPE, make_policy().strategy("Auto").build(), Settings(), NOW, 3)


@pytest.mark.parametrize(("whole", "waiting", "size"), [(4, 9, 4), (4, 3, 3), (4, 4, 4), (4, 0, 1), (1, 1, 1)])
def test_round_size_is_the_smaller_of_the_strategys_round_and_the_waiting_pods(whole: int, waiting: int,
                                                                                size: int) -> None:
    assert rounds.round_size(whole, waiting) == size


# -- next pod's node, consume, release ----------------------------------------------------------

PLAN = {"b": 2, "a": 1}


def opened(placed: dict[str, str] | None = None, active: float = NOW) -> Round:
    return Round("shop/web", NOW, PLAN, active, placed or {})


NEXT: list[tuple[str, dict[str, str], str, set[str] | None, str | None, list[str]]] = [
    # name, placed, the asking pod, the nodes its checks pass, next node, the sequence of the rest
    ("an_empty_round_starts_at_the_plans_first_node", {}, "p0", None, "b", ["b", "b", "a"]),
    ("a_node_with_no_place_left_is_passed_over", {"p0": "b", "p1": "b"}, "p2", None, "a", ["a"]),
    ("the_asking_pods_own_place_counts_as_free", {"p0": "b", "p1": "b"}, "p1", None, "b", ["b", "a"]),
    ("a_node_its_checks_refuse_is_passed_over", {}, "p0", {"a", "c"}, "a", ["b", "b", "a"]),
    ("a_used_up_round_has_no_next_node", {"p0": "b", "p1": "b", "p2": "a"}, "p3", None, None, []),
    ("a_pod_off_the_plan_takes_no_place", {"p0": "c"}, "p1", None, "b", ["b", "b", "a"]),
]


@pytest.mark.parametrize(("name", "placed", "uid", "passing", "want", "rest"), NEXT, ids=[c[0] for c in NEXT])
def test_next_node(name: str, placed: dict[str, str], uid: str, passing: set[str] | None, want: str | None,
                   rest: list[str]) -> None:
    rnd = opened(placed)
    assert rounds.next_node(rnd, uid, passing) == want
    assert rounds.sequence(rnd, uid) == rest
    assert rounds.remaining(rnd, uid) == len(rest)


def test_consume_takes_a_place_and_marks_the_round_active() -> None:
    rnd = opened()
    after = rounds.consume(rnd, "p0", "b", NOW + 5)
    assert rnd.placed == {} and rnd.active == NOW  # pure: the round given is unchanged
    assert after.placed == {"p0": "b"} and after.active == NOW + 5
    assert rounds.quota(after) == {"b": 1, "a": 1}
    moved = rounds.consume(after, "p0", "a", NOW + 6)  # placed again elsewhere: it moves
    assert rounds.quota(moved) == {"b": 2}


def test_release_gives_the_place_back() -> None:
    rnd = rounds.consume(opened(), "p0", "b", NOW + 1)
    assert rounds.quota(rounds.release(rnd, "p0")) == dict(PLAN)
    assert rounds.release(rnd, "unknown") is rnd


def test_sequence_is_what_next_node_and_consume_give_pod_after_pod() -> None:
    rnd = opened()
    taken = []
    for i in range(4):
        where = rounds.next_node(rnd, f"p{i}")
        if where is None:
            break
        taken.append(where)
        rnd = rounds.consume(rnd, f"p{i}", where, NOW + i)
    assert taken == rounds.sequence(opened()) == ["b", "b", "a"]


# A pod takes a place on a node (of the plan or not), gives its place back, or is seen recorded in
# the round (as a restarted extender sees it).
CHANGES = st.lists(st.tuples(st.sampled_from(["consume", "release", "note"]), st.sampled_from(["p0", "p1", "p2", "p3"]),
                             st.sampled_from(["a", "b", "c"])), max_size=12)


def _places_left_pod_by_pod(changes: list[tuple[str, str, str]], index: str,
                            plan: dict[str, int] = PLAN) -> list[dict[str, dict[str, int]]]:
    """Each pod's places left after each change, with ``BERTH_INDEX`` set to ``index``."""
    seen = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(INDEX_VARIABLE, index)
        rnd: Round | None = Round("shop/web", NOW, plan, NOW)
        mark = RoundMark(opened().id, None, None)
        for i, (change, uid, node) in enumerate(changes):
            assert rnd is not None
            if change == "consume":
                rnd = rounds.consume(rnd, uid, node, NOW + i)
            elif change == "release":
                rnd = rounds.release(rnd, uid)
            else:
                rnd = rounds.note(rnd, mark, uid, node)
            assert rnd is not None
            seen.append({pod: rounds.quota(rnd, pod) for pod in ("", "p0", "p1", "p2", "p3")})
    return seen


@given(CHANGES)
def test_places_left_kept_by_the_index_are_those_counted_from_the_pods(changes: list[tuple[str, str, str]]) -> None:
    """With the index on, a round's places left are kept as its pods take and give them back;
    with it off, counted from its pods at every ask: the same, whatever the changes."""
    assert _places_left_pod_by_pod(changes, "on") == _places_left_pod_by_pod(changes, "off")


# A longer plan, so that a node given its first place back goes in front of, between or behind the
# nodes with a place left (node "e" is off the plan).
LONG_CHANGES = st.lists(st.tuples(st.sampled_from(["consume", "release", "note"]),
                                  st.sampled_from(["p0", "p1", "p2", "p3", "p4", "p5"]),
                                  st.sampled_from(["a", "b", "c", "d", "e"])), max_size=20)


@given(LONG_CHANGES)
def test_places_left_kept_by_the_index_on_a_longer_plan_are_those_counted_from_the_pods(
        changes: list[tuple[str, str, str]]) -> None:
    plan = {"d": 1, "b": 2, "a": 1, "c": 2}
    assert _places_left_pod_by_pod(changes, "on", plan) == _places_left_pod_by_pod(changes, "off", plan)


@pytest.mark.parametrize("index", ["on", "off"])
def test_a_rounds_places_left_are_read_without_a_walk_of_its_plan_with_the_index_on(
        index: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """As the extender's cycle asks, pod after pod: filter asks and takes a place, bind gives it back,
    asks and takes it again. With the index, the nodes with a place left are walked out of the
    plan's counts once, then kept; without it, at every ask."""
    monkeypatch.setenv(INDEX_VARIABLE, index)
    rnd = Round("shop/web", NOW, {f"n{i}": 2 for i in range(5)}, NOW)
    walks = mock.patch.object(rounds, "with_place", wraps=rounds.with_place)
    with walks as walked:
        for i in range(9):
            uid = f"p{i}"
            node = rounds.next_node(rnd, uid)
            assert node == f"n{i // 2}"
            rnd = rounds.release(rounds.consume(rnd, uid, node, NOW + i), uid)
            assert rounds.quota(rnd, uid) == {f"n{j}": 2 - (j == i // 2) * (i % 2) for j in range(i // 2, 5)}
            rnd = rounds.consume(rnd, uid, node, NOW + i)
    assert walked.call_count == (1 if index == "on" else 18)


def test_a_round_keeps_its_places_left_with_the_index_on_only(monkeypatch: pytest.MonkeyPatch) -> None:
    for index, kept in (("on", {"b": 1, "a": 1}), ("off", None)):
        monkeypatch.setenv(INDEX_VARIABLE, index)
        rnd = rounds.consume(opened(), "p0", "b", NOW + 1)
        assert rounds.quota(rnd) == {"b": 1, "a": 1}
        assert rnd.index == kept


# -- expire at now ------------------------------------------------------------------------------

EXPIRE: list[tuple[str, Round, float, bool]] = [
    # name, round, now, in force for a new pod
    ("active_within_the_timeout", opened(active=NOW), NOW + 120, True),
    ("idle_past_the_timeout", opened(active=NOW), NOW + 120.5, False),
    ("the_last_pods_activity_counts_not_the_opening", opened({"p0": "b"}, active=NOW + 100), NOW + 200, True),
    ("used_up", opened({"p0": "b", "p1": "b", "p2": "a"}), NOW + 1, False),
    ("closed_by_a_policy_change", rounds.close(opened()), NOW + 1, False),
]


@pytest.mark.parametrize(("name", "rnd", "now", "force"), EXPIRE, ids=[c[0] for c in EXPIRE])
def test_in_force_at_now(name: str, rnd: Round, now: float, force: bool) -> None:
    assert rounds.in_force(rnd, now, 120.0, "new") is force
    assert rounds.expired(rnd, now, 120.0) is (now - rnd.active > 120.0)


@pytest.mark.parametrize(("name", "rnd", "now", "force"), EXPIRE, ids=[c[0] for c in EXPIRE])
def test_places_left_are_the_quota_of_a_round_in_force_and_none_otherwise(name: str, rnd: Round, now: float,
                                                                        force: bool) -> None:
    assert rounds.places_left(rnd, now, 120.0, "new") == (rounds.quota(rnd, "new") if force else None)


def test_a_pods_own_place_counts_as_left_for_it() -> None:
    full = opened({"p0": "b", "p1": "b", "p2": "a"})
    assert rounds.places_left(full, NOW + 1, 120.0, "p0") == {"b": 1}
    assert rounds.places_left(full, NOW + 1, 120.0, "other") is None


def test_no_round_is_not_in_force() -> None:
    assert rounds.in_force(None, NOW) is False
    assert rounds.places_left(None, NOW) is None


NEXT_ROUND = Round("shop/web", NOW + 5, {"c": 2}, NOW + 5, {"p9": "c"})

JUDGED_IN: list[tuple[str, Round | None, Round | None, float, str, str | None]] = [
    # name, the round the pod holds a place in, the book's round, now, the pod, the round it is judged in
    ("its_own_round_though_the_next_one_opened", opened({"p0": "b", "p1": "b", "p2": "a"}), NEXT_ROUND, NOW + 6,
     "p2", "own"),
    ("its_own_round_with_its_place_given_back_before_the_judgement", opened({"p0": "b", "p1": "b"}), NEXT_ROUND,
     NOW + 6, "p2", "own"),
    ("the_books_round_when_it_holds_no_place", None, NEXT_ROUND, NOW + 6, "p2", "book"),
    ("the_books_round_once_its_own_round_lapsed", opened({"p0": "b", "p1": "b", "p2": "a"}), NEXT_ROUND,
     NOW + 121, "p2", "book"),
    ("the_books_round_once_a_policy_change_closed_its_own", rounds.close(opened({"p0": "b", "p1": "b", "p2": "a"})),
     NEXT_ROUND, NOW + 6, "p2", "book"),
    ("the_book_is_its_own_round", opened({"p0": "b"}), opened({"p0": "b"}), NOW + 1, "p0", "book"),
    ("none_when_no_round_has_a_place_for_it", None, opened({"p0": "b", "p1": "b", "p2": "a"}), NOW + 1, "p3", None),
]


@pytest.mark.parametrize(("name", "placed_in", "book", "now", "uid", "want"), JUDGED_IN,
                         ids=[c[0] for c in JUDGED_IN])
def test_a_pod_is_judged_in_the_round_it_holds_a_place_in_while_that_is_in_force(
        name: str, placed_in: Round | None, book: Round | None, now: float, uid: str, want: str | None) -> None:
    got = rounds.judged_in(placed_in, book, now, 120.0, uid)
    expected = {"own": placed_in, "book": book, None: None}[want]
    if expected is None:
        assert got is None
    else:
        assert got is not None and got[0] is expected
        assert got[1] == rounds.places_left(expected, now, 120.0, uid)


@pytest.mark.parametrize(("name", "previous", "now", "want"), [
    ("the_first_round_opens_now", None, NOW, NOW),
    ("a_round_after_an_older_one_opens_now", opened(), NOW + 0.5, NOW + 0.5),
    ("a_round_in_the_millisecond_of_the_one_before_opens_a_millisecond_after_it", opened(), NOW + 0.0004,
     NOW + 0.001),
])
def test_rounds_of_a_policy_open_at_times_their_ids_tell_apart(name: str, previous: Round | None, now: float,
                                                                 want: float) -> None:
    got = rounds.opening_time(previous, now)
    assert got == pytest.approx(want)
    if previous is not None:
        assert rounds.round_id("shop/web", got) != previous.id
        assert rounds.parse_round_id(rounds.round_id("shop/web", got))[1] > previous.opened  # type: ignore[index]


# -- resume from recorded decisions ---------------------------------------------------------------

def annotations(opened_at: float, plan: dict[str, int], time: str = "1970-01-12T13:46:50Z", *,
                v1: bool = True, round_annotation: bool = True) -> dict[str, str]:
    """What the extender writes on a pod it binds in a round: the round's id and the decision, as a
    versioned record (``v1``) or in the shape berth wrote before the version field existed."""
    rid = rounds.round_id("shop/web", opened_at)
    decision = Decision(pod="shop/w", policy="shop/web", strategy="Fill", considered=["a", "b", "c"],
                        ranking=["b", "a"], trigger="bind", time=time, plan=plan, round_id=rid)
    data = decision.record().to_json() if v1 else unversioned(decision)
    out = {DECISION_ANNOTATION: orjson.dumps(data).decode()}
    if round_annotation:
        out[ROUND_ANNOTATION] = rid
    return out


def unversioned(decision: Decision) -> dict[str, Any]:
    """A decision in the shape berth wrote before the record had a version."""
    return {"pod": decision.pod, "policy": decision.policy, "strategy": decision.strategy,
            "trigger": decision.trigger, "time": decision.time, "considered": list(decision.considered),
            "refused": {node: refusal.reason for node, refusal in decision.refused.by_node()},
            "winner": decision.winner, "ranking": list(decision.ranking), "warnings": list(decision.warnings),
            "error": None, "plan": decision.plan}


def test_recorded_mark_reads_an_annotation_written_before_the_record_had_a_version() -> None:
    unversioned = ('{"pod":"shop/p","policy":"shop/web","strategy":"Fill","trigger":"bind",'
                   '"time":"1970-01-12T13:46:50Z","considered":["a","b"],"refused":{},"winner":"b","ranking":["b"],'
                   '"warnings":[],"error":null,"plan":{"b":2,"a":1}}')
    mark = rounds.recorded_mark({ROUND_ANNOTATION: rounds.round_id("shop/web", NOW), DECISION_ANNOTATION: unversioned})
    assert mark == RoundMark(f"shop/web@{int(NOW * 1000)}", {"b": 2, "a": 1}, NOW + 10)


@pytest.mark.parametrize(("name", "v1", "round_annotation"), [
    ("a_versioned_record", True, True),
    ("a_record_written_before_the_version_field", False, True),
    ("a_versioned_record_naming_the_round_without_the_round_annotation", True, False),
])
def test_recorded_mark_reads_the_round_its_plan_and_time(name: str, v1: bool, round_annotation: bool) -> None:
    given = annotations(NOW, {"b": 2, "a": 1}, "1970-01-12T13:46:50Z", v1=v1, round_annotation=round_annotation)
    mark = rounds.recorded_mark(given)
    assert mark == RoundMark(f"shop/web@{int(NOW * 1000)}", {"b": 2, "a": 1}, NOW + 10)


NO_ROUND = Decision(pod="shop/w", policy="shop/web", strategy="Auto", considered=["a", "b"], ranking=["b", "a"],
                    trigger="bind", time="1970-01-12T13:46:50Z").record().model_dump_json(by_alias=True)


@pytest.mark.parametrize(("name", "given"), [
    ("no_round_annotation", {DECISION_ANNOTATION: "{}"}),
    ("a_record_of_no_round", {DECISION_ANNOTATION: NO_ROUND}),
    ("a_record_of_no_round_as_bytes", {DECISION_ANNOTATION: NO_ROUND.encode()}),
    ("no_annotation_at_all", {}),
    ("a_round_id_without_policy", {ROUND_ANNOTATION: "web@123"}),
    ("a_round_id_without_time", {ROUND_ANNOTATION: "shop/web@soon"}),
])
def test_recorded_mark_of_pods_recording_no_round(name: str, given: dict[str, str]) -> None:
    assert rounds.recorded_mark(given) is None


def test_recorded_mark_with_an_unreadable_decision_keeps_the_round_id() -> None:
    mark = rounds.recorded_mark({ROUND_ANNOTATION: "shop/web@1000", DECISION_ANNOTATION: "{not json"})
    assert mark == RoundMark("shop/web@1000", None, None)


def mark(opened_at: float, plan: dict[str, int] | None = None, time: float | None = None) -> RoundMark:
    return RoundMark(rounds.round_id("shop/web", opened_at), plan, time)


RESUME: list[tuple[str, list[tuple[str, str, RoundMark]], dict[str, Any] | None]] = [
    # name, the placed pods' (uid, node, mark) in the order seen, the round rebuilt (None: none)
    ("one_round_two_pods", [("p0", "b", mark(NOW, PLAN, NOW + 1)), ("p1", "b", mark(NOW, PLAN, NOW + 2))],
     {"opened": NOW, "active": NOW + 2, "placed": {"p0": "b", "p1": "b"}, "quota": {"a": 1},
      "carrier": "p0"}),
    ("a_newer_round_replaces_an_older_one", [("p0", "b", mark(NOW, PLAN, NOW + 1)),
                                             ("p1", "c", mark(NOW + 50, {"c": 1, "a": 1}, NOW + 51))],
     {"opened": NOW + 50, "active": NOW + 51, "placed": {"p1": "c"}, "quota": {"a": 1}, "carrier": "p1"}),
    ("an_older_rounds_pod_seen_later_changes_nothing", [("p1", "c", mark(NOW + 50, {"c": 1, "a": 1}, NOW + 51)),
                                                        ("p0", "b", mark(NOW, PLAN, NOW + 1))],
     {"opened": NOW + 50, "active": NOW + 51, "placed": {"p1": "c"}, "quota": {"a": 1}, "carrier": "p1"}),
    ("a_round_first_seen_without_its_plan_is_not_rebuilt", [("p0", "b", mark(NOW, None, NOW + 1))], None),
    ("a_pod_without_time_counts_but_marks_no_activity", [("p0", "b", mark(NOW, PLAN, None))],
     {"opened": NOW, "active": NOW, "placed": {"p0": "b"}, "quota": {"b": 1, "a": 1},
      "carrier": "p0"}),
    ("pods_seen_before_the_carrier_of_their_plan_count_in_its_round",
     [("p1", "b", mark(NOW, None, NOW + 2)), ("p2", "a", mark(NOW, None, NOW + 3)),
      ("p0", "b", mark(NOW, PLAN, NOW + 1))],
     {"opened": NOW, "active": NOW + 3, "placed": {"p0": "b", "p1": "b", "p2": "a"}, "quota": {}, "carrier": "p0"}),
]


@pytest.mark.parametrize(("name", "seen", "want"), RESUME, ids=[c[0] for c in RESUME])
def test_resume(name: str, seen: list[tuple[str, str, RoundMark]], want: dict[str, Any] | None) -> None:
    book = rounds.resume(seen)
    if want is None:
        assert book == {}
        return
    rnd = book["shop/web"]
    assert (rnd.opened, rnd.active, dict(rnd.placed), rounds.quota(rnd)) == \
        (want["opened"], want["active"], want["placed"], want["quota"])
    assert rnd.carrier == want["carrier"]


def test_a_carrier_that_gives_its_place_back_or_goes_carries_the_plan_no_more() -> None:
    rnd = rounds.carried(rounds.consume(opened(), "p0", "b", NOW + 1), "p0")
    assert not rounds.needs_carrier(rnd)
    assert rounds.consume(rnd, "p1", "b", NOW + 2).carrier == "p0"  # another pod takes a place: still p0
    assert rounds.release(rnd, "p1").carrier == "p0"
    assert rounds.needs_carrier(rounds.release(rnd, "p0"))  # its bind failed
    assert rounds.needs_carrier(rounds.uncarried(rnd, "p0"))  # deleted once bound: its place stays taken
    assert rounds.quota(rounds.uncarried(rnd, "p0")) == {"b": 1, "a": 1}


def test_a_restarted_extender_resumes_the_round_its_pods_record_until_it_expires() -> None:
    """The extender opened a round at NOW and bound two pods at NOW+10; after a restart nothing but
    the pods' annotations is left: they give back the round with the places it had left, in force
    until it has been idle for the timeout."""
    opening = rounds.open_round(cluster(NODES), SHAPE, make_policy().strategy("Fill").count(2).nodes_limit(2).build(),
                                Settings(), NOW, 4)
    assert opening.round is not None
    rnd = opening.round
    written = []
    for uid in ("p0", "p1"):
        where = rounds.next_node(rnd, uid)
        assert where is not None
        rnd = rounds.consume(rnd, uid, where, NOW + 10)
        written.append((uid, where, annotations(NOW, dict(opening.round.plan), "1970-01-12T13:46:50Z")))
    book = rounds.resume((uid, where, m) for uid, where, a in written if (m := rounds.recorded_mark(a)))
    resumed = book["shop/web"]
    assert resumed.id == rnd.id and dict(resumed.placed) == dict(rnd.placed)
    assert rounds.sequence(resumed) == rounds.sequence(rnd) == ["a", "a"]
    assert rounds.in_force(resumed, NOW + 10 + 120, 120.0, "p2")
    assert not rounds.in_force(resumed, NOW + 10 + 121, 120.0, "p2")


@pytest.mark.parametrize(("name", "spec", "placed", "code", "resolvable"), [
    ("a_full_fill_round_cannot_be_preempted_into_room", {"strategy": "Fill", "count": 2, "nodesLimit": 2},
     ["a", "a", "b", "b"], "already_filled", False),
    ("an_each_round_short_of_room_may_be_once_victims_go", {"strategy": "Each", "count": 9, "nodesLimit": 2},
     [], "insufficient_resource", True),
])
def test_a_round_that_cannot_open_refuses_every_node_for_its_reason(name: str, spec: dict[str, Any],
                                                                     placed: list[str], code: str,
                                                                     resolvable: bool) -> None:
    view = cluster(NODES, [make_pod(f"x{i}").on(n).cpu("500m").info() for i, n in enumerate(placed)])
    opening = rounds.open_round(view, SHAPE, make_policy().spec(**spec).build(), Settings(), NOW, 3)
    assert opening.round is None
    decision = rounds.refused_by_round(opening.decision, ["a", "c"])
    assert decision.error == opening.error and decision.winner is None and decision.considered == ["a", "c"]
    assert {n: (r.reason.split(":")[0], r.resolvable) for n, r in decision.refused.items()} == \
        {"a": (code, resolvable), "c": (code, resolvable)}
