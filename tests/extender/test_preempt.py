"""preempt: of kube-scheduler's candidate nodes (each with the victims its own preemption chose),
berth keeps those where the pod would pass its filter once the victims are gone, so that no pod
is evicted for a place berth will not give; the victims themselves are answered as given."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tests.builders import make_node, make_pod, make_policy
from tests.extender.helpers import Harness, harness

WEB = {"app": "web"}
DB = {"role": "db"}


def victims(*pods: dict[str, Any]) -> dict[str, Any]:
    return {"Pods": [{"UID": p["metadata"]["uid"]} for p in pods], "NumPDBViolations": 0}


def preempt(h: Harness, preemptor: dict[str, Any], candidates: dict[str, dict[str, Any]], *,
            full: bool = False) -> tuple[int, dict[str, Any]]:
    if full:  # nodeCacheCapable: false sends the victims whole
        body = {"Pod": preemptor, "NodeNameToVictims": {
            n: {"Pods": [BY_UID[v["UID"]] for v in c["Pods"]], "NumPDBViolations": 0} for n, c in candidates.items()}}
    else:
        body = {"Pod": preemptor, "NodeNameToMetaVictims": candidates}
    r = h.client.post("/preempt", content=orjson.dumps(body))
    return r.status_code, r.json()


LOW_A = make_pod("low-a").labels({"app": "batch"}).cpu("3").on("a").obj()
LOW_B = make_pod("low-b").labels({"app": "batch"}).cpu("3").on("b").obj()
SMALL_B = make_pod("small-b").labels({"app": "batch"}).cpu("1").on("b").obj()
DB_A = make_pod("db-a").labels(DB).cpu("1").on("a").obj()
MID_A = make_pod("mid-a").labels({"app": "batch"}).cpu("2").on("a").obj()
HIGH = make_pod("high").labels(WEB).cpu("2").obj()
BY_UID = {p["metadata"]["uid"]: p for p in (LOW_A, LOW_B, SMALL_B, DB_A, MID_A)}

CASES = [
    # (behaviour, objects, candidates, nodes berth keeps)
    ("evicting the victims makes room: kept",
     [make_node("a").obj(), LOW_A, make_policy("web").obj()], {"a": victims(LOW_A)}, {"a"}),
    ("still no room once the victims are gone: dropped",
     [make_node("a").obj(), make_node("b").obj(), LOW_A, LOW_B, SMALL_B, make_policy("web").obj()],
     {"a": victims(LOW_A), "b": victims(SMALL_B)}, {"a"}),
    ("the policy's node filter excludes the node: dropped",
     [make_node("a").obj(),
      make_node("b").obj(), LOW_A, LOW_B,
      make_policy("web").node_filter({"excludes": ["b"]}).obj()],
     {"a": victims(LOW_A), "b": victims(LOW_B)}, {"a"}),
    ("a node-label rule fails on the node: dropped",
     [make_node("a").labels({"type": "gpu"}).obj(), make_node("b").obj(), LOW_A, LOW_B,
      make_policy("web").rules({"resource": "Node", "operator": "HasNot", "labels": {"type": "gpu"}}).obj()],
     {"a": victims(LOW_A), "b": victims(LOW_B)}, {"b"}),
    ("a pod rule broken by a pod that stays: dropped",
     [make_node("a").cpu("5").obj(), make_node("b").obj(), LOW_A, DB_A, LOW_B,
      make_policy("web").rules({"resource": "Pod", "operator": "HasNot", "labels": DB}).obj()],
     {"a": victims(LOW_A), "b": victims(LOW_B)}, {"b"}),
    ("a pod rule broken only by a victim: kept",
     [make_node("a").obj(), DB_A, MID_A,
      make_policy("web").rules({"resource": "Pod", "operator": "HasNot", "labels": DB}).obj()],
     {"a": victims(DB_A)}, {"a"}),
    ("a node that is not Ready: dropped",
     [make_node("a").ready(False).obj(), make_node("b").obj(), LOW_A, LOW_B, make_policy("web").obj()],
     {"a": victims(LOW_A), "b": victims(LOW_B)}, {"b"}),
    ("a node berth has never seen: dropped",
     [make_node("b").obj(), LOW_B, make_policy("web").obj()], {"ghost": victims(LOW_B), "b": victims(LOW_B)}, {"b"}),
]


@pytest.mark.parametrize(("objects", "candidates", "kept"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
@pytest.mark.parametrize("full", [False, True], ids=["meta-victims", "full-victims"])
def test_preempt_keeps_only_nodes_the_pod_would_pass(objects: list[dict[str, Any]],
                                                     candidates: dict[str, dict[str, Any]], kept: set[str],
                                                     full: bool) -> None:
    h = harness(objects)
    if full and "ghost" in candidates:
        candidates = {n: c for n, c in candidates.items() if n != "ghost"}
    status, reply = preempt(h, HIGH, candidates, full=full)
    assert status == 200, reply
    assert reply == {"NodeNameToMetaVictims": {n: candidates[n] for n in sorted(kept)}}


def test_pods_no_policy_selects_get_the_scheduler_victims_as_given() -> None:
    h = harness([make_node("a").obj(), LOW_A])  # no policy; and even with no room on a, berth does not judge
    big = make_pod("big").labels({"app": "other"}).cpu("8").obj()
    candidates = {"a": victims(LOW_A)}
    assert preempt(h, big, candidates) == (200, {"NodeNameToMetaVictims": candidates})


def test_a_nominated_preemptor_does_not_count_against_itself() -> None:
    h = harness([make_node("a").obj(), LOW_A, make_policy("web").obj()])
    nominated = make_pod("high").labels(WEB).cpu("1").uid("uid-high-nominated").obj()
    nominated["status"]["nominatedNodeName"] = "a"
    h.store.apply_pod(nominated)  # kube-scheduler's nomination, as the watch shows it: counted on a
    status, reply = preempt(h, nominated, {"a": victims(LOW_A)})
    assert (status, reply) == (200, {"NodeNameToMetaVictims": {"a": victims(LOW_A)}})


def test_preempt_changes_nothing_in_the_view() -> None:
    h = harness([make_node("a").obj(), LOW_A, make_policy("web").obj()])
    before = (dict(h.store.view.requested("a")), h.store.view.pod_count("a"))
    preempt(h, HIGH, {"a": victims(LOW_A)})
    assert (dict(h.store.view.requested("a")), h.store.view.pod_count("a")) == before
    assert h.store.view.pod(LOW_A["metadata"]["uid"]) is not None


def test_an_unreadable_preemptor_is_a_bad_request() -> None:
    h = harness([make_node("a").obj(), LOW_A, make_policy("web").obj()])
    bad = make_pod("high").labels(WEB).obj()
    bad["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "lots"}}
    status, reply = preempt(h, bad, {"a": victims(LOW_A)})
    assert status == 400
    assert "not a quantity" in reply["Error"]


def test_the_open_rounds_plan_decides_which_candidates_stay() -> None:
    """A Fill round planned a: 2 for the two pending pods; preemption on b would evict for a place
    the round will not give, so only a stays (and no new round is opened)."""
    h = harness([make_node("a").obj(),
                 make_node("b").obj(),
                 make_policy("web").strategy("Fill").count(2).nodes_limit(1).obj()])
    first, second = make_pod("web-1").labels(WEB).obj(), make_pod("web-2").labels(WEB).obj()
    h.store.apply_pod(first)
    h.store.apply_pod(second)
    assert h.filter(first)["NodeNames"] == ["a"]
    rounds = dict(h.store.rounds)
    status, reply = preempt(h, second, {"a": victims(), "b": victims()})
    assert (status, reply) == (200, {"NodeNameToMetaVictims": {"a": victims()}})
    assert h.store.rounds == rounds
