"""The policy's placement rules: every top-level rule must hold on the node.

A Node rule reads the node's labels. A Pod rule reads the live pods of the pod's namespace on
the node (the pod being placed not counted), or with ``within`` on every node sharing the node's
value for that label key; a node without the key breaks both operators. ``anyOf`` holds where
one member holds, ``allOf`` where every member does. What the framework does with a node that
breaks a rule depends on the other nodes (Preferred matching, room elsewhere): :func:`holds`
says only whether a rule holds there (docs/behaviour.md#placement-rules, #affinity-matching).
"""

from __future__ import annotations

from collections.abc import Mapping

from berth.core.decision import Refusal
from berth.core.model import NodeInfo
from berth.core.placement_rules import Group, Operator, Resource, RuleNode, reads_pods
from berth.core.plugins import Depends, PodContext, live_pods

DEPENDS = Depends.NODE | Depends.NODE_PODS | Depends.DOMAIN_PODS


_NODE_RULE = Depends.NODE
_POD_RULE = Depends.NODE | Depends.NODE_PODS
_POD_RULE_WITHIN = _POD_RULE | Depends.DOMAIN_PODS


def depends(rule: RuleNode) -> Depends:
    """What ``rule``'s verdict on a node reads: a Node rule the node alone; a Pod rule the pods on
    the node too, and with ``within`` the pods on the other nodes of its group."""
    if isinstance(rule, Group):
        found = _NODE_RULE
        for member in rule.members:
            found |= depends(member)
        return found
    if rule.resource is Resource.NODE:
        return _NODE_RULE
    return _POD_RULE if rule.within is None else _POD_RULE_WITHIN


def refusal(index: int, rule: RuleNode) -> Refusal:
    """Why a node breaking top-level rule ``index`` is refused (resolvable when the rule reads pods)."""
    return Refusal(f"placementRules[{index}] not met: {rule.describe()}", reads_pods((rule,)))


def holds(ctx: PodContext, rule: RuleNode, node: NodeInfo) -> bool:
    """Whether ``rule`` holds on ``node`` for the pod."""
    if isinstance(rule, Group):
        members = (holds(ctx, m, node) for m in rule.members)
        return any(members) if rule.any else all(members)
    if rule.resource is Resource.NODE:
        has = _carries(node.labels, rule.labels)
    elif rule.within is None:
        has = _holds_pod(ctx, node.name, rule.labels)
    else:
        value = node.labels.get(rule.within)
        if value is None:
            return False  # outside every group of the key: neither Has nor HasNot holds
        has = any(_holds_pod(ctx, other.name, rule.labels) for other in ctx.state.nodes.values()
                  if other.labels.get(rule.within) == value)
    return has if rule.operator is Operator.HAS else not has


def _carries(labels: Mapping[str, str], wanted: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in wanted.items())


def _holds_pod(ctx: PodContext, node: str, labels: Mapping[str, str]) -> bool:
    """Whether a live pod of the namespace on ``node``, other than the one placed, carries ``labels``."""
    uid = ctx.pod.uid
    return any(p.uid != uid and _carries(p.labels, labels) for p in live_pods(ctx.state, node, ctx.pod.namespace))
