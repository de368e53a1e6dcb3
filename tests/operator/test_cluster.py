"""The operator's cluster is the extender's live view (list, watch, relist on 410, ready after the
first full list), for Nodes, Pods and Leases only: Kopf watches the policies."""

from __future__ import annotations

import threading
import time

from berth.operator.cluster import WATCHED, OperatorStore, live_view
from tests.builders import make_node, make_pod
from tests.extender.helpers import FakeSource, event
from tests.operator import objects as o
from tests.operator.objects import store_of


def test_the_operator_watches_nodes_pods_and_leases_and_is_ready_without_policies() -> None:
    source = FakeSource()
    source.objects["nodes"] = [make_node("node-a").disk(None).obj()]
    source.objects["pods"] = [make_pod("w1").on("node-a").cpu("1").memory("1Gi").obj()]
    store = OperatorStore()
    view = live_view(store, source, settle_heap=False)
    before = set(threading.enumerate())  # other tests' extender views may still be watching policies
    view.start()
    started = set(threading.enumerate()) - before
    deadline = time.monotonic() + 5
    while not store.ready and time.monotonic() < deadline:
        time.sleep(0.01)
    view.stop()
    assert store.ready and source.lists["policies"] == 0
    assert {kind for kind, count in source.lists.items() if count} == set(WATCHED)
    assert started and all(t.name != "berth-watch-policies" for t in started)


def test_a_410_relist_forgets_the_pods_that_went_and_tells_the_operator() -> None:
    told: list[tuple[str, object, object]] = []
    source = FakeSource()
    keep, gone = (make_pod("keep")
                  .on("node-a")
                  .cpu("1")
                  .memory("1Gi")
                  .obj()), make_pod("gone").on("node-a").cpu("1").memory("1Gi").obj()
    source.objects["nodes"] = [make_node("node-a").disk(None).obj()]
    source.objects["pods"] = [keep, gone]
    store = OperatorStore(leases_tracked=False, on_pod_change=lambda ns, a, b: told.append((ns, a, b)))
    view = live_view(store, source, settle_heap=False)
    source.scripts["pods"] = [[{"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old"}}],
                              [event("MODIFIED", {**keep, "status": {"phase": "Succeeded"}}, "900")]]
    view.run("pods", max_cycles=1)
    assert len(told) == 2  # both pods listed
    source.objects["pods"] = [keep]
    view.run("pods", max_cycles=1)  # relisted after the 410: "gone" is forgotten, then "keep" finishes
    assert told[2:] == [("shop", {"app": "web"}, None), ("shop", {"app": "web"}, None)]
    with store.lock:
        assert store.records("shop") == []


def test_a_status_reads_only_the_pods_it_selects_of_a_namespace() -> None:
    store = store_of([make_node("node-a").disk(None).obj()],
                     [make_pod(name).on("node-a").labels({"app": app}).cpu("1").memory("1Gi").obj()
                      for name, app in (("w1", "web"), ("w2", "web"), ("d1", "db"))]
                     + [make_pod("w3").labels({"app": "web"}).cpu("1").memory("1Gi").obj()])
    with store.lock:
        every = store.records(o.NAMESPACE)
        web = store.records(o.NAMESPACE, lambda pod: pod.labels.get("app") == "web")
    assert sorted(r.info.name for r in every) == ["d1", "w1", "w2", "w3"]
    assert sorted((r.info.name, r.pending) for r in web) == [("w1", False), ("w2", False), ("w3", True)]
