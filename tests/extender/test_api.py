"""The explain API (decisions, preview, allocations, capacity) and the operations endpoints."""

from __future__ import annotations

import orjson

from berth.core.decision import Winner
from berth.extender.questions import CAPACITY_PLAN_LIMIT
from berth.extender.routes import deps
from berth.extender.settings import ExtenderSettings
from tests.builders import make_node, make_pod, make_policy
from tests.decision_schema import valid_record
from tests.extender.helpers import harness

WEB = {"app": "web"}


def cluster() -> list[dict[str, object]]:
    return [make_node("a").cpu("2").memory("4Gi").obj(),
            make_node("b").cpu("4").memory("8Gi").obj(),
            make_node("c").cpu(None).obj(),
            make_policy("web").strategy("Spread").spec(capacity={"cpuOvercommitPercent": 200}).obj(),
            make_pod("old").labels(WEB).cpu("1").memory("1Gi").on("a").obj()]


def test_decision_of_a_pod_never_placed_is_404() -> None:
    h = harness(cluster())
    r = h.client.get("/api/v1/decisions/shop/nobody")
    assert r.status_code == 404
    assert r.json() == {"error": "no decision recorded for pod shop/nobody"}


def test_decision_after_a_filter_names_every_refusal() -> None:
    h = harness(cluster())
    h.filter(make_pod("huge").labels(WEB).cpu("100").obj())
    d = valid_record(h.client.get("/api/v1/decisions/shop/huge").json())
    assert d.trigger == "filter"
    assert d.considered == ["a", "b", "c"] and d.considered_count == 3
    assert set(d.refusals()) == {"a", "b"} and d.refused_count == 2
    assert d.refusals()["b"].startswith("insufficient capacity: cpu: needs 100")
    assert [(g.reason, g.count, g.nodes) for g in d.refused] == [("insufficient capacity: cpu", 2, ["a", "b"])]
    # c reports no cpu: unknown is neither zero nor unlimited; eligible, with a warning
    assert d.winner is not None and (d.winner.node, d.winner.rank, d.winner.score) == ("c", 1, 10)
    assert any("c" in w for w in d.warnings)


def test_decision_when_nothing_fits_carries_the_error() -> None:
    h = harness([make_node("a").cpu("1").obj(), make_policy("web").obj()])
    h.filter(make_pod("huge").labels(WEB).cpu("100").obj())
    d = valid_record(h.client.get("/api/v1/decisions/shop/huge").json()).to_json()
    assert d["winner"] is None
    assert d["error"]["code"] == "insufficient_resource"


def test_decision_held_back_by_topology_spread_alone_says_spread_unsatisfied() -> None:
    """Both nodes have room; with minDomains 3 over two hostnames each would make skew 2."""
    spread = [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
               "minDomains": 3}]
    h = harness([make_node("a").labels({"kubernetes.io/hostname": "a"}).obj(),
                 make_node("b").labels({"kubernetes.io/hostname": "b"}).obj(),
                 make_policy("web").spec(topologySpreadConstraints=spread).obj(),
                 make_pod("w1").labels(WEB).on("a").obj(), make_pod("w2").labels(WEB).on("b").obj()])
    h.filter(make_pod("w3").labels(WEB).obj())
    d = valid_record(h.client.get("/api/v1/decisions/shop/w3").json()).to_json()
    assert d["winner"] is None
    assert d["error"]["code"] == "spread_unsatisfied"
    assert "skew 2" in d["error"]["message"]


def test_preview_of_a_shape() -> None:
    h = harness(cluster())
    body = {"namespace": "shop", "labels": WEB, "requests": {"cpu": "3", "memory": "1Gi"}}
    r = h.client.post("/api/v1/preview", content=orjson.dumps(body))
    assert r.status_code == 200, r.text
    result = r.json()
    d = valid_record(result["decision"])
    assert d.policy == "shop/web" and d.strategy == "Spread" and d.trigger == "preview"
    assert "a" not in d.refusals()  # cpuOvercommitPercent 200: a has 4 - 1 = 3 cores to give
    assert d.winner is not None and result["scores"][d.winner.node] == d.winner.score == 10
    assert h.store.assumed == {}  # a preview changes nothing


def test_preview_of_a_pod_manifest_with_a_named_policy_and_nodes() -> None:
    h = harness(cluster())
    body = {"pod": make_pod("x").labels({"app": "other"}).obj(), "policy": "web", "nodes": ["a"]}
    d = valid_record(h.client.post("/api/v1/preview", content=orjson.dumps(body)).json()["decision"])
    assert d.considered == ["a"] and d.policy == "shop/web"


def test_preview_errors() -> None:
    h = harness(cluster())
    assert h.client.post("/api/v1/preview", content=b"{").status_code == 400
    r = h.client.post("/api/v1/preview", content=orjson.dumps({"requests": {"cpu": "many"}}))
    assert r.status_code == 400 and "cannot read the pod" in r.json()["error"]
    r = h.client.post("/api/v1/preview", content=orjson.dumps({"namespace": "shop", "policy": "nope"}))
    assert r.status_code == 404 and "shop/nope" in r.json()["error"]
    r = h.client.post("/api/v1/preview", content=orjson.dumps({"colour": "blue"}))
    assert r.status_code == 400 and "colour" in r.json()["error"]


def test_the_routes_take_the_settings_and_questions_they_are_given() -> None:
    h = harness(cluster())
    body = orjson.dumps({"namespace": "shop", "labels": WEB, "nodes": ["a", "b"]})
    assert h.client.post("/api/v1/preview", content=body).status_code == 200
    h.app.dependency_overrides[deps.settings] = lambda: ExtenderSettings(api_anonymous=True, api_max_node_names=1)
    r = h.client.post("/api/v1/preview", content=body)
    assert r.status_code == 400 and "BERTH_API_MAX_NODE_NAMES" in r.json()["error"]

    class Allocations:
        def allocations(self) -> dict[str, object]:
            return {"nodes": {}, "given": True}

    h.app.dependency_overrides[deps.questions] = Allocations
    assert h.client.get("/api/v1/nodes/allocations").json() == {"nodes": {}, "given": True}
    h.app.dependency_overrides.clear()
    assert set(h.client.get("/api/v1/nodes/allocations").json()["nodes"]) == {"a", "b", "c"}


def test_capacity_by_query_and_by_body() -> None:
    h = harness(cluster())
    r = h.client.get("/api/v1/capacity", params={"namespace": "shop", "labels": "app=web", "cpu": "1",
                                                 "memory": "1Gi"})
    assert r.status_code == 200, r.text
    by_query = r.json()
    assert by_query["policy"] == "shop/web"
    assert by_query["nodes"]["b"] == 8  # 4 cores at 200%: 8 of 1 core; 8Gi of memory: 8
    assert by_query["total"] == sum(by_query["nodes"].values())
    body = {"namespace": "shop", "labels": WEB, "requests": {"cpu": "1", "memory": "1Gi"}}
    assert h.client.post("/api/v1/capacity", content=orjson.dumps(body)).json() == by_query
    assert h.client.get("/api/v1/capacity", params={"labels": "nonsense"}).status_code == 400
    assert h.client.get("/api/v1/capacity", params={"cpu": "lots"}).status_code == 400


def test_capacity_lists_room_per_node_and_what_one_round_places() -> None:
    """A policy with rules and spread: every node keeps its raw room in the table, and placeable
    says what one round could place under the whole policy and why not one more."""
    zones = [make_node(n).labels({"kubernetes.io/hostname": n, "topology.kubernetes.io/zone": z, **extra}).obj()
             for n, z, extra in (("a", "z1", {"disk": "ssd"}), ("b", "z2", {"disk": "ssd"}), ("c", "z2", {}))]
    rules = [{"resource": "Node", "operator": "Has", "labels": {"disk": "ssd"}}]
    h = harness([*zones, make_policy("web").spec(placementRules=rules).obj()])
    out = h.client.get("/api/v1/capacity", params={"namespace": "shop", "labels": "app=web", "cpu": "1",
                                                   "memory": "1Gi"}).json()
    assert out["nodes"] == {"a": 4, "b": 4, "c": 4} and out["total"] == 12
    assert out["placeable"]["pods"] == 8 and out["placeable"]["code"] == "affinity_unsatisfied"


def test_capacity_plans_at_most_its_limit_under_the_lock() -> None:
    h = harness([make_node(f"n{i}").cpu("64").memory("256Gi").obj() for i in range(3)] + [make_policy("web").obj()])
    out = h.client.get("/api/v1/capacity", params={"namespace": "shop", "labels": "app=web", "cpu": "100m",
                                                   "memory": "128Mi"}).json()
    assert out["total"] == 3 * 110  # pod slots bind
    assert out["placeable"] == {"pods": CAPACITY_PLAN_LIMIT, "code": None,
                                "reason": f"planning stops at {CAPACITY_PLAN_LIMIT} pods; more may fit"}


def test_allocations_show_every_node_and_the_settings_in_force() -> None:
    h = harness(cluster())
    result = h.client.get("/api/v1/nodes/allocations").json()
    assert result["settings"]["cpu_overcommit_percent"] == 100
    assert result["policies"]["shop/web"]["settings"]["cpu_overcommit_percent"] == 200
    a = result["nodes"]["a"]
    assert a["allocatable"]["cpu"] == 2000 and a["requested"]["cpu"] == 1000
    assert "cpu" in result["nodes"]["c"]["unknown"]


def test_health_readiness_and_metrics() -> None:
    h = harness(cluster())
    assert h.client.get("/healthz").text == "ok"
    assert h.client.get("/readyz").status_code == 200  # a snapshot is fully listed
    h.filter(make_pod("web-1").labels(WEB).obj())
    text = h.client.get("/metrics").text
    for name in ("berth_extender_request_seconds_bucket{le=", 'berth_view_objects{kind="nodes"} 3.0',
                 'berth_view_objects{kind="assumed"} 1.0', 'berth_extender_decisions_total{result="placed"',
                 'berth_view_objects{kind="pods"} 1.0',  # the bound pod; the assumed one is counted apart
                 "berth_bind_conflicts_total", "berth_watch_restarts_total"):
        assert name in text, name


def test_objects_berth_cannot_read_are_counted_by_kind() -> None:
    """An object the watch delivers that berth cannot read is left out of the view, logged, and
    counted, so that an operator sees a view that silently lacks a node."""
    from prometheus_client.parser import text_string_to_metric_families

    h = harness(cluster())
    h.store.apply_node({"metadata": {"name": "broken"}, "status": {"allocatable": {"cpu": "lots"}}})
    h.store.apply_pod({"metadata": {"name": "p", "namespace": "shop"}, "spec": {"containers": "none"}})
    assert "broken" not in h.store.view.nodes
    families = {f.name: f for f in text_string_to_metric_families(h.client.get("/metrics").text)}
    counts = {s.labels["kind"]: s.value for s in families["berth_view_unreadable_objects"].samples
              if s.name.endswith("_total")}
    assert counts == {"nodes": 1.0, "pods": 1.0, "leases": 0.0}


def test_view_sizes_are_read_under_the_stores_lock() -> None:
    """A scrape must not walk the view while a watch thread changes it."""
    import threading

    h = harness(cluster())
    read: list[dict[str, int]] = []
    with h.store.lock:
        reader = threading.Thread(target=lambda: read.append(h.store.sizes()))
        reader.start()
        reader.join(0.2)
        assert reader.is_alive() and not read  # waits for the lock
    reader.join(5)
    assert read and read[0]["nodes"] == 3


def test_the_openapi_schema_documents_the_wire_types() -> None:
    h = harness(cluster())
    schema = h.client.get("/openapi.json").json()
    components = schema["components"]["schemas"]
    for name in ("ExtenderArgs", "ExtenderFilterResult", "HostPriority", "ExtenderBindingArgs",
                 "ExtenderBindingResult", "ExtenderPreemptionArgs", "ExtenderPreemptionResult", "ShapeRequest"):
        assert name in components, name
    assert set(components["ExtenderArgs"]["properties"]) == {"Pod", "Nodes", "NodeNames"}
    assert schema["paths"]["/filter"]["post"]["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ExtenderArgs"}


# -- a policy's decision ---------------------------------------------------------------------------


def test_a_policys_decision_is_its_pods_latest_with_a_fresh_preview_of_a_pending_one() -> None:
    h = harness(cluster())
    first, second = make_pod("web-1").labels(WEB).cpu("1").obj(), make_pod("web-2").labels(WEB).cpu("1").obj()
    h.schedule(first)
    h.clock.advance(5)
    h.schedule(second)
    h.store.apply_pod(make_pod("web-3").labels(WEB).cpu("100").obj())  # pending: nothing fits it
    r = h.client.get("/api/v1/policies/shop/web/decision").json()
    assert (r["policy"], r["decisionSource"], r["decision"]["pod"]) == ("shop/web", "extender", "shop/web-2")
    assert r["preview"]["pod"] == "shop/web-3" and r["preview"]["pending"] is True
    assert valid_record(r["decision"]).trigger == "bind"
    assert valid_record(r["preview"]["decision"]).trigger == "preview"
    assert valid_record(r["preview"]["decision"]).refusals()["b"].startswith("insufficient capacity: cpu: needs 100")


def test_a_policys_decision_kept_in_its_status_when_newer_than_any_in_memory() -> None:
    body = make_policy("web").strategy("Spread").obj()
    body["status"] = {"latestDecision": {"pod": "shop/old", "time": "2030-01-01T00:00:00.00Z", "winner": "a"}}
    h = harness([*cluster()[:3], body, cluster()[4]])
    h.schedule(make_pod("web-1").labels(WEB).cpu("1").obj())  # recorded in 2027, older than the status copy
    r = h.client.get("/api/v1/policies/shop/web/decision").json()
    assert (r["decisionSource"], r["decision"]["pod"]) == ("policyStatus", "shop/old")
    assert valid_record(r["decision"]).winner == Winner(node="a")  # the status an older operator wrote, read
    assert r["preview"]["pod"] == "shop/old" and r["preview"]["pending"] is False  # no pod pending


def test_a_policy_with_no_decision_yet_and_an_unknown_policy() -> None:
    h = harness([make_node("a").obj(), make_policy("web").obj()])
    assert h.client.get("/api/v1/policies/shop/web/decision").json() == {
        "policy": "shop/web", "decision": None, "decisionSource": None, "preview": None}
    r = h.client.get("/api/v1/policies/shop/nope/decision")
    assert r.status_code == 404 and r.json() == {"error": "no valid PlacementPolicy shop/nope"}
