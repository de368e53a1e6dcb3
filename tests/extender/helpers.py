"""Raw Kubernetes JSON for the extender's tests (the extender reads what the API server and
kube-scheduler send, so its tests build that, not the core's dataclasses), and a harness that
serves an app over a snapshot with a hand-driven clock."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from fastapi import FastAPI
from fastapi.testclient import TestClient

from berth.extender.app import create_app
from berth.extender.settings import ExtenderSettings
from berth.extender.store import ClusterStore

ZONE = "topology.kubernetes.io/zone"
NOW = 1_800_000_000.0

_uids = itertools.count(1)


def nodedrain(name: str, *, status_pods: Iterable[Mapping[str, Any]] = (), drained: Iterable[str] = ("a",),
              mode: str = "Execute", **spec: Any) -> dict[str, Any]:
    """A NodeDrain of ``drained`` (to ``spec``'s destinations, any by default) whose status lists
    ``status_pods`` (each: pod, uid, source, workload, state, destination)."""
    body: dict[str, Any] = {"nodes": list(drained), "mode": mode, **spec}
    if "destinations" not in body and "destinationSelector" not in body:
        body["anyDestination"] = True
    return {
        "apiVersion": "berth.dev/v1alpha1",
        "kind": "NodeDrain",
        "metadata": {"name": name},
        "spec": body,
        "status": {"nodes": list(drained), "pods": [dict(p) for p in status_pods]},
    }


def lease(node_name: str, renew: str) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": node_name, "namespace": "kube-node-lease"},
        "spec": {"holderIdentity": node_name, "renewTime": renew},
    }


def args(
    pod_obj: Mapping[str, Any], names: Iterable[str] | None = None, nodes: Iterable[Mapping[str, Any]] | None = None
) -> dict[str, Any]:
    """ExtenderArgs, cache-capable (names) or with full Node objects."""
    if nodes is not None:
        return {"Pod": dict(pod_obj), "Nodes": {"metadata": {}, "items": [dict(n) for n in nodes]}, "NodeNames": None}
    return {"Pod": dict(pod_obj), "Nodes": None, "NodeNames": list(names or ())}


def bind_args(pod_obj: Mapping[str, Any], node_name: str) -> dict[str, Any]:
    meta = pod_obj["metadata"]
    return {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": node_name}


@dataclass
class Clock:
    now: float = NOW

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Harness:
    """An app over a store filled from objects, a test client, and the clock it runs on."""

    store: ClusterStore
    app: FastAPI
    client: TestClient
    clock: Clock
    bound: dict[str, str] = field(default_factory=dict)

    def filter(self, pod_obj: Mapping[str, Any], names: Iterable[str] | None = None, **kw: Any) -> dict[str, Any]:
        names = list(names) if names is not None else sorted(self.store.view.nodes)
        r = self.client.post("/filter", content=orjson.dumps(args(pod_obj, names, **kw)))
        assert r.status_code == 200, r.text
        out: dict[str, Any] = r.json()
        return out

    def prioritize(self, pod_obj: Mapping[str, Any], names: Iterable[str]) -> dict[str, int]:
        r = self.client.post("/prioritize", content=orjson.dumps(args(pod_obj, list(names))))
        assert r.status_code == 200, r.text
        return {h["Host"]: h["Score"] for h in r.json()}

    def bind(self, pod_obj: Mapping[str, Any], node_name: str) -> str:
        r = self.client.post("/bind", content=orjson.dumps(bind_args(pod_obj, node_name)))
        assert r.status_code == 200, r.text
        error: str = r.json()["Error"]
        return error

    def schedule(self, pod_obj: Mapping[str, Any], names: Iterable[str] | None = None) -> str | None:
        """What kube-scheduler does with the extender alone: filter, prioritize, pick the top score, bind."""
        result = self.filter(pod_obj, names)
        passing = result["NodeNames"]
        if not passing:
            return None
        if len(passing) == 1:
            chosen = passing[0]
        else:
            scores = self.prioritize(pod_obj, passing)
            chosen = max(passing, key=lambda n: scores[n])
        error = self.bind(pod_obj, chosen)
        assert error == "", error
        return chosen


def make_store(objects: Iterable[Mapping[str, Any]], *, leases_tracked: bool = False) -> ClusterStore:
    store = ClusterStore(leases_tracked=leases_tracked)
    by_kind: dict[str, list[Mapping[str, Any]]] = {"nodes": [], "pods": [], "leases": [], "policies": [],
                                                   "nodedrains": []}
    kind_map = {"Node": "nodes", "Pod": "pods", "Lease": "leases", "PlacementPolicy": "policies",
                "NodeDrain": "nodedrains"}
    for obj in objects:
        by_kind[kind_map[obj["kind"]]].append(obj)
    for kind in ("policies", "nodes", "leases", "pods", "nodedrains"):
        store.replace(kind, by_kind[kind])
    return store


def harness(objects: Iterable[Mapping[str, Any]], *, leases_tracked: bool = False, **settings: Any) -> Harness:
    clock = Clock()
    store = make_store(objects, leases_tracked=leases_tracked)
    store.clock = clock
    app = create_app(store, ExtenderSettings(**{"api_anonymous": True, **settings}), clock=clock)
    return Harness(store, app, TestClient(app), clock)
