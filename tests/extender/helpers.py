"""Raw Kubernetes JSON for the extender's tests (the extender reads what the API server and
kube-scheduler send, so its tests build that, not the core's dataclasses), a harness that
serves an app over a snapshot with a hand-driven clock, and a scripted watch source for the
live view (the extender's and the operator's)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from fastapi import FastAPI
from fastapi.testclient import TestClient

from berth.extender.app import create_app
from berth.extender.live_view import NotFound, Page
from berth.extender.nominator import Nominator
from berth.extender.settings import ExtenderSettings
from berth.extender.store import ClusterStore
from tests.builders import make_node, make_pod

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


BAD_INPUT = [
    # (verb, body, status, fragment of the message): malformed bodies and each verb's answer, which
    # the fast path and the FastAPI routes must give alike
    ("filter", b"", 400, "empty request body"),
    ("filter", b"{not json", 400, "not valid JSON"),
    ("filter", b"[1, 2]", 400, "must be a JSON object"),
    ("filter", b'{"NodeNames": ["a"]}', 400, "Pod: Field required"),
    ("filter", b'{"Pod": "web", "NodeNames": ["a"]}', 400, "Pod: Input should be a valid dictionary"),
    ("filter", b'{"Pod": {"metadata": {"name": "p"}}, "NodeNames": "a"}', 400, "NodeNames: Input should be a valid"),
    ("filter", b'{"Pod": {"metadata": {"name": "p"}}, "NodeNames": [1]}', 400, "NodeNames[0]: Input should be"),
    ("filter", b'{"Pod": {"metadata": {"name": "p"}}}', 400, "one of Nodes or NodeNames is required"),
    ("filter", b'{"Pod": {"metadata": {"name": "p"}}, "Nodes": {"items": [3]}}', 400, "Nodes.items[0]"),
    ("filter", b'{"Pod": {}, "NodeNames": ["a"]}', 200, "metadata.name is missing"),
    ("prioritize", b'{"Pod": {}, "NodeNames": ["a"]}', 400, "metadata.name is missing"),
    ("prioritize", b'{"Pod": 1}', 400, "Pod: Input should be a valid dictionary"),
    ("bind", b'{"PodName": "p", "PodNamespace": "shop", "PodUID": "u"}', 400, "Node: Field required"),
    ("bind", b'{"PodName": "", "PodNamespace": "shop", "PodUID": "u", "Node": "a"}', 400, "PodName: String should"),
    ("bind", b'{"PodName": 5, "PodNamespace": "shop", "PodUID": "u", "Node": "a"}', 400, "PodName: Input should be"),
    ("preempt", b'{"Pod": {}, "NodeNameToMetaVictims": {"a": {"Pods": [{"UID": 7}]}}}', 400, "UID"),
    ("api/v1/preview", b'{"requests": {"cpu": []}}', 400, "requests.cpu"),
]

NODES = [make_node("a").cpu("4").obj(), make_node("b").cpu("4").obj(), make_node("c").cpu("4").obj()]
"""Three empty 4-CPU nodes, a, b and c: the nomination tests' cluster."""


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


KINDS = ("nodes", "pods", "leases", "policies", "nodedrains")


class FakeSource:
    """Lists return the current objects; each watch plays the next scripted step."""

    def __init__(self) -> None:
        self.objects: dict[str, list[dict[str, Any]]] = {k: [] for k in KINDS}
        self.scripts: dict[str, list[list[dict[str, Any]] | Exception]] = {k: [] for k in KINDS}
        self.lists: dict[str, int] = dict.fromkeys(KINDS, 0)
        self.watches: list[tuple[str, str]] = []
        self.missing: set[str] = set()
        self.rv = 100
        self.page_size = 2

    def list_pages(self, kind: str) -> Iterator[Page]:
        self.lists[kind] += 1
        if kind in self.missing:
            raise NotFound(f"{kind}: the server could not find the requested resource")
        items = self.objects[kind]
        self.rv += 1
        if not items:
            yield Page([], str(self.rv))
        for i in range(0, len(items), self.page_size):
            yield Page(items[i:i + self.page_size], str(self.rv))

    def watch(self, kind: str, resource_version: str, timeout_seconds: int) -> Iterator[dict[str, Any]]:
        self.watches.append((kind, resource_version))
        if not self.scripts[kind]:
            raise RuntimeError("no more script: end of test")
        step = self.scripts[kind].pop(0)
        if isinstance(step, Exception):
            raise step
        yield from step


def event(etype: str, obj: dict[str, Any], rv: str) -> dict[str, Any]:
    obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": rv}}
    return {"type": etype, "object": obj}


# -- the nominator ----------------------------------------------------------------------------------

SCHED = "berth-scheduler"
"""The scheduler whose pods the nomination tests' nominator takes."""


def counted(h: Harness, result: str) -> float:
    value = h.app.state.engine.metrics.registry.get_sample_value("berth_nominations_total", {"result": result})
    return value or 0.0


def nominating(objects: list[dict[str, Any]], **settings: Any) -> tuple[Harness, Nominator]:
    """A nominator that takes pods as soon as they come, unless ``nominate_after_seconds`` is given
    (the wait's own tests)."""
    settings.setdefault("nominate_after_seconds", 0)
    h = harness(objects, nominate=True, nominate_schedulers=SCHED, **settings)
    nominator = h.app.state.nominator
    assert isinstance(nominator, Nominator)
    return h, nominator


def pending(name: str, **kw: Any) -> dict[str, Any]:
    builder = make_pod(name).scheduler(kw.pop("scheduler", SCHED))
    if "labels" in kw:
        builder = builder.labels(kw.pop("labels"))
    if "nominated" in kw:
        builder = builder.nominated(kw.pop("nominated"))
    if "on" in kw:
        builder = builder.on(kw.pop("on"))
    return builder.obj()
