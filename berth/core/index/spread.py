"""Topology spread's domain counts, kept between evaluations: which nodes count for a
constraint's domains (until a node changes) and the matching pods per domain (caught up with the
nodes the view's log names since). The plain path counts them afresh
(:func:`berth.core.plugins.spread.pre_filter`)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping

from berth.core import topology
from berth.core.compiled import SpreadConstraint
from berth.core.model import LabelSelector, PodInfo
from berth.core.policy import PlacementPolicy
from berth.core.topology import SpreadContext, counts_for_domains
from berth.core.view import ClusterState, selector_key


def spread_context(state: ClusterState, pod: PodInfo, policy: PlacementPolicy | None) -> SpreadContext | None:
    """The pod's spread constraints with their domain counts (None: the policy has none)."""
    if policy is None:
        return None

    def count(index: int, rule: SpreadConstraint, selector: LabelSelector,
              keys: list[str]) -> tuple[Mapping[str, int], Mapping[str, int]]:
        domain_of = _domains(state, index, pod, policy, keys)
        key = (policy, index, pod.constraint_signature())
        return (state.matching_counts(pod.namespace, selector),
                _domain_counts(state, pod.namespace, selector, domain_of, key))

    return topology.spread_context(pod, policy, count)


def _domain_counts(state: ClusterState, namespace: str, selector: LabelSelector, domain_of: Mapping[str, str],
                   key: Hashable) -> dict[str, int]:
    """Matching pods per domain. The sums are kept on the view and caught up with the nodes changed
    since (the view's node log), an overlay's simulated pods added on top: not recounted every time."""
    base = state.base
    per_node = base.matching_counts(namespace, selector)
    log = base.node_log
    memo = base.memo(("domain-counts", key, namespace, selector_key(selector)))
    changed = log.since(memo["token"]) if memo.get("domains") is domain_of else None
    if changed is None:
        counts = dict.fromkeys(domain_of.values(), 0)
        for node, n in per_node.items():
            domain = domain_of.get(node)
            if domain is not None:
                counts[domain] += n
        memo.update(domains=domain_of, counts=counts, seen=dict(per_node))
    else:
        counts, seen = memo["counts"], memo["seen"]
        for node in changed:
            delta = per_node.get(node, 0) - seen.get(node, 0)
            if delta:
                seen[node] = per_node.get(node, 0)
                domain = domain_of.get(node)
                if domain is not None:
                    counts[domain] += delta
    memo["token"] = log.token
    out = dict(counts)
    local = state.local_nodes()
    if local:
        here = state.matching_counts(namespace, selector)
        for node in local:
            delta = here.get(node, 0) - per_node.get(node, 0)
            domain = domain_of.get(node)
            if delta and domain is not None:
                out[domain] += delta
    return out


def _domains(state: ClusterState, index: int, pod: PodInfo, policy: PlacementPolicy,
             keys: list[str]) -> Mapping[str, str]:
    """node -> domain for the nodes whose pods count, memoised until a node changes."""
    rule = policy.spread_constraints[index]
    shared = state.nodes is state.base.nodes  # not a request's own Node objects
    memo = state.memo(("domains", policy, index, pod.constraint_signature())) if shared else {}
    hit = memo.get("map")
    if hit is not None and hit[0] == state.nodes_version:
        return hit[1]  # type: ignore[no-any-return]
    domain_of = {node.name: node.labels[rule.topology_key] for node in state.nodes.values()
                 if counts_for_domains(rule, node, pod, policy, keys)}
    memo["map"] = (state.nodes_version, domain_of)
    return domain_of
