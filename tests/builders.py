"""One set of builders for every test: nodes, pods and policies, fluently, as kube-scheduler's
tests build theirs (``st.MakePod().Label("foo", "").Obj()``)::

    make_node("a").cpu("8").label(ZONE, "z1").info()         # the NodeInfo the core reads
    make_node("a").cpu("8").label(ZONE, "z1").obj()          # the Node the API server sends
    make_pod("web-0").on("a").cpu("500m").info() / .obj()
    make_policy().strategy("Fill").count(3).build() / .obj()  # a PlacementPolicy / its manifest

One set of defaults everywhere: a node has 4 CPUs, 8Gi of memory, 100Gi of ephemeral storage and
room for 110 pods, is Ready and carries its hostname label; a pod is ``shop/<name>`` (uid
``uid-shop-<name>``), labelled ``app: web``, asks 100m CPU and 128Mi of memory, was created at
2026-01-01T00:00:00Z and is Running when bound, Pending when not; a policy is ``shop/web`` at
generation 1 and selects ``app: web``.
Quantities are written the Kubernetes way (``"4"``, ``"500m"``, ``"8Gi"``); a resource set to
``None`` is left out: a node's is then *unknown* to the core (never zero), a pod does not ask for it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Self

from berth.core.model import NodeInfo, Owner, PodInfo, Taint, Toleration
from berth.core.policy import PlacementPolicy, policy_from_manifest
from berth.core.quantity import CPU, DISK, MEMORY, PODS, to_base_units

NAMESPACE = "shop"
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
BYPASS = "berth.dev/bypass"
SLEEPY = "berth.dev/sleepy"
MIRROR = "kubernetes.io/config.mirror"
DECISION = "berth.dev/decision"
CREATED = "2026-01-01T00:00:00Z"

Quantity = str | int | None


def _amounts(quantities: Mapping[str, Quantity]) -> dict[str, int]:
    return {r: to_base_units(r, q) for r, q in quantities.items() if q is not None}


class NodeBuilder:
    """A node; :meth:`obj` is the Node object, :meth:`info` the core's NodeInfo."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._allocatable: dict[str, Quantity] = {CPU: "4", MEMORY: "8Gi", DISK: "100Gi", PODS: "110"}
        self._labels: dict[str, str] = {HOSTNAME: name}
        self._taints: list[Taint] = []
        self._ready: bool | None = True
        self._unschedulable = False
        self._bypassed = False
        self._rv = "1"

    def cpu(self, q: Quantity) -> Self:
        return self.resource(CPU, q)

    def memory(self, q: Quantity) -> Self:
        return self.resource(MEMORY, q)

    def disk(self, q: Quantity) -> Self:
        return self.resource(DISK, q)

    def pods(self, q: Quantity) -> Self:
        return self.resource(PODS, q)

    def resource(self, name: str, q: Quantity) -> Self:
        """Allocatable ``name``; None leaves it out (unknown)."""
        self._allocatable[name] = q
        return self

    def resources(self, quantities: Mapping[str, Quantity] | None) -> Self:
        for name, q in (quantities or {}).items():
            self.resource(name, q)
        return self

    def label(self, key: str, value: str) -> Self:
        self._labels[key] = value
        return self

    def zone(self, zone: str) -> Self:
        return self.label(ZONE, zone)

    def labels(self, labels: Mapping[str, str] | None) -> Self:
        """More labels (the hostname label stays unless one of them replaces it)."""
        self._labels.update(labels or {})
        return self

    def taint(self, key: str, value: str = "", effect: str = "NoSchedule") -> Self:
        self._taints.append(Taint(key, value, effect))
        return self

    def taints(self, taints: Iterable[Taint | Mapping[str, str]]) -> Self:
        for t in taints:
            if isinstance(t, Taint):
                self._taints.append(t)
            else:
                self.taint(t.get("key", ""), t.get("value", "") or "", t.get("effect", ""))
        return self

    def ready(self, ready: bool | None = True) -> Self:
        """``None``: the node reports no Ready condition."""
        self._ready = ready
        return self

    def not_ready(self) -> Self:
        return self.ready(False)

    def cordoned(self, unschedulable: bool = True) -> Self:
        self._unschedulable = unschedulable
        return self

    def bypassed(self, bypassed: bool = True) -> Self:
        self._bypassed = bypassed
        return self

    def rv(self, resource_version: str) -> Self:
        self._rv = resource_version
        return self

    def info(self) -> NodeInfo:
        return NodeInfo(name=self._name, labels=dict(self._labels), allocatable=_amounts(self._allocatable),
                        taints=tuple(self._taints), unschedulable=self._unschedulable, ready=self._ready,
                        bypassed=self._bypassed)

    def obj(self) -> dict[str, Any]:
        allocatable = {r: str(q) for r, q in self._allocatable.items() if q is not None}
        meta: dict[str, Any] = {"name": self._name, "uid": f"node-uid-{self._name}", "resourceVersion": self._rv,
                                "labels": dict(self._labels)}
        if self._bypassed:
            meta["annotations"] = {BYPASS: "true"}
        spec: dict[str, Any] = {}
        if self._unschedulable:
            spec["unschedulable"] = True
        if self._taints:
            spec["taints"] = [{"key": t.key, **({"value": t.value} if t.value else {}), "effect": t.effect}
                              for t in self._taints]
        status: dict[str, Any] = {"allocatable": allocatable, "capacity": dict(allocatable)}
        if self._ready is not None:
            status["conditions"] = [{"type": "Ready", "status": "True" if self._ready else "False"}]
        return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec, "status": status}


class PodBuilder:
    """A pod; :meth:`obj` is the Pod object, :meth:`info` the core's PodInfo."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._namespace = NAMESPACE
        self._uid: str | None = None
        self._labels: dict[str, str] = {"app": "web"}
        self._requests: dict[str, Quantity] = {CPU: "100m", MEMORY: "128Mi"}
        self._node: str | None = None
        self._phase: str | None = None
        self._terminating = False
        self._annotations: dict[str, str] = {}
        self._tolerations: list[Toleration] = []
        self._owner: Owner | None = None
        self._created = CREATED
        self._rv = "1"
        self._nominated: str | None = None
        self._scheduler = "default-scheduler"

    def namespace(self, namespace: str) -> Self:
        self._namespace = namespace
        return self

    def uid(self, uid: str | None) -> Self:
        """None: ``uid-<namespace>-<name>``."""
        self._uid = uid
        return self

    def label(self, key: str, value: str) -> Self:
        self._labels[key] = value
        return self

    def labels(self, labels: Mapping[str, str] | None) -> Self:
        """Exactly these labels, instead of ``app: web`` (None keeps them)."""
        if labels is not None:
            self._labels = dict(labels)
        return self

    def cpu(self, q: Quantity) -> Self:
        return self.request(CPU, q)

    def memory(self, q: Quantity) -> Self:
        return self.request(MEMORY, q)

    def disk(self, q: Quantity) -> Self:
        return self.request(DISK, q)

    def request(self, name: str, q: Quantity) -> Self:
        """What the pod asks of ``name``; None (or zero) asks nothing."""
        self._requests[name] = q
        return self

    def requests(self, quantities: Mapping[str, Quantity] | None) -> Self:
        for name, q in (quantities or {}).items():
            self.request(name, q)
        return self

    def on(self, node: str | None) -> Self:
        """Bound to ``node`` (None: pending)."""
        self._node = node
        return self

    def phase(self, phase: str | None) -> Self:
        """None: Running when bound, Pending when not."""
        self._phase = phase
        return self

    def terminating(self, terminating: bool = True) -> Self:
        self._terminating = terminating
        return self

    def sleepy(self, sleepy: bool = True) -> Self:
        return self._flag(SLEEPY, "true", sleepy)

    def mirror(self, mirror: bool = True) -> Self:
        """The API server's mirror of a static pod."""
        return self._flag(MIRROR, "mirror", mirror)

    def _flag(self, key: str, value: str, on: bool) -> Self:
        if on:
            self._annotations[key] = value
        else:
            self._annotations.pop(key, None)
        return self

    def annotations(self, annotations: Mapping[str, str] | None) -> Self:
        self._annotations.update(annotations or {})
        return self

    def decision(self, decision: Mapping[str, Any]) -> Self:
        """The decision annotation berth writes on a bound pod."""
        self._annotations[DECISION] = json.dumps(decision)
        return self

    def toleration(self, key: str = "", operator: str = "Equal", value: str = "", effect: str = "") -> Self:
        self._tolerations.append(Toleration(key, operator, value, effect))
        return self

    def tolerations(self, tolerations: Iterable[Toleration]) -> Self:
        self._tolerations.extend(tolerations)
        return self

    def owner(self, owner: Owner | tuple[str, str] | None) -> Self:
        """Its controller: an Owner or (kind, name); None: no controller."""
        self._owner = Owner(*owner) if isinstance(owner, tuple) else owner
        return self

    def created(self, timestamp: str) -> Self:
        """metadata.creationTimestamp (default: the same instant for every pod)."""
        self._created = timestamp
        return self

    def rv(self, resource_version: str) -> Self:
        self._rv = resource_version
        return self

    def nominated(self, node: str | None) -> Self:
        """status.nominatedNodeName."""
        self._nominated = node
        return self

    def scheduler(self, name: str) -> Self:
        """spec.schedulerName (default: default-scheduler)."""
        self._scheduler = name
        return self

    @property
    def _the_uid(self) -> str:
        return self._uid if self._uid is not None else f"uid-{self._namespace}-{self._name}"

    def info(self) -> PodInfo:
        requests = {r: a for r, a in _amounts(self._requests).items() if a}
        return PodInfo(uid=self._the_uid, name=self._name, namespace=self._namespace, labels=dict(self._labels),
                       requests=requests, node_name=self._node, terminating=self._terminating,
                       sleepy=self._annotations.get(SLEEPY) == "true", tolerations=tuple(self._tolerations),
                       controller=self._owner, mirror=MIRROR in self._annotations)

    def obj(self) -> dict[str, Any]:
        requests = {r: str(q) for r, q in self._requests.items() if q is not None}
        container: dict[str, Any] = {"name": "c", "image": "registry.k8s.io/pause:3.10"}
        if requests:
            container["resources"] = {"requests": requests}
        spec: dict[str, Any] = {"containers": [container], "schedulerName": self._scheduler}
        if self._node:
            spec["nodeName"] = self._node
        if self._tolerations:
            spec["tolerations"] = [{k: v for k, v in (("key", t.key), ("operator", t.operator), ("value", t.value),
                                                      ("effect", t.effect)) if v} for t in self._tolerations]
        meta: dict[str, Any] = {"name": self._name, "namespace": self._namespace, "uid": self._the_uid,
                                "resourceVersion": self._rv, "labels": dict(self._labels)}
        meta["creationTimestamp"] = self._created
        if self._annotations:
            meta["annotations"] = dict(self._annotations)
        if self._terminating:
            meta["deletionTimestamp"] = "2026-01-01T00:05:00Z"
        if self._owner is not None:
            meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": self._owner.kind, "name": self._owner.name,
                                        "uid": f"uid-{self._owner.name}", "controller": True}]
        phase = self._phase or ("Running" if self._node else "Pending")
        status: dict[str, Any] = {"phase": phase}
        if self._nominated:
            status["nominatedNodeName"] = self._nominated
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


class PolicyBuilder:
    """A PlacementPolicy; :meth:`obj` is its manifest, :meth:`build` the validated policy. Spec
    fields are written in their Kubernetes spelling."""

    def __init__(self, name: str = "web") -> None:
        self._name = name
        self._namespace = NAMESPACE
        self._generation = 1
        self._spec: dict[str, Any] = {"selector": {"matchLabels": {"app": "web"}}}
        self._status: dict[str, Any] | None = None

    def namespace(self, namespace: str) -> Self:
        self._namespace = namespace
        return self

    def generation(self, generation: int) -> Self:
        self._generation = generation
        return self

    def match(self, labels: Mapping[str, str]) -> Self:
        """Select the pods carrying ``labels`` (instead of ``app: web``)."""
        return self.spec(selector={"matchLabels": dict(labels)})

    def strategy(self, strategy: str | None) -> Self:
        return self.spec(strategy=strategy)

    def count(self, count: int) -> Self:
        return self.spec(count=count)

    def nodes_limit(self, limit: int) -> Self:
        return self.spec(nodesLimit=limit)

    def node_filter(self, node_filter: Mapping[str, Any]) -> Self:
        return self.spec(nodeFilter=node_filter)

    def spread(self, *constraints: Mapping[str, Any]) -> Self:
        """topologySpreadConstraints."""
        return self.spec(topologySpreadConstraints=list(constraints))

    def rules(self, *rules: Any) -> Self:
        """placementRules."""
        return self.spec(placementRules=list(rules))

    def spec(self, **fields: Any) -> Self:
        """Spec fields in their Kubernetes spelling; a value of None leaves the field out."""
        for key, value in fields.items():
            if value is None:
                self._spec.pop(key, None)
            else:
                self._spec[key] = value
        return self

    def whole_spec(self, spec: Mapping[str, Any]) -> Self:
        """Exactly this spec (no default selector)."""
        self._spec = dict(spec)
        return self

    def status(self, status: Mapping[str, Any]) -> Self:
        self._status = dict(status)
        return self

    def obj(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "apiVersion": "berth.dev/v1alpha1",
            "kind": "PlacementPolicy",
            "metadata": {"name": self._name, "namespace": self._namespace, "generation": self._generation,
                         "uid": f"uid-policy-{self._name}"},
            "spec": dict(self._spec),
        }
        if self._status is not None:
            body["status"] = dict(self._status)
        return body

    def build(self) -> PlacementPolicy:
        return policy_from_manifest(self.obj())


def make_node(name: str) -> NodeBuilder:
    return NodeBuilder(name)


def make_pod(name: str) -> PodBuilder:
    return PodBuilder(name)


def make_policy(name: str = "web") -> PolicyBuilder:
    return PolicyBuilder(name)
