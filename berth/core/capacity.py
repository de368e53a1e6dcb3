"""Seed 000's DUMMY (CalculateCapacity) and seed 001's allocations view: how much room there is,
rather than where pods would go."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from berth.core.candidates import collect_candidates
from berth.core.fit import SHARE_DIMENSIONS
from berth.core.model import PodInfo
from berth.core.policy import PlacementPolicy
from berth.core.quantity import PODS
from berth.core.settings import Settings
from berth.core.view import ClusterState


@dataclass
class CapacityTable:
    """Seed 000's DUMMY / CalculateCapacity: each node's raw capacity for a shape, and the total."""

    nodes: dict[str, int] = field(default_factory=dict)
    total: int = 0
    unverified: dict[str, list[str]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"nodes": dict(self.nodes), "total": self.total}
        if self.unverified:
            out["unverified"] = {k: list(v) for k, v in self.unverified.items()}
        return out


def capacity_table(state: ClusterState, pod: PodInfo, policy: PlacementPolicy | None, settings: Settings,
                   now: float) -> CapacityTable:
    """Each node's capacity for ``pod``'s shape, among the nodes the policy's filter admits."""
    table = CapacityTable()
    for c in collect_candidates(state, pod, policy, settings.for_policy(policy), now,
                                  require_fit=False).candidates:
        table.nodes[c.name] = c.capacity
        table.total += c.capacity
        if c.unverified:
            table.unverified[c.name] = list(c.unverified)
    return table


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
