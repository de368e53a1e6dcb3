"""The NodeDrain against a real kube-apiserver (tests/e2e/harness): the CRD is accepted (its CEL
rules compile within the apiserver's cost budget), valid drains apply, each invalid one is
refused by the schema or by the CEL rule tests/crd names for it, and the operator plans a drain
in Plan mode into its status, evicting nothing, and executes one in Execute mode."""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from tests.crd.nodedrain_manifests import INVALID, SCHEMA, VALID
from tests.e2e.harness import ControlPlane, NodeSpec, simple_pod, wait_for
from tests.e2e.harness.fixtures import (  # noqa: F401  (pytest fixtures)
    control_plane,
    e2e_namespace,
    kube_api,
    make_nodes,
    node_leases,
)
from tests.e2e.test_operator_e2e import CRD as POLICY_CRD
from tests.e2e.test_operator_e2e import PEERING_CRD, Operator

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "crds" / "nodedrains.berth.dev.yaml"


@pytest.fixture(scope="module")
def drain_crd(control_plane: ControlPlane) -> Iterator[None]:  # noqa: F811
    control_plane.apply_crds(CRD, POLICY_CRD, PEERING_CRD)
    yield


def _apply(control_plane: ControlPlane, obj: dict[str, Any], tmp_path: Path) -> Any:  # noqa: F811
    path = tmp_path / "drain.yaml"
    path.write_text(yaml.safe_dump(obj))
    return control_plane.kubectl("apply", "--server-side", "-f", str(path), check=False)


def test_nodedrain_crd_is_established(control_plane: ControlPlane, drain_crd: None) -> None:  # noqa: F811
    out = control_plane.kubectl("get", "crd", "nodedrains.berth.dev", "-o", "json")
    conditions = {c["type"]: c["status"] for c in json.loads(out.stdout)["status"]["conditions"]}
    assert conditions.get("Established") == "True"
    assert conditions.get("NonStructuralSchema") is None


@pytest.mark.parametrize(("name", "obj"), VALID, ids=[v[0] for v in VALID])
def test_valid_nodedrain_applies(name: str, obj: dict[str, Any], control_plane: ControlPlane,  # noqa: F811
                                 drain_crd: None, tmp_path: Path) -> None:
    applied = _apply(control_plane, {**obj, "metadata": {"name": f"valid-{name.replace('_', '-')}"}}, tmp_path)
    assert applied.returncode == 0, applied.stderr


@pytest.mark.parametrize(("name", "obj", "path", "refused_by"), INVALID, ids=[v[0] for v in INVALID])
def test_invalid_nodedrain_is_refused(name: str, obj: dict[str, Any], path: str, refused_by: str,
                                      control_plane: ControlPlane, drain_crd: None,  # noqa: F811
                                      tmp_path: Path) -> None:
    refused = _apply(control_plane, {**obj, "metadata": {"name": f"invalid-{name.replace('_', '-')}"}}, tmp_path)
    assert refused.returncode != 0, f"{name} was accepted"
    if refused_by == SCHEMA:
        assert path.split("[")[0] in refused.stderr, refused.stderr
    else:
        assert refused_by in refused.stderr, refused.stderr


def _owned(pod: dict[str, Any], replica_set: str) -> dict[str, Any]:
    """``pod`` owned by a ReplicaSet (none exists: no controller manager runs here to collect it)."""
    pod["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": replica_set,
                                           "uid": str(uuid.uuid4()), "controller": True}]
    return pod


def test_operator_plans_a_drain_into_its_status(control_plane: ControlPlane, drain_crd: None,  # noqa: F811
                                                e2e_namespace: str, kube_api: Any,  # noqa: F811
                                                make_nodes: Callable[..., list[str]]) -> None:  # noqa: F811
    run = "r" + uuid.uuid4().hex[:6]
    a, b, c = make_nodes(NodeSpec(f"drain-{run}-a", cpu="8"),
                         NodeSpec(f"drain-{run}-b", cpu="1", labels={"berth.e2e/drain": run}),
                         NodeSpec(f"drain-{run}-c", cpu="1", labels={"berth.e2e/drain": run}))
    core = k8s.CoreV1Api(kube_api)
    for name, cpu, owner in (("w1", "500m", "web-rs"), ("w2", "500m", "web-rs"), ("big", "2", "big-rs")):
        pod = _owned(simple_pod(name, cpu=cpu, labels={"app": name.rstrip("12")}), owner)
        pod["spec"]["nodeName"] = a  # bound, as if scheduled
        core.create_namespaced_pod(e2e_namespace, pod)
    operator = Operator(control_plane, f"berth-operator-drain-{run}", "--webhook", "off").start()
    try:
        drain = {"apiVersion": "berth.dev/v1alpha1", "kind": "NodeDrain", "metadata": {"name": f"drain-{run}"},
                 "spec": {"nodes": [a], "destinationSelector": {"matchLabels": {"berth.e2e/drain": run}}}}
        control_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(drain))
        custom = k8s.CustomObjectsApi(kube_api)
        body = wait_for(lambda: custom.get_cluster_custom_object("berth.dev", "v1alpha1", "nodedrains",
                                                                 f"drain-{run}"),
                        lambda b: (b.get("status") or {}).get("observedGeneration") == 1,
                        timeout=120, what="the NodeDrain planned",
                        describe=lambda b: json.dumps(b.get("status")) + operator.log()[-2000:])
        status = body["status"]
        assert (status["phase"], status["planned"], status["blocked"], status["moved"]) == ("Blocked", 2, 1, 0)
        pods = {p["pod"].split("/")[1]: p for p in status["pods"]}
        assert {pods["w1"]["destination"], pods["w2"]["destination"]} == {b, c}
        short = "insufficient capacity: cpu: needs 2, 1 free of 1 allocatable (short by 1)"
        assert pods["big"]["refused"] == {b: short, c: short}
        table = control_plane.kubectl("get", "nodedrain", f"drain-{run}").stdout.splitlines()
        assert table[0].split() == ["NAME", "PHASE", "MOVED", "PLANNED", "BLOCKED", "AGE"]
        assert table[1].split()[:5] == [f"drain-{run}", "Blocked", "0", "2", "1"]
        # Plan mode evicts and cordons nothing, however many times it plans (the operator's
        # resync here is 1 s: a few ticks pass)
        before = {p.metadata.uid for p in core.list_namespaced_pod(e2e_namespace).items}
        time.sleep(4)
        pods_now = core.list_namespaced_pod(e2e_namespace).items
        assert {p.metadata.uid for p in pods_now} == before and len(before) == 3
        assert {p.spec.node_name for p in pods_now} == {a}
        assert all(p.metadata.deletion_timestamp is None for p in pods_now)
        assert not core.read_node(a).spec.unschedulable
        control_plane.kubectl("delete", "nodedrain", f"drain-{run}", "--wait=true", "--timeout=60s")
    finally:
        operator.stop()


def _terminate(core: Any, namespace: str) -> None:
    """Complete the termination of evicted pods, as a kubelet would (no kubelet runs on these nodes)."""
    for pod in core.list_namespaced_pod(namespace).items:
        if pod.metadata.deletion_timestamp is not None:
            core.delete_namespaced_pod(pod.metadata.name, namespace, grace_period_seconds=0)


def test_operator_executes_a_drain_through_the_eviction_api(control_plane: ControlPlane,  # noqa: F811
                                                            drain_crd: None, e2e_namespace: str,  # noqa: F811
                                                            kube_api: Any,  # noqa: F811
                                                            make_nodes: Callable[..., list[str]]) -> None:  # noqa: F811
    """Execute cordons the node, evicts a pod (its termination completed here), and keeps asking
    for the eviction a PodDisruptionBudget refuses (429) until the budget is gone; then the drain
    is Drained, and deleting it leaves the node cordoned."""
    run = "r" + uuid.uuid4().hex[:6]
    a, b = make_nodes(NodeSpec(f"exec-{run}-a", cpu="8"), NodeSpec(f"exec-{run}-b", cpu="4"))
    core = k8s.CoreV1Api(kube_api)
    for name, owner in (("web", "web-rs"), ("guarded", "guarded-rs")):
        pod = _owned(simple_pod(name, cpu="500m", labels={"app": name}), owner)
        pod["spec"]["nodeName"] = a
        core.create_namespaced_pod(e2e_namespace, pod)
        # running and ready, as a kubelet would report it: the Eviction API deletes a Pending pod
        # without consulting its PodDisruptionBudget
        core.patch_namespaced_pod_status(name, e2e_namespace, {"status": {
            "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
    policy = k8s.PolicyV1Api(kube_api)
    policy.create_namespaced_pod_disruption_budget(e2e_namespace, {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "guarded"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}}})
    operator = Operator(control_plane, f"berth-operator-exec-{run}", "--webhook", "off").start()
    custom = k8s.CustomObjectsApi(kube_api)

    def status() -> dict[str, Any]:
        body = custom.get_cluster_custom_object("berth.dev", "v1alpha1", "nodedrains", f"exec-{run}")
        return dict(body.get("status") or {})

    def pods(s: dict[str, Any]) -> dict[str, dict[str, Any]]:
        return {p["pod"].split("/")[1]: p for p in s.get("pods") or []}

    try:
        drain = {"apiVersion": "berth.dev/v1alpha1", "kind": "NodeDrain", "metadata": {"name": f"exec-{run}"},
                 "spec": {"nodes": [a], "destinations": [b], "mode": "Execute", "maxEvictionsInFlight": 2}}
        control_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(drain))
        refused = wait_for(status, lambda s: pods(s).get("guarded", {}).get("attempts", 0) >= 1
                           and pods(s).get("web", {}).get("state") in ("Evicting", "Moved"),
                           timeout=120, what="web evicted, guarded refused by its budget",
                           describe=lambda s: json.dumps(s) + operator.log()[-2000:])
        assert core.read_node(a).spec.unschedulable is True
        guarded = pods(refused)["guarded"]
        assert (guarded["state"], guarded["destination"]) == ("Evicting", b)
        assert "disruption budget" in guarded["refusal"]
        assert core.read_namespaced_pod("guarded", e2e_namespace).metadata.deletion_timestamp is None
        _terminate(core, e2e_namespace)
        wait_for(status, lambda s: pods(s).get("web", {}).get("state") == "Moved", timeout=60,
                 what="web moved", describe=json.dumps)
        assert status()["phase"] == "Draining"  # guarded still refused
        policy.delete_namespaced_pod_disruption_budget("guarded", e2e_namespace)

        def finished() -> dict[str, Any]:
            _terminate(core, e2e_namespace)
            return status()

        done = wait_for(finished, lambda s: s.get("phase") == "Drained", timeout=120, what="the drain finished",
                        describe=lambda s: json.dumps(s) + operator.log()[-2000:])
        assert {name: p["state"] for name, p in pods(done).items()} == {"web": "Moved", "guarded": "Moved"}
        assert done["moved"] == 2
        control_plane.kubectl("delete", "nodedrain", f"exec-{run}", "--wait=true", "--timeout=60s")
        assert core.read_node(a).spec.unschedulable is True  # nodes stay cordoned, as after kubectl drain
    finally:
        operator.stop()


class DrainStack:
    """berth's extender, a kube-scheduler whose profile ``berth-<run>`` calls it, the
    kube-controller-manager (which recreates evicted pods and keeps PodDisruptionBudgets' status)
    and an operator (started by the test when it wants it)."""

    def __init__(self, control_plane: ControlPlane, run: str) -> None:  # noqa: F811
        from berth.extender.scheduler_config import scheduler_config
        from tests.e2e.stack import Extender

        self.scheduler_name = f"berth-{run}"
        self.extender = Extender(control_plane, name=f"berth-extender-{run}").start()
        self.sched = control_plane.start_scheduler(scheduler_config(self.extender.url,
                                                                    scheduler_name=self.scheduler_name),
                                                   name=f"kube-scheduler-{run}")
        self.control_plane = control_plane
        control_plane.start_controller_manager()
        self.operator = Operator(control_plane, f"berth-operator-{run}", "--webhook", "off")

    def stop(self) -> None:
        self.operator.stop()
        self.control_plane.stop_controller_manager()
        self.sched.stop()
        self.extender.stop()


@pytest.fixture
def drain_stack(control_plane: ControlPlane, drain_crd: None) -> Iterator[DrainStack]:  # noqa: F811
    stack = DrainStack(control_plane, "r" + uuid.uuid4().hex[:6])
    try:
        yield stack
    finally:
        stack.stop()


def _deployment(apps: Any, namespace: str, name: str, replicas: int, labels: dict[str, str], scheduler: str,
                cpu: str = "500m", readiness_gates: tuple[str, ...] = ()) -> None:
    gates = {"readinessGates": [{"conditionType": g} for g in readiness_gates]} if readiness_gates else {}
    apps.create_namespaced_deployment(namespace, {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels},
                              "spec": {"schedulerName": scheduler, "terminationGracePeriodSeconds": 0, **gates,
                                       "containers": [{
                                           "name": "c", "image": "registry.k8s.io/pause:3.10",
                                           "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]}}}})


def _live(core: Any, namespace: str, selector: str = "") -> list[Any]:
    return [p for p in core.list_namespaced_pod(namespace, label_selector=selector).items
            if p.metadata.deletion_timestamp is None]


def _ready(pod: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in (pod.status.conditions or ()))


def _gates_open(pod: Any) -> bool:
    """Every readiness gate of ``pod`` has its condition True (a kubelet reports a pod Ready only then)."""
    conditions = {c.type: c.status for c in (pod.status.conditions or ())}
    return all(conditions.get(g.condition_type) == "True" for g in (pod.spec.readiness_gates or ()))


def _act_as_kubelet(core: Any, namespace: str) -> None:
    """What the kubelets of these fake nodes would do: finish the termination of evicted pods, and
    report every bound pod running, and ready once its readiness gates are open (until then
    running with its containers ready, not Ready, as a kubelet reports it)."""
    for pod in core.list_namespaced_pod(namespace).items:
        if pod.metadata.deletion_timestamp is not None:
            with contextlib.suppress(k8s.ApiException):
                core.delete_namespaced_pod(pod.metadata.name, namespace, grace_period_seconds=0)
        elif pod.spec.node_name and not _ready(pod):
            ready = _gates_open(pod)
            if not ready and pod.status.phase == "Running":
                continue  # reported already: Ready waits for the gates
            with contextlib.suppress(k8s.ApiException):
                core.patch_namespaced_pod_status(pod.metadata.name, namespace, {"status": {
                    "phase": "Running", "conditions": [
                        {"type": "ContainersReady", "status": "True"},
                        {"type": "Ready", "status": "True" if ready else "False",
                         **({} if ready else {"reason": "ReadinessGatesNotReady"})}]}})


def _kubelet_pods(core: Any, namespace: str) -> list[Any]:
    """The namespace's pods not being deleted, once the fake nodes' kubelets have done their part."""
    _act_as_kubelet(core, namespace)
    return _live(core, namespace)


def _running_on(core: Any, namespace: str, node: str, count: int) -> list[Any]:
    """The namespace's ``count`` pods, once they all run on ``node`` and are Ready."""
    return wait_for(partial(_kubelet_pods, core, namespace),
                    lambda ps: len(ps) == count and all(p.spec.node_name == node and _ready(p) for p in ps),
                    timeout=90, what="the pods running on the node to drain",
                    describe=lambda ps: str([(p.metadata.name, p.spec.node_name) for p in ps]))


def _drain_progress(api: Any, core: Any, namespace: str, name: str) -> dict[str, Any]:
    """The NodeDrain ``name``'s status, once the fake nodes' kubelets have done their part."""
    _act_as_kubelet(core, namespace)
    return _drain_status(api, name)


def _open_gate(core: Any, namespace: str, pods: Iterable[Any], gate: str) -> None:
    """Set the readiness gate ``gate`` of ``pods`` True, as the controller that owns the gate would
    (a load balancer's, once the pod receives traffic)."""
    for pod in pods:
        if not _gates_open(pod):
            with contextlib.suppress(k8s.ApiException):
                core.patch_namespaced_pod_status(pod.metadata.name, namespace, {"status": {
                    "conditions": [{"type": gate, "status": "True"}]}})


def _drain_status(kube_api: Any, name: str) -> dict[str, Any]:  # noqa: F811
    body = k8s.CustomObjectsApi(kube_api).get_cluster_custom_object("berth.dev", "v1alpha1", "nodedrains", name)
    return dict(body.get("status") or {})


def test_a_deployment_drained_onto_two_destinations_lands_as_planned(
        control_plane: ControlPlane, drain_stack: DrainStack, e2e_namespace: str,  # noqa: F811
        kube_api: Any, make_nodes: Callable[..., list[str]]) -> None:  # noqa: F811
    """kube-controller-manager recreates each evicted pod; kube-scheduler, through berth's
    extender, sends the replacement to the destination the drain planned for it, not to the
    roomier node berth would choose for a new pod."""
    run = drain_stack.scheduler_name.removeprefix("berth-")
    core, apps = k8s.CoreV1Api(kube_api), k8s.AppsV1Api(kube_api)
    (a,) = make_nodes(NodeSpec(f"move-{run}-a", cpu="8"))
    operator = drain_stack.operator
    _deployment(apps, e2e_namespace, "web", 4, {"app": f"web-{run}"}, drain_stack.scheduler_name)

    def live() -> list[Any]:
        return _live(core, e2e_namespace)

    first = wait_for(live, lambda ps: len(ps) == 4 and all(p.spec.node_name == a for p in ps), timeout=90,
                     what="the Deployment's 4 pods bound to the node to drain")
    for p in first:  # running and ready, as a kubelet would report them
        core.patch_namespaced_pod_status(p.metadata.name, e2e_namespace, {"status": {
            "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
    b, c, roomy = make_nodes(NodeSpec(f"move-{run}-b", cpu="2"), NodeSpec(f"move-{run}-c", cpu="2"),
                             NodeSpec(f"move-{run}-roomy", cpu="16"))
    operator.start()
    drain = {"apiVersion": "berth.dev/v1alpha1", "kind": "NodeDrain", "metadata": {"name": f"move-{run}"},
             "spec": {"nodes": [a], "destinations": [b, c], "mode": "Execute", "maxEvictionsInFlight": 4}}

    def status() -> dict[str, Any]:
        _terminate(core, e2e_namespace)
        return _drain_status(kube_api, f"move-{run}")

    started = time.monotonic()
    control_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(drain))
    planned = wait_for(status, lambda s: s.get("planned") == 4 or s.get("moved", 0) > 0, timeout=60,
                       what="the drain planned", describe=lambda s: json.dumps(s) + operator.log()[-2000:])
    plan = sorted(p["destination"] for p in planned["pods"])
    assert sorted(set(plan)) == [b, c]
    done = wait_for(status, lambda s: s.get("phase") == "Drained", timeout=180, what="the drain finished",
                    describe=lambda s: json.dumps(s) + operator.log()[-2000:])
    assert sorted(p["destination"] for p in done["pods"]) == plan
    landed = wait_for(live, lambda ps: len(ps) == 4 and all(p.spec.node_name for p in ps), timeout=90,
                      what="the 4 replacements bound",
                      describe=lambda ps: str([(p.metadata.name, p.spec.node_name) for p in ps]))
    elapsed = time.monotonic() - started
    assert sorted(p.spec.node_name for p in landed) == plan, [(p.metadata.name, p.spec.node_name) for p in landed]
    assert roomy not in plan
    print(f"\n[drain figure] 4 pods drained end to end (NodeDrain applied to every replacement bound): "
          f"{elapsed:.1f}s")


class Availability:
    """The pods of a selector as the API server serialises their changes (a watch from a list):
    the fewest ready, bound, not terminating pods ever seen at once, after :meth:`start`."""

    def __init__(self, core: Any, namespace: str, selector: str) -> None:
        from kubernetes import watch

        self.core, self.namespace, self.selector = core, namespace, selector
        self.watch = watch.Watch()
        self.available: dict[str, bool] = {}
        self.fewest: int | None = None
        self.events = 0
        self.error: BaseException | None = None
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    @staticmethod
    def _up(pod: Any) -> bool:
        return bool(pod.spec.node_name) and pod.metadata.deletion_timestamp is None and _ready(pod)

    def _count(self) -> None:
        now = sum(self.available.values())
        self.fewest = now if self.fewest is None else min(self.fewest, now)

    def start(self) -> Availability:
        listed = self.core.list_namespaced_pod(self.namespace, label_selector=self.selector)
        self.available = {p.metadata.uid: self._up(p) for p in listed.items}
        self._count()
        self._thread = threading.Thread(target=self._follow, args=(listed.metadata.resource_version,), daemon=True)
        self._thread.start()
        return self

    def _follow(self, resource_version: str) -> None:
        """Follow the watch, resumed from the last resourceVersion seen when a stream ends (no
        change is missed: a resourceVersion too old to resume from fails the test)."""
        from urllib3.exceptions import ProtocolError

        try:
            while not self._stopped.is_set():
                try:
                    for event in self.watch.stream(self.core.list_namespaced_pod, self.namespace,
                                                   label_selector=self.selector, resource_version=resource_version,
                                                   timeout_seconds=60):
                        pod = event["object"]
                        if event["type"] == "DELETED":
                            self.available.pop(pod.metadata.uid, None)
                        else:
                            self.available[pod.metadata.uid] = self._up(pod)
                        resource_version = pod.metadata.resource_version
                        self.events += 1
                        self._count()
                except ProtocolError:
                    continue  # the stream ended early: resumed where it was
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def stop(self) -> int:
        """The fewest available pods seen (raises if the watch failed)."""
        self._stopped.set()
        self.watch.stop()
        if self._thread is not None:
            self._thread.join(timeout=15)
        if self.error is not None:
            raise AssertionError(f"the pods' watch failed: {self.error!r}")
        assert self.fewest is not None
        return self.fewest


def test_a_disruption_budget_paces_the_evictions_of_a_deployment_drain(
        control_plane: ControlPlane, drain_stack: DrainStack, e2e_namespace: str,  # noqa: F811
        kube_api: Any, make_nodes: Callable[..., list[str]]) -> None:  # noqa: F811
    """Four pods drained with four evictions allowed in flight, under a PodDisruptionBudget of
    maxUnavailable 1: the Eviction API accepts one eviction and refuses the three the budget does
    not allow, the drain asks again with backoff, and at no moment of the pods' history (a watch)
    are more than one of them unavailable; the drain still completes, every pod where it was planned.

    The pods have a readiness gate (as behind a load balancer whose controller sets it): the
    replacements stay unready, and the budget allows nothing more, until every pod of the drained
    node has had its eviction asked for; only then are their gates opened. Without that hold, a
    replacement turning ready while the evictions go out gives the budget room again, and how many
    are refused is a matter of timing."""
    run = drain_stack.scheduler_name.removeprefix("berth-")
    core, apps, policy = k8s.CoreV1Api(kube_api), k8s.AppsV1Api(kube_api), k8s.PolicyV1Api(kube_api)
    replicas, max_unavailable = 4, 1
    labels = {"app": f"paced-{run}"}
    selector = f"app=paced-{run}"
    gate = "berth.e2e/serving"
    (a,) = make_nodes(NodeSpec(f"pdb-{run}-a", cpu="8"))
    _deployment(apps, e2e_namespace, "paced", replicas, labels, drain_stack.scheduler_name, readiness_gates=(gate,))
    policy.create_namespaced_pod_disruption_budget(e2e_namespace, {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "paced"},
        "spec": {"maxUnavailable": max_unavailable, "selector": {"matchLabels": labels}}})

    def running(open_gates: bool = True) -> list[Any]:
        if open_gates:
            _open_gate(core, e2e_namespace, _live(core, e2e_namespace, selector), gate)
        _act_as_kubelet(core, e2e_namespace)
        return _live(core, e2e_namespace, selector)

    first = wait_for(running, lambda ps: len(ps) == replicas and all(p.spec.node_name == a and _ready(p) for p in ps),
                     timeout=90, what="the Deployment's pods running on the node to drain",
                     describe=lambda ps: str([(p.metadata.name, p.spec.node_name, _ready(p)) for p in ps]))
    wait_for(lambda: policy.read_namespaced_pod_disruption_budget("paced", e2e_namespace).status,
             lambda s: s is not None and s.current_healthy == replicas and s.disruptions_allowed == max_unavailable,
             timeout=60, what="the budget's status kept by the disruption controller", describe=str)
    b, c = make_nodes(NodeSpec(f"pdb-{run}-b", cpu="2"), NodeSpec(f"pdb-{run}-c", cpu="2"))
    availability = Availability(core, e2e_namespace, selector).start()
    operator = drain_stack.operator.start()
    name = f"pdb-{run}"
    drain = {"apiVersion": "berth.dev/v1alpha1", "kind": "NodeDrain", "metadata": {"name": name},
             "spec": {"nodes": [a], "destinations": [b, c], "mode": "Execute", "maxEvictionsInFlight": replicas}}
    started = time.monotonic()
    control_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(drain))
    plans: dict[str, str] = {}
    originals = {f"{e2e_namespace}/{p.metadata.name}" for p in first}

    def status(open_gates: bool = True) -> dict[str, Any]:
        running(open_gates)
        s = _drain_status(kube_api, name)
        for p in s.get("pods") or ():
            if p.get("destination"):
                assert plans.setdefault(p["pod"], p["destination"]) == p["destination"], "a planned pod moved"
        return s

    def entries(s: dict[str, Any]) -> dict[str, dict[str, Any]]:
        return {p["pod"]: p for p in s.get("pods") or ()}

    def asked(s: dict[str, Any]) -> bool:
        """Every pod of the drained node had its eviction accepted (``evictedAt``, kept once it
        is Moved) or refused (``attempts``)."""
        e = entries(s)
        return all(o in e and ("evictedAt" in e[o] or int(e[o].get("attempts") or 0) >= 1) for o in originals)

    # the replacements' gates stay closed: the budget's one disruption is spent by the first eviction
    held = entries(wait_for(lambda: status(open_gates=False), asked, timeout=120, interval=0.5,
                            what="every pod's eviction asked for, the replacements held unready",
                            describe=lambda s: json.dumps(s) + operator.log()[-2000:]))
    accepted = {o for o in originals if "evictedAt" in held[o]}
    refused = {o for o in originals if "disruption budget" in str(held[o].get("refusal") or "")}
    assert len(accepted) == max_unavailable, f"{sorted(accepted)} evicted at once under the budget"
    assert refused == originals - accepted, {o: held[o] for o in originals}
    assert len(refused) == replicas - max_unavailable
    # each refused pod's first refusal has its EvictionRefused Event (posted by the operator meanwhile)
    wait_for(lambda: _refused_in_events(core, name), lambda r: r >= refused, timeout=30,
             what="an EvictionRefused Event for each refused pod", describe=str)
    assert not any(_ready(p) for p in _live(core, e2e_namespace, selector) if p.spec.node_name != a)
    # released: the replacements turn ready, the budget allows the next eviction, one at a time
    done = wait_for(status, lambda s: s.get("phase") == "Drained", timeout=240, interval=0.5,
                    what="the drain finished", describe=lambda s: json.dumps(s) + operator.log()[-2000:])
    landed = wait_for(running, lambda ps: len(ps) == replicas and all(p.spec.node_name and _ready(p) for p in ps),
                      timeout=90, what="the replacements running",
                      describe=lambda ps: str([(p.metadata.name, p.spec.node_name) for p in ps]))
    elapsed = time.monotonic() - started
    fewest = availability.stop()
    assert availability.events > 0
    assert replicas - fewest <= max_unavailable, f"{replicas - fewest} pods unavailable at once"
    assert {p["state"] for p in done["pods"]} == {"Moved"} and done["moved"] == replicas
    assert sorted(p.spec.node_name for p in landed) == sorted(plans.values())
    print(f"\n[drain figure] {replicas} pods drained end to end under a budget of maxUnavailable "
          f"{max_unavailable} (NodeDrain applied to every replacement running): {elapsed:.1f}s")


def _refused_in_events(core: Any, drain: str) -> set[str]:
    """The pods the NodeDrain ``drain``'s EvictionRefused Events name (one Event per refused pod)."""
    events = core.list_event_for_all_namespaces(
        field_selector=f"involvedObject.name={drain},reason=EvictionRefused").items
    return {str(e.message).split(" from ", 1)[0] for e in events}


def test_a_pod_with_no_room_stays_blocked_and_moves_once_a_node_is_added(
        control_plane: ControlPlane, drain_stack: DrainStack, e2e_namespace: str,  # noqa: F811
        kube_api: Any, make_nodes: Callable[..., list[str]]) -> None:  # noqa: F811
    """Two Deployments drained onto the nodes of a label: the small pods move, the big one fits
    no destination and stays on its node, reported Blocked with the destination's per-resource
    shortfall; a node with the label added later is a destination the next plan finds, and the
    big pod moves there."""
    run = drain_stack.scheduler_name.removeprefix("berth-")
    core, apps = k8s.CoreV1Api(kube_api), k8s.AppsV1Api(kube_api)
    dest_label = {"berth.e2e/room": run}
    (a,) = make_nodes(NodeSpec(f"room-{run}-a", cpu="8"))
    _deployment(apps, e2e_namespace, "web", 2, {"app": f"web-{run}"}, drain_stack.scheduler_name)
    _deployment(apps, e2e_namespace, "big", 1, {"app": f"big-{run}"}, drain_stack.scheduler_name, cpu="3")

    running = partial(_kubelet_pods, core, e2e_namespace)
    first = _running_on(core, e2e_namespace, a, 3)
    (big,) = [p for p in first if p.metadata.labels["app"] == f"big-{run}"]
    (b,) = make_nodes(NodeSpec(f"room-{run}-b", cpu="2", labels=dest_label))
    operator = drain_stack.operator.start()
    name = f"room-{run}"
    drain = {"apiVersion": "berth.dev/v1alpha1", "kind": "NodeDrain", "metadata": {"name": name},
             "spec": {"nodes": [a], "destinationSelector": {"matchLabels": dest_label}, "mode": "Execute"}}
    control_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(drain))

    status = partial(_drain_progress, kube_api, core, e2e_namespace, name)

    def by_pod(s: dict[str, Any]) -> dict[str, dict[str, Any]]:
        return {p["pod"].split("/")[1]: p for p in s.get("pods") or ()}

    blocked = wait_for(status, lambda s: s.get("phase") == "Blocked", timeout=120, interval=0.5,
                       what="the small pods moved, the big one blocked",
                       describe=lambda s: json.dumps(s) + operator.log()[-2000:])
    assert (blocked["moved"], blocked["blocked"]) == (2, 1)
    stays = by_pod(blocked)[big.metadata.name]
    assert (stays["state"], stays["source"], stays["code"]) == ("Blocked", a, "insufficient_resource")
    # b's 2 CPUs hold the two moved pods (500m each): the big pod's shortfall is counted with them
    assert stays["refused"] == {b: "insufficient capacity: cpu: needs 3, 1 free of 2 allocatable (short by 2)"}
    assert "destination" not in stays
    still = core.read_namespaced_pod(big.metadata.name, e2e_namespace)
    assert (still.spec.node_name, still.metadata.deletion_timestamp) == (a, None)
    conditions = {c["type"]: c for c in blocked["conditions"]}
    assert (conditions["Drained"]["status"], conditions["Drained"]["reason"]) == ("False", "PodsBlocked")
    assert big.metadata.name in conditions["Planned"]["message"]

    (c,) = make_nodes(NodeSpec(f"room-{run}-c", cpu="4", labels=dest_label))
    done = wait_for(status, lambda s: s.get("phase") == "Drained", timeout=120, interval=0.5,
                    what="the big pod planned on the new node and moved",
                    describe=lambda s: json.dumps(s) + operator.log()[-2000:])
    moved = by_pod(done)[big.metadata.name]
    assert (moved["state"], moved["destination"]) == ("Moved", c)
    assert "refused" not in moved
    landed = wait_for(running, lambda ps: len(ps) == 3 and all(p.spec.node_name for p in ps), timeout=90,
                      what="the replacements bound",
                      describe=lambda ps: str([(p.metadata.name, p.spec.node_name) for p in ps]))
    assert sorted((p.metadata.labels["app"], p.spec.node_name) for p in landed) == \
        sorted([(f"big-{run}", c), (f"web-{run}", b), (f"web-{run}", b)])


def test_a_move_of_one_workload_to_a_named_node_honours_it_over_berths_checks(
        control_plane: ControlPlane, drain_stack: DrainStack, e2e_namespace: str,  # noqa: F811
        kube_api: Any, make_nodes: Callable[..., list[str]]) -> None:  # noqa: F811
    """A NodeDrain with a pod selector and one named destination moves that workload alone to
    that node although its PlacementPolicy excludes it: the plan and each replacement's recorded
    decision carry a warning saying so. kube-scheduler's own check still applies: the third pod,
    for which the node has no room left, stays Blocked. The other workload on the node is not
    touched."""
    run = drain_stack.scheduler_name.removeprefix("berth-")
    core, apps = k8s.CoreV1Api(kube_api), k8s.AppsV1Api(kube_api)
    custom = k8s.CustomObjectsApi(kube_api)
    web, other = {"app": f"web-{run}"}, {"app": f"other-{run}"}
    (a,) = make_nodes(NodeSpec(f"target-{run}-a", cpu="8"))
    _deployment(apps, e2e_namespace, "web", 3, web, drain_stack.scheduler_name, cpu="1")
    _deployment(apps, e2e_namespace, "other", 1, other, drain_stack.scheduler_name)

    running = partial(_kubelet_pods, core, e2e_namespace)
    first = _running_on(core, e2e_namespace, a, 4)
    target, roomy = make_nodes(NodeSpec(f"target-{run}-t", cpu="2"), NodeSpec(f"target-{run}-roomy", cpu="16"))
    operator = drain_stack.operator.start()
    custom.create_namespaced_custom_object("berth.dev", "v1alpha1", e2e_namespace, "placementpolicies", {
        "apiVersion": "berth.dev/v1alpha1", "kind": "PlacementPolicy", "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": web}, "nodeFilter": {"excludes": [target]}}})
    wait_for(lambda: custom.get_namespaced_custom_object("berth.dev", "v1alpha1", e2e_namespace,
                                                         "placementpolicies", "web"),
             lambda p: (p.get("status") or {}).get("observedGeneration") == 1, timeout=60,
             what="the operator read the policy", describe=lambda p: json.dumps(p) + operator.log()[-2000:])
    name = f"target-{run}"
    drain = {"apiVersion": "berth.dev/v1alpha1", "kind": "NodeDrain", "metadata": {"name": name},
             "spec": {"nodes": [a], "podSelector": {"matchLabels": web}, "destinations": [target],
                      "mode": "Execute"}}
    control_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(drain))

    status = partial(_drain_progress, kube_api, core, e2e_namespace, name)

    done = wait_for(status, lambda s: s.get("phase") == "Blocked", timeout=120, interval=0.5,
                    what="two pods moved to the target, the third blocked",
                    describe=lambda s: json.dumps(s) + operator.log()[-2000:])
    entries = done["pods"]
    assert all(e["pod"].startswith(f"{e2e_namespace}/web-") for e in entries), entries  # the workload alone
    moved = [e for e in entries if e["state"] == "Moved"]
    (blocked,) = [e for e in entries if e["state"] == "Blocked"]
    assert len(moved) == 2 and {e["destination"] for e in moved} == {target}
    for entry in moved:
        assert entry["policy"] == f"{e2e_namespace}/web"
        assert entry["warnings"] == [f"{target}: berth's checks refuse it (excluded by nodeFilter.excludes); "
                                     "honoured as the move's explicit target"]
    assert blocked["reason"] == (f"kube-scheduler would refuse the move target {target}: insufficient capacity: "
                                 "cpu: needs 1, 0 free of 2 allocatable (short by 1)")
    assert list(blocked["refused"]) == [target]

    # the policy's status names the drain and where it moved the policy's pods
    wanted = [{"name": name, "mode": "Execute", "phase": "Blocked", "moved": {target: 2}, "planned": {},
               "blocked": 1}]
    wait_for(lambda: custom.get_namespaced_custom_object("berth.dev", "v1alpha1", e2e_namespace,
                                                         "placementpolicies", "web"),
             lambda p: (p.get("status") or {}).get("drains") == wanted, timeout=60,
             what="the policy's status naming the drain",
             describe=lambda p: json.dumps((p.get("status") or {}).get("drains")) + operator.log()[-2000:])

    landed = wait_for(running, lambda ps: len(ps) == 4 and all(p.spec.node_name for p in ps), timeout=90,
                      what="the replacements bound",
                      describe=lambda ps: str([(p.metadata.name, p.spec.node_name) for p in ps]))
    where = sorted((p.metadata.labels["app"], p.spec.node_name) for p in landed)
    assert where == sorted([(web["app"], target), (web["app"], target), (web["app"], a), (other["app"], a)])
    assert roomy not in {p.spec.node_name for p in landed}
    original = {p.metadata.uid for p in first}
    stayed = {p.metadata.uid for p in landed if p.spec.node_name == a}
    assert stayed <= original  # the blocked pod and the other workload's pod were never evicted
    for pod in landed:
        if pod.spec.node_name != target:
            continue
        record = json.loads(pod.metadata.annotations["berth.dev/decision"])
        assert (record["winner"]["node"], record["policy"]) == (target, f"{e2e_namespace}/web")
        assert any(w.startswith(f"{target}: berth's checks refuse it (excluded by nodeFilter.excludes)")
                   and w.endswith(f"honoured as the explicit target of NodeDrain {name}")
                   for w in record["warnings"]), record["warnings"]


def test_holds_survive_an_extender_restart(control_plane: ControlPlane, drain_stack: DrainStack,  # noqa: F811
                                           e2e_namespace: str, kube_api: Any,  # noqa: F811
                                           make_nodes: Callable[..., list[str]]) -> None:  # noqa: F811
    """The extender is down while the drain evicts: it never sees the evicted pods. Restarted, it
    rebuilds each hold from the shape the NodeDrain's status keeps, and the replacements, pending
    meanwhile, land where the drain planned them, not on the roomier node berth would choose for
    a new pod."""
    run = drain_stack.scheduler_name.removeprefix("berth-")
    core, apps = k8s.CoreV1Api(kube_api), k8s.AppsV1Api(kube_api)
    labels = {"app": f"web-{run}"}
    (a,) = make_nodes(NodeSpec(f"restart-{run}-a", cpu="8"))
    _deployment(apps, e2e_namespace, "web", 2, labels, drain_stack.scheduler_name)

    running = partial(_kubelet_pods, core, e2e_namespace)
    first = _running_on(core, e2e_namespace, a, 2)
    b, c, roomy = make_nodes(NodeSpec(f"restart-{run}-b", cpu="1"), NodeSpec(f"restart-{run}-c", cpu="1"),
                             NodeSpec(f"restart-{run}-roomy", cpu="16"))
    drain_stack.extender.kill()
    operator = drain_stack.operator.start()
    name = f"restart-{run}"
    drain = {"apiVersion": "berth.dev/v1alpha1", "kind": "NodeDrain", "metadata": {"name": name},
             "spec": {"nodes": [a], "destinations": [b, c], "mode": "Execute"}}
    control_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(drain))

    status = partial(_drain_progress, kube_api, core, e2e_namespace, name)

    done = wait_for(status, lambda s: s.get("phase") == "Drained", timeout=120, interval=0.5,
                    what="the pods evicted while the extender is down",
                    describe=lambda s: json.dumps(s) + operator.log()[-2000:])
    plan = sorted(p["destination"] for p in done["pods"])
    assert set(plan) <= {b, c}
    evicted = {p.metadata.uid for p in first}
    wait_for(running, lambda ps: len(ps) == 2 and not any(p.spec.node_name for p in ps)
             and not {p.metadata.uid for p in ps} & evicted, timeout=60,
             what="the replacements created, pending without the extender")
    drain_stack.extender.start()
    landed = wait_for(running, lambda ps: len(ps) == 2 and all(p.spec.node_name for p in ps), timeout=120,
                      what="the replacements bound",
                      describe=lambda ps: str([(p.metadata.name, p.spec.node_name) for p in ps]))
    assert sorted(p.spec.node_name for p in landed) == plan, [(p.metadata.name, p.spec.node_name) for p in landed]
    assert roomy not in {p.spec.node_name for p in landed}
    for pod in landed:  # each names the hold it took: an extender restarted again rebuilds none for it
        assert pod.metadata.annotations["berth.dev/drain-hold"] in {e["uid"] for e in done["pods"]}
