"""Kubernetes objects as the API server sends them, for the operator's tests."""

from __future__ import annotations

from typing import Any

NAMESPACE = "shop"


def lease(node: str, renew: str = "2026-01-01T00:00:00.000000Z") -> dict[str, Any]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": node, "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": node, "renewTime": renew}}


def decision(pod_name: str, time: str, winner: str | None = "node-a", *, policy_key: str | None = f"{NAMESPACE}/web",
             considered: list[str] | None = None, refused: dict[str, str] | None = None) -> dict[str, Any]:
    considered = considered if considered is not None else ["node-a", "node-b"]
    return {"pod": f"{NAMESPACE}/{pod_name}", "policy": policy_key, "strategy": "Auto", "trigger": "bind",
            "time": time, "considered": considered, "refused": refused or {}, "winner": winner,
            "ranking": [winner] if winner else [], "warnings": [], "error": None, "plan": None}
