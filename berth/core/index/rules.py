"""Placement rules judged as node sets (docs/behaviour.md#placement-rules): each rule becomes,
once per evaluation, the set of nodes where it does not hold, and the rules that read only node
labels (:func:`berth.core.plugins.rules.depends`) are kept until a node changes. The check over
one node is :mod:`berth.core.plugins.rules`.

Node rules read the node's labels. Pod rules read the labels of the live pods of the same
namespace (the tenant) on the node, or with ``within`` on every node sharing the candidate's
value for that node label key, whatever their status. Assumed pods count; terminating pods
and the pod being placed do not. A node without the ``within`` key fails both operators.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from berth.core.index.cluster import StateIndex, index_of
from berth.core.model import PodInfo
from berth.core.placement_rules import Group, Operator, Resource, RuleNode
from berth.core.plugins import Depends
from berth.core.plugins import rules as rules_check
from berth.core.view import ClusterState


@dataclass
class RuleContext:
    """One evaluation's view of the rules: each rule becomes, once, the set of nodes where it
    does not hold (usually the smaller side), so judging nodes is a set operation per rule."""

    state: ClusterState
    kept: StateIndex
    pod: PodInfo
    node_rules: dict[Any, Any] = field(default_factory=dict)
    """Sets of rules that read the node objects alone, shared by evaluations until a node changes."""
    _failing: dict[int, frozenset[str]] = field(default_factory=dict)

    def all_nodes(self) -> frozenset[str]:
        hit: frozenset[str] | None = self.node_rules.get("all")
        if hit is None:
            hit = self.node_rules["all"] = frozenset(self.state.nodes)
        return hit

    def failing(self, rule: RuleNode) -> frozenset[str]:
        """The nodes where ``rule`` does not hold."""
        hit = self._failing.get(id(rule))
        if hit is None:
            hit = self.node_rules.get(id(rule))
            if hit is None:
                hit = self._compute(rule)
                if rules_check.depends(rule) == Depends.NODE:
                    self.node_rules[id(rule)] = hit
            self._failing[id(rule)] = hit
        return hit

    def _compute(self, rule: RuleNode) -> frozenset[str]:
        if isinstance(rule, Group):
            parts = [self.failing(m) for m in rule.members]
            # anyOf fails where every member fails; allOf where any member fails
            return frozenset.intersection(*parts) if rule.any else frozenset.union(*parts)
        everywhere = self.all_nodes()
        if rule.resource is Resource.NODE:
            has = frozenset.intersection(*(self.kept.nodes_labelled(k, v) for k, v in rule.labels.items())) \
                if rule.labels else everywhere
            return everywhere - has if rule.operator is Operator.HAS else has
        with_pod = self.kept.nodes_with_pod(self.pod.namespace, rule.labels, self.pod.uid) & everywhere
        if rule.within is None:
            return everywhere - with_pod if rule.operator is Operator.HAS else with_pod
        # within: the candidate's group is every node sharing its value for the key; a node
        # without the key fails both operators.
        key = rule.within
        nodes = self.state.nodes
        values = {nodes[n].labels[key] for n in with_pod if key in nodes[n].labels}
        has = frozenset().union(*(self.kept.nodes_labelled(key, v) for v in values))
        if rule.operator is Operator.HAS:
            return everywhere - has
        return has | self._unkeyed(key)

    def _unkeyed(self, key: str) -> frozenset[str]:
        hit: frozenset[str] | None = self.node_rules.get(("unkeyed", key))
        if hit is None:
            hit = self.node_rules[("unkeyed", key)] = self.all_nodes() - self.kept.nodes_with_label_key(key)
        return hit


def rule_context(state: ClusterState, pod: PodInfo, rules_owner: object) -> RuleContext:
    """A context for ``pod`` whose node-label rule sets are kept, per owner of the rule objects
    (the policy), until a node changes."""
    kept = index_of(state)
    if state.nodes is not state.base.nodes:
        return RuleContext(state, kept, pod)  # a request's own Node objects: nothing of the view's applies
    memo = kept.view.memo(("node-rules", rules_owner))
    changes = kept.view.changes
    if changes.changed(memo.get("token"), Depends.NODE):
        memo.clear()
        memo["token"] = changes.token
    return RuleContext(state, kept, pod, memo)
