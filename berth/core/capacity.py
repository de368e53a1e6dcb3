"""The capacity query and the allocations view: how much room there is, rather than where pods
would go; and beside it how many pods one round could place (docs/behaviour.md#capacity-only)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from berth.core.evaluate import effective_strategy
from berth.core.fit import SHARE_DIMENSIONS
from berth.core.framework import collect_candidates
from berth.core.model import PodInfo
from berth.core.plan import plan_round
from berth.core.policy import ROUND_STRATEGIES, PlacementPolicy
from berth.core.quantity import PODS
from berth.core.settings import Settings
from berth.core.view import ClusterState, ClusterView

PLACEABLE_LIMIT = 1000
"""Pods a capacity query plans at most to find ``placeable`` (each is a placement of the round)."""


@dataclass(frozen=True)
class Placeable:
    """How many pods of a shape one round could place under the whole policy, and why not one more."""

    pods: int
    code: str | None  # the error code of the pod that found no node; None when nothing stopped the plan
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"pods": self.pods, "code": self.code, "reason": self.reason}


@dataclass
class CapacityTable:
    """The capacity query's answer: each node's raw capacity for a shape, and the total."""

    nodes: dict[str, int] = field(default_factory=dict)
    total: int = 0
    unverified: dict[str, list[str]] = field(default_factory=dict)
    placeable: Placeable | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"nodes": dict(self.nodes), "total": self.total}
        if self.unverified:
            out["unverified"] = {k: list(v) for k, v in self.unverified.items()}
        if self.placeable is not None:
            out["placeable"] = self.placeable.to_dict()
        return out


def capacity_table(state: ClusterState, pod: PodInfo, policy: PlacementPolicy | None, settings: Settings,
                   now: float) -> CapacityTable:
    """Each node's raw capacity for ``pod``'s shape (zeros listed), among the nodes the pod may go to
    at all: its own constraints, the policy's node filter (with liveness) and capacity settings
    apply; topology spread and placement rules do not (they say where, not how much room)."""
    table = CapacityTable()
    for c in collect_candidates(state, pod, policy, settings.for_policy(policy), now,
                                  require_fit=False, room_only=True).candidates:
        table.nodes[c.name] = c.capacity
        table.total += c.capacity
        if c.unverified:
            table.unverified[c.name] = list(c.unverified)
    return table


def capacity_report(view: ClusterView, pod: PodInfo, policy: PlacementPolicy | None, settings: Settings,
                    now: float, limit: int = PLACEABLE_LIMIT) -> CapacityTable:
    """The capacity table and beside it :func:`placeable` (what ``berth capacity`` and the capacity
    API answer)."""
    table = capacity_table(view, pod, policy, settings, now)
    table.placeable = placeable(view, pod, policy, settings, now, table.total, limit)
    return table


def placeable(view: ClusterView, pod: PodInfo, policy: PlacementPolicy | None, settings: Settings, now: float,
              room: int, limit: int = PLACEABLE_LIMIT) -> Placeable:
    """How many pods of ``pod``'s shape one round could place under the whole policy (spread, rules,
    the strategy and its limits), found by planning the round: Fill and Each plan their own round;
    the others place pod after pod until one finds no node, at most ``room`` + 1 (``room``: the
    capacity table's total, which no policy can exceed) and at most ``limit`` pods."""
    strategy = effective_strategy(policy, settings.for_policy(policy))
    if strategy in ROUND_STRATEGIES and policy is not None:
        fixed = plan_round(view, pod, policy, settings, now, None)
        if fixed.error is not None:
            return Placeable(0, fixed.error.code.value, fixed.error.message)
        return Placeable(sum(fixed.plan.values()), None,
                         f"{strategy.value}: the round's own plan, {len(fixed.plan)} node(s)")
    count = min(room + 1, limit)
    result = plan_round(view, pod, policy, settings, now, count)
    if result.stop is None:
        return Placeable(count, None, f"planning stops at {count} pods; more may fit")
    return Placeable(sum(result.placed.values()), result.stop.code.value, result.stop.message)


def node_allocations(state: ClusterState, settings: Settings) -> dict[str, dict[str, Any]]:
    """Every node's allocatable, requested, free and unknown dimensions, in base units."""
    out: dict[str, dict[str, Any]] = {}
    for name in sorted(state.nodes):
        node = state.nodes[name]
        requested = state.requested(name)
        dims = sorted(set(node.allocatable) | set(requested))
        out[name] = {
            "allocatable": {d: node.allocatable[d] for d in dims if d in node.allocatable},
            "requested": {d: requested.get(d, 0) for d in dims},
            "free": {d: node.allocatable[d] * settings.overcommit_percent(d) // 100 - requested.get(d, 0)
                     for d in dims if d in node.allocatable},
            "unknown": [d for d in (*SHARE_DIMENSIONS, PODS) if d not in node.allocatable],
        }
    return out
