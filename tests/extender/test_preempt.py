"""preempt: of kube-scheduler's candidate nodes (each with the victims its own preemption chose),
berth keeps those where the pod would pass its filter once the victims are gone, so that no pod
is evicted for a place berth will not give; the victims themselves are answered as given."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tests.extender.helpers import Harness, harness, node, pod, policy

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


LOW_A = pod("low-a", labels={"app": "batch"}, cpu="3", node_name="a")
LOW_B = pod("low-b", labels={"app": "batch"}, cpu="3", node_name="b")
SMALL_B = pod("small-b", labels={"app": "batch"}, cpu="1", node_name="b")
DB_A = pod("db-a", labels=DB, cpu="1", node_name="a")
MID_A = pod("mid-a", labels={"app": "batch"}, cpu="2", node_name="a")
HIGH = pod("high", labels=WEB, cpu="2")
BY_UID = {p["metadata"]["uid"]: p for p in (LOW_A, LOW_B, SMALL_B, DB_A, MID_A)}

CASES = [
    # (behaviour, objects, candidates, nodes berth keeps)
    ("evicting the victims makes room: kept",
     [node("a"), LOW_A, policy("web")], {"a": victims(LOW_A)}, {"a"}),
    ("still no room once the victims are gone: dropped",
     [node("a"), node("b"), LOW_A, LOW_B, SMALL_B, policy("web")],
     {"a": victims(LOW_A), "b": victims(SMALL_B)}, {"a"}),
    ("the policy's node filter excludes the node: dropped",
     [node("a"), node("b"), LOW_A, LOW_B, policy("web", nodeFilter={"excludes": ["b"]})],
     {"a": victims(LOW_A), "b": victims(LOW_B)}, {"a"}),
    ("a node-label rule fails on the node: dropped",
     [node("a", labels={"type": "gpu"}), node("b"), LOW_A, LOW_B,
      policy("web", placementRules=[{"resource": "Node", "operator": "HasNot", "labels": {"type": "gpu"}}])],
     {"a": victims(LOW_A), "b": victims(LOW_B)}, {"b"}),
    ("a pod rule broken by a pod that stays: dropped",
     [node("a", cpu="5"), node("b"), LOW_A, DB_A, LOW_B,
      policy("web", placementRules=[{"resource": "Pod", "operator": "HasNot", "labels": DB}])],
     {"a": victims(LOW_A), "b": victims(LOW_B)}, {"b"}),
    ("a pod rule broken only by a victim: kept",
     [node("a"), DB_A, MID_A,
      policy("web", placementRules=[{"resource": "Pod", "operator": "HasNot", "labels": DB}])],
     {"a": victims(DB_A)}, {"a"}),
    ("a node that is not Ready: dropped",
     [node("a", ready=False), node("b"), LOW_A, LOW_B, policy("web")],
     {"a": victims(LOW_A), "b": victims(LOW_B)}, {"b"}),
    ("a node berth has never seen: dropped",
     [node("b"), LOW_B, policy("web")], {"ghost": victims(LOW_B), "b": victims(LOW_B)}, {"b"}),
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
    h = harness([node("a"), LOW_A])  # no policy; and even with no room on a, berth does not judge
    big = pod("big", labels={"app": "other"}, cpu="8")
    candidates = {"a": victims(LOW_A)}
    assert preempt(h, big, candidates) == (200, {"NodeNameToMetaVictims": candidates})


def test_a_nominated_preemptor_does_not_count_against_itself() -> None:
    h = harness([node("a"), LOW_A, policy("web")])
    nominated = pod("high", labels=WEB, cpu="1", uid="uid-high-nominated")
    nominated["status"]["nominatedNodeName"] = "a"
    h.store.apply_pod(nominated)  # kube-scheduler's nomination, as the watch shows it: counted on a
    status, reply = preempt(h, nominated, {"a": victims(LOW_A)})
    assert (status, reply) == (200, {"NodeNameToMetaVictims": {"a": victims(LOW_A)}})


def test_preempt_changes_nothing_in_the_view() -> None:
    h = harness([node("a"), LOW_A, policy("web")])
    before = (dict(h.store.view.requested("a")), h.store.view.pod_count("a"))
    preempt(h, HIGH, {"a": victims(LOW_A)})
    assert (dict(h.store.view.requested("a")), h.store.view.pod_count("a")) == before
    assert h.store.view.pod(LOW_A["metadata"]["uid"]) is not None


def test_an_unreadable_preemptor_is_a_bad_request() -> None:
    h = harness([node("a"), LOW_A, policy("web")])
    bad = pod("high", labels=WEB)
    bad["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "lots"}}
    status, reply = preempt(h, bad, {"a": victims(LOW_A)})
    assert status == 400
    assert "not a quantity" in reply["Error"]


def test_the_open_rounds_plan_decides_which_candidates_stay() -> None:
    """A Fill round planned a: 2 for the two pending pods; preemption on b would evict for a place
    the round will not give, so only a stays (and no new round is opened)."""
    h = harness([node("a"), node("b"), policy("web", strategy="Fill", count=2, nodesLimit=1)])
    first, second = pod("web-1", labels=WEB), pod("web-2", labels=WEB)
    h.store.apply_pod(first)
    h.store.apply_pod(second)
    assert h.filter(first)["NodeNames"] == ["a"]
    rounds = dict(h.store.rounds)
    status, reply = preempt(h, second, {"a": victims(), "b": victims()})
    assert (status, reply) == (200, {"NodeNameToMetaVictims": {"a": victims()}})
    assert h.store.rounds == rounds
