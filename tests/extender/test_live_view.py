"""The live view against a scripted watch source: first lists, watch events, relists after
410 Gone and after watch errors (forgetting what disappeared meanwhile), readiness, invalid
policies kept aside, assumed pods surviving a relist."""

from __future__ import annotations

import threading
import time
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient

from berth.extender.app import create_app
from berth.extender.live_view import Gone, LiveView
from berth.extender.metrics import Metrics
from berth.extender.settings import ExtenderSettings
from berth.extender.store import ClusterStore
from tests.builders import make_node, make_pod, make_policy
from tests.extender.helpers import FakeSource, args, event, lease, nodedrain


def live(source: FakeSource, **kw: Any) -> tuple[ClusterStore, LiveView, Metrics]:
    store = ClusterStore(leases_tracked=True)
    metrics = Metrics(store)
    return store, LiveView(store, source, metrics=metrics, sleep=lambda s: None, settle_heap=False, **kw), metrics


def test_ready_only_after_the_first_list_of_all_four_kinds() -> None:
    source = FakeSource()
    source.objects["nodes"] = [make_node("a").obj(), make_node("b").obj(), make_node("c").obj()]
    store, view, _ = live(source)
    app = create_app(store, ExtenderSettings())
    client = TestClient(app)
    assert client.get("/readyz").status_code == 503
    for kind in ("nodes", "pods", "leases"):
        view.relist(kind)
    r = client.get("/readyz")
    assert r.status_code == 503 and "policies" in r.text
    view.relist("policies")
    assert client.get("/readyz").status_code == 200
    assert sorted(store.view.nodes) == ["a", "b", "c"]  # listed in pages of two


def test_watch_events_update_the_view() -> None:
    source = FakeSource()
    source.objects["nodes"] = [make_node("a").obj()]
    bound = make_pod("web-1").labels({}).on("a").cpu("1").obj()
    source.scripts["nodes"] = [[event("ADDED", make_node("b").obj(), "201"), event("DELETED",
                                               make_node("a").obj(), "202")]]
    source.scripts["pods"] = [[event("ADDED", bound, "301"),
                               event("MODIFIED", {**bound, "status": {"phase": "Succeeded"}}, "302")]]
    store, view, _ = live(source)
    view.run("nodes", max_cycles=1)
    assert sorted(store.view.nodes) == ["b"]
    assert source.watches[0] == ("nodes", str(source.rv))  # watched from the list's resourceVersion
    view.relist("pods")
    with pytest.raises(RuntimeError):  # the script ends
        view.watch_until_error("pods", "300")
    assert store.view.pod(bound["metadata"]["uid"]) is None  # a finished pod frees its node


def test_410_gone_leads_to_a_relist_that_forgets_what_disappeared() -> None:
    source = FakeSource()
    keep, gone = make_pod("keep").labels({}).on("a").cpu("1").obj(), make_pod("gone").labels({}).on("a").cpu("1").obj()
    source.objects["nodes"] = [make_node("a").obj()]
    source.objects["pods"] = [keep, gone]
    store, view, metrics = live(source)
    view.relist("nodes")
    # first watch: ends with 410 Gone; meanwhile "gone" was deleted and its DELETED event was missed
    source.scripts["pods"] = [[{"type": "ERROR", "object": {"kind": "Status", "code": 410,
                                                              "message": "too old resource version"}}], []]
    view.run("pods", max_cycles=1)
    assert store.view.pod(gone["metadata"]["uid"]) is not None
    source.objects["pods"] = [keep]
    view.run("pods", max_cycles=1)
    assert store.view.pod(gone["metadata"]["uid"]) is None
    assert store.view.pod(keep["metadata"]["uid"]) is not None
    assert source.lists["pods"] == 2
    assert view.relists["pods"] >= 1
    assert 'berth_watch_restarts_total{kind="pods"}' in metrics.render().decode()


def test_watch_errors_lead_to_a_relist_with_backoff() -> None:
    source = FakeSource()
    source.objects["nodes"] = [make_node("a").obj()]
    source.scripts["nodes"] = [ConnectionResetError("connection reset by peer"), Gone("expired")]
    slept: list[float] = []
    store = ClusterStore()
    view = LiveView(store, source, sleep=slept.append, settle_heap=False)
    view.run("nodes", max_cycles=2)
    assert source.lists["nodes"] == 2
    assert slept == [0.5]  # an error backs off; a 410 relists at once
    assert view.relists["nodes"] == 2


def test_a_watch_that_ends_normally_resumes_from_the_last_resource_version() -> None:
    source = FakeSource()
    source.objects["leases"] = []
    source.scripts["leases"] = [
        [event("ADDED", lease("a", "2026-11-30T12:00:00Z"), "501"),
         {"type": "BOOKMARK", "object": {"kind": "Lease", "metadata": {"resourceVersion": "550"}}}],
        RuntimeError("stop"),
    ]
    store, view, _ = live(source)
    view.run("leases", max_cycles=1)
    assert [rv for kind, rv in source.watches if kind == "leases"][1] == "550"
    assert store.view.leases["a"] is not None


def test_invalid_policies_are_kept_aside_and_ignored() -> None:
    source = FakeSource()
    good = make_policy("web").strategy("Spread").obj()
    bad = make_policy("broken").match({"app": "broken"}).rules({"resource": "Node", "operator": "Has", "labels": {},
                                            "weight": 3}).obj()
    source.objects["policies"] = [good, bad]
    store, view, _ = live(source)
    view.relist("policies")
    assert list(store.policies) == ["shop/web"]
    assert "shop/broken" in store.invalid_policies
    assert "placementRules" in store.invalid_policies["shop/broken"]
    # fixed by a later update
    fixed = make_policy("broken").strategy("BestFit").match({"app": "broken"}).obj()
    source.scripts["policies"] = [[event("MODIFIED", fixed, "900")]]
    with pytest.raises(RuntimeError):
        view.watch_until_error("policies", "800")
    assert sorted(store.policies) == ["shop/broken", "shop/web"]
    assert store.invalid_policies == {}


def test_without_the_crd_there_are_no_policies_and_the_view_is_ready() -> None:
    source = FakeSource()
    source.missing.add("policies")
    store, view, _ = live(source)
    view.run("policies", max_cycles=1)
    assert "policies" in store.listed
    assert store.policies == {}


def test_an_assumed_pod_survives_a_relist_until_the_api_server_shows_it() -> None:
    source = FakeSource()
    source.objects["nodes"] = [make_node("a").cpu("2").obj()]
    source.objects["policies"] = [make_policy("web").obj()]
    p = make_pod("web-1").labels({"app": "web"}).cpu("1").obj()
    source.objects["pods"] = [p]  # pending
    store, view, _ = live(source, track_leases=False)
    for kind in ("nodes", "pods", "policies"):
        view.relist(kind)
    app = create_app(store, ExtenderSettings())
    client = TestClient(app)
    assert client.post("/filter", content=orjson.dumps(args(p, ["a"]))).json()["NodeNames"] == ["a"]
    uid = p["metadata"]["uid"]
    assert store.view.is_assumed(uid)
    view.relist("pods")  # the pod is still pending in the API server
    assert store.view.is_assumed(uid)
    source.objects["pods"] = [{**p, "spec": {**p["spec"], "nodeName": "a"}}]
    view.relist("pods")
    assert not store.view.is_assumed(uid)
    assert store.view.pod(uid) is not None
    assert store.assumed == {}


def test_threads_start_and_stop() -> None:
    source = FakeSource()
    source.objects["nodes"] = [make_node("a").obj()]
    store = ClusterStore()
    view = LiveView(store, source, track_leases=False, settle_heap=False)
    view.start()
    deadline = time.monotonic() + 5
    while not store.ready and time.monotonic() < deadline:
        time.sleep(0.01)
    view.stop()
    assert store.ready
    assert store.view.leases_tracked is False
    assert all(t.name.startswith("berth-watch-") for t in threading.enumerate() if "berth" in t.name)


def test_nodedrain_watch_events_feed_the_drains_holds() -> None:
    source = FakeSource()
    evicted = make_pod("web-1").labels({}).on("a").owner(("ReplicaSet", "web-1")).obj()
    source.objects["pods"] = [evicted]
    entry = {"pod": "shop/web-1", "uid": evicted["metadata"]["uid"], "source": "a", "workload": "ReplicaSet/web-1",
             "state": "Evicting", "destination": "b"}
    drain = nodedrain("retire-a", status_pods=[entry])
    source.scripts["nodedrains"] = [[event("ADDED", drain, "401"), event("DELETED", drain, "402")]]
    store, view, _ = live(source)
    for kind in ("nodes", "pods"):
        view.relist(kind)
    view.relist("nodedrains")
    assert store.holds == {}
    seen: list[int] = []
    store_apply = store.apply_nodedrain

    def spy(obj: Any) -> None:
        store_apply(obj)
        seen.append(len(store.holds))

    store.apply_nodedrain = spy  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):  # the script ends
        view.watch_until_error("nodedrains", "400")
    assert seen == [1] and store.holds == {}  # held on ADDED, released on DELETED


def test_without_the_nodedrain_crd_there_are_no_drains_and_the_view_is_ready() -> None:
    source = FakeSource()
    source.missing.add("nodedrains")
    store, view, _ = live(source)
    view.run("nodedrains", max_cycles=1)
    assert "nodedrains" in store.listed and store.drains == {}
