"""The built-in sample cluster and workload mix of ``berth simulate``.

The cluster is generated, not random: the same objects every time, in the shape
``kubectl get nodes,pods,leases -A -o json`` prints, so it goes through the same loader as a
user's snapshot (``berth sample`` prints it). Three zones of twelve workers each, in five
sizes, three racks per zone, a tainted control-plane node, one cordoned worker and one worker
whose Lease stopped being renewed (so it is down), DaemonSet pods on every node and an uneven
load of older workloads on the workers. The workload mix is ``workloads.yaml`` next to this file.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from importlib import resources
from typing import Any

from berth.core.kube import LEASE_NAMESPACE, format_time

SOURCE = "(built-in sample cluster)"
WORKLOADS_SOURCE = "(built-in workload mix)"
ZONES = ("a", "b", "c")
ZONE_LABEL = "topology.kubernetes.io/zone"
REGION = "region-1"
LEASE_TIME = datetime(2026, 1, 15, 9, 30, 0, tzinfo=UTC)
"""Every live node's Lease was renewed at most 9 s before this; the snapshot is judged at it."""

# name: (cpu, memory, ephemeral-storage) allocatable, the count per zone
SIZES: dict[str, tuple[str, str, str, int]] = {
    "small": ("3920m", "14848Mi", "90Gi", 4),
    "medium": ("7910m", "30208Mi", "180Gi", 4),
    "large": ("15890m", "61440Mi", "360Gi", 2),
    "highmem": ("7910m", "124928Mi", "180Gi", 1),
    "xlarge": ("31850m", "126976Mi", "720Gi", 1),
}
CORDONED = "b-medium-4"
STALE_LEASE = "c-small-4"
CONTROL_PLANE = "control-plane-1"

# (namespace, app, cpu, memory) of the pods every node runs
DAEMONS = (("kube-system", "kube-proxy", "100m", "128Mi"), ("monitoring", "node-exporter", "50m", "64Mi"))
# (namespace, app, cpu, memory, ephemeral-storage) of the older workloads, and how many land on worker i
LEGACY = (("legacy", "reporting", "1", "4Gi", "10Gi"), ("legacy", "queue", "500m", "2Gi", "1Gi"))


def _legacy_counts(i: int, size: str) -> tuple[int, int]:
    """Older pods on the i-th worker: an uneven but fixed pattern, heavier on bigger nodes."""
    scale = {"small": 1, "medium": 2, "large": 3, "highmem": 2, "xlarge": 5}[size]
    return ((i * 7 + 3) % 4) * scale // 2, ((i * 5 + 1) % 3) * scale // 2


def workers() -> list[tuple[str, str, str, str]]:
    """(name, zone, size, rack) of every worker, in a fixed order."""
    out = []
    for zone in ZONES:
        n = 0
        for size, (*_, per_zone) in SIZES.items():
            for k in range(1, per_zone + 1):
                out.append((f"{zone}-{size}-{k}", zone, size, f"{zone}{n % 3 + 1}"))
                n += 1
    return out


def _node(name: str, zone: str, size: str, rack: str | None, *, control_plane: bool = False,
          cordoned: bool = False) -> dict[str, Any]:
    cpu, memory, disk = (SIZES[size][:3] if size in SIZES else ("3920m", "14848Mi", "90Gi"))
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": size,
        ZONE_LABEL: f"{REGION}{zone}",
        "topology.kubernetes.io/region": REGION,
    }
    if rack:
        labels["rack"] = rack
    spec: dict[str, Any] = {}
    if control_plane:
        labels["node-role.kubernetes.io/control-plane"] = ""
        spec["taints"] = [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]
    if cordoned:
        spec["unschedulable"] = True
        spec["taints"] = [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule",
                           "timeAdded": _time(LEASE_TIME - timedelta(hours=2))}]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, "uid": f"node-{name}"},
        "spec": spec,
        "status": {
            "allocatable": {"cpu": cpu, "memory": memory, "ephemeral-storage": disk, "pods": "110"},
            "capacity": {"cpu": cpu, "memory": memory, "ephemeral-storage": disk, "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


def _pod(namespace: str, app: str, index: int, node: str, requests: dict[str, str], *,
         phase: str = "Running") -> dict[str, Any]:
    name = f"{app}-{node}" if index < 0 else f"{app}-{index:03d}"
    spec: dict[str, Any] = {"containers": [{"name": app, "image": f"registry.example/{app}:1",
                                            "resources": {"requests": dict(requests)}}]}
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": f"{namespace}-{name}", "labels": {"app": app}},
        "spec": spec,
        "status": {"phase": phase},
    }


def _lease(node: str, renewed: datetime) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": node, "namespace": LEASE_NAMESPACE},
        "spec": {"holderIdentity": node, "leaseDurationSeconds": 40, "renewTime": _time(renewed)},
    }


def _time(moment: datetime) -> str:
    return format_time(moment.timestamp(), digits=6)


def sample_objects() -> dict[str, Any]:
    """The sample cluster as one kubectl ``List``."""
    nodes = [_node(CONTROL_PLANE, "a", "control-plane", None, control_plane=True)]
    nodes += [_node(name, zone, size, rack, cordoned=name == CORDONED) for name, zone, size, rack in workers()]
    pods: list[dict[str, Any]] = []
    for node in nodes:
        name = node["metadata"]["name"]
        for namespace, app, cpu, memory in DAEMONS:
            pods.append(_pod(namespace, app, -1, name, {"cpu": cpu, "memory": memory}))
    for app, cpu, memory in (("kube-apiserver", "250m", "1Gi"), ("etcd", "100m", "512Mi"),
                             ("kube-scheduler", "100m", "256Mi")):
        pods.append(_pod("kube-system", app, -1, CONTROL_PLANE, {"cpu": cpu, "memory": memory}))
    serial = {app: 0 for _, app, *_ in LEGACY}
    for i, (name, _zone, size, _rack) in enumerate(workers()):
        for (namespace, app, cpu, memory, disk), n in zip(LEGACY, _legacy_counts(i, size), strict=True):
            for _ in range(n):
                pods.append(_pod(namespace, app, serial[app], name,
                                 {"cpu": cpu, "memory": memory, "ephemeral-storage": disk}))
                serial[app] += 1
    # Finished and pending pods, which a snapshot holds and the view ignores.
    pods.append(_pod("legacy", "nightly-report", 0, "a-large-1", {"cpu": "2", "memory": "8Gi"}, phase="Succeeded"))
    pods.append(_pod("legacy", "reporting", 999, "", {"cpu": "1", "memory": "4Gi"}, phase="Pending"))
    leases = []
    for k, node in enumerate(nodes):
        name = node["metadata"]["name"]
        renewed = LEASE_TIME - timedelta(seconds=k % 10)
        if name == STALE_LEASE:
            renewed = LEASE_TIME - timedelta(minutes=7)
        leases.append(_lease(name, renewed))
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
            "items": [*nodes, *pods, *leases]}


def workloads_text() -> str:
    """The built-in workload mix (YAML)."""
    return resources.files(__name__).joinpath("workloads.yaml").read_text(encoding="utf-8")
