"""Kubernetes objects as kubectl prints them, and snapshot files made from them, for the CLI tests."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

RENEWED = "2026-03-01T10:00:00.000000Z"  # the newest Lease in the test snapshots
RENEWED_EPOCH = 1772359200.0


def node(name: str, *, cpu: str = "4", memory: str = "8Gi", zone: str = "a", ready: bool = True,
         unschedulable: bool = False, extra: Mapping[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"unschedulable": True} if unschedulable else {}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
                                              "topology.kubernetes.io/zone": f"zone-{zone}"}},
        "spec": spec,
        "status": {
            "allocatable": {"cpu": cpu, "memory": memory, "ephemeral-storage": "100Gi", "pods": "110",
                            **(extra or {})},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod(name: str, *, namespace: str = "shop", node: str | None = None, cpu: str = "500m", memory: str = "1Gi",
        labels: Mapping[str, str] | None = None, phase: str = "Running",
        owner: tuple[str, str] | None = None, annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A pod as kubectl prints it; ``owner`` (kind, name) is its controller's ownerReference."""
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "registry.example/app:1",
                                            "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}
    if node:
        spec["nodeName"] = node
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}",
                            "labels": dict(labels or {"app": "web"})}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner[0], "name": owner[1],
                                    "uid": f"uid-{owner[1]}", "controller": True}]
    if annotations:
        meta["annotations"] = dict(annotations)
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": meta,
        "spec": spec,
        "status": {"phase": phase},
    }


def lease(node: str, renew: str = RENEWED, namespace: str = "kube-node-lease") -> dict[str, Any]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": node, "namespace": namespace},
            "spec": {"holderIdentity": node, "leaseDurationSeconds": 40, "renewTime": renew}}


def policy(strategy: str | None = "Auto", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"selector": {"matchLabels": {"app": "web"}}, **spec}
    if strategy is not None:
        body["strategy"] = strategy
    return {"apiVersion": "berth.dev/v1alpha1", "kind": "PlacementPolicy",
            "metadata": {"name": "web", "namespace": "shop"}, "spec": body}


def cluster() -> list[dict[str, Any]]:
    """Three nodes in two zones with a web pod on n1, a pending and a finished pod, and Leases."""
    return [
        node("n1", zone="a"), node("n2", zone="a"), node("n3", cpu="2", memory="4Gi", zone="b"),
        pod("web-0", node="n1"),
        pod("batch-0", node="n2", cpu="1", memory="2Gi", labels={"app": "batch"}),
        pod("web-pending", node=None),
        pod("job-done", node="n3", cpu="2", memory="4Gi", labels={"app": "job"}, phase="Succeeded"),
        lease("n1"), lease("n2", "2026-03-01T09:59:55.000000Z"), lease("n3", "2026-03-01T09:59:58Z"),
        lease("kube-scheduler", "2020-01-01T00:00:00Z", namespace="kube-system"),  # not a node lease
    ]


def as_list(items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": list(items)}


def write_json(path: Path, items: Sequence[Mapping[str, Any]]) -> Path:
    path.write_text(json.dumps(as_list(items), indent=4))
    return path


def write_yaml_docs(path: Path, items: Sequence[Mapping[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump_all(list(items), sort_keys=False))
    return path


def write_yaml(path: Path, obj: object) -> Path:
    path.write_text(yaml.safe_dump(obj, sort_keys=False))
    return path
