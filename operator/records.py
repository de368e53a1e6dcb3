"""What the operator's Kopf indexes keep of Nodes, Pods and Leases: the core's plain data plus
the few fields the status needs. Pure functions of one object each, so they are cheap to call on
every watch event and easy to test."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from berth.core.decision import DECISION_ANNOTATION
from berth.core.kube import ObjectError, is_terminal, lease_renew_seconds, node_from_object, pod_from_object
from berth.core.model import NodeInfo, PodInfo

log = logging.getLogger("berth.operator")

NODE_LEASE_NAMESPACE = "kube-node-lease"


@dataclass(frozen=True, slots=True)
class PodRecord:
    info: PodInfo
    terminal: bool  # phase Succeeded or Failed: holds no resources, is not the policy's anymore
    created: str  # metadata.creationTimestamp (RFC 3339), orders the pending pods
    decision: str | None  # the raw berth.dev/decision annotation, parsed only when needed

    @property
    def live(self) -> bool:
        return not self.terminal and not self.info.terminating

    @property
    def pending(self) -> bool:
        return self.live and not self.info.node_name

    @property
    def placed(self) -> bool:
        return self.live and bool(self.info.node_name)


def node_record(body: Mapping[str, Any]) -> NodeInfo | None:
    try:
        return node_from_object(body)
    except ObjectError as exc:
        log.warning("ignoring a node the core cannot read: %s", exc)
        return None


def pod_record(body: Mapping[str, Any]) -> PodRecord | None:
    try:
        info = pod_from_object(body)
    except ObjectError as exc:
        log.warning("ignoring a pod the core cannot read: %s", exc)
        return None
    meta = body.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    decision = annotations.get(DECISION_ANNOTATION)
    return PodRecord(info=info, terminal=is_terminal(body), created=str(meta.get("creationTimestamp") or ""),
                     decision=decision if isinstance(decision, str) else None)


def lease_record(body: Mapping[str, Any]) -> tuple[str, float | None] | None:
    """A node's Lease in kube-node-lease: (node name, renew time); other Leases: None."""
    if (body.get("metadata") or {}).get("namespace") != NODE_LEASE_NAMESPACE:
        return None
    try:
        return lease_renew_seconds(body)
    except ObjectError as exc:
        log.warning("ignoring a node lease the core cannot read: %s", exc)
        return None
