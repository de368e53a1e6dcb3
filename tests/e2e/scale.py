"""A large cluster in the harness's API server, made fast, and the operator run on it: shared by
``bench/bench_operator.py`` and the operator's scale test.

Every object is sent as raw JSON by a pool of threads over one keep-alive HTTP client (the
kubernetes client's models would cost more than the API server's work). Pods are created bound
(``spec.nodeName``), as a scheduler would leave them, or pending for a scheduler nobody runs.

The cluster: ``nodes`` Ready nodes, each with a Lease (written once, valid for an hour: the
operator runs with ``BERTH_LIVENESS_THRESHOLD_SECONDS=3600``); ``policies`` PlacementPolicies,
``per_namespace`` to a namespace, policy ``j`` selecting the pods labelled ``app: app-j``;
``pending`` pending pods per policy and the other pods bound, spread over the policies and nodes.
"""

from __future__ import annotations

import datetime
import os
import ssl
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson

from tests.e2e.harness import ControlPlane, create_namespace
from tests.e2e.harness.process import ManagedProcess

GROUP, VERSION, PLURAL = "berth.dev", "v1alpha1", "placementpolicies"
POLICIES_PATH = f"/apis/{GROUP}/{VERSION}/{PLURAL}"
NOBODY = "no-scheduler"  # pending pods wait for a scheduler that never comes


def log(msg: str) -> None:
    print(f"[scale] {msg}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Shape:
    nodes: int
    pods: int  # all pods, the pending ones included
    policies: int
    per_namespace: int = 5
    pending: int = 10  # per policy

    @property
    def namespaces(self) -> int:
        return -(-self.policies // self.per_namespace)

    def namespace(self, i: int) -> str:
        return f"scale-{i:04d}"

    def policy(self, j: int) -> tuple[str, str]:
        """(namespace, name) of policy ``j``; it selects ``app: app-<j % per_namespace>``."""
        return self.namespace(j // self.per_namespace), f"policy-{j % self.per_namespace}"

    def app(self, j: int) -> str:
        return f"app-{j % self.per_namespace}"

    def node(self, i: int) -> str:
        return f"scale-node-{i:05d}"


class Api:
    """Raw JSON requests to the harness's API server with its admin certificate."""

    def __init__(self, cp: ControlPlane, connections: int = 32) -> None:
        assert cp.pki is not None
        tls = ssl.create_default_context(cafile=str(cp.pki.ca_cert))
        tls.load_cert_chain(str(cp.pki.admin_cert), str(cp.pki.admin_key))
        limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
        self.client = httpx.Client(base_url=cp.server, verify=tls, limits=limits, timeout=httpx.Timeout(60))
        self.connections = connections
        self.server, self.tls = cp.server, tls

    def async_client(self, connections: int) -> httpx.AsyncClient:
        """An asyncio client of the same API server and credentials, ``connections`` at most (for a
        caller that keeps many requests in flight from one thread)."""
        limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
        return httpx.AsyncClient(base_url=self.server, verify=self.tls, limits=limits, timeout=httpx.Timeout(60))

    def send(self, method: str, path: str, body: Any = None, *, content_type: str = "application/json",
             ok: tuple[int, ...] = (200, 201)) -> Any:
        for attempt in range(5):
            resp = self.client.request(method, path, content=orjson.dumps(body) if body is not None else None,
                                       headers={"Content-Type": content_type})
            if resp.status_code in ok:
                return orjson.loads(resp.content) if resp.content else None
            if resp.status_code not in (429, 500, 503, 504) or attempt == 4:
                raise RuntimeError(f"{method} {path}: HTTP {resp.status_code}: {resp.text[:300]}")
            time.sleep(0.5 * (attempt + 1))
        raise AssertionError("unreachable")

    def bulk(self, requests: Iterable[tuple[str, str, Any]], *, content_type: str = "application/json") -> int:
        """(method, path, body) requests, ``connections`` at a time; the count sent."""
        count = 0

        def one(req: tuple[str, str, Any]) -> None:
            self.send(*req, content_type=content_type)

        with ThreadPoolExecutor(self.connections) as pool:
            for _ in pool.map(one, requests):
                count += 1
        return count

    def policies(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.send("GET", POLICIES_PATH)["items"]
        return items

    def close(self) -> None:
        self.client.close()


MERGE = "application/merge-patch+json"


def pod_body(name: str, app: str, node: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}],
        "terminationGracePeriodSeconds": 0, "automountServiceAccountToken": False,
    }
    if node:
        spec["nodeName"] = node
    else:
        spec["schedulerName"] = NOBODY
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": app}}, "spec": spec}


def make_nodes(api: Api, shape: Shape) -> None:
    now = datetime.datetime.now(datetime.UTC)
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    micro = now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    res = {"cpu": "64", "memory": "256Gi", "ephemeral-storage": "500Gi", "pods": "110"}
    names = [shape.node(i) for i in range(shape.nodes)]
    api.bulk(("POST", "/api/v1/nodes", {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": n, "labels": {"kubernetes.io/hostname": n, "topology.kubernetes.io/zone": f"z{i % 3}"}},
        "spec": {}}) for i, n in enumerate(names))
    api.bulk((("PATCH", f"/api/v1/nodes/{n}/status", {"status": {
        "capacity": res, "allocatable": res,
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ready",
                        "lastHeartbeatTime": stamp, "lastTransitionTime": stamp}]}}) for n in names),
             content_type=MERGE)
    api.bulk((("PATCH", f"/api/v1/nodes/{n}", {"spec": {"taints": None}}) for n in names), content_type=MERGE)
    api.bulk(("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": n},
        "spec": {"holderIdentity": n, "leaseDurationSeconds": 3600, "renewTime": micro}}) for n in names)


def policy_body(name: str, app: str) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "PlacementPolicy", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": app}}}}


def make_policies(api: Api, cp: ControlPlane, shape: Shape) -> None:
    kube = cp.api_client()
    try:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda i: create_namespace(kube, shape.namespace(i)), range(shape.namespaces)))
    finally:
        kube.close()
    api.bulk(("POST", f"/apis/{GROUP}/{VERSION}/namespaces/{ns}/{PLURAL}", policy_body(name, shape.app(j)))
             for j, (ns, name) in ((j, shape.policy(j)) for j in range(shape.policies)))


def pod_requests(shape: Shape) -> Iterator[tuple[str, str, Any]]:
    """Pending pods first (``pending`` per policy), then bound ones round-robin over the policies
    and the nodes."""
    for j in range(shape.policies):
        ns, name = shape.policy(j)
        for k in range(shape.pending):
            yield "POST", f"/api/v1/namespaces/{ns}/pods", pod_body(f"pending-{name}-{k}", shape.app(j), None)
    bound = max(0, shape.pods - shape.policies * shape.pending)
    for i in range(bound):
        j = i % shape.policies
        ns, name = shape.policy(j)
        yield "POST", f"/api/v1/namespaces/{ns}/pods", pod_body(f"bound-{name}-{i}", shape.app(j),
                                                               shape.node(i % shape.nodes))


def make_pods(api: Api, shape: Shape) -> None:
    api.bulk(pod_requests(shape))


def build(cp: ControlPlane, api: Api, shape: Shape) -> dict[str, float]:
    """The whole cluster; seconds taken per kind of object."""
    took: dict[str, float] = {}
    for what, make in (("nodes", lambda: make_nodes(api, shape)),
                       ("policies", lambda: make_policies(api, cp, shape)),
                       ("pods", lambda: make_pods(api, shape))):
        started = time.monotonic()
        make()
        took[what] = time.monotonic() - started
        log(f"{what} created in {took[what]:.1f}s")
    return took


def has_status(policy: dict[str, Any]) -> bool:
    status = policy.get("status") or {}
    return "observedGeneration" in status and bool(status.get("conditions"))


@dataclass
class OperatorProcess:
    """``berth operator --webhook off`` as a process of its own on the harness's cluster."""

    cp: ControlPlane
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    process: ManagedProcess | None = None
    started: float = 0.0

    def start(self) -> OperatorProcess:
        berth = os.path.join(os.path.dirname(sys.executable), "berth")
        env = {"KUBECONFIG": str(self.cp.kubeconfig), "PYTHONUNBUFFERED": "1",
               "BERTH_LIVENESS_THRESHOLD_SECONDS": "3600", **self.env}
        self.process = ManagedProcess("berth-operator-scale", [berth, "operator", "--webhook", "off", *self.args],
                                      self.cp.workdir / "logs" / "berth-operator-scale.log", env=env,
                                      cwd=self.cp.workdir)
        self.started = time.monotonic()
        self.process.start()
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None and self.process.pid is not None
        return self.process.pid

    def rss_mib(self) -> float:
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return float("nan")

    def cpu_seconds(self) -> float:
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def log_tail(self, chars: int = 3000) -> str:
        if self.process is None or not self.process.log_path.exists():
            return ""
        return self.process.log_path.read_text(errors="replace")[-chars:]

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop(grace=10)


def wait_every_status(api: Api, op: OperatorProcess, count: int, timeout: float,
                      interval: float = 1.0, on_poll: Callable[[int], None] | None = None) -> float | None:
    """Seconds from the operator's start until ``count`` policies have a status; None on timeout."""
    deadline = op.started + timeout
    while time.monotonic() < deadline:
        done = sum(1 for p in api.policies() if has_status(p))
        if on_poll is not None:
            on_poll(done)
        if done >= count:
            return time.monotonic() - op.started
        if op.process is not None and op.process.popen is not None and op.process.popen.poll() is not None:
            raise RuntimeError(f"the operator exited:\n{op.log_tail()}")
        time.sleep(interval)
    return None


class PolicyWrites:
    """A watch on every PlacementPolicy counting MODIFIED events (status writes: the operator
    changes nothing else once the policies are handled), each with when it was received here and
    the second the API server wrote it in (the latest status entry of its managedFields): a
    watcher that falls behind receives two seconds' writes in one, the API server's second does
    not move."""

    def __init__(self, api: Api, resource_version: str) -> None:
        self.api = api
        self.rv = resource_version
        self.times: list[float] = []
        self.server_seconds: list[tuple[float, str]] = []  # (received, the API server's second)
        self.stopping = False
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopping:
            url = f"{POLICIES_PATH}?watch=1&timeoutSeconds=600&resourceVersion={self.rv}"
            try:
                with self.api.client.stream("GET", url, timeout=httpx.Timeout(10, read=None)) as resp:
                    for line in resp.iter_lines():
                        if self.stopping:
                            return
                        if not line:
                            continue
                        event = orjson.loads(line)
                        obj = event.get("object") or {}
                        self.rv = (obj.get("metadata") or {}).get("resourceVersion") or self.rv
                        if event.get("type") == "MODIFIED":
                            second = max((str(f.get("time") or "") for f in
                                          (obj.get("metadata") or {}).get("managedFields") or ()
                                          if f.get("subresource") == "status"), default="")
                            with self.lock:
                                self.times.append(time.monotonic())
                                self.server_seconds.append((self.times[-1], second))
            except httpx.HTTPError:
                if not self.stopping:
                    time.sleep(0.5)

    def between(self, start: float, end: float) -> list[float]:
        with self.lock:
            return [t for t in self.times if start <= t < end]

    def most_in_a_second(self, start: float, end: float) -> int:
        """The most writes received between ``start`` and ``end`` that the API server wrote in one
        second."""
        counts: dict[str, int] = {}
        with self.lock:
            for received, second in self.server_seconds:
                if start <= received < end and second:
                    counts[second] = counts.get(second, 0) + 1
        return max(counts.values(), default=0)

    def stop(self) -> None:
        self.stopping = True
