"""A drain of a node with 100 pods, end to end in the harness: a Deployment's 100 pods on one
node drained onto two destinations with 20 evictions in flight; kube-controller-manager recreates
each evicted pod and kube-scheduler, through berth's extender, binds every replacement where
the drain planned it, within :data:`DRAIN_BOUND_SECONDS` of the NodeDrain's apply. The time is
printed: it is the figure of a drain's end-to-end duration (an upper bound on a shared machine)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from tests.e2e.harness import ControlPlane, NodeSpec, wait_for
from tests.e2e.harness.fixtures import (  # noqa: F401  (pytest fixtures)
    control_plane,
    e2e_namespace,
    kube_api,
    make_nodes,
    node_leases,
)
from tests.e2e.test_nodedrain_e2e import (  # noqa: F401  (pytest fixtures)
    DrainStack,
    _act_as_kubelet,
    _deployment,
    _drain_status,
    _live,
    drain_crd,
    drain_stack,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

PODS = 100
IN_FLIGHT = 20
DRAIN_BOUND_SECONDS = 120.0
"""15 s on a shared two-core machine under a load of 11; the bound leaves room for a slower one."""


def test_a_node_of_100_pods_drains_end_to_end_as_planned(
        control_plane: ControlPlane, drain_stack: DrainStack, e2e_namespace: str,  # noqa: F811
        kube_api: Any, make_nodes: Callable[..., list[str]]) -> None:  # noqa: F811
    run = drain_stack.scheduler_name.removeprefix("berth-")
    core, apps = k8s.CoreV1Api(kube_api), k8s.AppsV1Api(kube_api)
    (a,) = make_nodes(NodeSpec(f"scale-{run}-a", cpu="64"))
    _deployment(apps, e2e_namespace, "web", PODS, {"app": f"web-{run}"}, drain_stack.scheduler_name, cpu="100m")

    def running() -> list[Any]:
        _act_as_kubelet(core, e2e_namespace)
        return _live(core, e2e_namespace)

    wait_for(running, lambda ps: len(ps) == PODS and all(p.spec.node_name == a for p in ps), timeout=300,
             interval=1, what=f"the Deployment's {PODS} pods on the node to drain",
             describe=lambda ps: f"{sum(1 for p in ps if p.spec.node_name == a)} of {len(ps)} bound there")
    b, c = make_nodes(NodeSpec(f"scale-{run}-b", cpu="32"), NodeSpec(f"scale-{run}-c", cpu="32"))
    operator = drain_stack.operator.start()
    name = f"scale-{run}"
    drain = {"apiVersion": "berth.dev/v1alpha1", "kind": "NodeDrain", "metadata": {"name": name},
             "spec": {"nodes": [a], "destinations": [b, c], "mode": "Execute", "maxEvictionsInFlight": IN_FLIGHT}}
    started = time.monotonic()
    control_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(drain))

    def status() -> dict[str, Any]:
        _act_as_kubelet(core, e2e_namespace)
        return _drain_status(kube_api, name)

    done = wait_for(status, lambda s: s.get("phase") == "Drained", timeout=DRAIN_BOUND_SECONDS, interval=1,
                    what="the drain finished",
                    describe=lambda s: json.dumps({k: v for k, v in s.items() if k != "pods"}) + operator.log()[-2000:])
    drained = time.monotonic() - started
    plan = sorted(p["destination"] for p in done["pods"])
    assert done["moved"] == PODS and set(plan) == {b, c}
    landed = wait_for(running, lambda ps: len(ps) == PODS and all(p.spec.node_name for p in ps),
                      timeout=max(DRAIN_BOUND_SECONDS - drained, 1), interval=1, what="every replacement bound",
                      describe=lambda ps: f"{sum(1 for p in ps if p.spec.node_name)} of {len(ps)} bound")
    bound = time.monotonic() - started
    assert sorted(p.spec.node_name for p in landed) == plan
    print(f"\n[drain figure] a node of {PODS} pods ({IN_FLIGHT} evictions in flight): Drained {drained:.1f}s after "
          f"the NodeDrain's apply, every replacement bound where planned {bound:.1f}s after")
