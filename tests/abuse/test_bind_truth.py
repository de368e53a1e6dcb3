"""A refused bind tells the truth: after any failed Binding the extender's view holds what the API
server holds, and a Binding refused because the pod is already bound elsewhere never frees the room
the pod takes on the node it runs on (else the next pod over-commits that node)."""

# ruff: noqa: F811  (the harness fixtures are imported, then requested by name)
from __future__ import annotations

import copy
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient
from kubernetes import client as k8s

from berth.core.model import PodInfo
from berth.extender.app import create_app
from berth.extender.binder import BindError
from berth.extender.settings import ExtenderSettings
from tests.builders import make_node, make_pod, make_policy
from tests.e2e.harness import wait_for
from tests.e2e.harness.fixtures import (  # noqa: F401  (pytest fixtures)
    control_plane,
    e2e_namespace,
    kube_api,
    make_nodes,
    node_leases,
)
from tests.e2e.harness.kube import NodeSpec, simple_pod
from tests.e2e.stack import GROUP, PLURAL, VERSION, Extender, berth_crd, berth_extender, policy_manifest  # noqa: F401
from tests.extender.helpers import Clock, args, bind_args, make_store

WEB = {"app": "web"}


class ApiServer:
    """Stands in for the API server's side of a Binding: a pod is bound once; a second Binding is
    refused with Conflict, as the API server refuses it; reads answer the pod as stored."""

    def __init__(self, pods: list[dict[str, Any]], *, unreadable: bool = False) -> None:
        self.pods = {p["metadata"]["uid"]: copy.deepcopy(p) for p in pods}
        self.unreadable = unreadable
        self.bindings = 0

    def stored(self, uid: str) -> dict[str, Any]:
        return self.pods[uid]

    async def bind(self, pod: PodInfo, node: str, annotations: Mapping[str, str]) -> None:
        stored = self.pods[pod.uid]
        if stored["spec"].get("nodeName"):
            raise BindError(f"cannot bind pod {pod.key} to {node}: Conflict: Operation cannot be fulfilled on "
                            f"pods/binding \"{pod.name}\": pod {pod.name} is already assigned to node "
                            f"\"{stored['spec']['nodeName']}\"")
        self.bindings += 1
        stored["spec"]["nodeName"] = node
        stored["status"]["phase"] = "Running"

    async def record_event(self, pod: PodInfo, node: str, message: str) -> None:
        return None

    async def fetch_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        if self.unreadable:
            raise ConnectionError("the API server went away")
        for stored in self.pods.values():
            if stored["metadata"]["namespace"] == namespace and stored["metadata"]["name"] == name:
                return copy.deepcopy(stored)
        return None


def _client(objects: list[dict[str, Any]], api: ApiServer) -> tuple[TestClient, Any]:
    store = make_store(objects)
    app = create_app(store, ExtenderSettings(), binder=api, clock=Clock())
    return TestClient(app), store


def _bind(client: TestClient, pod_obj: dict[str, Any], node_name: str) -> str:
    reply = client.post("/bind", content=orjson.dumps(bind_args(pod_obj, node_name)))
    assert reply.status_code == 200, reply.text
    error: str = reply.json()["Error"]
    return error


def _passing(client: TestClient, pod_obj: dict[str, Any], names: list[str]) -> list[str]:
    reply = client.post("/filter", content=orjson.dumps(args(pod_obj, names)))
    assert reply.status_code == 200, reply.text
    passing: list[str] = reply.json()["NodeNames"] or []
    return passing


@pytest.mark.parametrize("labels", [WEB, {"app": "batch"}], ids=["governed", "no_policy"])
def test_a_second_bind_of_a_pod_the_watch_shows_bound_keeps_its_room(labels: dict[str, str]) -> None:
    """The watch already shows the pod on node a; a bind of it to b (a second scheduler, a retry) is
    refused and the pod keeps counting on a: a governed 3-CPU pod no longer fits a 4-CPU node a."""
    running = make_pod("first").labels(labels).cpu("2").on("a").obj()
    api = ApiServer([running])
    client, store = _client([make_node("a").cpu("4").obj(),
                             make_node("b").cpu("4").obj(),
                             make_policy("web").obj(), running], api)
    error = _bind(client, running, "b")
    assert "already" in error
    assert store.view.pod(running["metadata"]["uid"]).node_name == "a"
    assert _passing(client, make_pod("next").labels(WEB).cpu("3").obj(), ["a"]) == []


@pytest.mark.parametrize("labels", [WEB, {"app": "batch"}], ids=["governed", "no_policy"])
def test_a_retried_bind_refused_as_already_assigned_keeps_the_pod_on_its_node(labels: dict[str, str]) -> None:
    """The first Binding was created but its reply never came; kube-scheduler binds again, the API
    server answers Conflict before the watch shows the pod: the pod is read again and counted on a."""
    first = make_pod("first").labels(labels).cpu("2").obj()
    api = ApiServer([first])
    client, store = _client([make_node("a").cpu("4").obj(), make_policy("web").obj(), first], api)
    _passing(client, first, ["a"])
    assert _bind(client, first, "a") == ""
    assert "already assigned" in _bind(client, first, "a")
    assert api.bindings == 1
    shown = store.view.pod(first["metadata"]["uid"])
    assert shown is not None and shown.node_name == "a"
    assert _passing(client, make_pod("next").labels(WEB).cpu("3").obj(), ["a"]) == []


def test_a_refused_bind_that_cannot_be_read_again_keeps_the_earlier_binds_count() -> None:
    """The Conflict comes and the pod cannot be read (the API server went away): the earlier bind's
    count on a stays, since that Binding may well exist."""
    first = make_pod("first").labels(WEB).cpu("2").obj()
    api = ApiServer([first])
    client, _ = _client([make_node("a").cpu("4").obj(), make_policy("web").obj(), first], api)
    _passing(client, first, ["a"])
    assert _bind(client, first, "a") == ""
    api.unreadable = True
    assert "already assigned" in _bind(client, first, "a")
    assert _passing(client, make_pod("next").labels(WEB).cpu("3").obj(), ["a"]) == []



# -- against the real control plane ----------------------------------------------------------------


@pytest.mark.e2e
def test_a_duplicate_bind_refused_by_the_api_server_keeps_the_node_full(
        control_plane: Any, kube_api: Any, berth_extender: Extender, e2e_namespace: str,
        make_nodes: Callable[..., list[str]]) -> None:
    """A real Binding, then a second bind of the same pod to another node (a second scheduler, a
    retry): the API server refuses it (or berth does, its watch having shown the pod bound), and
    the first node still counts the pod: a 3-CPU pod is refused there (2 + 3 > 4)."""
    suffix = uuid.uuid4().hex[:6]
    first, second = make_nodes(NodeSpec(name=f"dup-a-{suffix}", cpu="4"), NodeSpec(name=f"dup-b-{suffix}", cpu="4"))
    k8s.CustomObjectsApi(kube_api).create_namespaced_custom_object(
        GROUP, VERSION, e2e_namespace, PLURAL, policy_manifest("dup", {"app": "dup"}, strategy="Spread"))
    core = k8s.CoreV1Api(kube_api)
    placed = core.create_namespaced_pod(e2e_namespace, simple_pod("dup-1", cpu="2", labels={"app": "dup"},
                                                                  scheduler_name="nobody"))
    raw = kube_api.sanitize_for_serialization(placed)
    wait_for(lambda: berth_extender.post("/filter", {"Pod": raw, "NodeNames": [first]}),
             lambda answer: answer.get("NodeNames") == [first], timeout=30, what="berth to see the node and policy")
    binding = {"PodName": "dup-1", "PodNamespace": e2e_namespace, "PodUID": placed.metadata.uid}
    assert berth_extender.post("/bind", {**binding, "Node": first})["Error"] == ""
    refused = berth_extender.post("/bind", {**binding, "Node": second})["Error"]
    assert "already" in refused, refused
    assert core.read_namespaced_pod("dup-1", e2e_namespace).spec.node_name == first
    big = kube_api.sanitize_for_serialization(core.create_namespaced_pod(
        e2e_namespace, simple_pod("dup-2", cpu="3", labels={"app": "dup"}, scheduler_name="nobody")))
    answer = berth_extender.post("/filter", {"Pod": big, "NodeNames": [first]})
    assert answer["NodeNames"] == [], answer
