"""Topology spread's domain counts, kept between evaluations: which nodes count for a
constraint's domains (until a node object changes) and the matching pods per domain (the pods of
a domain are those on its nodes: caught up with the nodes whose pods changed since); and the
nodes DoNotSchedule refuses, as whole domains. The plain path counts them afresh and judges node
by node (:mod:`berth.core.plugins.spread`)."""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping
from collections.abc import Set as AbstractSet

from berth.core import topology
from berth.core.compiled import SpreadConstraint
from berth.core.index.cluster import index_of, selector_key
from berth.core.model import LabelSelector, PodInfo
from berth.core.plugins import Depends
from berth.core.policy import PlacementPolicy
from berth.core.topology import SpreadContext, counts_for_domains
from berth.core.view import ClusterState


def spread_context(state: ClusterState, pod: PodInfo, policy: PlacementPolicy | None) -> SpreadContext | None:
    """The pod's spread constraints with their domain counts (None: the policy has none)."""
    if policy is None:
        return None

    def count(index: int, rule: SpreadConstraint, selector: LabelSelector,
              keys: list[str]) -> tuple[Mapping[str, int], Mapping[str, int]]:
        domain_of = _domains(state, index, pod, policy, keys)
        key = (policy, index, pod.constraint_signature())
        return (index_of(state).matching_counts(pod.namespace, selector),
                _domain_counts(state, pod.namespace, selector, domain_of, key))

    return topology.spread_context(pod, policy, count)


def spread_refusals(spread: SpreadContext, state: ClusterState
                    ) -> Iterator[tuple[AbstractSet[str], tuple[str, bool]]]:
    """The nodes DoNotSchedule constraints refuse, in groups with their (reason, resolvable),
    the first constraint first (a node takes the first group it is in). A domain is refused only
    when it holds more matching pods than ``maxSkew + globalMin - self``, so only such domains
    are visited."""
    kept = index_of(state)
    for c in spread.hard:
        key = c.rule.topology_key
        yield kept.nodes_without_label_key(key), (f"topology spread: node has no label {key}", False)
        limit = c.rule.max_skew + c.global_min - c.self_match
        for domain, count in c.domain_counts.items():
            if count > limit:
                skew = c.skew_if_placed(domain)
                yield kept.nodes_labelled(key, domain), (
                    f"topology spread: placing here makes skew {skew} in {key}={domain} "
                    f"(maxSkew {c.rule.max_skew})", True)


def _domain_counts(state: ClusterState, namespace: str, selector: LabelSelector, domain_of: Mapping[str, str],
                   key: Hashable) -> dict[str, int]:
    """Matching pods per domain. The sums are kept on the view and caught up with the nodes whose
    pods changed since, an overlay's simulated pods added on top: not recounted every time."""
    kept = index_of(state.base).view
    per_node = kept.matching_counts(namespace, selector)
    changes = kept.changes
    memo = kept.memo(("domain-counts", key, namespace, selector_key(selector)))
    changed = changes.since(memo["token"], Depends.NODE_PODS) if memo.get("domains") is domain_of else None
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
    memo["token"] = changes.token
    out = dict(counts)
    local = state.local_nodes()
    if local:
        here = index_of(state).matching_counts(namespace, selector)
        for node in local:
            delta = here.get(node, 0) - per_node.get(node, 0)
            domain = domain_of.get(node)
            if delta and domain is not None:
                out[domain] += delta
    return out


def _domains(state: ClusterState, index: int, pod: PodInfo, policy: PlacementPolicy,
             keys: list[str]) -> Mapping[str, str]:
    """node -> domain for the nodes whose pods count, memoised until a node object changes."""
    rule = policy.spread_constraints[index]
    shared = state.nodes is state.base.nodes  # not a request's own Node objects
    kept = index_of(state).view
    changes = kept.changes
    memo = kept.memo(("domains", policy, index, pod.constraint_signature())) if shared else {}
    hit = memo.get("map")
    if hit is not None and not changes.changed(hit[0], Depends.NODE):
        return hit[1]  # type: ignore[no-any-return]
    domain_of = {node.name: node.labels[rule.topology_key] for node in state.nodes.values()
                 if counts_for_domains(rule, node, pod, policy, keys)}
    memo["map"] = (changes.token, domain_of)
    return domain_of
