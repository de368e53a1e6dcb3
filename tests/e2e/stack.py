"""berth's whole stack around the e2e control plane, as real processes: the extender
(``berth extender``), the operator (``berth operator``, i.e. ``kopf run``), the CRD, and a
kube-scheduler whose profile ``berth-scheduler`` calls berth exactly as ``extender/README.md``
tells users (the configuration comes from :func:`berth.extender.scheduler_config.scheduler_config`).

Session fixtures (import them into a test module, as with :mod:`tests.e2e.harness.fixtures`):

* ``berth_crd``: the PlacementPolicy CRD applied and Established.
* ``placement_namespace``: one namespace for the session's policies and pods (the operator
  watches it alone, so that it never competes with another module's operator).
* ``berth_extender``: an :class:`Extender` (``berth extender --host 127.0.0.1 --port <free>``,
  ``KUBECONFIG`` = the control plane's admin kubeconfig), ready (``/readyz``). Tests may
  :meth:`Extender.kill` and :meth:`Extender.start` it again on the same port.
* ``berth_operator``: an :class:`Operator` (standalone, ``--namespace`` the session's namespace;
  with the dev admission webhook when the control plane is local).
* ``berth_scheduler``: the kube-scheduler with the ``berth-scheduler`` profile.

Everything started here is stopped when the session ends (and, as every process of the harness,
killed with the test process: :mod:`tests.e2e.harness.process`).

Helpers for the tests: :func:`served_extender` (the extender in the test's own process, on the
control plane's live view, with the settings a test gives), :func:`expected_plan` (the core's plan
on a snapshot of the cluster taken with the real ``kubectl get nodes,pods,leases -A -o json``),
:func:`bound_nodes`, :func:`events`.
"""

# ruff: noqa: F811  (the harness fixtures are imported, then requested by name)
from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
import yaml
from kubernetes import client as k8s
from prometheus_client.parser import text_string_to_metric_families

from berth.core.kube import pod_from_object
from berth.core.plan import plan_round
from berth.core.policy import ROUND_STRATEGIES, policy_from_manifest
from berth.core.settings import Settings
from berth.extender.app import create_app
from berth.extender.binder import KubeBinder
from berth.extender.leader import nominator_elector
from berth.extender.live_view import KubeSource, LiveView
from berth.extender.metrics import Metrics
from berth.extender.scheduler_config import scheduler_config  # type: ignore[import-not-found,unused-ignore]
from berth.extender.settings import ExtenderSettings
from berth.extender.store import ClusterStore
from berth.snapshot import snapshot_from_documents
from tests.e2e.harness import ControlPlane, HarnessError, temporary_namespace, wait_for
from tests.e2e.harness.fixtures import control_plane, kube_api  # noqa: F401  (pytest fixtures)
from tests.e2e.harness.process import ManagedProcess, free_port

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "crds" / "placementpolicies.berth.dev.yaml"
GROUP, VERSION, PLURAL = "berth.dev", "v1alpha1", "placementpolicies"

SCHEDULER_NAME = os.environ.get("BERTH_E2E_SCHEDULER_NAME", "berth-scheduler")
LIVENESS_THRESHOLD_SECONDS = 15
"""The extender's and operator's ``BERTH_LIVENESS_THRESHOLD_SECONDS`` here (default 40): a node
whose Lease is no longer renewed is down after 15 s; the harness renews Leases every 2 s."""
HOLD_GATE = "berth.dev/e2e-hold"
"""A scheduling gate: pods created with it wait (pending, seen by berth) until it is removed."""


def _berth_command() -> str:
    """The ``berth`` console script of this interpreter's environment."""
    script = Path(sys.executable).with_name("berth")
    if not script.exists():
        raise HarnessError(f"{script} not found: install berth (pip install -e .) in this environment")
    return str(script)


def _log(msg: str) -> None:
    print(f"[berth-e2e] {msg}", file=sys.stderr, flush=True)


# -- processes ---------------------------------------------------------------------------------


class Extender:
    """``berth extender`` as a process of its own on 127.0.0.1:<port> (the port survives restarts)."""

    def __init__(self, cp: ControlPlane, env: Mapping[str, str] | None = None, name: str = "berth-extender") -> None:
        self.cp = cp
        self.name = name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {"KUBECONFIG": str(cp.kubeconfig), "PYTHONUNBUFFERED": "1",
                    "BERTH_LIVENESS_THRESHOLD_SECONDS": str(LIVENESS_THRESHOLD_SECONDS),
                    "BERTH_LOG_LEVEL": "WARNING", "BERTH_API_ANONYMOUS": "true", **(env or {})}
        self.process: ManagedProcess | None = None
        self.starts = 0

    @property
    def log_path(self) -> Path:
        return self.cp.workdir / "logs" / f"{self.name}.log"

    def start(self, timeout: float = 120.0) -> Extender:
        """Start (or restart) the process and wait for ``/readyz`` (its first full list)."""
        self.process = ManagedProcess(
            self.name, [_berth_command(), "extender", "--host", "127.0.0.1", "--port", str(self.port),
                        "--dev-insecure"],
            self.log_path, env=self.env, cwd=self.cp.workdir).start()
        self.starts += 1
        self.process.wait_until(self.ready, timeout, "ready (/readyz)", interval=0.25)
        return self

    def ready(self) -> bool:
        return extender_ready(self.url)

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        proc = self.process
        if proc is not None and proc.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.stop(grace=1)

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop(grace=10)

    def get(self, path: str) -> Any:
        resp = httpx.get(self.url + path, timeout=10)
        resp.raise_for_status()
        return resp.json()

    def post(self, path: str, body: Mapping[str, Any]) -> Any:
        resp = httpx.post(self.url + path, json=dict(body), timeout=10)
        resp.raise_for_status()
        return resp.json()

    def view_count(self, kind: str) -> float:
        """``berth_view_objects{kind=...}`` from ``/metrics``."""
        for family in text_string_to_metric_families(httpx.get(self.url + "/metrics", timeout=10).text):
            if family.name == "berth_view_objects":
                for sample in family.samples:
                    if sample.labels.get("kind") == kind:
                        return float(sample.value)
        return 0.0


class Operator:
    """``berth operator`` (Kopf) as a process of its own, standalone."""

    def __init__(self, cp: ControlPlane, namespace: str, webhook: bool) -> None:
        self.cp = cp
        self.namespace = namespace
        self.webhook_config = f"berth-placement-e2e-{uuid.uuid4().hex[:6]}.berth.dev" if webhook else None
        args = ["--namespace", namespace, "--resync-seconds", "1"]
        if self.webhook_config:
            args += ["--webhook", "dev", "--webhook-port", str(free_port()), "--webhook-config", self.webhook_config]
        else:
            args += ["--webhook", "off"]
        self.process = ManagedProcess(
            "berth-operator", [_berth_command(), "operator", *args], cp.workdir / "logs" / "berth-operator.log",
            env={"KUBECONFIG": str(cp.kubeconfig), "PYTHONUNBUFFERED": "1", "POD_ID": "berth-operator-placement-e2e",
                 "BERTH_LIVENESS_THRESHOLD_SECONDS": str(LIVENESS_THRESHOLD_SECONDS)},
            cwd=cp.workdir)

    def start(self, api: Any, timeout: float = 120.0) -> Operator:
        self.process.start()
        # Ready when it writes a status (and, with the webhook, when the apiserver calls it).
        probe = policy_manifest("probe-operator", {"app": "probe-operator"}, strategy="Auto")
        self.cp.kubectl("apply", "-n", self.namespace, "-f", "-", input=yaml.safe_dump(probe))
        self.process.wait_until(lambda: condition(get_policy(api, self.namespace, "probe-operator"), "Valid")
                                is not None, timeout, "writing a PlacementPolicy status")
        if self.webhook_config:
            bad = policy_manifest("probe-operator-bad", {"app": "probe"})
            bad["spec"]["placementRules"] = [{"resource": "Node", "operator": "Has", "labels": {"a": "1", " a ": "2"}}]

            def refused() -> bool:
                out = self.cp.kubectl("apply", "--dry-run=server", "-n", self.namespace, "-f", "-",
                                      input=yaml.safe_dump(bad), check=False)
                return out.returncode != 0 and "denied the request" in out.stderr

            self.process.wait_until(refused, timeout, "refusing an invalid policy through its webhook", interval=0.5)
        self.cp.kubectl("delete", "placementpolicy", "-n", self.namespace, "probe-operator", "--ignore-not-found")
        return self

    def stop(self) -> None:
        self.process.stop(grace=15)
        if self.webhook_config:
            self.cp.kubectl("delete", "validatingwebhookconfiguration", self.webhook_config, "--ignore-not-found",
                            check=False)


@contextlib.contextmanager
def served_extender(control_plane: ControlPlane, settings: ExtenderSettings) -> Iterator[str]:
    """An extender with ``settings`` on the control plane's live view, served by uvicorn on
    127.0.0.1 until the block ends; its URL. With ``nominate`` it nominates while it holds the
    nominator's Lease (``leader_*`` settings; in ``default`` unless they say otherwise), as the
    server does."""
    api = control_plane.api_client()
    store = ClusterStore(leases_tracked=True)
    metrics = Metrics(store)
    live = LiveView(store, KubeSource(api), metrics=metrics, watch_timeout_seconds=60, settle_heap=False)
    app = create_app(store, settings, binder=KubeBinder(api), source=live, metrics=metrics,
                     elector=nominator_elector(settings, api.configuration))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    wait_for(lambda: extender_ready(url), lambda ok: ok, timeout=60, what="the extender ready")
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(10)
        api.close()


def extender_ready(url: str) -> bool:
    """Whether the extender at ``url`` answers ``/readyz`` with 200 (its first full list is in)."""
    try:
        return httpx.get(url + "/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


# -- fixtures ----------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def berth_crd(control_plane: ControlPlane) -> None:
    control_plane.apply_crds(CRD)


@pytest.fixture(scope="session")
def placement_namespace(kube_api: Any) -> Iterator[str]:
    with temporary_namespace(kube_api, "e2e-placement") as name:
        yield name


@pytest.fixture(scope="session")
def berth_extender(control_plane: ControlPlane, berth_crd: None) -> Iterator[Extender]:
    ext = Extender(control_plane)
    try:
        ext.start()
        _log(f"berth extender ready at {ext.url}")
        yield ext
    finally:
        ext.stop()


@pytest.fixture(scope="session")
def berth_operator(control_plane: ControlPlane, kube_api: Any, berth_crd: None,
                   placement_namespace: str) -> Iterator[Operator]:
    # The dev webhook listens on 127.0.0.1: only a local API server can call it.
    op = Operator(control_plane, placement_namespace, webhook=control_plane.managed)
    try:
        op.start(kube_api)
        yield op
    finally:
        op.stop()


@dataclass
class BerthScheduler:
    name: str
    config: dict[str, Any]
    scheduler: Any


def berth_scheduler_config(url: str, name: str = SCHEDULER_NAME, **kwargs: Any) -> dict[str, Any]:
    """extender/README.md's configuration: filter, prioritize, bind (and preempt), weight 30,
    ``nodeCacheCapable: true``, ``percentageOfNodesToScore: 100``, a profile ``name``."""
    config: dict[str, Any] = scheduler_config(url, scheduler_name=name, **kwargs)
    extender = config["extenders"][0]
    assert config["percentageOfNodesToScore"] == 100 and extender["nodeCacheCapable"] is True
    verbs = (extender["filterVerb"], extender["prioritizeVerb"], extender["bindVerb"])
    assert verbs == ("filter", "prioritize", "bind")
    return config


@pytest.fixture(scope="session")
def berth_scheduler(control_plane: ControlPlane, berth_extender: Extender) -> Iterator[BerthScheduler]:
    config = berth_scheduler_config(berth_extender.url)
    sched = control_plane.start_scheduler(config, name=f"kube-scheduler-{SCHEDULER_NAME}")
    try:
        yield BerthScheduler(SCHEDULER_NAME, config, sched)
    finally:
        sched.stop()


# -- manifests and reading the cluster ---------------------------------------------------------


def policy_manifest(name: str, match_labels: Mapping[str, str], *, strategy: str | None = None,
                    **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"selector": {"matchLabels": dict(match_labels)}, **spec}
    if strategy is not None:
        body["strategy"] = strategy
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "PlacementPolicy", "metadata": {"name": name}, "spec": body}


def get_policy(api: Any, namespace: str, name: str) -> dict[str, Any]:
    result: Any = k8s.CustomObjectsApi(api).get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    return dict(result)


def condition(body: Mapping[str, Any], kind: str) -> dict[str, Any] | None:
    for c in (body.get("status") or {}).get("conditions") or ():
        if c.get("type") == kind:
            return dict(c)
    return None


def bound_nodes(core: Any, namespace: str, label_selector: str) -> dict[str, str | None]:
    """pod name -> the node the scheduler bound it to (None: still unbound)."""
    pods = core.list_namespaced_pod(namespace, label_selector=label_selector).items
    return {p.metadata.name: p.spec.node_name for p in pods}


def node_counts(placed: Mapping[str, str | None]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for node in placed.values():
        if node:
            counts[node] = counts.get(node, 0) + 1
    return counts


def events(core: Any, namespace: str, pod: str, reason: str) -> list[str]:
    items = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={pod}").items
    return [str(e.message) for e in items if e.reason == reason]


def cluster_snapshot(cp: ControlPlane) -> list[Any]:
    """``kubectl get nodes,pods,leases -A -o json``, as a user would take it for ``berth plan``."""
    out = cp.kubectl("get", "nodes,pods,leases", "-A", "-o", "json", timeout=120)
    return [json.loads(out.stdout)]


def expected_plan(cp: ControlPlane, pod: Mapping[str, Any], namespace: str, policy: Mapping[str, Any],
                  count: int | None) -> dict[str, int]:
    """The core's plan for ``count`` pods like ``pod`` (None: a Fill/Each round of its own) on the
    cluster as it is now, with the extender's settings."""
    snapshot = snapshot_from_documents(cluster_snapshot(cp), "kubectl get nodes,pods,leases -A -o json")
    body = {**policy, "metadata": {**policy["metadata"], "namespace": namespace}}
    parsed = policy_from_manifest(body)
    shape = json.loads(json.dumps(pod))
    shape["metadata"] = {**shape["metadata"], "namespace": namespace}
    shape["spec"].pop("schedulingGates", None)
    info = pod_from_object(shape)
    settings = Settings(liveness_threshold_seconds=LIVENESS_THRESHOLD_SECONDS)
    now = time.time()
    result = plan_round(snapshot.view(), info, parsed, settings, now, count)
    if result.error is not None:
        raise AssertionError(f"the core refuses the plan: {result.error}")
    if count is None and parsed.spec.strategy not in ROUND_STRATEGIES:
        raise AssertionError("count=None plans a round of one pod for greedy strategies")
    return dict(result.plan)
