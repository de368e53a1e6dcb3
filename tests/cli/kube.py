"""Kubernetes objects as kubectl prints them, and snapshot files made from them, for the CLI tests."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from tests.builders import make_node, make_pod

RENEWED = "2026-03-01T10:00:00.000000Z"  # the newest Lease in the test snapshots
RENEWED_EPOCH = 1772359200.0


def lease(node: str, renew: str = RENEWED, namespace: str = "kube-node-lease") -> dict[str, Any]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": node, "namespace": namespace},
            "spec": {"holderIdentity": node, "leaseDurationSeconds": 40, "renewTime": renew}}


def cluster() -> list[dict[str, Any]]:
    """Three nodes in two zones with a web pod on n1, a pending and a finished pod, and Leases."""
    return [
        make_node("n1").zone("zone-a").obj(),
        make_node("n2").zone("zone-a").obj(),
        make_node("n3").zone("zone-b").cpu("2").memory("4Gi").obj(),
        make_pod("web-0").on("n1").cpu("500m").memory("1Gi").obj(),
        make_pod("batch-0").on("n2").cpu("1").memory("2Gi").labels({"app": "batch"}).obj(),
        make_pod("web-pending").on(None).cpu("500m").memory("1Gi").obj(),
        make_pod("job-done").on("n3").cpu("2").memory("4Gi").labels({"app": "job"}).phase("Succeeded").obj(),
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
