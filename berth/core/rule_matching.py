"""Does a node meet a policy's placement rules (seed 002)?

Node rules read the node's labels. Pod rules read the labels of the live pods of the same
namespace (the tenant) on the node, or with ``within`` on every node sharing the candidate's
value for that node label key, whatever their status. Assumed pods count; terminating pods
and the pod being placed do not. A node without the ``within`` key fails both operators.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from berth.core.model import NodeInfo, PodInfo
from berth.core.placement_rules import Group, Operator, Resource, Rule, RuleNode
from berth.core.view import ClusterState


@dataclass
class RuleContext:
    state: ClusterState
    pod: PodInfo
    # Keyed by the rule object: one evaluation asks the same rule of thousands of nodes.
    _with_pod: dict[int, frozenset[str]] = field(default_factory=dict)
    _group_has: dict[tuple[int, str], bool] = field(default_factory=dict)

    def nodes_with_pod(self, rule: Rule) -> frozenset[str]:
        hit = self._with_pod.get(id(rule))
        if hit is None:
            hit = self.state.nodes_with_pod(self.pod.namespace, rule.labels, self.pod.uid)
            self._with_pod[id(rule)] = hit
        return hit

    def group_has_pod(self, rule: Rule, value: str) -> bool:
        key = (id(rule), value)
        hit = self._group_has.get(key)
        if hit is None:
            assert rule.within is not None
            hit = not self.nodes_with_pod(rule).isdisjoint(self.state.nodes_labelled(rule.within, value))
            self._group_has[key] = hit
        return hit


def holds(rule: RuleNode, node: NodeInfo, ctx: RuleContext) -> bool:
    if isinstance(rule, Group):
        if rule.any:
            return any(holds(m, node, ctx) for m in rule.members)
        return all(holds(m, node, ctx) for m in rule.members)
    return _rule_holds(rule, node, ctx)


def _rule_holds(rule: Rule, node: NodeInfo, ctx: RuleContext) -> bool:
    if rule.resource is Resource.NODE:
        has = all(node.labels.get(k) == v for k, v in rule.labels.items())
    else:
        if rule.within:
            value = node.labels.get(rule.within)
            if value is None:
                return False
            has = ctx.group_has_pod(rule, value)
        else:
            has = node.name in ctx.nodes_with_pod(rule)
    return has if rule.operator is Operator.HAS else not has


def first_broken(rules: tuple[RuleNode, ...], node: NodeInfo, ctx: RuleContext) -> tuple[str, bool] | None:
    """The first top-level rule ``node`` breaks, described for a refusal message, and whether
    evicting pods could mend it (a rule that reads pods can be; a node-label rule cannot)."""
    for i, rule in enumerate(rules):
        if not holds(rule, node, ctx):
            return f"placementRules[{i}] not met: {rule.describe()}", reads_pods((rule,))
    return None


def reads_pods(rules: tuple[RuleNode, ...]) -> bool:
    """Whether any rule reads pods (so placing a pod can change other nodes' verdicts)."""
    def walk(rule: RuleNode) -> bool:
        if isinstance(rule, Group):
            return any(walk(m) for m in rule.members)
        return rule.resource is Resource.POD
    return any(walk(r) for r in rules)
