"""The checks of one pod against one node, one small module each, read alone.

Each check is written plainly over one node at a time, reading the pod through
:class:`PodContext` (what the pre-filter made of it once) and the cluster through its state:
``filter(ctx, node)`` answers a :class:`~berth.core.decision.Refusal` or None (the pod's own
constraints, the node filter, liveness, topology spread), ``holds(ctx, rule, node)`` a placement
rule, ``judge(...)`` the fit and the node's figures as a candidate; the round's quota and Auto's
ceiling read the plan and the workload's count. Each declares in ``DEPENDS`` what its verdict
reads, so that a cache of verdicts (:mod:`berth.core.index`) knows when one is stale.

The framework (:mod:`berth.core.framework`) runs them in the order a user reasons in: does the
node exist, may this pod go there at all (:mod:`.constraints`, :mod:`.node_filter`,
:mod:`.liveness`), does the round leave it room (:mod:`.quota`), does topology spread allow it
(:mod:`.spread`), do the placement rules hold (:mod:`.rules`), does it fit (:mod:`.fit`); then
the strategy ranks the rest (:mod:`.score`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import Flag, auto

from berth.core.compiled import NodeFilter
from berth.core.model import LabelSelector, PodInfo
from berth.core.policy import PlacementPolicy, Strategy
from berth.core.settings import Settings
from berth.core.view import ClusterState


class Depends(Flag):
    """What a check's verdict on one node reads: when none of it changed, the verdict stands."""

    NODE = auto()  # the node object: labels, taints, allocatable, conditions
    NODE_PODS = auto()  # the pods bound or assumed on the node
    DOMAIN_PODS = auto()  # the pods on the other nodes of its domain (a zone, a ``within`` group)
    LEASES = auto()  # the node's Lease, and the clock
    ROUND = auto()  # the round's plan, or the workload's count on the node


@dataclass(slots=True)
class PodContext:
    """What every check reads about the pod being placed, made once per pod (the pre-filter).
    Read only (not frozen: it is made for every evaluation, and a frozen one costs more to make)."""

    state: ClusterState
    pod: PodInfo
    policy: PlacementPolicy | None
    settings: Settings  # the policy's overrides applied
    now: float
    workload: LabelSelector  # the pods that count as the pod's workload
    need: Mapping[str, int]  # what one more pod of this shape takes from a node
    strategy: Strategy | None = None
    quota: Mapping[str, int] | None = None  # a Fill or Each round's plan: pods left per node
    require_fit: bool = True  # False: a node with no room stays a candidate with capacity 0

    @property
    def node_filter(self) -> NodeFilter | None:
        return self.policy.node_filter if self.policy is not None else None


def live_pods(state: ClusterState, node: str, namespace: str) -> Iterator[PodInfo]:
    """The pods of ``namespace`` on ``node`` that count for workloads, spread and rules: every
    one bound or assumed there but those terminating."""
    return (p for p in state.pods_on(node) if p.namespace == namespace and not p.terminating)


def count_matching(state: ClusterState, node: str, namespace: str, selector: LabelSelector) -> int:
    """How many live pods of ``namespace`` on ``node`` match ``selector``."""
    return sum(1 for p in live_pods(state, node, namespace) if selector.matches(p.labels))
