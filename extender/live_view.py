"""The live view: Nodes, Pods, kube-node-lease Leases, PlacementPolicies and NodeDrains listed and watched
through the kubernetes client, fed into the :class:`~berth.extender.store.ClusterStore`.

One thread per kind: list (in pages, applied as they come), then watch from the list's
resourceVersion; a watch that ends normally (server timeout) is resumed from the last
resourceVersion seen (bookmarks included); a watch error or ``410 Gone`` leads to a fresh
list, which also forgets what disappeared meanwhile. ``/readyz`` turns ready after the first
full list of the first four kinds (NodeDrains are not needed to serve). The operator runs the
same code for Nodes, Pods and Leases (:mod:`berth.operator.cluster`).

The transport is the kubernetes client's own API functions with ``_preload_content=False``:
the raw JSON is decoded with orjson and never turned into the client's model classes (which
would cost seconds and hundreds of MiB on a large cluster).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from berth.core import API_GROUP, CRD_VERSION, LEASE_NAMESPACE, NODEDRAIN_PLURAL, POLICY_PLURAL
from berth.extender.heap import collector_paused, settle
from berth.extender.metrics import Metrics
from berth.extender.store import WATCHED_KINDS, ClusterStore

log = logging.getLogger("berth.extender.live_view")

OPTIONAL_KINDS = {"policies": "PlacementPolicy", "nodedrains": "NodeDrain"}
"""Kinds whose CRD may be missing: then none of them, and the list is tried again later."""
LIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"
PAGE_SIZE = 1000


class Gone(Exception):
    """410 Gone: the resourceVersion is too old; list again."""


class NotFound(Exception):
    """404: the resource does not exist (the PlacementPolicy CRD is not installed)."""


@dataclass(frozen=True, slots=True)
class Page:
    items: list[dict[str, Any]]
    resource_version: str


class WatchSource(Protocol):
    """Lists and watches one kind (``nodes``, ``pods``, ``leases``, ``policies``, ``nodedrains``) of raw
    objects."""

    def list_pages(self, kind: str) -> Iterator[Page]: ...

    def watch(self, kind: str, resource_version: str, timeout_seconds: int) -> Iterator[dict[str, Any]]: ...


class KubeSource:
    """:class:`WatchSource` on a kubernetes ``ApiClient`` (in-cluster config or KUBECONFIG); with
    ``pod_namespace``, the pods of that namespace only (the operator's tests)."""

    def __init__(self, api_client: Any, *, pod_namespace: str | None = None) -> None:
        from kubernetes import client

        self.pod_namespace = pod_namespace
        self.core: Any = client.CoreV1Api(api_client)
        self.coordination: Any = client.CoordinationV1Api(api_client)
        self.custom: Any = client.CustomObjectsApi(api_client)

    def _call(self, kind: str, **kwargs: Any) -> Any:
        kwargs["_preload_content"] = False
        if kind == "nodes":
            return self.core.list_node(**kwargs)
        if kind == "pods" and self.pod_namespace:
            return self.core.list_namespaced_pod(self.pod_namespace, field_selector=LIVE_PODS, **kwargs)
        if kind == "pods":
            return self.core.list_pod_for_all_namespaces(field_selector=LIVE_PODS, **kwargs)
        if kind == "leases":
            return self.coordination.list_namespaced_lease(LEASE_NAMESPACE, **kwargs)
        if kind == "policies":
            return self.custom.list_cluster_custom_object(API_GROUP, CRD_VERSION, POLICY_PLURAL, **kwargs)
        if kind == "nodedrains":
            return self.custom.list_cluster_custom_object(API_GROUP, CRD_VERSION, NODEDRAIN_PLURAL, **kwargs)
        raise ValueError(f"unknown kind {kind!r}")

    def list_pages(self, kind: str) -> Iterator[Page]:
        from kubernetes.client.exceptions import ApiException

        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"limit": PAGE_SIZE, "_request_timeout": 120}
            if token:
                kwargs["_continue"] = token
            try:
                resp = self._call(kind, **kwargs)
            except ApiException as exc:
                if exc.status == 410:
                    raise Gone(f"list of {kind}: continue token expired") from None
                if exc.status == 404:
                    raise NotFound(f"list of {kind}: {exc.reason}") from None
                raise
            try:
                data = orjson.loads(resp.data)
            finally:
                resp.release_conn()  # back to the pool for the next page
            meta = data.get("metadata") or {}
            yield Page(list(data.get("items") or ()), str(meta.get("resourceVersion") or ""))
            token = meta.get("continue")
            if not token:
                return

    def watch(self, kind: str, resource_version: str, timeout_seconds: int) -> Iterator[dict[str, Any]]:
        from kubernetes.client.exceptions import ApiException

        try:
            resp = self._call(kind, watch=True, resource_version=resource_version, allow_watch_bookmarks=True,
                              timeout_seconds=timeout_seconds, _request_timeout=(10, timeout_seconds + 30))
        except ApiException as exc:
            if exc.status == 410:
                raise Gone(f"watch of {kind}: {exc.reason}") from None
            raise
        try:
            buffer = b""
            for chunk in resp.stream(amt=None, decode_content=False):
                buffer += chunk
                while True:
                    end = buffer.find(b"\n")
                    if end < 0:
                        break
                    line, buffer = buffer[:end], buffer[end + 1:]
                    if line.strip():
                        yield orjson.loads(line)
        finally:
            resp.close()
            resp.release_conn()


Handler = Callable[[Mapping[str, Any]], None]


class LiveView:
    """Keeps ``store`` up to date from ``source``; :meth:`start` spawns one daemon thread per kind
    of ``kinds`` (the extender watches all five; the operator, whose policies and drains Kopf
    watches, nodes, pods and leases: its store is ready without ``policies``)."""

    def __init__(self, store: ClusterStore, source: WatchSource, *, metrics: Metrics | None = None,
                 track_leases: bool = True, watch_timeout_seconds: int = 300, backoff_max_seconds: float = 30.0,
                 sleep: Callable[[float], None] | None = None, settle_heap: bool = True,
                 kinds: Sequence[str] = WATCHED_KINDS) -> None:
        self.store = store
        self.kinds = tuple(kinds)
        self.source = source
        self.metrics = metrics
        self.track_leases = track_leases
        self.watch_timeout_seconds = watch_timeout_seconds
        self.backoff_max_seconds = backoff_max_seconds
        self.settle_heap = settle_heap  # freeze the first full view (berth.extender.heap); off in tests
        self._stop = threading.Event()
        self._sleep = sleep or self._stop.wait
        self._threads: list[threading.Thread] = []
        self.relists: dict[str, int] = {}
        self.resource_versions: dict[str, str] = {}
        if not track_leases:  # liveness by the Ready condition alone (clusters without kubelets)
            store.view.leases_tracked = False
            store.mark_listed("leases")

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        kinds = [kind for kind in WATCHED_KINDS if kind in self.kinds]
        if not self.track_leases and "leases" in kinds:
            kinds.remove("leases")
        for kind in kinds:
            thread = threading.Thread(target=self.run, args=(kind,), name=f"berth-watch-{kind}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    # -- one kind --------------------------------------------------------------------------

    def run(self, kind: str, *, max_cycles: int | None = None) -> None:
        """List and watch ``kind`` until stopped (or for ``max_cycles`` list+watch cycles, in tests)."""
        backoff = 0.5
        cycles = 0
        while not self.stopped and (max_cycles is None or cycles < max_cycles):
            cycles += 1
            try:
                rv = self.relist(kind)
                backoff = 0.5
                self.watch_until_error(kind, rv)
            except Gone as exc:
                log.info("%s: %s; listing again", kind, exc)
                self._restarted(kind)
            except NotFound as exc:
                if kind not in OPTIONAL_KINDS:
                    log.warning("%s: %s", kind, exc)
                else:
                    log.warning("the %s CRD is not installed (%s): none; checking again in %.0fs",
                                OPTIONAL_KINDS[kind], exc, self.backoff_max_seconds)
                    self.store.replace(kind, [])
                self._sleep(self.backoff_max_seconds)
            except Exception as exc:
                log.warning("%s: watch failed (%s: %s); listing again in %.1fs", kind, type(exc).__name__, exc,
                            backoff)
                self._restarted(kind)
                self._sleep(backoff)
                backoff = min(backoff * 2, self.backoff_max_seconds)

    def _restarted(self, kind: str) -> None:
        self.relists[kind] = self.relists.get(kind, 0) + 1
        if self.metrics is not None:
            self.metrics.watch_restarts.labels(kind).inc()

    def relist(self, kind: str) -> str:
        """A full list of ``kind`` into the store; returns the list's resourceVersion."""
        started = time.perf_counter()
        rv = ""
        count = 0

        def items() -> Iterator[Mapping[str, Any]]:
            nonlocal rv, count
            for page in self.source.list_pages(kind):
                rv = page.resource_version or rv
                count += len(page.items)
                yield from page.items

        was_ready = self.store.ready
        with collector_paused():
            self.store.replace(kind, items())
        if self.settle_heap and self.store.ready and not was_ready:
            settle()  # the first full view: out of the collector's sight (see berth.extender.heap)
        self.resource_versions[kind] = rv
        log.info("listed %d %s in %.2fs (resourceVersion %s)", count, kind, time.perf_counter() - started, rv)
        return rv

    def watch_until_error(self, kind: str, rv: str) -> None:
        """Watch from ``rv``, resuming after normal ends; returns only when stopped, raises on errors."""
        handlers = self._handlers(kind)
        while not self.stopped:
            for event in self.source.watch(kind, rv, self.watch_timeout_seconds):
                if self.stopped:
                    return
                etype = event.get("type")
                obj = event.get("object")
                if not isinstance(obj, dict):
                    continue
                if etype == "ERROR":
                    code = obj.get("code")
                    if code == 410:
                        raise Gone(f"watch of {kind}: {obj.get('message', 'resourceVersion too old')}")
                    raise RuntimeError(f"watch of {kind}: error {code}: {obj.get('message', '')}")
                new_rv = (obj.get("metadata") or {}).get("resourceVersion")
                if etype == "BOOKMARK":
                    if new_rv:
                        rv = str(new_rv)
                    continue
                handler = handlers.get(str(etype))
                if handler is not None:
                    handler(obj)
                if new_rv:
                    rv = str(new_rv)
                self.resource_versions[kind] = rv

    def _handlers(self, kind: str) -> dict[str, Handler]:
        s = self.store
        table: dict[str, tuple[Handler, Handler]] = {
            "nodes": (s.apply_node, s.delete_node),
            "pods": (s.apply_pod, s.delete_pod),
            "leases": (s.apply_lease, s.delete_lease),
            "policies": (s.apply_policy, s.delete_policy),
            "nodedrains": (s.apply_nodedrain, s.delete_nodedrain),
        }
        apply, delete = table[kind]
        return {"ADDED": apply, "MODIFIED": apply, "DELETED": delete}


def kube_api_client() -> Any:
    """An ApiClient from the in-cluster config, else from KUBECONFIG / ~/.kube/config, like any client."""
    from kubernetes import client
    from kubernetes import config as kube_config

    config: Any = kube_config
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    return client.ApiClient()
