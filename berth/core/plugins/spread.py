"""Topology spread, as kube-scheduler's PodTopologySpread judges it.

The pre-filter counts, per constraint, the matching pods in each domain (the values of
``topologyKey`` on the nodes that may count, :func:`~berth.core.topology.counts_for_domains`).
DoNotSchedule refuses a node when ``count(domain) + self - globalMin > maxSkew`` (globalMin is 0
while fewer than ``minDomains`` domains exist); ScheduleAnyway scores the nodes left, fewer
matching pods in the domain scoring higher (:meth:`~berth.core.topology.SpreadContext.scores`).
See docs/behaviour.md#topology-spread.
"""

from __future__ import annotations

from collections.abc import Mapping

from berth.core.compiled import SpreadConstraint
from berth.core.decision import Refusal
from berth.core.model import LabelSelector, NodeInfo
from berth.core.plugins import Depends, PodContext, count_matching
from berth.core.topology import SpreadContext, counts_for_domains, spread_context

DEPENDS = Depends.NODE | Depends.DOMAIN_PODS


def pre_filter(ctx: PodContext) -> SpreadContext | None:
    """The pod's constraints with their domain counts, counted afresh over every node."""
    policy, pod, state = ctx.policy, ctx.pod, ctx.state
    if policy is None:
        return None

    def count(_: int, rule: SpreadConstraint, selector: LabelSelector,
              keys: list[str]) -> tuple[Mapping[str, int], Mapping[str, int]]:
        per_node = {name: count_matching(state, name, pod.namespace, selector) for name in state.nodes}
        counts: dict[str, int] = {}
        for node in state.nodes.values():
            if counts_for_domains(rule, node, pod, policy, keys):
                domain = node.labels[rule.topology_key]
                counts[domain] = counts.get(domain, 0) + per_node[node.name]
        return per_node, counts

    return spread_context(pod, policy, count)


def filter(spread: SpreadContext, node: NodeInfo) -> Refusal | None:
    """The first DoNotSchedule constraint the node breaks: it lacks the key, or placing the pod
    in its domain makes the skew exceed maxSkew."""
    for c in spread.hard:
        key = c.rule.topology_key
        domain = node.labels.get(key)
        if domain is None:
            return Refusal(f"topology spread: node has no label {key}", False)
        count = c.domain_counts.get(domain)
        if count is not None and count > c.rule.max_skew + c.global_min - c.self_match:
            return Refusal(f"topology spread: placing here makes skew {c.skew_if_placed(domain)} in "
                           f"{key}={domain} (maxSkew {c.rule.max_skew})", True)
    return None
