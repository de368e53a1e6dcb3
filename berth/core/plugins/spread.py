"""Topology spread, as kube-scheduler's PodTopologySpread judges it.

The pre-filter counts, per constraint, the matching pods in each domain (the values of
``topologyKey`` on the nodes that may count, :func:`~berth.core.topology.counts_for_domains`).
DoNotSchedule refuses a node when ``count(domain) + self - globalMin > maxSkew`` (globalMin is 0
while fewer than ``minDomains`` domains exist); ScheduleAnyway scores the nodes left, fewer
matching pods in the domain scoring higher (:meth:`~berth.core.topology.SpreadContext.scores`).
See docs/behaviour.md#topology-spread.
"""

from __future__ import annotations

from berth.core.decision import Refusal
from berth.core.model import NodeInfo
from berth.core.plugins import Depends, PodContext, count_matching
from berth.core.topology import Constraint, SpreadContext, constraint_selector, counts_for_domains

DEPENDS = Depends.NODE | Depends.DOMAIN_PODS


def pre_filter(ctx: PodContext) -> SpreadContext | None:
    """The pod's constraints with their domain counts, counted over every node."""
    policy, pod, state = ctx.policy, ctx.pod, ctx.state
    if policy is None or not policy.spread_constraints:
        return None
    rules = policy.spread_constraints
    hard_keys = [c.topology_key for c in rules if c.hard]
    hard: list[Constraint] = []
    soft: list[Constraint] = []
    node_counts = []
    for rule in rules:
        selector = constraint_selector(rule, pod)
        per_node = {name: count_matching(state, name, pod.namespace, selector) for name in state.nodes}
        keys = hard_keys if rule.hard else [rule.topology_key]
        counts: dict[str, int] = {}
        for node in state.nodes.values():
            if counts_for_domains(rule, node, pod, policy, keys):
                domain = node.labels[rule.topology_key]
                counts[domain] = counts.get(domain, 0) + per_node[node.name]
        global_min = min(counts.values()) if counts else 0
        if rule.min_domains is not None and len(counts) < rule.min_domains:
            global_min = 0
        c = Constraint(rule, selector, int(selector.matches(pod.labels)), counts, global_min)
        if rule.hard:
            hard.append(c)
        else:
            soft.append(c)
            node_counts.append(per_node)
    return SpreadContext(tuple(hard), tuple(soft), tuple(node_counts))


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
