"""Topology spread with kube-scheduler's PodTopologySpread semantics
(docs/behaviour.md#topology-spread).

Domains are the values of ``topologyKey`` on the nodes that may count: under
``nodeAffinityPolicy: Honor`` (the default) nodes matching the pod's node selector and the
policy's node filter; under ``nodeTaintsPolicy: Honor`` nodes whose taints the pod tolerates.
DoNotSchedule refuses a node when ``count(domain) + self - globalMin > maxSkew`` (globalMin is
0 while fewer than ``minDomains`` domains exist); ScheduleAnyway scores nodes, fewer matching
pods in the domain scoring higher, as kube-scheduler normalises it.

The check over one node is :mod:`berth.core.plugins.spread`; the domain counts kept between
evaluations, and the refusals judged domain by domain, are the index's (:mod:`berth.core.index.spread`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from berth.core.compiled import InclusionPolicy, SpreadConstraint
from berth.core.model import SCHEDULING_EFFECTS, LabelSelector, NodeInfo, PodInfo
from berth.core.plugins.node_filter import in_node_filter
from berth.core.policy import PlacementPolicy

HOSTNAME_KEY = "kubernetes.io/hostname"
MAX_SCORE = 100


@dataclass(frozen=True, slots=True)
class Constraint:
    rule: SpreadConstraint
    selector: LabelSelector
    self_match: int
    domain_counts: Mapping[str, int]
    global_min: int

    def skew_if_placed(self, domain: str) -> int:
        return self.domain_counts.get(domain, 0) + self.self_match - self.global_min


@dataclass(frozen=True, slots=True)
class SpreadContext:
    """The spread constraints of one pod, with domain counts taken once per evaluation."""

    hard: tuple[Constraint, ...]
    soft: tuple[Constraint, ...]
    node_counts: tuple[Mapping[str, int], ...]  # per soft constraint: matching pods per node

    def scores(self, nodes: Iterable[NodeInfo]) -> dict[str, int]:
        """ScheduleAnyway scores 0..100 for the given (passing) nodes; higher is better."""
        if not self.soft:
            return {}
        nodes = list(nodes)
        keys = [c.rule.topology_key for c in self.soft]
        scored = [n for n in nodes if all(k in n.labels for k in keys)]
        weights = []
        for c in self.soft:
            domains = {n.labels[c.rule.topology_key] for n in scored}
            weights.append(math.log(len(domains) + 2))
        raw: dict[str, float] = {}
        for n in scored:
            total = 0.0
            for i, c in enumerate(self.soft):
                key = c.rule.topology_key
                if key == HOSTNAME_KEY:
                    count = self.node_counts[i].get(n.name, 0)
                else:
                    count = c.domain_counts.get(n.labels[key], 0)
                total += count * weights[i] + (c.rule.max_skew - 1)
            raw[n.name] = float(round(total))
        out = {n.name: 0 for n in nodes}
        if not raw:
            return out
        high, low = max(raw.values()), min(raw.values())
        for name, value in raw.items():
            out[name] = MAX_SCORE if high == 0 else int(MAX_SCORE * (high + low - value) / high)
        return out


DomainCounter = Callable[[int, SpreadConstraint, LabelSelector, list[str]], tuple[Mapping[str, int], Mapping[str, int]]]
"""Given a constraint (its position, itself, its selector and the label keys a node needs to count),
the matching pods per node and per domain."""


def spread_context(pod: PodInfo, policy: PlacementPolicy | None, count: DomainCounter) -> SpreadContext | None:
    """The pod's spread constraints with their domain counts (None: the policy has none).

    The plain path and the index count differently (afresh, or kept between evaluations); what the
    counts mean is decided here once: a DoNotSchedule constraint counts only the nodes holding every
    DoNotSchedule key, and globalMin is 0 while fewer than ``minDomains`` domains exist."""
    if policy is None or not policy.spread_constraints:
        return None
    rules = policy.spread_constraints
    hard_keys = [c.topology_key for c in rules if c.hard]
    hard: list[Constraint] = []
    soft: list[Constraint] = []
    node_counts: list[Mapping[str, int]] = []
    for index, rule in enumerate(rules):
        selector = constraint_selector(rule, pod)
        per_node, counts = count(index, rule, selector, hard_keys if rule.hard else [rule.topology_key])
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


def constraint_selector(rule: SpreadConstraint, pod: PodInfo) -> LabelSelector:
    """The constraint's selector (the policy's own when it sets none), with matchLabelKeys from the pod."""
    extra = {k: pod.labels[k] for k in rule.match_label_keys if k in pod.labels}
    return rule.selector.with_labels(extra) if extra else rule.selector


def counts_for_domains(rule: SpreadConstraint, node: NodeInfo, pod: PodInfo,
                       policy: PlacementPolicy, keys: list[str]) -> bool:
    if any(k not in node.labels for k in keys):
        return False
    if rule.node_affinity_policy is InclusionPolicy.HONOR and not (
            pod.node_affinity.matches(node.name, node.labels) and in_node_filter(policy.node_filter, node)):
        return False
    return (rule.node_taints_policy is not InclusionPolicy.HONOR
            or pod.untolerated_taint(node.taints, SCHEDULING_EFFECTS) is None)
