"""Kubernetes objects as the API server sends them, for the operator's tests, and the core's view of
them for the NodeDrain tests."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from berth.core.decision import Decision, Refusal, Refused
from berth.core.kube import node_from_object, pod_from_object
from berth.core.policy import PlacementPolicy
from berth.core.view import ClusterView
from berth.operator.cluster import OperatorStore
from tests.builders import make_pod

NAMESPACE = "shop"
NOW = 1767225600.0
"""The NodeDrain tests' clock."""
RS = ("ReplicaSet", "web-7d9f")


def lease(node: str, renew: str = "2026-01-01T00:00:00.000000Z") -> dict[str, Any]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": node, "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": node, "renewTime": renew}}


def decision(pod_name: str, time: str, winner: str | None = "node-a", *, policy_key: str | None = f"{NAMESPACE}/web",
             considered: list[str] | None = None, refused: dict[str, str] | None = None,
             plan: dict[str, int] | None = None) -> dict[str, Any]:
    """A decision annotation as the extender writes it at bind (``plan``: its round's)."""
    considered = considered if considered is not None else ["node-a", "node-b"]
    made = Decision(pod=f"{NAMESPACE}/{pod_name}", policy=policy_key, strategy="Auto", considered=considered,
                    refused=Refused({n: Refusal(r) for n, r in (refused or {}).items()}),
                    ranking=[winner] if winner else [], trigger="bind", time=time, plan=plan)
    return made.record(limit=len(considered)).to_json()


def unversioned_decision(pod_name: str, time: str, winner: str | None = "node-a", *,
                         policy_key: str | None = f"{NAMESPACE}/web", considered: list[str] | None = None,
                         refused: dict[str, str] | None = None) -> dict[str, Any]:
    """A decision annotation as berth wrote it before the record had a version."""
    considered = considered if considered is not None else ["node-a", "node-b"]
    return {"pod": f"{NAMESPACE}/{pod_name}", "policy": policy_key, "strategy": "Auto", "trigger": "bind",
            "time": time, "considered": considered, "refused": refused or {}, "winner": winner,
            "ranking": [winner] if winner else [], "warnings": [], "error": None, "plan": None}


def store_of(nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]],
             leases: Iterable[Mapping[str, Any]] | None = None) -> OperatorStore:
    """A store listed once from plain objects (no Lease tracking when ``leases`` is None)."""
    store = OperatorStore(leases_tracked=leases is not None)
    store.replace("nodes", nodes)
    store.replace("pods", pods)
    store.replace("leases", leases or ())
    return store


def nodedrain(spec: dict[str, Any], *, generation: int = 1, status: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"apiVersion": "berth.dev/v1alpha1", "kind": "NodeDrain",
                            "metadata": {"name": "drain-a", "generation": generation, "uid": "uid-drain-a"},
                            "spec": spec}
    if status is not None:
        body["status"] = status
    return body


def view(nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> ClusterView:
    out = ClusterView()
    for n in nodes:
        out.upsert_node(node_from_object(n))
    for p in pods:
        out.upsert_pod(pod_from_object(p))
    return out


def api_pod() -> dict[str, Any]:
    """The api pod on node-a: its 3 CPUs fit no 2-CPU destination."""
    return (make_pod("api")
            .on("node-a")
            .cpu("3")
            .labels({"app": "api"})
            .owner(("ReplicaSet", "api-1"))
            .memory("1Gi")
            .obj())


def no_policy(_: Any) -> PlacementPolicy | None:
    return None
