"""Fill and Each run in rounds: the plan is made once for the workload's pending pods and
enforced pod by pod; pods beyond it wait for the next round; a restarted extender resumes the
round from the annotations of the pods it bound."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson
import pytest

from berth.core import rounds
from berth.core.decision import DECISION_ANNOTATION
from berth.core.round import ROUND_ANNOTATION, parse_round_id
from tests.builders import make_node, make_pod, make_policy
from tests.decision_schema import valid_record
from tests.extender.helpers import NOW, Harness, harness

WEB = {"app": "web"}


def cluster() -> list[dict[str, Any]]:
    return [make_node("a").cpu("4").obj(), make_node("b").cpu("8").obj(), make_node("c").cpu("2").obj()]


def pending(n: int) -> list[dict[str, Any]]:
    return [make_pod(f"web-{i}").labels(WEB).cpu("500m").uid(f"uid-web-{i}").obj() for i in range(n)]


def placed_counts(h: Harness) -> dict[str, int]:
    counts: dict[str, int] = {}
    for p in h.store.view.all_pods():
        if p.labels.get("app") == "web" and p.node_name:
            counts[p.node_name] = counts.get(p.node_name, 0) + 1
    return counts


def test_fill_round_tops_up_the_chosen_nodes_and_no_further() -> None:
    pods = pending(5)
    h = harness([*cluster(), make_policy("web").strategy("Fill").count(2).nodes_limit(2).obj(), *pods])
    placed = [h.schedule(p) for p in pods[:4]]
    assert sorted(placed) == ["a", "a", "b", "b"]  # (Count, Capacity) descending: b and a, two each
    # the first pod bound carries the round's whole plan; the others name the round, its size and
    # what the plan gives their node
    first = valid_record(h.client.get("/api/v1/decisions/shop/web-0").json())
    assert first.round is not None and first.round.plan == {"b": 2, "a": 2}
    decision = valid_record(h.client.get("/api/v1/decisions/shop/web-3").json())
    assert decision.round is not None and decision.round.plan is None
    assert decision.winner is not None and (decision.round.places, decision.round.on_node) == (4, 2)
    assert decision.round.id == first.round.id  # one round, named by its policy and when it opened
    assert decision.round.id is not None and parse_round_id(decision.round.id) is not None
    # the round is used up; the next round finds every chosen node at its target
    result = h.filter(pods[4])
    assert result["NodeNames"] == []
    assert all(reason.startswith("already_filled: Fill: every chosen node")
               for reason in result["FailedAndUnresolvableNodes"].values())
    assert set(result["FailedAndUnresolvableNodes"]) == {"a", "b", "c"}


def test_quota_refuses_nodes_the_plan_gives_nothing_more() -> None:
    pods = pending(3)
    h = harness([*cluster(), make_policy("web").strategy("Fill").count(2).nodes_limit(1).obj(), *pods])
    first = h.filter(pods[0])
    assert first["NodeNames"] == ["b"]  # the plan is b: 2; a and c get nothing in this round
    assert first["FailedAndUnresolvableNodes"]["a"] == "the round's plan places no more pods here"
    assert h.schedule(pods[0]) == "b"
    assert h.schedule(pods[1]) == "b"
    assert h.filter(pods[2])["NodeNames"] == []


def test_a_round_plans_only_the_pods_that_are_pending() -> None:
    pods = pending(2)
    h = harness([*cluster(), make_policy("web").strategy("Each").count(2).nodes_limit(2).obj(), *pods])
    h.schedule(pods[0])
    round_ = h.store.rounds["shop/web"]
    assert sum(round_.plan.values()) == 2  # Each would add 4 (2 on each of 2 nodes); 2 pods are pending
    h.schedule(pods[1])
    assert sum(placed_counts(h).values()) == 2


def test_an_idle_round_closes_after_its_timeout() -> None:
    pods = pending(3)
    h = harness([*cluster(), make_policy("web").strategy("Each").count(1).nodes_limit(3).obj(), *pods],
                round_timeout_seconds=60)
    h.schedule(pods[0])
    first_id = h.store.rounds["shop/web"].id
    h.clock.advance(61)
    h.schedule(pods[1])
    assert h.store.rounds["shop/web"].id != first_id


def test_a_restarted_extender_resumes_the_open_round_from_annotations() -> None:
    pods = pending(4)
    spec = {"strategy": "Fill", "count": 2, "nodesLimit": 2}
    h = harness([*cluster(), make_policy("web").spec(**spec).obj(), *pods])
    first = [h.schedule(p) for p in pods[:2]]
    binder = h.app.state.engine.binder
    annotations = binder.annotations
    assert ROUND_ANNOTATION in annotations["shop/web-0"]
    assert '"plan":{"b":2,"a":2}' in annotations["shop/web-0"][DECISION_ANNOTATION]

    # What the API server holds after the restart: the two bound pods with berth's annotations.
    objects: list[dict[str, Any]] = [*cluster(), make_policy("web").spec(**spec).obj()]
    for p, where in zip(pods[:2], first, strict=True):
        bound = (make_pod(p["metadata"]["name"])
                 .labels(WEB)
                 .cpu("500m")
                 .uid(p["metadata"]["uid"])
                 .on(where)
                 .annotations(annotations[f"shop/{p['metadata']['name']}"])
                 .obj())
        objects.append(bound)
    objects.extend(pods[2:])
    restarted = harness(objects)
    restarted.clock.now = h.clock.now + 5
    rest = [restarted.schedule(p) for p in pods[2:]]
    assert sorted(first + rest) == ["a", "a", "b", "b"]
    assert restarted.store.rounds["shop/web"].id == h.store.rounds["shop/web"].id


def test_a_changed_policy_closes_its_round_for_good() -> None:
    pods = pending(4)
    spec = {"strategy": "Fill", "count": 2, "nodesLimit": 2}
    h = harness([*cluster(), make_policy("web").spec(**spec).obj(), *pods])
    assert h.schedule(pods[0]) == "b"
    first = h.store.rounds["shop/web"]
    h.store.apply_policy(make_policy("web").generation(2).spec(**{**spec, "nodesLimit": 1}).obj())
    assert h.store.rounds["shop/web"].closed
    # the watch shows the pod of the closed round bound, with its annotations: the round stays closed
    annotations = h.app.state.engine.binder.annotations["shop/web-0"]
    h.store.apply_pod(make_pod("web-0").labels(WEB).cpu("500m").uid("uid-web-0").on("b").annotations(annotations).obj())
    assert h.store.rounds["shop/web"].closed
    h.clock.advance(1)
    assert h.schedule(pods[1]) == "b"  # a new round under the changed policy: b, topped up to 2
    assert h.store.rounds["shop/web"].id != first.id and dict(h.store.rounds["shop/web"].plan) == {"b": 1}


def test_a_restarted_extender_resumes_a_round_from_annotations_written_before_the_record_had_a_version() -> None:
    """Pods bound by a berth of before the versioned decision record carry its unversioned
    annotation (the round's plan at the top): the round still resumes from them."""
    pods = pending(4)
    spec = {"strategy": "Fill", "count": 2, "nodesLimit": 2}
    opened = NOW - 10
    round_id = f"shop/web@{int(opened * 1000)}"
    stamp = datetime.fromtimestamp(opened, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z"
    objects: list[dict[str, Any]] = [*cluster(), make_policy("web").spec(**spec).obj()]
    for p in pods[:2]:
        name = p["metadata"]["name"]
        unversioned = (
            f'{{"pod":"shop/{name}","policy":"shop/web","strategy":"Fill","trigger":"bind","time":"{stamp}",'
            '"considered":["a","b","c"],"refused":{},"winner":"b","ranking":["b","a"],"warnings":[],"error":null,'
            '"plan":{"b":2,"a":2}}')
        objects.append(make_pod(name).labels(WEB).cpu("500m").uid(p["metadata"]["uid"]).on("b")
                       .annotations({DECISION_ANNOTATION: unversioned, ROUND_ANNOTATION: round_id}).obj())
    objects.extend(pods[2:])
    restarted = harness(objects)
    rest = [restarted.schedule(p) for p in pods[2:]]
    assert restarted.store.rounds["shop/web"].id == round_id  # resumed, not a new round
    assert rest == ["a", "a"]  # the rest of the recorded plan: b holds its two already


def _bound(p: dict[str, Any], node: str, annotations: dict[str, str]) -> dict[str, Any]:
    """The pod ``p`` as the API server shows it once bound to ``node`` with berth's annotations."""
    return (make_pod(p["metadata"]["name"]).labels(WEB).cpu("500m").uid(p["metadata"]["uid"]).on(node)
            .annotations(annotations).obj())


def test_one_pod_of_a_round_records_its_whole_plan_the_others_its_id_and_size() -> None:
    pods = pending(4)
    h = harness([*cluster(), make_policy("web").strategy("Fill").count(2).nodes_limit(2).obj(), *pods])
    for p in pods:
        h.schedule(p)
    annotations = h.app.state.engine.binder.annotations
    plans = {name: valid_record(orjson.loads(a[DECISION_ANNOTATION])).round for name, a in annotations.items()}
    assert all(a[ROUND_ANNOTATION] == plans["shop/web-0"].id for a in annotations.values())  # type: ignore[union-attr]
    assert {name: r.plan for name, r in plans.items() if r is not None and r.plan is not None} == {
        "shop/web-0": {"b": 2, "a": 2}}
    assert {(r.places, r.on_node) for r in plans.values() if r is not None} == {(4, 2)}


def test_a_restarted_extender_resumes_the_round_whatever_the_order_its_pods_are_listed_in() -> None:
    pods = pending(4)
    spec = {"strategy": "Fill", "count": 2, "nodesLimit": 2}
    h = harness([*cluster(), make_policy("web").spec(**spec).obj(), *pods])
    first = [h.schedule(p) for p in pods[:2]]
    annotations = h.app.state.engine.binder.annotations
    bound = [_bound(p, where, annotations[f"shop/{p['metadata']['name']}"])
             for p, where in zip(pods[:2], first, strict=True)]
    # the carrier (web-0) comes last: the pod before it waits for its plan
    restarted = harness([*cluster(), make_policy("web").spec(**spec).obj(), *reversed(bound), *pods[2:]])
    restarted.clock.now = h.clock.now + 5
    assert restarted.store.rounds["shop/web"].id == h.store.rounds["shop/web"].id
    assert dict(restarted.store.rounds["shop/web"].placed) == {"uid-web-0": first[0], "uid-web-1": first[1]}
    rest = [restarted.schedule(p) for p in pods[2:]]
    assert sorted(first + rest) == ["a", "a", "b", "b"]


def test_the_next_pod_bound_records_the_plan_once_the_carrier_is_gone() -> None:
    pods = pending(4)
    h = harness([*cluster(), make_policy("web").strategy("Fill").count(2).nodes_limit(2).obj(), *pods])
    annotations = h.app.state.engine.binder.annotations
    where = h.schedule(pods[0])
    assert where is not None
    h.store.apply_pod(_bound(pods[0], where, annotations["shop/web-0"]))
    h.schedule(pods[1])
    assert valid_record(orjson.loads(annotations["shop/web-1"][DECISION_ANNOTATION])).round.plan is None  # type: ignore[union-attr]
    h.store.delete_pod(_bound(pods[0], where, annotations["shop/web-0"]))
    h.schedule(pods[2])
    carried = valid_record(orjson.loads(annotations["shop/web-2"][DECISION_ANNOTATION])).round
    assert carried is not None and carried.plan == {"b": 2, "a": 2}


def _winner(h: Harness, p: dict[str, Any]) -> str:
    """The node ``p``'s last filter placed it on (tentatively: its bind has not come)."""
    return h.store.assumed[p["metadata"]["uid"]].pod.node_name


@pytest.mark.parametrize("strategy", ["Fill", "Each"])
@pytest.mark.parametrize("then", ["bind", "filter again"])
def test_a_pod_keeps_its_place_in_its_round_after_the_next_round_opened(strategy: str, then: str) -> None:
    """kube-scheduler judges a pod while it binds the one before, so the pod after a round's last
    opens the next round before the round's last pods are bound: those are still judged within
    their own round, and the next round's places stay for the next pods."""
    pods = pending(4)
    h = harness([*cluster(), make_policy("web").strategy(strategy).count(2).obj(), *pods[:2]])
    for p in pods[:2]:
        assert h.filter(p)["NodeNames"]
    first = h.store.rounds["shop/web"]
    placed = {p["metadata"]["name"]: _winner(h, p) for p in pods[:2]}
    assert sorted(placed.values()) == sorted(n for n, k in first.plan.items() for _ in range(k))
    for p in pods[2:]:  # two more pods: the next round opens for them
        h.store.apply_pod(p)
    h.clock.advance(1)
    assert h.filter(pods[2])["NodeNames"]
    second = h.store.rounds["shop/web"]
    assert second.id != first.id and second.size == 2
    for p in pods[:2]:
        name = p["metadata"]["name"]
        if then == "bind":
            assert h.bind(p, placed[name]) == ""
            annotations = h.app.state.engine.binder.annotations[f"shop/{name}"]
            assert annotations[ROUND_ANNOTATION] == first.id
        else:
            assert placed[name] in h.filter(p)["NodeNames"]
            assert _winner(h, p) == placed[name]
    book = h.store.rounds["shop/web"]  # the next round holds web-2 alone, and web-3's place is left
    assert (book.id, dict(book.placed), rounds.quota(book)) == (second.id, dict(second.placed), rounds.quota(second))
    if then == "bind":  # round one's first pod bound records its plan
        carried = orjson.loads(h.app.state.engine.binder.annotations["shop/web-0"][DECISION_ANNOTATION])["round"]
        assert carried["plan"] == dict(first.plan)


def test_a_round_past_the_book_is_kept_only_while_a_pod_not_bound_holds_a_place_in_it() -> None:
    pods = pending(6)
    h = harness([*cluster(), make_policy("web").strategy("Fill").count(2).obj(), *pods[:2]])
    opened_ids = []
    for wave in ([], pods[2:4], pods[4:6]):
        for p in wave:
            h.store.apply_pod(p)
        h.clock.advance(1)
        for p in (wave or pods[:2]):
            assert h.filter(p)["NodeNames"]
        opened_ids.append(h.store.rounds["shop/web"].id)
        if len(opened_ids) == 2:  # the first round's pods are bound; the second's are not
            for p in pods[:2]:
                assert h.bind(p, _winner(h, p)) == ""
    first, second, third = opened_ids
    assert len(set(opened_ids)) == 3
    assert h.store.round_of(first) is None  # its pods are bound: nothing judges them within it again
    kept = h.store.round_of(second)
    assert kept is not None and set(kept.placed) == {"uid-web-2", "uid-web-3"}
    assert h.store.round_of(third) is h.store.rounds["shop/web"]
