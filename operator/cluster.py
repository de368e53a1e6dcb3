"""The operator's copy of the cluster: the extender's watch-fed store (:mod:`berth.extender.store`,
fed by :mod:`berth.extender.live_view`: list, watch, relist on 410, ready after the first full
list), for Nodes, Pods and node Leases. Kopf watches only the PlacementPolicies.

:class:`OperatorStore` adds the two things a policy's status reads that the extender does not
keep (a pending pod's creation time, which orders the round's shape, and a pod's decision and
round annotations) and tells :attr:`OperatorStore.on_pod_change` which namespace and labels each change
touched, so that only the policies selecting them are recomputed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from berth.core import DECISION_ANNOTATION, ROUND_ANNOTATION, PodInfo
from berth.extender.live_view import LiveView, WatchSource
from berth.extender.store import ClusterStore
from berth.operator.records import PodRecord

WATCHED = ("nodes", "pods", "leases")

_NO_EXTRAS: tuple[str, str | None, str | None] = ("", None, None)

PodChange = Callable[[str, Mapping[str, str] | None, Mapping[str, str] | None], None]
"""(namespace, labels before or None, labels after or None), called under the store's lock."""


class OperatorStore(ClusterStore):
    """Nodes, bound pods and Leases in the core's view; pending pods by namespace; for each pod,
    the few fields a status adds (:meth:`records`)."""

    def __init__(self, *, leases_tracked: bool = True, on_pod_change: PodChange | None = None) -> None:
        super().__init__(leases_tracked=leases_tracked, decisions_kept=0, kinds=WATCHED)
        self.on_pod_change = on_pod_change
        # uid -> (creationTimestamp of a pending pod or "", the raw decision and round annotations or
        # None); only pods that have one of them, so a cluster of bound pods without decisions costs
        # nothing here.
        self.extras: dict[str, tuple[str, str | None, str | None]] = {}
        self._extras_changed: set[str] = set()

    # -- what a status reads -------------------------------------------------------------

    def records(self, namespace: str, selects: Callable[[PodInfo], bool] | None = None) -> list[PodRecord]:
        """The live pods of ``namespace``, placed (as the API server shows them) and pending; with
        ``selects``, only those it selects (a policy's status reads its own pods of a namespace
        that holds many). Call under :attr:`lock`."""
        view = self.view
        extras = self.extras
        out: list[PodRecord] = []
        for pods in (view.pods_in_namespace(namespace), self._pending_by_ns.get(namespace, {}).values()):
            for pod in pods:
                if selects is not None and not selects(pod):
                    continue
                if pod.node_name and view.is_assumed(pod.uid):
                    continue  # a nominated preemptor: counted on its node for plans, pending for the status
                created, decision, in_round = extras.get(pod.uid, _NO_EXTRAS)
                out.append(PodRecord(pod, terminal=False, created=created, decision=decision, round=in_round))
        return out

    # -- hooks on the extender's store ------------------------------------------------------

    def _parse_pod(self, obj: Mapping[str, Any]) -> Any:
        parsed = super()._parse_pod(obj)
        if parsed is None:
            return None
        pod: PodInfo = parsed[0]
        meta = obj.get("metadata") or {}
        annotations = meta.get("annotations") or {}
        if not isinstance(annotations, Mapping):
            annotations = {}
        decision = annotations.get(DECISION_ANNOTATION)
        in_round = annotations.get(ROUND_ANNOTATION)
        created = "" if pod.node_name else str(meta.get("creationTimestamp") or "")
        extra = (created, decision if isinstance(decision, str) else None,
                 in_round if isinstance(in_round, str) else None)
        if self.extras.get(pod.uid, _NO_EXTRAS) != extra:
            if extra == _NO_EXTRAS:
                self.extras.pop(pod.uid, None)
            else:
                self.extras[pod.uid] = extra
            self._extras_changed.add(pod.uid)
        return parsed

    def _apply_pod_locked(self, pod: PodInfo, nominated: str | None = None, scheduler: str | None = None,
                          berths: bool = False) -> None:
        old = self._known(pod.uid)
        super()._apply_pod_locked(pod, nominated, scheduler, berths)
        changed = pod.uid in self._extras_changed
        self._extras_changed.discard(pod.uid)
        if changed or old != pod:
            self._tell(old, pod)

    def forget_pod(self, uid: str) -> None:
        old = self._known(uid)
        super().forget_pod(uid)
        self._forgotten(uid, old)

    def _forget_listed_pod(self, uid: str) -> None:
        old = self._known(uid)
        super()._forget_listed_pod(uid)
        self._forgotten(uid, old)

    def _forgotten(self, uid: str, old: PodInfo | None) -> None:
        self.extras.pop(uid, None)
        self._extras_changed.discard(uid)
        if old is not None:
            self._tell(old, None)

    def _known(self, uid: str) -> PodInfo | None:
        return self.pending.get(uid) or self.view.pod(uid)

    def _tell(self, old: PodInfo | None, new: PodInfo | None) -> None:
        if self.on_pod_change is None:
            return
        namespace = (new or old).namespace  # type: ignore[union-attr]
        self.on_pod_change(namespace, old.labels if old is not None else None,
                           new.labels if new is not None else None)


def live_view(store: OperatorStore, source: WatchSource, *, watch_timeout_seconds: int = 300,
              settle_heap: bool = True) -> LiveView:
    """The extender's list-and-watch loop, for the kinds the operator reads."""
    return LiveView(store, source, track_leases=store.track_leases, kinds=WATCHED,
                    watch_timeout_seconds=watch_timeout_seconds, settle_heap=settle_heap)
