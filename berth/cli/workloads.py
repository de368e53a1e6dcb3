"""The workload mix ``berth simulate`` places: a ``WorkloadMix`` document (see
``berth/sample/workloads.yaml`` for the format), validated with errors that name the field."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from berth.core import (
    API_VERSION,
    SLEEPY_ANNOTATION,
    InvalidPolicy,
    PlacementPolicy,
    PodInfo,
    Strategy,
    policy_from_manifest,
)
from berth.snapshot import SnapshotError, parse_documents, pod_from_manifest, read_text

KIND = "WorkloadMix"
_TOP_FIELDS = frozenset({"apiVersion", "kind", "metadata", "workloads", "referencePod"})
_FIELDS = frozenset({"name", "namespace", "replicas", "labels", "requests", "template", "sleepy", "policy"})


@dataclass(frozen=True)
class Workload:
    name: str
    namespace: str
    replicas: int
    pod: PodInfo  # the shape, labels and constraints every replica shares
    spec: Mapping[str, Any] = field(default_factory=dict)  # PlacementPolicy spec, without strategy

    def policy(self, strategy: Strategy | None, *, count: int | None = None,
               nodes_limit: int | None = None) -> PlacementPolicy:
        spec = dict(self.spec)
        spec.setdefault("selector", {"matchLabels": dict(self.pod.labels)})
        if strategy is not None:
            spec["strategy"] = strategy.value
        if count is not None:
            spec["count"] = count
        if nodes_limit is not None:
            spec["nodesLimit"] = nodes_limit
        return policy_from_manifest({"apiVersion": API_VERSION, "kind": "PlacementPolicy",
                                     "metadata": {"name": self.name, "namespace": self.namespace},
                                     "spec": spec})

    def round_shape(self, room: Sequence[int]) -> tuple[int, int]:
        """Fill's and Each's (count, nodesLimit) for this workload: the policy's when it sets them.
        Else, from ``room`` (how many more pods fit on each node): the per-node ``count`` that lets
        one round place the most of ``replicas`` on the nodes that can take that many (ties to the
        smaller count, which spreads wider), and as many such nodes as that needs."""
        count = self.spec.get("count")
        if not isinstance(count, int) or count <= 0:
            count = max(range(1, max([*room, 1]) + 1),
                        key=lambda c: (min(self.replicas, c * sum(1 for r in room if r >= c)), -c))
        limit = self.spec.get("nodesLimit")
        if not isinstance(limit, int) or limit <= 0:
            able = sum(1 for r in room if r >= count)
            limit = max(1, min(math.ceil(self.replicas / count), able))
        return count, limit


@dataclass(frozen=True)
class WorkloadMix:
    source: str
    name: str
    workloads: tuple[Workload, ...]
    reference: Workload  # whose shape measures stranded capacity

    @property
    def pods(self) -> int:
        return sum(w.replicas for w in self.workloads)


def load_mix(path: str) -> WorkloadMix:
    return parse_mix(read_text(path), path)


def parse_mix(text: str, source: str) -> WorkloadMix:
    docs = parse_documents(text, source)
    if len(docs) != 1:
        raise SnapshotError(f"{source}: expected one {KIND} document, found {len(docs)}")
    doc = docs[0]
    if not isinstance(doc, Mapping):
        raise SnapshotError(f"{source}: expected a {KIND} object")
    if doc.get("kind") != KIND:
        raise SnapshotError(f"{source}: kind: expected {KIND}, found {doc.get('kind')!r}")
    if doc.get("apiVersion") not in (None, API_VERSION):
        raise SnapshotError(f"{source}: apiVersion: expected {API_VERSION}, found {doc.get('apiVersion')!r}")
    for key in doc:
        if key not in _TOP_FIELDS:
            raise SnapshotError(f"{source}: {key}: unknown field")
    meta = doc.get("metadata") or {}
    name = str(meta.get("name") or "workloads") if isinstance(meta, Mapping) else "workloads"
    raw = doc.get("workloads")
    if not isinstance(raw, list) or not raw:
        raise SnapshotError(f"{source}: workloads: must be a non-empty list")
    workloads: list[Workload] = []
    for i, item in enumerate(raw):
        w = _workload(item, f"workloads[{i}]", source)
        if any(o.name == w.name and o.namespace == w.namespace for o in workloads):
            raise SnapshotError(f"{source}: workloads[{i}].name: {w.namespace}/{w.name} appears twice")
        workloads.append(w)
    ref_name = doc.get("referencePod")
    if ref_name is None:
        reference = min(workloads, key=_size)
    else:
        found = [w for w in workloads if w.name == ref_name]
        if not found:
            raise SnapshotError(f"{source}: referencePod: no workload named {ref_name!r}")
        reference = found[0]
    return WorkloadMix(source, name, tuple(workloads), reference)


def _size(w: Workload) -> tuple[int, int, str]:
    return (w.pod.requests.get("memory", 0), w.pod.requests.get("cpu", 0), w.name)


def _workload(item: object, where: str, source: str) -> Workload:
    def fail(fieldname: str, problem: str) -> SnapshotError:
        return SnapshotError(f"{source}: {where}{'.' + fieldname if fieldname else ''}: {problem}")

    if not isinstance(item, Mapping):
        raise fail("", "must be an object")
    for key in item:
        if key not in _FIELDS:
            raise fail(str(key), "unknown field")
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise fail("name", "is required")
    namespace = item.get("namespace") or "default"
    if not isinstance(namespace, str):
        raise fail("namespace", "must be a string")
    replicas = item.get("replicas")
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise fail("replicas", "must be a whole number, 0 or more")
    labels = item.get("labels")
    if labels is None:
        labels = {"app": name}
    if not isinstance(labels, Mapping) or not all(isinstance(v, str) for v in labels.values()):
        raise fail("labels", "must be a map of strings")
    if ("requests" in item) == ("template" in item):
        raise fail("requests", "give either requests or template")
    sleepy = item.get("sleepy", False)
    if not isinstance(sleepy, bool):
        raise fail("sleepy", "must be true or false")
    if "template" in item:
        template = item["template"]
        if not isinstance(template, Mapping):
            raise fail("template", "must be a pod template ({metadata, spec})")
        tmeta = dict(template.get("metadata") or {})
        tmeta.setdefault("labels", dict(labels))
        spec = template.get("spec") or {}
    else:
        requests = item["requests"]
        if not isinstance(requests, Mapping):
            raise fail("requests", "must be a map of quantities")
        tmeta = {"labels": dict(labels)}
        spec = {"containers": [{"name": name, "resources": {"requests": dict(requests)}}]}
    if sleepy:
        tmeta["annotations"] = {**(tmeta.get("annotations") or {}), SLEEPY_ANNOTATION: "true"}
    tmeta.update(name=name, namespace=namespace)
    try:
        pod = pod_from_manifest({"apiVersion": "v1", "kind": "Pod", "metadata": tmeta, "spec": spec})
    except SnapshotError as exc:
        detail = str(exc).removeprefix("pod: ")
        shorthand = "spec.containers[0].resources.requests."
        if "template" in item:
            detail = "template." + detail
        elif detail.startswith(shorthand):
            detail = "requests." + detail.removeprefix(shorthand)
        raise SnapshotError(f"{source}: {where}.{detail}") from None
    policy_spec = item.get("policy") or {}
    if not isinstance(policy_spec, Mapping):
        raise fail("policy", "must be an object (PlacementPolicy spec fields)")
    if "strategy" in policy_spec:
        raise fail("policy.strategy", "simulate places the mix with every strategy; remove it "
                   "(use --strategies to choose)")
    workload = Workload(name, namespace, replicas, pod, dict(policy_spec))
    try:
        workload.policy(Strategy.AUTO)
    except InvalidPolicy as exc:
        raise fail("policy" + exc.path.removeprefix("spec"), exc.problem) from None
    return workload
