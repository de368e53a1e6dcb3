"""filter and prioritize on a snapshot view: refusals and where they go, pass-through pods, the
strategy's winner scoring 10, and the winner counted on its node before the bind arrives."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from berth.extender.wire import scheduler_text
from tests.builders import make_node, make_pod, make_policy
from tests.decision_schema import valid_record
from tests.extender.helpers import ZONE, args, harness

WEB = {"app": "web"}


def three_nodes() -> list[dict[str, Any]]:
    return [make_node("a").cpu("2").obj(), make_node("b").cpu("4").obj(), make_node("c").cpu("1").obj()]


# -- where each refusal goes ------------------------------------------------------------------

REFUSALS = [
    # (name, objects, pod kwargs, node, expected bucket, reason fragment)
    ("capacity: resolvable, the shortfall message",
     [make_node("a").cpu("1").obj(),
      make_policy("web").obj()], {"cpu": "1500m"}, "a", "FailedNodes", "insufficient capacity: cpu"),
    ("node filter excludes: unresolvable",
     [make_node("a").obj(),
      make_policy("web").node_filter({"excludes": ["a"]}).obj()], {}, "a", "FailedAndUnresolvableNodes", ""),
    ("node filter labels: unresolvable",
     [make_node("a").obj(),
      make_policy("web").node_filter({"labels": {"disk": "ssd"}}).obj()], {}, "a", "FailedAndUnresolvableNodes",
     ""),
    ("not Ready: unresolvable",
     [make_node("a").ready(False).obj(), make_policy("web").obj()], {}, "a", "FailedAndUnresolvableNodes", "not Ready"),
    ("cordoned: unresolvable",
     [make_node("a").cordoned().obj(), make_policy("web").obj()], {}, "a", "FailedAndUnresolvableNodes", ""),
    ("unknown node: unresolvable",
     [make_node("a").obj(), make_policy("web").obj()], {}, "ghost", "FailedAndUnresolvableNodes", "unknown node"),
    ("node rule HasNot: unresolvable",
     [make_node("a").labels({"type": "gpu"}).obj(), make_node("b").obj(),
      make_policy("web").rules({"resource": "Node", "operator": "HasNot", "labels": {"type": "gpu"}}).obj()],
     {}, "a", "FailedAndUnresolvableNodes", ""),
]


@pytest.mark.parametrize(("objects", "pod_kw", "target", "bucket", "fragment"),
                         [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS])
def test_refusal_goes_to_the_right_bucket(objects: list[dict[str, Any]], pod_kw: dict[str, Any], target: str,
                                          bucket: str, fragment: str) -> None:
    h = harness(objects)
    names = sorted({target, *h.store.view.nodes})
    result = h.filter(make_pod("web-1").labels(WEB).requests(pod_kw).obj(), names)
    assert target not in result["NodeNames"]
    assert target in result[bucket], result
    assert fragment in result[bucket][target]
    other = "FailedNodes" if bucket == "FailedAndUnresolvableNodes" else "FailedAndUnresolvableNodes"
    assert target not in result[other]


def test_mixed_refusals_are_sorted_into_both_buckets_in_one_reply() -> None:
    h = harness([make_node("a").labels({"type": "gpu"}).obj(),
                 make_node("b").cpu("1").obj(),
                 make_node("c").cpu("1").obj(),
                 make_node("d").obj(),
                 make_policy("web").rules({"resource": "Node", "operator": "HasNot", "labels": {"type": "gpu"}}).obj()])
    result = h.filter(make_pod("web-1").labels(WEB).cpu("1500m").obj(), ["a", "b", "c", "d", "ghost"])
    assert result["NodeNames"] == ["d"]
    assert set(result["FailedNodes"]) == {"b", "c"}
    assert result["FailedNodes"]["b"] == result["FailedNodes"]["c"]
    assert result["FailedNodes"]["b"].startswith("insufficient capacity: cpu")
    assert set(result["FailedAndUnresolvableNodes"]) == {"a", "ghost"}
    assert result["FailedAndUnresolvableNodes"]["a"].startswith("placementRules[0] not met")


def test_every_refusal_is_named_when_nothing_fits() -> None:
    h = harness([*three_nodes(), make_policy("web").obj()])
    result = h.filter(make_pod("web-1").labels(WEB).cpu("8").obj())
    assert result["NodeNames"] == []
    assert result["Error"] == ""  # refusals are not errors: kube-scheduler lists them in FailedScheduling
    assert set(result["FailedNodes"]) == {"a", "b", "c"}
    # one text per cause, so that kube-scheduler's FailedScheduling event reads "3 insufficient capacity: cpu"
    assert set(result["FailedNodes"].values()) == {"insufficient capacity: cpu"}
    # each node's figures are in the pod's own record
    record = valid_record(h.client.get("/api/v1/decisions/shop/web-1").json())
    assert [(g.reason, g.count) for g in record.refused] == [("insufficient capacity: cpu", 3)]
    refused = record.refusals()
    assert refused["b"] == "insufficient capacity: cpu: needs 8, 4 free of 4 allocatable (short by 4)"
    assert refused["c"] == "insufficient capacity: cpu: needs 8, 1 free of 1 allocatable (short by 7)"


def test_topology_spread_do_not_schedule_refuses_the_crowded_zone() -> None:
    spread = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": WEB}}]
    objects = [make_node("a1").labels({ZONE: "a"}).obj(), make_node("b1").labels({ZONE: "b"}).obj(),
               make_policy("web").spec(topologySpreadConstraints=spread).obj(),
               make_pod("web-0").labels(WEB).on("a1").obj()]
    h = harness(objects)
    result = h.filter(make_pod("web-1").labels(WEB).obj())
    assert result["NodeNames"] == ["b1"]
    assert "topology spread" in result["FailedNodes"]["a1"]


def test_nodes_refused_in_large_groups_are_each_named_in_their_bucket() -> None:
    """Thousands of nodes refused together (a spread domain, a node rule) are kept as groups and
    sent group by group: every node is still named, in the right bucket, with its reason."""
    spread = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": WEB}}]
    rule = [{"resource": "Node", "operator": "HasNot", "labels": {"type": "gpu"}}]
    crowded = [make_node(f"a{i:03d}").labels({ZONE: "a"}).obj() for i in range(120)]
    gpus = [make_node(f"g{i:02d}").labels({ZONE: "b", "type": "gpu"}).obj() for i in range(30)]
    small = [make_node(f"b{i:02d}").labels({ZONE: "b"}).cpu("1").obj() for i in range(3)]
    free = [make_node(f"b{i:02d}").labels({ZONE: "b"}).obj() for i in range(3, 8)]
    h = harness([*crowded, *gpus, *small, *free,
                 make_policy("web").spec(topologySpreadConstraints=spread, placementRules=rule).obj(),
                 make_pod("web-0").labels(WEB).on("a000").obj()])
    names = ["ghost", *sorted(h.store.view.nodes, reverse=True)]
    result = h.filter(make_pod("web-1").labels(WEB).cpu("1500m").obj(), names)
    assert sorted(result["NodeNames"]) == [f"b{i:02d}" for i in range(3, 8)]
    failed, unresolvable = result["FailedNodes"], result["FailedAndUnresolvableNodes"]
    assert set(failed) == {f"a{i:03d}" for i in range(120)} | {"b00", "b01", "b02"}
    assert {failed[f"a{i:03d}"] for i in range(120)} == {f"topology spread: placing here breaks maxSkew 1 in {ZONE}"}
    assert failed["b00"].startswith("insufficient capacity: cpu")
    assert set(unresolvable) == {f"g{i:02d}" for i in range(30)} | {"ghost"}
    assert all(unresolvable[f"g{i:02d}"].startswith("placementRules[0] not met") for i in range(30))
    record = valid_record(h.client.get("/api/v1/decisions/shop/web-1").json())
    assert record.refused_count == 120 + 30 + 3 + 1
    # the record keeps the first 100 refused nodes in the order considered, from every group
    kept = ["ghost", *(f"g{i:02d}" for i in reversed(range(30))), "b02", "b01", "b00",
            *(f"a{i:03d}" for i in reversed(range(54, 120)))]
    assert sorted(record.refusals()) == sorted(kept)
    assert record.refusals()["g00"] == unresolvable["g00"]
    assert record.refusals()["a119"] == f"topology spread: placing here makes skew 2 in {ZONE}=a (maxSkew 1)"
    # grouped by cause, each with the count of every node refused for it (not only those listed)
    assert {g.reason: g.count for g in record.refused} == {
        f"topology spread: placing here breaks maxSkew 1 in {ZONE}": 120, unresolvable["g00"]: 30,
        "insufficient capacity: cpu": 3, "unknown node: berth has not seen it": 1}


# -- pass-through and the cluster default strategy ---------------------------------------------

def test_pods_no_policy_selects_pass_through_with_equal_scores() -> None:
    h = harness([*three_nodes(), make_policy("web").obj(),
                                 make_policy("other").namespace("elsewhere").match({"app": "db"}).obj()])
    db = make_pod("db-1").labels({"app": "db"}).cpu("64").obj()  # fits nowhere, but berth does not judge it
    result = h.filter(db, ["c", "a", "b"])
    assert result == {"NodeNames": ["c", "a", "b"], "FailedNodes": {}, "FailedAndUnresolvableNodes": {},
                      "Error": ""}
    assert h.prioritize(db, ["c", "a", "b"]) == {"a": 0, "b": 0, "c": 0}
    assert h.store.assumed == {}  # nothing counted before its bind


def test_a_policy_governs_only_its_own_namespace() -> None:
    h = harness([*three_nodes(), make_policy("web").namespace("tenant-a").node_filter({"excludes": ["a"]}).obj()])
    result = h.filter(make_pod("web-1").namespace("tenant-b").labels(WEB).obj())
    assert result["NodeNames"] == ["a", "b", "c"]


def test_cluster_default_strategy_judges_unselected_pods() -> None:
    h = harness(three_nodes(), default_strategy="BestFit")
    p = make_pod("db-1").labels({"app": "db"}).cpu("1500m").obj()
    result = h.filter(p)
    assert result["NodeNames"] == ["a", "b"]
    assert "c" in result["FailedNodes"]
    scores = h.prioritize(p, ["a", "b"])
    assert scores["a"] == 10  # best fit: the fuller node after placement


# -- prioritize: the strategy's node gets 10 ----------------------------------------------------

@pytest.mark.parametrize(("strategy", "winner"), [("Spread", "b"), ("BestFit", "a"), (None, "b")])
def test_prioritize_gives_the_strategy_winner_ten(strategy: str | None, winner: str) -> None:
    spec = {"strategy": strategy} if strategy else {}
    h = harness([make_node("a").cpu("2").obj(), make_node("b").cpu("8").obj(), make_policy("web").spec(**spec).obj()])
    p = make_pod("web-1").labels(WEB).cpu("1").obj()
    h.filter(p)
    scores = h.prioritize(p, ["a", "b"])
    assert scores[winner] == 10
    assert all(s <= 4 for n, s in scores.items() if n != winner)


def test_prioritize_reuses_filter_evaluation_for_the_same_nodes() -> None:
    h = harness([*three_nodes(), make_policy("web").strategy("Spread").obj()])
    p = make_pod("web-1").labels(WEB).obj()
    passing = h.filter(p)["NodeNames"]
    h.prioritize(p, passing)
    h.prioritize(p, ["a", "c"])  # another node set: judged again
    text = h.client.get("/metrics").text
    assert 'berth_extender_decisions_total{result="reused",verb="prioritize"} 1.0' in text
    assert 'berth_extender_decisions_total{result="scored",verb="prioritize"} 1.0' in text


REUSE_SCENARIOS = [
    # (name, policy, pods' cpu)
    ("Spread", make_policy("web").strategy("Spread"), "500m"),
    ("BestFit, nodes filling up", make_policy("web").strategy("BestFit"), "900m"),
    ("Fill: a round's plan", make_policy("web").strategy("Fill"), "500m"),
    ("zone spread", make_policy("web").strategy("Spread").spread(
        {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}), "500m"),
]


def _scheduled_cycle(index: str, policy: Any, cpu: str, monkeypatch: pytest.MonkeyPatch,
                     *, whole_nodes: bool) -> tuple[list[Any], str]:
    """Four pods through filter, prioritize (twice over the passing nodes, once over another set)
    and bind, with ``BERTH_INDEX`` set to ``index``: every answer, and the metrics text."""
    monkeypatch.setenv("BERTH_INDEX", index)
    nodes = [make_node(n).cpu("2").labels({ZONE: z}).obj() for n, z in (("a", "z1"), ("b", "z1"), ("c", "z2"))]
    for i, node in enumerate(nodes):
        node["metadata"]["resourceVersion"] = str(i + 1)
    h = harness([*nodes, policy.obj()])
    answers: list[Any] = []
    for i in range(4):
        p = make_pod(f"web-{i}").labels(WEB).cpu(cpu).obj()
        p["metadata"]["resourceVersion"] = str(100 + i)  # as the API server sends it: the pod read once
        if whole_nodes:
            r = h.client.post("/filter", content=orjson.dumps(args(p, nodes=nodes)))
            result = r.json()
            passing = [n["metadata"]["name"] for n in (result["Nodes"] or {}).get("items", [])]
        else:
            result = h.filter(p)
            passing = result["NodeNames"]
        answers.append(result)
        if not passing:
            continue
        scores = h.prioritize(p, passing)
        answers += [scores, h.prioritize(p, passing), h.prioritize(p, passing[:1])]
        answers.append(h.bind(p, max(passing, key=lambda n: scores[n])))
    return answers, h.client.get("/metrics").text


@pytest.mark.parametrize("whole_nodes", [False, True], ids=["node names", "whole nodes"])
@pytest.mark.parametrize(("policy", "cpu"), [r[1:] for r in REUSE_SCENARIOS], ids=[r[0] for r in REUSE_SCENARIOS])
def test_the_extenders_reuse_answers_as_the_index_off_does(policy: Any, cpu: str, whole_nodes: bool,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """prioritize's reuse of filter's evaluation and the echoed nodes' encodings are kept for speed
    alone: with the index off nothing is reused, and every answer is the same."""
    indexed, indexed_metrics = _scheduled_cycle("on", policy, cpu, monkeypatch, whole_nodes=whole_nodes)
    naive, naive_metrics = _scheduled_cycle("off", policy, cpu, monkeypatch, whole_nodes=whole_nodes)
    assert naive == indexed
    assert 'result="reused",verb="prioritize"} ' in indexed_metrics
    assert 'result="reused",verb="prioritize"} ' not in naive_metrics
    assert 'berth_cache_entries{cache="encoded_nodes"} 0.0' in naive_metrics


def test_prioritize_scores_every_asked_node_once_whichever_way_the_reply_is_built() -> None:
    """The nodes filter passed are scored from the ranking's runs; any other node set one score per
    name asked about. Both must give each node the core's score."""
    h = harness([*(make_node(f"n{i:02d}").cpu(str(2 + i % 5)).obj() for i in range(12)),
                   make_policy("web").strategy("Spread").obj()])
    p = make_pod("web-1").labels(WEB).cpu("1").obj()
    passing = h.filter(p)["NodeNames"]
    assert len(passing) == 12
    from_runs = h.prioritize(p, passing)
    r = h.client.post("/prioritize", content=orjson.dumps(args(p, [*passing, "ghost"])))
    one_by_one = r.json()
    assert sorted(x["Host"] for x in one_by_one) == sorted([*passing, "ghost"])
    assert {x["Host"]: x["Score"] for x in one_by_one} == {**from_runs, "ghost": 0}
    n = len(passing)  # the winner 10, the node at place i of the ranking 4 * (n - i) // n
    assert sorted(from_runs.values(), reverse=True) == [10, *(4 * (n - i) // n for i in range(1, n))]


# -- the winner counts at once (docs/behaviour.md#assumed-pods) -----------------------------------

def test_the_winner_counts_before_its_bind_arrives() -> None:
    h = harness([make_node("a").cpu("1").obj(), make_node("b").cpu("1").obj(), make_policy("web").obj()])
    first, second, third = (make_pod(f"web-{i}").labels(WEB).cpu("800m").obj() for i in range(3))
    r1 = h.filter(first)
    assert r1["NodeNames"] == ["a", "b"]
    scores = h.prioritize(first, r1["NodeNames"])
    chosen = max(scores, key=lambda n: scores[n])
    # kube-scheduler asks about the next pod before the bind of the first one
    r2 = h.filter(second)
    assert r2["NodeNames"] == [n for n in ("a", "b") if n != chosen]
    assert chosen in r2["FailedNodes"]
    r3 = h.filter(third)  # the second pod's winner (the other node) counts too
    assert r3["NodeNames"] == []


def test_a_single_passing_node_is_counted_without_prioritize() -> None:
    """kube-scheduler skips prioritize when one node is left; filter's winner already counts."""
    h = harness([make_node("a").cpu("1").obj(), make_node("b").cpu("1").obj(), make_policy("web").obj()])
    r1 = h.filter(make_pod("web-1").labels(WEB).cpu("800m").obj(), ["a"])
    assert r1["NodeNames"] == ["a"]
    r2 = h.filter(make_pod("web-2").labels(WEB).cpu("800m").obj(), ["a", "b"])
    assert r2["NodeNames"] == ["b"]


def test_a_tentative_place_is_released_after_its_ttl() -> None:
    h = harness([make_node("a").cpu("1").obj(), make_policy("web").obj()], tentative_ttl_seconds=5)
    h.filter(make_pod("web-1").labels(WEB).cpu("800m").obj())
    assert h.filter(make_pod("web-2").labels(WEB).cpu("800m").obj())["NodeNames"] == []
    h.clock.advance(6)
    assert h.filter(make_pod("web-3").labels(WEB).cpu("800m").obj())["NodeNames"] == ["a"]
    text = h.client.get("/metrics").text
    assert 'berth_assumptions_expired_total{kind="tentative"} 1.0' in text


def test_filtering_the_same_pod_again_does_not_count_it_twice() -> None:
    h = harness([make_node("a").cpu("1").obj(), make_policy("web").obj()])
    p = make_pod("web-1").labels(WEB).cpu("800m").obj()
    assert h.filter(p)["NodeNames"] == ["a"]
    assert h.filter(p)["NodeNames"] == ["a"]  # a retry of the same pod voids its earlier place
    assert h.prioritize(p, ["a"]) == {"a": 10}


# -- nodeCacheCapable: false ----------------------------------------------------------------------

def test_full_node_objects_are_judged_and_returned_whole() -> None:
    # the view knows nothing of these nodes: the request's Node objects are used
    h = harness([make_policy("web").obj()])
    nodes = [make_node("x").cpu("1").obj(), make_node("y").cpu("4").obj()]
    r = h.client.post("/filter", content=orjson.dumps(args(make_pod("web-1").labels(WEB).cpu("2").obj(), nodes=nodes)))
    result = r.json()
    assert set(result) == {"Nodes", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}
    assert [n["metadata"]["name"] for n in result["Nodes"]["items"]] == ["y"]
    assert result["Nodes"]["items"][0] == nodes[1]
    assert "insufficient capacity" in result["FailedNodes"]["x"]


GPU_RULE = [{"resource": "Node", "operator": "HasNot", "labels": {"type": "gpu"}}]


def test_a_request_node_labelled_otherwise_than_the_view_is_judged_by_its_own_labels() -> None:
    # The view's "a" and "b" carry no gpu label; the request's "a" does, and "z" is unknown to the view.
    h = harness([make_node("a").obj(), make_node("b").obj(), make_policy("web").spec(placementRules=GPU_RULE).obj()])
    assert h.filter(make_pod("web-0").labels(WEB).obj())["NodeNames"] == ["a", "b"]  # the view's tables are warm
    nodes = [make_node("a").labels({"type": "gpu"}).obj(),
             make_node("b").obj(),
             make_node("z").labels({"type": "gpu"}).obj()]
    result = h.client.post("/filter", content=orjson.dumps(args((make_pod("web-1")
                                                                 .labels(WEB)
                                                                 .obj()), nodes=nodes))).json()
    assert [n["metadata"]["name"] for n in result["Nodes"]["items"]] == ["b"]
    assert set(result["FailedAndUnresolvableNodes"]) == {"a", "z"}
    # and the view's own verdicts are untouched by the request's objects
    assert h.filter(make_pod("web-2").labels(WEB).obj())["NodeNames"] == ["a", "b"]


def test_a_node_object_berth_cannot_read_is_refused_alone() -> None:
    h = harness([make_policy("web").obj()])
    broken = make_node("x").obj()
    broken["status"]["allocatable"]["cpu"] = "lots"
    r = h.client.post("/filter", content=orjson.dumps(args(make_pod("web-1").labels(WEB).obj(), nodes=[broken,
                                                           make_node("y").obj()])))
    result = r.json()
    assert [n["metadata"]["name"] for n in result["Nodes"]["items"]] == ["y"]
    assert "cannot read the node" in result["FailedAndUnresolvableNodes"]["x"]


# -- a pod berth cannot read ----------------------------------------------------------------------

def test_an_unreadable_pod_gets_the_protocol_error() -> None:
    h = harness([make_node("a").obj(), make_policy("web").obj()])
    bad = make_pod("web-1").labels(WEB).obj()
    bad["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "a lot"
    r = h.client.post("/filter", content=orjson.dumps(args(bad, ["a"])))
    assert r.status_code == 200
    assert "cannot read the pod" in r.json()["Error"]
    r = h.client.post("/prioritize", content=orjson.dumps(args(bad, ["a"])))
    assert r.status_code == 400
    assert "cannot read the pod" in r.json()["Error"]


def test_percent_signs_are_spelt_out_for_kube_scheduler() -> None:
    """kube-scheduler formats refusal reasons as a format string: '10%' would read '10%!f(MISSING)'."""
    assert scheduler_text("below the 10% free floor; 5 %") == "below the 10 percent free floor; 5 percent"
    h = harness([make_node("a").disk("100Gi").obj(), make_policy("web").obj()])
    p = make_pod("web-1").labels(WEB).obj()
    p["spec"]["containers"][0]["resources"]["requests"]["ephemeral-storage"] = "95Gi"
    result = h.filter(p)
    assert result["FailedNodes"]["a"] == "insufficient capacity: ephemeral-storage"
    # the explain API keeps the core's own words
    record = valid_record(h.client.get("/api/v1/decisions/shop/web-1").json())
    assert "below the 10% free floor" in (record.refusal_of("a") or "")


def test_a_pod_nominated_by_preemption_holds_its_room() -> None:
    h = harness([make_node("a").cpu("2").obj(), make_node("b").cpu("2").obj(), make_policy("web").obj()])
    preemptor = make_pod("high").labels(WEB).cpu("1500m").obj()
    preemptor["status"]["nominatedNodeName"] = "a"
    h.store.apply_pod(preemptor)  # the watch shows kube-scheduler's nomination
    result = h.filter(make_pod("web-1").labels(WEB).cpu("1").obj())
    assert result["NodeNames"] == ["b"]
    assert "insufficient capacity" in result["FailedNodes"]["a"]
    # the nomination cleared: the room is free again
    preemptor["status"].pop("nominatedNodeName")
    h.store.apply_pod(preemptor)
    h.clock.advance(60)  # web-1's tentative place on b expires
    assert h.filter(make_pod("web-2").labels(WEB).cpu("1").obj())["NodeNames"] == ["a", "b"]
    # the preemptor's own filter does not count itself
    h.clock.advance(60)  # web-2's tentative place expires; a nomination does not
    preemptor["status"]["nominatedNodeName"] = "a"
    h.store.apply_pod(preemptor)
    assert h.filter(preemptor, ["a"])["NodeNames"] == ["a"]


# -- pod-level resources and node affinity, read from the pod objects --------------------------------

def _pod_level(p: dict[str, Any], **requests: str) -> dict[str, Any]:
    p["spec"]["resources"] = {"requests": requests}
    return p


def test_a_bound_pods_pod_level_request_counts_on_its_node() -> None:
    # the containers ask 100m; the pod as a whole 3 cores, as kube-scheduler counts it
    h = harness([make_node("a").cpu("4").obj(), make_node("b").cpu("4").obj(), make_policy("web").obj(),
                 _pod_level(make_pod("big").labels({"app": "other"}).on("a").obj(), cpu="3")])
    assert h.store.view.requested("a")["cpu"] == 3000
    result = h.filter(make_pod("web-1").labels(WEB).cpu("1500m").obj())
    assert result["NodeNames"] == ["b"]
    assert result["FailedNodes"] == {"a": "insufficient capacity: cpu"}


def test_a_pending_pods_pod_level_request_is_what_must_fit() -> None:
    h = harness([make_node("a").cpu("2").obj(), make_node("b").cpu("4").obj(), make_policy("web").obj()])
    result = h.filter(_pod_level(make_pod("web-1").labels(WEB).cpu("100m").obj(), cpu="3"))
    assert result["NodeNames"] == ["b"]


def test_a_match_fields_pin_sends_the_pod_to_its_node_only() -> None:
    h = harness([make_node("a").obj(), make_node("b").obj(), make_policy("web").obj()])
    p = make_pod("web-1").labels(WEB).obj()
    p["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b"]}]}]}}}
    result = h.filter(p)
    assert result["NodeNames"] == ["b"]
    assert "a" in result["FailedAndUnresolvableNodes"]


WINNER_ONLY = [
    # name, BERTH_FILTER_WINNER_ONLY, the pod's cpu, NodeNames, FailedNodes
    ("every_passing_node_and_the_refusals", False, "1500m", ["a", "b", "c"], ["tiny"]),
    ("the_winner_alone_and_no_refusal", True, "1500m", ["c"], []),
    ("no_winner_every_refusal", True, "16", [], ["a", "b", "c", "tiny"]),
]


@pytest.mark.parametrize(("name", "winner_only", "cpu", "expected", "failed"), WINNER_ONLY,
                         ids=[c[0] for c in WINNER_ONLY])
def test_filter_answers_with_the_winner_alone_when_set(name: str, winner_only: bool, cpu: str, expected: list[str],
                                                       failed: list[str]) -> None:
    """With the winner alone kube-scheduler binds it and reads no refusal, so none is sent; a pod no
    node takes gets every refusal, for kube-scheduler's FailedScheduling event and its preemption."""
    h = harness([make_node("a").cpu("2").obj(),
                 make_node("b").cpu("4").obj(),
                 make_node("c").cpu("8").obj(),
                 make_node("tiny").cpu("1").obj(),
                 make_policy("web").strategy("Spread").obj()], filter_winner_only=winner_only)
    pod = make_pod("web-1").labels({"app": "web"}).cpu(cpu).obj()
    reply = h.filter(pod, ["a", "b", "c", "tiny"])
    assert reply["NodeNames"] == expected
    assert sorted(reply["FailedNodes"]) == failed
    assert reply["FailedAndUnresolvableNodes"] == {}
    refused = orjson.loads(h.store.decisions["shop/web-1"])["refused"]
    assert sorted(n for group in refused for n in group["nodes"]) == (failed or ["tiny"])  # the record keeps them


def test_filter_winner_only_leaves_pods_no_policy_selects_every_node() -> None:
    h = harness([make_node("a").cpu("2").obj(), make_node("b").cpu("4").obj()], filter_winner_only=True)
    assert h.filter(make_pod("db-1").labels({"app": "db"}).cpu("1").obj(), ["a", "b"])["NodeNames"] == ["a", "b"]


POD_CHANGES = [
    # (name, the pod prioritize is sent after filter's: resourceVersion, labels; its scores come from berth)
    ("the same pod at the same resourceVersion: read once", "7", {}, False),
    ("selected by a policy at a new resourceVersion: read again, and scored", "8", WEB, True),
    ("no resourceVersion: read again, and scored", "", WEB, True),
]


@pytest.mark.parametrize("index", ["on", "off"])
@pytest.mark.parametrize(("version", "labels", "scored"), [r[1:] for r in POD_CHANGES], ids=[r[0] for r in POD_CHANGES])
def test_a_pod_sent_again_is_read_again_unless_it_is_the_same_resource_version(
        version: str, labels: dict[str, str], scored: bool, index: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pod read last is reused for speed (the index on) only when the same pod comes at the same
    resourceVersion; a pod changed since filter is judged as it is now, with the index on or off."""
    monkeypatch.setenv("BERTH_INDEX", index)
    h = harness([*three_nodes(), make_policy("web").strategy("Spread").obj()])
    first = make_pod("web-1").labels({"app": "other"}).cpu("500m").obj()
    first["metadata"]["resourceVersion"] = "7"
    assert h.filter(first)["NodeNames"] == ["a", "b", "c"]
    again = make_pod("web-1").labels(labels or {"app": "other"}).cpu("500m").obj()
    again["metadata"]["resourceVersion"] = version
    got = h.prioritize(again, ["a", "b", "c"])
    assert (max(got.values()) == 10) is scored, got
    if not scored:
        assert got == {"a": 0, "b": 0, "c": 0}


@pytest.mark.parametrize("names", [
    ["a", "b", "c"], ["n-1"], [], ["a", "a", "b"], ["x,y", 'q"r', "s\\"], [",", '\\",'],
], ids=["three", "one", "none", "a name twice", "odd names", "separators"])
def test_a_passed_through_pod_scores_0_on_every_node_sent_in_order(names: list[str]) -> None:
    """The reply to prioritize for a pod no policy selects: one entry of score 0 per name sent, in
    the order sent, byte for byte the plain encoding of that list."""
    from berth.extender.replies import priorities

    got = orjson.dumps(priorities(names, ()))
    assert got == orjson.dumps([{"Host": n, "Score": 0} for n in names])
