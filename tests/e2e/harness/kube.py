"""API helpers for a cluster without kubelet or controller-manager, on the ``kubernetes``
client: fake Nodes that look Ready to the scheduler, their Leases kept fresh by a background
thread, namespaces with their ``default`` ServiceAccount, forced pod deletion, polling.

Every function takes a ``kubernetes.client.ApiClient`` (``ControlPlane.api_client()``).
"""

from __future__ import annotations

import contextlib
import datetime
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

NOT_READY_TAINT = "node.kubernetes.io/not-ready"
NODE_LEASE_NAMESPACE = "kube-node-lease"
# The client's patch methods default to a JSON *patch* content type: always name one.
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"

T = TypeVar("T")


# ---------------------------------------------------------------------- polling


def wait_for(
    fetch: Callable[[], T],
    done: Callable[[T], bool],
    *,
    timeout: float,
    what: str,
    interval: float = 0.25,
    describe: Callable[[T], str] | None = None,
) -> T:
    """Call ``fetch`` until ``done(result)``; returns that result. On timeout raise an
    ``AssertionError`` that says ``what`` was awaited and shows the last result (through
    ``describe`` if given) or the last exception."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    last_exc: BaseException | None = None
    have = False
    while True:
        try:
            last = fetch()
            have = True
            last_exc = None
            if done(last):
                return last
        except ApiException as exc:
            last_exc = exc
        if time.monotonic() >= deadline:
            if last_exc is not None:
                state = f"last error: {last_exc}"
            elif have:
                state = f"last state: {describe(last) if describe else last!r}"  # type: ignore[arg-type]
            else:
                state = "no answer"
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; {state}")
        time.sleep(interval)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _is_not_found(exc: ApiException) -> bool:
    return bool(exc.status == 404)


def _is_conflict(exc: ApiException) -> bool:
    return bool(exc.status == 409)


# ---------------------------------------------------------------------- nodes


@dataclass
class NodeSpec:
    """What :func:`create_node` makes: allocatable resources (= capacity), labels, taints
    (``{"key", "value", "effect"}`` dicts) and whether the node reports Ready."""

    name: str
    cpu: str = "4"
    memory: str = "8Gi"
    ephemeral_storage: str = "100Gi"
    pods: int = 110
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[Mapping[str, str]] = ()
    ready: bool = True
    extra_resources: Mapping[str, str] = field(default_factory=dict)


def _resources(spec: NodeSpec) -> dict[str, str]:
    return {
        "cpu": spec.cpu,
        "memory": spec.memory,
        "ephemeral-storage": spec.ephemeral_storage,
        "pods": str(spec.pods),
        **spec.extra_resources,
    }


def _ready_condition(ready: bool, message: str = "") -> dict[str, Any]:
    now = _now().strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "type": "Ready",
        "status": "True" if ready else "False",
        "reason": "KubeletReady" if ready else "KubeletNotReady",
        "message": message or ("kubelet is posting ready status" if ready else "set NotReady by the test"),
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }


def create_node(api: Any, spec: NodeSpec) -> Any:
    """Create a Node through the API, set its status (capacity, allocatable, Ready condition)
    through the status subresource, and, for a Ready node, drop the
    ``node.kubernetes.io/not-ready`` taint that admission adds on create. Returns the Node."""
    core = k8s.CoreV1Api(api)
    labels = {
        "kubernetes.io/hostname": spec.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        **spec.labels,
    }
    body = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": spec.name, "labels": labels},
        "spec": {"taints": [dict(t) for t in spec.taints]},
    }
    core.create_node(k8s.V1Node.model_validate(body))
    res = _resources(spec)
    core.patch_node_status(
        spec.name,
        {
            "status": {
                "capacity": res,
                "allocatable": res,
                "conditions": [_ready_condition(spec.ready)],
                "addresses": [{"type": "Hostname", "address": spec.name}],
            }
        },
        _content_type=STRATEGIC_MERGE_PATCH,
    )
    if spec.ready:
        set_taints(api, spec.name, [dict(t) for t in spec.taints if t.get("key") != NOT_READY_TAINT])
    return core.read_node(spec.name)


def set_taints(api: Any, name: str, taints: Sequence[Mapping[str, str]]) -> None:
    """Replace the node's taints (a JSON merge patch replaces the whole list)."""
    k8s.CoreV1Api(api).patch_node(name, {"spec": {"taints": [dict(t) for t in taints]}}, _content_type=MERGE_PATCH)


def _taints_without(node: Any, key: str) -> list[dict[str, str]]:
    out = []
    for t in node.spec.taints or []:
        if t.key == key:
            continue
        taint = {"key": t.key, "effect": t.effect}
        if t.value:
            taint["value"] = t.value
        out.append(taint)
    return out


def remove_not_ready_taint(api: Any, name: str) -> None:
    """Drop the ``node.kubernetes.io/not-ready`` taint (added by admission on create)."""
    set_taints(api, name, _taints_without(k8s.CoreV1Api(api).read_node(name), NOT_READY_TAINT))


def set_node_ready(api: Any, name: str, ready: bool, *, taint: bool = True) -> None:
    """Set the node's Ready condition; with ``taint``, add or remove the not-ready taint as
    the node lifecycle controller would."""
    core = k8s.CoreV1Api(api)
    core.patch_node_status(
        name, {"status": {"conditions": [_ready_condition(ready)]}}, _content_type=STRATEGIC_MERGE_PATCH
    )
    if not taint:
        return
    if ready:
        remove_not_ready_taint(api, name)
    else:
        taints = _taints_without(core.read_node(name), NOT_READY_TAINT)
        taints.append({"key": NOT_READY_TAINT, "effect": "NoSchedule"})
        set_taints(api, name, taints)


def node_is_ready(node: Any) -> bool:
    """True when the Node has condition Ready=True."""
    return any(c.type == "Ready" and c.status == "True" for c in (node.status.conditions or []))


def delete_node(api: Any, name: str) -> None:
    """Delete the Node and its Lease (nothing else garbage-collects them here)."""
    try:
        k8s.CoreV1Api(api).delete_node(name)
    except ApiException as exc:
        if not _is_not_found(exc):
            raise
    try:
        k8s.CoordinationV1Api(api).delete_namespaced_lease(name, NODE_LEASE_NAMESPACE)
    except ApiException as exc:
        if not _is_not_found(exc):
            raise


# ---------------------------------------------------------------------- leases


def renew_node_lease(api: Any, node: str, *, duration_seconds: int = 40) -> datetime.datetime:
    """Create or renew the node's Lease in ``kube-node-lease`` as a kubelet would
    (holderIdentity = node name, renewTime = now). Returns the renew time written."""
    coord = k8s.CoordinationV1Api(api)
    now = _now()
    spec = {
        "holderIdentity": node,
        "leaseDurationSeconds": duration_seconds,
        "renewTime": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
    }
    try:
        coord.patch_namespaced_lease(node, NODE_LEASE_NAMESPACE, {"spec": spec}, _content_type=MERGE_PATCH)
    except ApiException as exc:
        if not _is_not_found(exc):
            raise
        try:
            coord.create_namespaced_lease(
                NODE_LEASE_NAMESPACE,
                k8s.V1Lease.model_validate(
                    {
                        "apiVersion": "coordination.k8s.io/v1",
                        "kind": "Lease",
                        "metadata": {"name": node},
                        "spec": spec,
                    }
                ),
            )
        except ApiException as exc2:
            if not _is_conflict(exc2):
                raise
            coord.patch_namespaced_lease(node, NODE_LEASE_NAMESPACE, {"spec": spec}, _content_type=MERGE_PATCH)
    return now


def lease_renew_time(api: Any, node: str) -> datetime.datetime | None:
    """The renewTime of the node's Lease, or None if it has none."""
    try:
        lease = k8s.CoordinationV1Api(api).read_namespaced_lease(node, NODE_LEASE_NAMESPACE)
    except ApiException as exc:
        if _is_not_found(exc):
            return None
        raise
    return lease.spec.renew_time if lease.spec else None


class NodeLeaseRenewer:
    """A daemon thread that renews the Lease of each registered node every ``interval``
    seconds, like the kubelets would. :meth:`pause` stops renewing one node (its Lease then
    ages), :meth:`resume` starts again. Use as a context manager or call :meth:`stop`."""

    def __init__(self, api: Any, *, interval: float = 3.0, duration_seconds: int = 40) -> None:
        self.api = api
        self.interval = interval
        self.duration_seconds = duration_seconds
        self._nodes: set[str] = set()
        self._paused: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self.errors: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, name="node-lease-renewer", daemon=True)
        self._thread.start()

    def add(self, *nodes: str) -> None:
        """Start renewing these nodes (renewed once right away)."""
        for node in nodes:
            renew_node_lease(self.api, node, duration_seconds=self.duration_seconds)
        with self._lock:
            self._nodes.update(nodes)
            self._paused.difference_update(nodes)

    def remove(self, *nodes: str) -> None:
        """Forget these nodes."""
        with self._lock:
            self._nodes.difference_update(nodes)
            self._paused.difference_update(nodes)

    def pause(self, node: str) -> None:
        """Stop renewing ``node``'s Lease (as if its kubelet died)."""
        with self._lock:
            self._paused.add(node)

    def resume(self, node: str) -> None:
        """Renew ``node``'s Lease again (right away)."""
        with self._lock:
            self._paused.discard(node)
        self._wake.set()

    @property
    def renewed_nodes(self) -> set[str]:
        """The nodes currently renewed."""
        with self._lock:
            return self._nodes - self._paused

    def _run(self) -> None:
        while not self._stop.is_set():
            for node in sorted(self.renewed_nodes):
                if self._stop.is_set():
                    break
                try:
                    renew_node_lease(self.api, node, duration_seconds=self.duration_seconds)
                except Exception as exc:  # the API may be going away; keep the last few errors
                    self.errors = [*self.errors[-9:], exc]
            self._wake.wait(self.interval)
            self._wake.clear()

    def stop(self) -> None:
        """Stop the thread."""
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=self.interval + 10)

    def __enter__(self) -> NodeLeaseRenewer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ---------------------------------------------------------------------- namespaces, pods


def ensure_default_service_account(api: Any, namespace: str) -> None:
    """Create the ``default`` ServiceAccount (no controller-manager makes it here)."""
    try:
        k8s.CoreV1Api(api).create_namespaced_service_account(
            namespace,
            k8s.V1ServiceAccount.model_validate(
                {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}
            ),
        )
    except ApiException as exc:
        if not _is_conflict(exc):
            raise


def create_namespace(api: Any, name: str, labels: Mapping[str, str] | None = None) -> None:
    """Create the namespace (if missing) and its ``default`` ServiceAccount."""
    try:
        k8s.CoreV1Api(api).create_namespace(
            k8s.V1Namespace.model_validate(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels or {})}}
            )
        )
    except ApiException as exc:
        if not _is_conflict(exc):
            raise
    ensure_default_service_account(api, name)


@contextlib.contextmanager
def temporary_namespace(api: Any, prefix: str) -> Iterator[str]:
    """A new namespace ``<prefix>-<random>`` with its default ServiceAccount, deleted afterwards."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    create_namespace(api, name)
    try:
        yield name
    finally:
        delete_namespace(api, name)


def force_delete_pod(api: Any, namespace: str, name: str) -> None:
    """Delete a pod at once (grace period 0): no kubelet will ever confirm its end."""
    try:
        k8s.CoreV1Api(api).delete_namespaced_pod(
            name, namespace, grace_period_seconds=0, body=k8s.V1DeleteOptions(grace_period_seconds=0)
        )
    except ApiException as exc:
        if not _is_not_found(exc):
            raise


def force_delete_pods(api: Any, namespace: str, label_selector: str | None = None) -> int:
    """Force-delete every pod of the namespace (matching ``label_selector``); returns the count."""
    core = k8s.CoreV1Api(api)
    pods = core.list_namespaced_pod(namespace, label_selector=label_selector).items
    for pod in pods:
        if pod.metadata and pod.metadata.name:
            force_delete_pod(api, namespace, pod.metadata.name)
    return len(pods)


def delete_namespace(api: Any, name: str) -> None:
    """Force-delete the namespace's pods, then delete the namespace. Without a
    controller-manager the namespace stays Terminating: use a new name for each test."""
    force_delete_pods(api, name)
    try:
        k8s.CoreV1Api(api).delete_namespace(name)
    except ApiException as exc:
        if not _is_not_found(exc):
            raise


def simple_pod(
    name: str,
    *,
    cpu: str = "100m",
    memory: str = "64Mi",
    labels: Mapping[str, str] | None = None,
    node_selector: Mapping[str, str] | None = None,
    scheduler_name: str | None = None,
    tolerations: Iterable[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """A one-container Pod manifest with requests (= limits) ``cpu``/``memory``; its image is
    never pulled since no kubelet runs."""
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "main",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {
                    "requests": {"cpu": cpu, "memory": memory},
                    "limits": {"cpu": cpu, "memory": memory},
                },
            }
        ],
        "terminationGracePeriodSeconds": 0,
    }
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if scheduler_name:
        spec["schedulerName"] = scheduler_name
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": spec,
    }
