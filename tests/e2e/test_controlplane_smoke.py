"""Smoke test of the e2e harness: a real etcd + kube-apiserver + kube-scheduler on 127.0.0.1
bind pods to fake Ready nodes; node Leases age once no longer renewed; the built kubectl
talks to the cluster with the generated kubeconfig.

Run: ``bash hack/install-deps.sh && bash hack/build-k8s.sh && pytest -m e2e tests/e2e``.
A control plane that cannot start makes these tests error (never skip).
"""

from __future__ import annotations

import datetime
import json
import re
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from tests.e2e.harness import (
    ControlPlane,
    NodeLeaseRenewer,
    NodeSpec,
    Scheduler,
    lease_renew_time,
    node_is_ready,
    simple_pod,
    wait_for,
)
from tests.e2e.harness.fixtures import (  # noqa: F401  (pytest fixtures)
    control_plane,
    e2e_namespace,
    kube_api,
    make_nodes,
    node_leases,
    start_scheduler,
)

pytestmark = pytest.mark.e2e

REPO_ROOT = Path(__file__).resolve().parents[2]


def _pinned_k8s_version() -> str:
    text = (REPO_ROOT / "hack" / "k8s-build" / "go.mod").read_text()
    match = re.search(r"k8s\.io/kubernetes (v\d+\.\d+\.\d+)", text)
    assert match, "hack/k8s-build/go.mod does not pin k8s.io/kubernetes"
    return match.group(1)


def test_scheduler_binds_pods_to_ready_nodes(
    kube_api: Any,  # noqa: F811
    make_nodes: Callable[..., list[str]],  # noqa: F811
    e2e_namespace: str,  # noqa: F811
    start_scheduler: Callable[..., Scheduler],  # noqa: F811
) -> None:
    run = "r" + uuid.uuid4().hex[:6]  # a letter first: never read back as a number
    selector = {"berth.e2e/smoke": run}
    # The default profile (default plugins, no extender) under a name of its own, so that no
    # other scheduler of the session (or of an existing cluster) competes for these pods.
    sched_name = f"berth-smoke-{run}"
    config: dict[str, Any] = {"profiles": [{"schedulerName": sched_name}]}
    sched = start_scheduler(config, name=f"smoke-scheduler-{run}")

    ready = make_nodes(*(NodeSpec(f"smoke-{run}-{i}", cpu="2", memory="4Gi", labels=selector) for i in range(3)))
    # A NotReady node (keeps the not-ready taint that admission adds): must get no pod.
    (not_ready,) = make_nodes(NodeSpec(f"smoke-{run}-notready", labels=selector, ready=False))

    core: Any = k8s.CoreV1Api(kube_api)  # Any: the models' fields are all Optional
    for name in ready:
        assert node_is_ready(core.read_node(name)), f"node {name} is not Ready"
    assert not node_is_ready(core.read_node(not_ready))

    pod_names = [f"smoke-{i}" for i in range(5)]
    for name in pod_names:
        core.create_namespaced_pod(
            e2e_namespace,
            k8s.V1Pod.model_validate(
                simple_pod(
                    name,
                    cpu="250m",
                    memory="256Mi",
                    labels={"app": "smoke"},
                    node_selector=selector,
                    scheduler_name=sched_name,
                )
            ),
        )

    def placements() -> dict[str, str | None]:
        pods = core.list_namespaced_pod(e2e_namespace, label_selector="app=smoke").items
        return {p.metadata.name: p.spec.node_name for p in pods}

    started = time.monotonic()
    bound = wait_for(
        placements,
        lambda m: len(m) == len(pod_names) and all(m.values()),
        timeout=60,
        what=f"the 5 pods to be bound by {sched_name} (scheduler log: {sched.log_path})",
    )
    print(f"5 pods bound in {time.monotonic() - started:.2f}s: {bound}")
    assert sched.alive(), f"kube-scheduler exited; log {sched.log_path}"
    assert set(bound.values()) <= set(ready), f"pods bound outside the Ready nodes: {bound}"
    for node in set(bound.values()):
        assert node_is_ready(core.read_node(node)), f"pod bound to {node}, which is not Ready"

    # The binding came from the real scheduler: it reports a Scheduled event per pod.
    events_api: Any = k8s.EventsV1Api(kube_api)

    def scheduled_events() -> set[str]:
        events = events_api.list_namespaced_event(e2e_namespace).items
        return {e.regarding.name for e in events if e.reason == "Scheduled" and e.reporting_controller == sched_name}

    wait_for(
        scheduled_events,
        lambda names: set(pod_names) <= names,
        timeout=30,
        what=f"a Scheduled event from {sched_name} for every pod",
    )


def test_node_lease_ages_when_not_renewed(
    kube_api: Any,  # noqa: F811
    make_nodes: Callable[..., list[str]],  # noqa: F811
    node_leases: NodeLeaseRenewer,  # noqa: F811
) -> None:
    run = "r" + uuid.uuid4().hex[:6]  # a letter first: never read back as a number
    alive, dead = make_nodes(NodeSpec(f"lease-{run}-alive"), NodeSpec(f"lease-{run}-dead"))
    node_leases.pause(dead)
    frozen = wait_for(
        lambda: lease_renew_time(kube_api, dead),
        lambda t: t is not None,
        timeout=10,
        what=f"the Lease of {dead}",
    )
    assert frozen is not None
    wait_seconds = 3 * node_leases.interval
    time.sleep(wait_seconds)

    now = datetime.datetime.now(datetime.UTC)
    dead_renew = lease_renew_time(kube_api, dead)
    alive_renew = lease_renew_time(kube_api, alive)
    assert dead_renew == frozen, f"{dead}'s Lease was renewed while paused ({frozen} -> {dead_renew})"
    assert dead_renew is not None and now - dead_renew >= datetime.timedelta(seconds=wait_seconds - 0.5), (
        f"{dead}'s renewTime {dead_renew} is not old at {now}"
    )
    assert alive_renew is not None and alive_renew > dead_renew, (
        f"{alive}'s Lease is not renewed: {alive_renew} vs paused {dead_renew}"
    )
    assert now - alive_renew <= datetime.timedelta(seconds=node_leases.interval + 5), (
        f"{alive}'s renewTime {alive_renew} is stale at {now} (renewer errors: {node_leases.errors})"
    )

    node_leases.resume(dead)
    wait_for(
        lambda: lease_renew_time(kube_api, dead),
        lambda t: t is not None and t > frozen,
        timeout=10,
        what=f"{dead}'s Lease to be renewed again after resume",
    )


def test_kubectl_with_generated_kubeconfig(
    control_plane: ControlPlane,  # noqa: F811
    make_nodes: Callable[..., list[str]],  # noqa: F811
) -> None:
    run = "r" + uuid.uuid4().hex[:6]  # a letter first: never read back as a number
    names = make_nodes(NodeSpec(f"kubectl-{run}-a"), NodeSpec(f"kubectl-{run}-b"))

    out = control_plane.kubectl("get", "nodes", "-o", "name").stdout.split()
    assert {f"node/{n}" for n in names} <= set(out), f"kubectl get nodes printed {out}"

    table = control_plane.kubectl("get", "nodes").stdout
    for name in names:
        row = next((line for line in table.splitlines() if line.startswith(name + " ")), None)
        assert row is not None and " Ready " in row, f"{name} not listed as Ready:\n{table}"

    if control_plane.managed:
        version = json.loads(control_plane.kubectl("version", "-o", "json").stdout)
        pinned = _pinned_k8s_version()
        assert version["clientVersion"]["gitVersion"] == pinned, version
        assert version["serverVersion"]["gitVersion"] == pinned, version


def test_controller_manager_creates_a_deployment_s_pods(
    control_plane: ControlPlane,  # noqa: F811
    kube_api: Any,  # noqa: F811
    e2e_namespace: str,  # noqa: F811
) -> None:
    """The Deployment and ReplicaSet controllers run: a Deployment's ReplicaSet creates its pods,
    and a pod deleted is recreated (what a drain's evictions rely on)."""
    control_plane.start_controller_manager()
    try:
        apps = k8s.AppsV1Api(kube_api)
        core = k8s.CoreV1Api(kube_api)
        labels = {"app": "web"}
        apps.create_namespaced_deployment(e2e_namespace, {
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": 2, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}},
        })

        def pods() -> list[Any]:
            return [p for p in core.list_namespaced_pod(e2e_namespace).items if p.metadata.deletion_timestamp is None]

        first = wait_for(pods, lambda found: len(found) == 2, timeout=60, what="the Deployment's 2 pods")
        owners = {ref.kind for p in first for ref in p.metadata.owner_references or () if ref.controller}
        assert owners == {"ReplicaSet"}
        gone = first[0].metadata.name
        core.delete_namespaced_pod(gone, e2e_namespace, grace_period_seconds=0)
        wait_for(pods, lambda found: len(found) == 2 and gone not in {p.metadata.name for p in found}, timeout=60,
                 what="the deleted pod's replacement")
    finally:
        control_plane.stop_controller_manager()
