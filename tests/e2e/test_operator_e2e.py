"""The PlacementPolicy CRD and operator against a real kube-apiserver (tests/e2e/harness):

- the CRD is accepted (structural schema, CEL rules within the apiserver's cost budget);
- ``kubectl apply`` of every valid example works; every invalid one is refused, by the schema
  or by the operator's admission webhook, with a message naming the field;
- the status tells the truth once pods are placed (conditions, placed per node, pending, plan,
  latest decision), ``kubectl get`` shows the columns and ``kubectl describe`` the Events;
- a restart resumes without rewriting an unchanged status, a policy that got in while the
  webhook was down is marked ``Valid=False``, and deletion needs no operator (no finalizer);
- two replicas with peering: one works, the other stands by and takes over.

The operator runs as ``python -m berth.operator.main`` with the self-signed dev webhook on
127.0.0.1 (the apiserver runs on the same machine).
"""

# ruff: noqa: F811  (the harness fixtures are imported, then requested by name)
from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from berth.core.decision import DecisionRecord
from tests.decision_schema import valid_record
from tests.e2e.harness import ControlPlane, NodeSpec, simple_pod, wait_for
from tests.e2e.harness.fixtures import (  # noqa: F401  (pytest fixtures)
    control_plane,
    e2e_namespace,
    kube_api,
    make_nodes,
    node_leases,
)
from tests.e2e.harness.process import ManagedProcess, free_port

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "crds" / "placementpolicies.berth.dev.yaml"
PEERING_CRD = ROOT / "crds" / "kopfpeerings.kopf.dev.yaml"
VALID = sorted((ROOT / "examples" / "valid").glob("*.yaml"))
INVALID = sorted((ROOT / "examples" / "invalid").glob("*.yaml"))
GROUP, VERSION, PLURAL = "berth.dev", "v1alpha1", "placementpolicies"


class Operator:
    """``python -m berth.operator.main`` as a process of its own."""

    def __init__(self, cp: ControlPlane, name: str, *args: str) -> None:
        self.name = name
        self.argv = [sys.executable, "-m", "berth.operator.main", "--resync-seconds", "1", *args]
        self.log_path = cp.workdir / "logs" / f"{name}.log"
        self.env = {"KUBECONFIG": str(cp.kubeconfig), "POD_ID": name, "PYTHONUNBUFFERED": "1"}
        self.cwd = cp.workdir  # not the repository root: its operator/ folder would shadow the stdlib's
        self.process = ManagedProcess(name, self.argv, self.log_path, env=self.env, cwd=self.cwd)
        self.webhook_config: str | None = None

    def start(self) -> Operator:
        if self.process.popen is not None:
            self.process = ManagedProcess(self.name, self.argv, self.log_path, env=self.env, cwd=self.cwd)
        self.process.start()
        return self

    def log(self) -> str:
        return self.process.log_path.read_text(errors="replace") if self.process.log_path.exists() else ""

    def wait_log(self, text: str, timeout: float = 60.0) -> None:
        self.process.wait_until(lambda: text in self.log(), timeout, f"logging {text!r}")

    def working(self) -> bool:
        """Not paused by peering: its last word on the peering is a resume."""
        log = self.log()
        return log.rfind("Resuming operations") > log.rfind("Pausing operations")

    def stop(self) -> None:
        self.process.stop(grace=15.0)


@pytest.fixture(scope="module")
def crds(control_plane: ControlPlane) -> Iterator[None]:
    control_plane.apply_crds(CRD, PEERING_CRD)
    yield


@pytest.fixture(scope="module")
def webhook_config() -> str:
    return f"berth-e2e-{uuid.uuid4().hex[:6]}.berth.dev"


@pytest.fixture(scope="module")
def operator(control_plane: ControlPlane, crds: None, webhook_config: str) -> Iterator[Operator]:
    """One operator for the module, with the dev webhook, cluster-wide."""
    op = Operator(control_plane, "berth-operator-e2e", *_webhook_args(webhook_config)).start()
    op.webhook_config = webhook_config
    try:
        _wait_webhook_ready(control_plane, op, webhook_config)
        yield op
    finally:
        op.stop()


def _webhook_args(config_name: str) -> list[str]:
    return ["--webhook", "dev", "--webhook-port", str(free_port()), "--webhook-config", config_name]


def _wait_webhook_ready(cp: ControlPlane, op: Operator, config_name: str) -> None:
    def served() -> bool:
        out = cp.kubectl("get", "validatingwebhookconfiguration", config_name, "-o", "json", check=False)
        if out.returncode != 0:
            return False
        hooks = json.loads(out.stdout).get("webhooks") or []
        return any("validate-placementpolicy" in (h.get("clientConfig") or {}).get("url", "") for h in hooks)
    op.process.wait_until(served, 90, "serving its admission webhook")
    # The apiserver reads webhook configurations through an informer: give it a moment.
    probe = _manifest(VALID[0], "probe-webhook")
    bad = yaml.safe_load((ROOT / "examples" / "invalid" / "label-key-empty.yaml").read_text())
    bad["metadata"]["name"] = "probe-webhook-bad"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        refused = cp.kubectl("apply", "--dry-run=server", "-n", "default", "-f", "-", check=False,
                             input=yaml.safe_dump(bad))
        if refused.returncode != 0 and "denied the request" in refused.stderr:
            break
        time.sleep(0.5)
    else:
        raise AssertionError(f"the webhook never refused the probe; operator log:\n{op.log()[-3000:]}")
    cp.kubectl("apply", "--dry-run=server", "-n", "default", "-f", "-", input=yaml.safe_dump(probe))


def _manifest(path: Path, name: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load(path.read_text())
    if name:
        body["metadata"]["name"] = name
    return body


def _policy(api: Any, namespace: str, name: str) -> dict[str, Any]:
    result: dict[str, Any] = k8s.CustomObjectsApi(api).get_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, name)
    return result


def _condition(body: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for c in (body.get("status") or {}).get("conditions") or ():
        if c.get("type") == kind:
            return dict(c)
    return None


def _wait_status(api: Any, namespace: str, name: str, done: Callable[[dict[str, Any]], bool],
                 what: str, timeout: float = 60.0) -> dict[str, Any]:
    return wait_for(lambda: _policy(api, namespace, name), done, timeout=timeout, what=what,
                    describe=lambda b: json.dumps(b.get("status"), indent=1))


def _settled(api: Any, namespace: str, name: str, quiet: float = 3.0, timeout: float = 30.0) -> dict[str, Any]:
    """The policy once no write has changed it for ``quiet`` seconds: the operator's status patch,
    kopf's record of the handling and its last-handled configuration come as separate writes."""
    body = _policy(api, namespace, name)
    since = time.monotonic()
    deadline = since + timeout
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = _policy(api, namespace, name)
        if now["metadata"]["resourceVersion"] != body["metadata"]["resourceVersion"]:
            body, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return body
    raise AssertionError(f"policy {namespace}/{name} still changing after {timeout:.0f} s")


def _expected(path: Path) -> str:
    return next(line.removeprefix("# berth: ") for line in path.read_text().splitlines()
                if line.startswith("# berth: "))


# -- the CRD and the examples ------------------------------------------------------------------------

def test_crd_is_accepted_by_the_apiserver(control_plane: ControlPlane, crds: None) -> None:
    out = control_plane.kubectl("get", "crd", "placementpolicies.berth.dev", "-o", "json")
    crd = json.loads(out.stdout)
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions.get("Established") == "True"
    assert conditions.get("NonStructuralSchema") is None
    # The OpenAPI document is published a moment after the CRD is Established.
    wait_for(lambda: control_plane.kubectl("explain", "placementpolicies.spec.placementRules", check=False),
             lambda out: "Affinity rules" in out.stdout, timeout=60, what="kubectl explain of the CRD",
             describe=lambda out: out.stderr)


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.stem)
def test_valid_example_applies_and_is_valid(path: Path, control_plane: ControlPlane,
                                            operator: Operator, e2e_namespace: str, kube_api: Any) -> None:
    control_plane.kubectl("apply", "-n", e2e_namespace, "-f", str(path))
    body = _wait_status(kube_api, e2e_namespace, path.stem,
                        lambda b: (_condition(b, "Valid") or {}).get("status") == "True", "Valid=True")
    assert body["status"]["observedGeneration"] == body["metadata"]["generation"]
    assert not body["metadata"].get("finalizers")


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_invalid_example_is_refused(path: Path, control_plane: ControlPlane,
                                    operator: Operator, e2e_namespace: str) -> None:
    refused = control_plane.kubectl("apply", "-n", e2e_namespace, "-f", str(path), check=False)
    assert refused.returncode != 0, f"{path.name} was accepted"
    message = refused.stderr
    field, _, _problem = _expected(path).partition(": ")
    if "denied the request" in message:  # the webhook: the core's message, word for word
        assert _expected(path) in message
    else:  # the schema or a CEL rule: the apiserver's message names the field (or its rule node)
        parent = field.rsplit(".", 1)[0] if "." in field else field
        assert field in message or parent.split("[")[0] in message, message
    absent = control_plane.kubectl("get", "placementpolicy", "-n", e2e_namespace, path.stem, check=False)
    assert absent.returncode != 0


def test_webhook_refusal_reads_as_the_issue_says(control_plane: ControlPlane, operator: Operator,
                                                 e2e_namespace: str) -> None:
    path = ROOT / "examples" / "invalid" / "labels-duplicate-after-trim.yaml"
    refused = control_plane.kubectl("apply", "-n", e2e_namespace, "-f", str(path), check=False)
    assert "spec.placementRules[0].labels.role: duplicate key after trimming" in refused.stderr


# -- status --------------------------------------------------------------------------------------------

def test_status_after_pods_are_placed(control_plane: ControlPlane, operator: Operator,
                                      e2e_namespace: str, kube_api: Any,
                                      make_nodes: Callable[..., list[str]]) -> None:
    run = "r" + uuid.uuid4().hex[:6]  # a letter first: never read back as a number
    a, b = make_nodes(NodeSpec(f"op-{run}-a", cpu="4", labels={"berth.e2e/run": run}),
                      NodeSpec(f"op-{run}-b", cpu="4", labels={"berth.e2e/run": run}))
    core = k8s.CoreV1Api(kube_api)
    policy = {"apiVersion": "berth.dev/v1alpha1", "kind": "PlacementPolicy", "metadata": {"name": "web"},
              "spec": {"selector": {"matchLabels": {"app": f"web-{run}"}}, "strategy": "Auto",
                       "nodeFilter": {"labels": {"berth.e2e/run": run}}}}
    control_plane.kubectl("apply", "-n", e2e_namespace, "-f", "-", input=yaml.safe_dump(policy))

    labels = {"app": f"web-{run}"}
    # as berth wrote it before the record had a version: the operator still reads it
    decision = {"pod": f"{e2e_namespace}/w1", "policy": f"{e2e_namespace}/web", "strategy": "Auto",
                "trigger": "bind", "time": "2026-01-01T00:00:05Z", "considered": [a, b], "refused": {},
                "winner": a, "ranking": [a, b], "warnings": [], "error": None, "plan": None}
    for name, node in (("w1", a), ("w2", b), ("w3", a)):
        pod = simple_pod(name, cpu="500m", labels=labels)
        pod["spec"]["nodeName"] = node  # bound, as if scheduled
        if name == "w1":
            pod["metadata"]["annotations"] = {"berth.dev/decision": json.dumps(decision)}
        core.create_namespaced_pod(e2e_namespace, pod)
    pending = simple_pod("w4", cpu="500m", labels=labels, scheduler_name="nobody-schedules-this")
    core.create_namespaced_pod(e2e_namespace, pending)

    body = _wait_status(kube_api, e2e_namespace, "web",
                        lambda b: (b.get("status") or {}).get("pending") == 1
                        and (b.get("status") or {}).get("placedTotal") == 3, "3 placed, 1 pending")
    status = body["status"]
    assert status["placed"] == {a: 2, b: 1}
    assert status["plan"] == {b: 1}
    assert status["strategy"] == "Auto" and status["selected"] == 4
    assert (_condition(body, "Satisfied") or {})["reason"] == "Planned"
    ready = _condition(body, "Ready") or {}
    assert (ready["status"], ready["reason"]) == ("False", "PodsPending")
    assert ready["observedGeneration"] == body["metadata"]["generation"]
    assert status["latestDecision"]["winner"] == {"node": a} and status["latestDecision"]["trigger"] == "bind"
    latest = DecisionRecord.model_validate(status["latestDecision"])  # the record's fields, as the API server keeps
    assert valid_record(latest.to_json()).considered == [a, b]

    table = control_plane.kubectl("get", "placementpolicies", "-n", e2e_namespace, "web").stdout
    header, row = table.splitlines()[:2]
    assert header.split() == ["NAME", "STRATEGY", "READY", "PLACED", "AGE"]
    assert row.split()[:4] == ["web", "Auto", "False", "3"]

    # The operator only reads pods and nodes: Kopf writes nothing on them.
    for obj in [*core.list_namespaced_pod(e2e_namespace).items, core.read_node(a)]:
        assert not any(k.startswith(("operator.berth.dev/", "kopf.zalando.org/"))
                       for k in (obj.metadata.annotations or {}))
        assert not obj.metadata.finalizers

    # The pending pod lands: Ready, and an Event says so.
    core.create_namespaced_pod_binding("w4", e2e_namespace, k8s.V1Binding(
        metadata=k8s.V1ObjectMeta(name="w4"), target=k8s.V1ObjectReference(kind="Node", name=b)),
        _preload_content=False)
    body = _wait_status(kube_api, e2e_namespace, "web",
                        lambda b: (_condition(b, "Ready") or {}).get("status") == "True", "Ready=True")
    assert body["status"]["placed"] == {a: 2, b: 2} and body["status"]["pending"] == 0
    assert "plan" not in body["status"]
    described = wait_for(lambda: control_plane.kubectl("describe", "placementpolicy", "-n", e2e_namespace,
                                                       "web").stdout,
                         lambda text: "AllPodsPlaced" in text, timeout=30, what="the AllPodsPlaced event")
    assert "Ready" in described and "Satisfied" in described

    # Unsatisfiable: a pod bigger than any node.
    core.create_namespaced_pod(e2e_namespace, simple_pod("huge", cpu="64", labels=labels,
                                                         scheduler_name="nobody-schedules-this"))
    body = _wait_status(kube_api, e2e_namespace, "web",
                        lambda b: (_condition(b, "Satisfied") or {}).get("status") == "False", "Satisfied=False")
    satisfied = _condition(body, "Satisfied") or {}
    assert satisfied["reason"] == "InsufficientResource"
    assert "insufficient capacity: cpu" in satisfied["message"]
    wait_for(lambda: core.list_namespaced_event(e2e_namespace, field_selector="involvedObject.name=web").items,
             lambda items: any(e.reason == "InsufficientResource" and e.type == "Warning" for e in items),
             timeout=30, what="a Warning event InsufficientResource on the policy")


def test_status_writes_are_debounced(control_plane: ControlPlane, operator: Operator,
                                     e2e_namespace: str, kube_api: Any) -> None:
    control_plane.kubectl("apply", "-n", e2e_namespace, "-f", str(VALID[0]))
    name = VALID[0].stem
    body = _wait_status(kube_api, e2e_namespace, name, lambda b: _condition(b, "Ready") is not None, "a status")
    time.sleep(3)  # at least two resync periods
    version = _policy(kube_api, e2e_namespace, name)["metadata"]["resourceVersion"]
    time.sleep(4)
    assert _policy(kube_api, e2e_namespace, name)["metadata"]["resourceVersion"] == version, \
        "the operator rewrote an unchanged status"
    for key in body["metadata"].get("annotations", {}):  # Kopf's bookkeeping: annotations, not status
        assert key == "kubectl.kubernetes.io/last-applied-configuration" or key.startswith("operator.berth.dev/")
    assert set(body["status"]) <= {"observedGeneration", "conditions", "strategy", "selected", "placed",
                                   "placedTotal", "pending", "plan", "planError", "latestDecision"}


# -- restart, resume, deletion -------------------------------------------------------------------------

def test_restart_resume_and_a_policy_that_got_in_without_the_webhook(
        control_plane: ControlPlane, crds: None, e2e_namespace: str, kube_api: Any,
        webhook_config: str, operator: Operator) -> None:
    operator.stop()
    try:
        # With the operator down (its webhook gone, failurePolicy Ignore), an invalid policy gets in.
        path = ROOT / "examples" / "invalid" / "labels-duplicate-after-trim.yaml"
        wait_for(lambda: control_plane.kubectl("apply", "-n", e2e_namespace, "-f", str(path), check=False),
                 lambda out: out.returncode == 0, timeout=30, what="the policy admitted without the webhook")
        control_plane.kubectl("apply", "-n", e2e_namespace, "-f", str(VALID[0]))
        # Deleting needs no operator: there is no finalizer.
        control_plane.kubectl("apply", "-n", e2e_namespace, "-f", str(VALID[1]))
        control_plane.kubectl("delete", "-n", e2e_namespace, "-f", str(VALID[1]), "--timeout=20s")

        again = Operator(control_plane, "berth-operator-e2e-restarted", *_webhook_args(webhook_config)).start()
        try:
            body = _wait_status(kube_api, e2e_namespace, path.stem,
                                lambda b: (_condition(b, "Valid") or {}).get("status") == "False", "Valid=False")
            valid = _condition(body, "Valid") or {}
            assert valid["reason"] == "InvalidSpec" and valid["message"] == _expected(path)
            _wait_status(kube_api, e2e_namespace, VALID[0].stem,
                         lambda b: (_condition(b, "Valid") or {}).get("status") == "True", "resumed")
            # A second restart finds nothing to change: the status is not rewritten. (The first's
            # writes, its status and kopf's own records, have all landed before it stops.)
            version = _settled(kube_api, e2e_namespace, VALID[0].stem)["metadata"]["resourceVersion"]
            again.stop()
            third = Operator(control_plane, "berth-operator-e2e-third", *_webhook_args(webhook_config)).start()
            try:
                _wait_webhook_ready(control_plane, third, webhook_config)
                time.sleep(5)  # resume handlers and a few resync periods
                assert _policy(kube_api, e2e_namespace, VALID[0].stem)["metadata"]["resourceVersion"] == version
            finally:
                third.stop()
        finally:
            again.stop()
    finally:
        operator.start()
        _wait_webhook_ready(control_plane, operator, webhook_config)


# -- two replicas ---------------------------------------------------------------------------------------

def test_two_replicas_one_works_the_other_takes_over(control_plane: ControlPlane, crds: None,
                                                      e2e_namespace: str, kube_api: Any,
                                                      operator: Operator) -> None:
    operator.stop()  # the module's operator is standalone: it would write too
    peering = f"berth-e2e-{uuid.uuid4().hex[:6]}"
    control_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(
        {"apiVersion": "kopf.dev/v1", "kind": "ClusterKopfPeering", "metadata": {"name": peering}}))
    low = Operator(control_plane, "berth-operator-low", "--peering", peering, "--priority", "10").start()
    high = Operator(control_plane, "berth-operator-high", "--peering", peering, "--priority", "20").start()
    try:
        # Kopf starts paused and resumes only while no live peer outranks it.
        high.process.wait_until(lambda: high.working(), 90, "working")
        wait_for(lambda: json.loads(control_plane.kubectl("get", "clusterkopfpeering", peering, "-o",
                                                          "json").stdout).get("status") or {},
                 lambda peers: {"berth-operator-low", "berth-operator-high"} <= set(peers), timeout=60,
                 what="both replicas in the peering object")

        control_plane.kubectl("apply", "-n", e2e_namespace, "-f", str(VALID[2]))
        _wait_status(kube_api, e2e_namespace, VALID[2].stem, lambda b: _condition(b, "Valid") is not None,
                     "a status from the working replica")
        assert not low.working(), "the lower-priority replica works too"

        high.stop()  # the standby resumes once the leader left the peering
        low.process.wait_until(lambda: low.working(), 90, "working after the leader left")
        control_plane.kubectl("apply", "-n", e2e_namespace, "-f", str(VALID[3]))
        _wait_status(kube_api, e2e_namespace, VALID[3].stem, lambda b: _condition(b, "Valid") is not None,
                     "a status from the replica that took over")
    finally:
        high.stop()
        low.stop()
        control_plane.kubectl("delete", "clusterkopfpeering", peering, "--ignore-not-found", check=False)
        operator.start()
        if operator.webhook_config:
            _wait_webhook_ready(control_plane, operator, operator.webhook_config)
