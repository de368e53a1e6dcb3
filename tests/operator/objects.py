"""Kubernetes objects as the API server sends them, for the operator's tests."""

from __future__ import annotations

import json
from typing import Any

NAMESPACE = "shop"


def node(name: str, cpu: str = "4", memory: str = "8Gi", labels: dict[str, str] | None = None,
         ready: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {},
        "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def pod(name: str, node: str | None = None, *, namespace: str = NAMESPACE, labels: dict[str, str] | None = None,
        cpu: str = "1", memory: str = "1Gi", created: str = "2026-01-01T00:00:00Z", phase: str | None = None,
        decision: dict[str, Any] | None = None, terminating: bool = False,
        owner: tuple[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}",
                            "labels": {"app": "web"} if labels is None else labels, "creationTimestamp": created}
    if decision is not None:
        meta["annotations"] = {"berth.dev/decision": json.dumps(decision)}
    if terminating:
        meta["deletionTimestamp"] = "2026-01-01T00:05:00Z"
    if owner is not None:  # (kind, name) of its controller
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner[0], "name": owner[1],
                                    "uid": f"uid-{owner[1]}", "controller": True}]
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": meta,
        "spec": {"nodeName": node, "containers": [
            {"name": "app", "image": "app", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]},
        "status": {"phase": phase or ("Running" if node else "Pending")},
    }


def lease(node: str, renew: str = "2026-01-01T00:00:00.000000Z") -> dict[str, Any]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": node, "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": node, "renewTime": renew}}


def policy(spec: dict[str, Any] | None = None, *, name: str = "web", namespace: str = NAMESPACE, generation: int = 1,
           status: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "berth.dev/v1alpha1", "kind": "PlacementPolicy",
        "metadata": {"name": name, "namespace": namespace, "generation": generation, "uid": f"uid-policy-{name}"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}} if spec is None else spec,
    }
    if status is not None:
        body["status"] = status
    return body


def decision(pod_name: str, time: str, winner: str | None = "node-a", *, policy_key: str | None = f"{NAMESPACE}/web",
             considered: list[str] | None = None, refused: dict[str, str] | None = None) -> dict[str, Any]:
    considered = considered if considered is not None else ["node-a", "node-b"]
    return {"pod": f"{NAMESPACE}/{pod_name}", "policy": policy_key, "strategy": "Auto", "trigger": "bind",
            "time": time, "considered": considered, "refused": refused or {}, "winner": winner,
            "ranking": [winner] if winner else [], "warnings": [], "error": None, "plan": None}
