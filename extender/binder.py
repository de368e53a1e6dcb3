"""Where a bind lands: the API server (Binding with the decision annotations, then an Event) or,
offline, the view itself; and the Event that tells a pod no node takes why (``BerthRefused``).

:class:`KubeBinder` creates the Binding (``pods/binding``), which carries the decision annotation
(and the round annotation) onto the pod, and writes the Event on the pod as a separate step: the
engine holds the node's lock only for the Binding, so the informative Event never delays the
next bind to the same node. The kubernetes client is synchronous: every call runs in a worker
thread so the event loop keeps answering filter and prioritize.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Protocol

import orjson

from berth.core.model import PodInfo
from berth.extender.store import ClusterStore

log = logging.getLogger("berth.extender.binder")

COMPONENT = "berth-extender"


class BindError(RuntimeError):
    """The API server refused a step of the bind; the message is what kube-scheduler shows."""


class Binder(Protocol):
    async def bind(self, pod: PodInfo, node: str, annotations: Mapping[str, str]) -> None:
        """Place the pod; BindError (or any failure) means it is not placed."""
        ...

    async def record_event(self, pod: PodInfo, node: str, message: str) -> None:
        """Tell the pod's reader why it landed there. Best effort: the engine logs a failure and the
        bind stands (the pod's annotation holds the decision)."""
        ...

    async def record_refused(self, pod: PodInfo, message: str) -> None:
        """Tell the reader of a pod no node takes which nodes berth refused and why (a Warning
        Event, ``BerthRefused``). Best effort, like :meth:`record_event`."""
        ...

    async def fetch_pod(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    async def fetch_drain(self, name: str) -> dict[str, Any] | None:
        """The NodeDrain ``name`` as the API server has it, or None when there is none."""
        ...


class MemoryBinder:
    """Offline mode: the bind records the pod as placed in the view; no API server is involved."""

    def __init__(self, store: ClusterStore) -> None:
        self.store = store
        self.annotations: dict[str, dict[str, str]] = {}

    async def bind(self, pod: PodInfo, node: str, annotations: Mapping[str, str]) -> None:
        with self.store.lock:
            self.store.confirm_placed(replace(pod, node_name=node))
            self.annotations[pod.key] = dict(annotations)

    async def record_event(self, pod: PodInfo, node: str, message: str) -> None:
        """Offline there is no pod object to carry an Event: the decision API holds the record."""

    async def record_refused(self, pod: PodInfo, message: str) -> None:
        """Offline: the decision API holds the record."""

    async def fetch_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return None

    async def fetch_drain(self, name: str) -> dict[str, Any] | None:
        """Offline there is no API server, hence no NodeDrain."""
        return None


class KubeBinder:
    """Creates Bindings with berth's own rights, through the kubernetes client."""

    def __init__(self, api_client: Any, *, record_events: bool = True) -> None:
        from kubernetes import client

        self.core: Any = client.CoreV1Api(api_client)
        self.record_events = record_events

    async def bind(self, pod: PodInfo, node: str, annotations: Mapping[str, str]) -> None:
        await asyncio.to_thread(self._bind, pod, node, dict(annotations))

    async def record_event(self, pod: PodInfo, node: str, message: str) -> None:
        if self.record_events and message:
            await asyncio.to_thread(self._event, pod, "BerthPlaced", "Normal", message)

    async def record_refused(self, pod: PodInfo, message: str) -> None:
        if self.record_events and message:
            await asyncio.to_thread(self._event, pod, "BerthRefused", "Warning", message)

    def _bind(self, pod: PodInfo, node: str, annotations: dict[str, str]) -> None:
        from kubernetes.client.exceptions import ApiException

        # The Binding carries the decision annotation: the API server copies a Binding's annotations
        # onto the pod as it sets spec.nodeName, so one write both binds and records (no PATCH), and
        # metadata.uid makes it a precondition (a recreated pod of the same name is not touched).
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid,
                         "annotations": dict(annotations)},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        try:
            # _preload_content=False: the client's V1Binding model cannot read the Status the server returns.
            _drain(self.core.create_namespaced_pod_binding(pod.name, pod.namespace, body, _preload_content=False))
        except ApiException as exc:
            raise BindError(f"cannot bind pod {pod.key} to {node}: {_api_reason(exc)}") from None

    def _event(self, pod: PodInfo, reason: str, kind: str, message: str) -> None:
        from kubernetes.client.exceptions import ApiException

        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{pod.name}.", "namespace": pod.namespace},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": pod.name, "namespace": pod.namespace,
                               "uid": pod.uid},
            "reason": reason,
            "message": message[:1024],
            "type": kind,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": COMPONENT,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            _drain(self.core.create_namespaced_event(pod.namespace, event, _preload_content=False))
        except ApiException as exc:  # an Event is informative: its failure does not stop the bind
            log.warning("cannot record an Event on pod %s: %s", pod.key, _api_reason(exc))

    async def fetch_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return await asyncio.to_thread(self._fetch_pod, namespace, name)

    def _fetch_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        from kubernetes.client.exceptions import ApiException

        try:
            resp = self.core.read_namespaced_pod(name, namespace, _preload_content=False)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise BindError(f"cannot read pod {namespace}/{name}: {_api_reason(exc)}") from None
        data = orjson.loads(_drain(resp))
        return data if isinstance(data, dict) else None

    async def fetch_drain(self, name: str) -> dict[str, Any] | None:
        return await asyncio.to_thread(self._fetch_drain, name)

    def _fetch_drain(self, name: str) -> dict[str, Any] | None:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        try:
            resp = client.CustomObjectsApi(self.core.api_client).get_cluster_custom_object(
                "berth.dev", "v1alpha1", "nodedrains", name, _preload_content=False)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise BindError(f"cannot read NodeDrain {name}: {_api_reason(exc)}") from None
        data = orjson.loads(_drain(resp))
        return data if isinstance(data, dict) else None


def _drain(resp: Any) -> bytes:
    """Read a ``_preload_content=False`` reply to its end and hand its connection back to the pool:
    a reply left unread keeps its connection, so the next call would open (and TLS-handshake) a new one."""
    try:
        return bytes(resp.read())
    finally:
        resp.release_conn()


def _api_reason(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if body:
        try:
            status = orjson.loads(body)
            if isinstance(status, dict) and status.get("message"):
                return f"{status.get('reason') or exc.status}: {status['message']}"
        except orjson.JSONDecodeError:
            pass
    return f"{getattr(exc, 'status', '')} {getattr(exc, 'reason', '')}".strip()
