"""The extender's page: Nodes, Policies and a pod's Placement card, server-rendered (Jinja2).

Served under ``/ui`` on the same ports as the explain API, with the same authorization: the
person signs in with a bearer token (their own Kubernetes credentials, as the Kubernetes
Dashboard and Headlamp do), which the page keeps in a short-lived ``HttpOnly``,
``SameSite=Strict`` cookie scoped to ``/ui`` and checks on every page with a TokenReview and the
SubjectAccessReviews the matching API answer needs. With anonymous access on there is no sign-in.
The page has no script and no write action: each view is a GET over the figures the explain API
serves (``node_allocations``, ``Extender.preview``, ``Extender.decision_of``), never a second
computation of placement. This module holds the page's figures and templates; its routes are
:mod:`berth.extender.routes.page`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape

from berth.core import API_GROUP, POLICY_PLURAL, DecisionRecord, PodInfo, format_amount
from berth.extender.authz import Access
from berth.extender.store import ClusterStore
from berth.extender.wire import BadRequest

COOKIE = "berth_token"
COOKIE_SECONDS = 1800
"""How long a sign-in lasts: the cookie is dropped by the browser after this, or when it closes."""

PAGE_SIZE = 50
"""Capacity cards per page of the Nodes view (a 5,000-node cluster is 100 pages)."""

MAIN_DIMENSIONS = ("cpu", "memory", "ephemeral-storage", "pods")

SECURITY_HEADERS = {
    # no script at all, styles inline, forms only to the page itself, never framed
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}

NODE_ACCESS = (Access("list", "nodes"), Access("list", POLICY_PLURAL, API_GROUP))
"""What the Nodes view shows is what ``/api/v1/nodes/allocations`` shows."""


@dataclass(frozen=True)
class Bar:
    """One requested-versus-allocatable bar; ``allocatable`` None is unknown capacity."""

    dimension: str
    requested: int
    allocatable: int | None
    limit: int | None  # the overcommit limit: allocatable x overcommit percent

    @property
    def known(self) -> bool:
        return self.allocatable is not None

    @property
    def scale(self) -> int:
        return max(self.requested, self.allocatable or 0, self.limit or 0, 1)

    def percent_of(self, amount: int) -> float:
        return round(100 * amount / self.scale, 2)

    @property
    def fullness(self) -> float:
        if not self.allocatable:
            return 0.0
        return self.requested / self.allocatable

    @property
    def state(self) -> str:
        if self.allocatable is None:
            return "unknown"
        if self.limit is not None and self.requested > self.limit:
            return "over"
        if self.requested > self.allocatable:
            return "overcommitted"
        return "full" if self.fullness >= 0.9 else "ok"

    def text(self, amount: int | None) -> str:
        return "unknown" if amount is None else format_amount(self.dimension, amount)


def bars(allocation: Mapping[str, Any], overcommit: Mapping[str, int]) -> list[Bar]:
    """The bars of one node's entry of ``/api/v1/nodes/allocations``: the main dimensions first,
    then each extended resource."""
    allocatable: Mapping[str, int] = allocation["allocatable"]
    requested: Mapping[str, int] = allocation["requested"]
    extended = sorted((set(allocatable) | set(requested)) - set(MAIN_DIMENSIONS))
    out = []
    for dim in (*MAIN_DIMENSIONS, *extended):
        total = allocatable.get(dim)
        limit = None if total is None else total * overcommit.get(dim, 100) // 100
        out.append(Bar(dim, int(requested.get(dim, 0)), total, limit))
    return out


def fullness(node_bars: Sequence[Bar]) -> float:
    """The fullest known dimension's requested / allocatable (what "sort by fullness" orders by)."""
    return max((bar.fullness for bar in node_bars if bar.known), default=0.0)


def allocation_fullness(allocation: Mapping[str, Any]) -> float:
    """:func:`fullness` of a node's allocations entry, without building its bars (sorting 5,000 nodes)."""
    requested: Mapping[str, int] = allocation["requested"]
    return max((requested.get(dim, 0) / total for dim, total in allocation["allocatable"].items() if total),
               default=0.0)


def age_text(seconds: float | None) -> str:
    if seconds is None:
        return "no Lease"
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def parse_label_filter(text: str) -> list[tuple[str, str | None]]:
    """``k=v,k2`` -> [(k, v), (k2, None)]: equal to a value, or the key present."""
    out: list[tuple[str, str | None]] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        key, sep, value = part.partition("=")
        key = key.strip()
        if not key or any(c.isspace() for c in key):
            raise BadRequest(f"label filter: {part!r} is not key=value or key")
        out.append((key, value.strip() if sep else None))
    return out


def labels_match(labels: Mapping[str, str], wanted: Sequence[tuple[str, str | None]]) -> bool:
    return all((key in labels) if value is None else labels.get(key) == value for key, value in wanted)


def environment() -> Environment:
    env = Environment(loader=PackageLoader("berth.extender", "templates"),
                      autoescape=select_autoescape(default=True, default_for_string=True))
    env.filters["amount"] = lambda amount, dim: format_amount(dim, int(amount))
    return env


def page_number(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise BadRequest(f"page: {text!r} is not a page number (1, 2, ...)")
    return int(text)


def local_target(target: str) -> str:
    """Only a path of this page is a place to go back to after signing in (no open redirect)."""
    return target if target.startswith("/ui/") and not target.startswith("//") and "\\" not in target else "/ui/nodes"


def node_card(store: ClusterStore, name: str, node_bars: list[Bar], now: float) -> dict[str, Any]:
    view = store.view
    info = view.nodes[name]
    renewed = view.leases.get(name)
    governed = []
    for pod in sorted(view.pods_on(name), key=lambda p: p.key):
        policy = store.policy_for(pod)
        if policy is not None:
            governed.append((pod.key, policy.key))
    return {"name": name, "bars": node_bars, "fullness": fullness(node_bars), "ready": info.ready,
            "lease_age": age_text(now - renewed) if renewed is not None else "no Lease",
            "cordoned": info.unschedulable, "taints": info.taints, "pods": view.pod_count(name),
            "governed": governed, "labels": dict(sorted(info.labels.items()))}


def policy_row(store: ClusterStore, policy: Any) -> dict[str, Any]:
    per_node: dict[str, int] = {}
    for pod in store.view.pods_in_namespace(policy.namespace):
        if pod.node_name and policy.governs(pod.namespace, pod.labels):
            per_node[pod.node_name] = per_node.get(pod.node_name, 0) + 1
    pending = sorted(pod.name for pod in store.pending_in(policy.namespace)
                     if policy.governs(pod.namespace, pod.labels))
    status = store.policy_status.get(policy.key) or {}
    return {"key": policy.key, "namespace": policy.namespace, "name": policy.name,
            "strategy": policy.strategy_name, "conditions": status.get("conditions") or [],
            "plan": status.get("plan"), "plan_error": status.get("planError"),
            "per_node": dict(sorted(per_node.items())), "pending": pending,
            "latest": (status.get("latestDecision") or {}).get("pod")}


def find_pod(store: ClusterStore, namespace: str, name: str) -> PodInfo | None:
    for pod in store.pending_in(namespace):
        if pod.name == name:
            return pod
    for pod in store.view.pods_in_namespace(namespace):
        if pod.name == name:
            return pod
    return None


def placement_card(recorded_data: Mapping[str, Any] | None, fresh_data: Mapping[str, Any] | None,
                   scores: Mapping[str, int]) -> dict[str, Any]:
    """Every node, with what the recorded decision and the fresh evaluation (each a decision
    record's JSON data, of this version or one written before it) said of it."""
    recorded, fresh = DecisionRecord.read(recorded_data), DecisionRecord.read(fresh_data)
    nodes = list(dict.fromkeys(chain(fresh.considered if fresh else (), recorded.considered if recorded else ())))

    def verdict(decision: DecisionRecord | None, name: str) -> dict[str, Any]:
        if decision is None:
            return {"kind": "none", "text": ""}
        refusal = decision.refusal_of(name)
        if refusal is not None:
            return {"kind": "refused", "text": refusal}
        if name not in decision.considered:
            return {"kind": "none", "text": "not considered"}
        if decision.winner is not None and decision.winner.node == name:
            return {"kind": "winner", "text": "winner", "rank": decision.winner.rank or 1}
        if name in decision.ranking:
            rank = decision.ranking.index(name) + 1
            return {"kind": "fits", "text": f"fits, ranked {rank}", "rank": rank}
        return {"kind": "fits", "text": "fits"}

    rows: list[dict[str, Any]] = [{"node": name, "recorded": verdict(recorded, name), "fresh": verdict(fresh, name),
                                   "score": scores.get(name)} for name in nodes]
    rows.sort(key=lambda row: (row["fresh"]["kind"] == "refused", row["fresh"].get("rank", 1 << 30), row["node"]))
    changed = 0
    if recorded is not None and fresh is not None:
        changed = sum(1 for row in rows if row["recorded"]["kind"] != row["fresh"]["kind"])
    return {"recorded": recorded, "fresh": fresh, "rows": rows,
            "recorded_groups": [(g.reason, g.count) for g in recorded.refused] if recorded else [],
            "fresh_groups": [(g.reason, g.count) for g in fresh.refused] if fresh else [], "changed": changed}


__all__ = ["Bar", "bars", "fullness", "parse_label_filter", "placement_card"]
