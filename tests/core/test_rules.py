"""Placement rules (docs/behaviour.md#placement-rules): every validation limit (with the offending path in the message),
the matching semantics of Has / HasNot on Node and Pod, ``within`` groups, anyOf / allOf, which
pods count, and Enforced vs Preferred matching."""

from __future__ import annotations

from typing import Any

import pytest

from berth.core.errors import ErrorCode, InvalidPolicy
from berth.core.placement_rules import Group, Operator, Resource, Rule, parse_rules
from berth.core.policy import policy_from_manifest
from tests.builders import PodBuilder, make_node, make_pod, make_policy

from .builders import Scenario, cluster, evaluate, plan, run


def rule(resource: str = "Pod", operator: str = "HasNot", labels: dict[str, str] | None = None,
         **extra: Any) -> dict[str, Any]:
    return {"resource": resource, "operator": operator, "labels": labels or {"role": "db"}, **extra}


def nested(depth: int) -> dict[str, Any]:
    """``depth`` groups nested inside each other around one rule."""
    node_: dict[str, Any] = rule()
    for _ in range(depth):
        node_ = {"allOf": [node_]}
    return node_


# name, placementRules, the path the message must name, a phrase of the problem
INVALID = [
    ("unknown_field_weight_rejected", [rule(weight=10)], "spec.placementRules[0].weight", "unknown field"),
    ("rule_without_resource_rejected", [{"operator": "Has", "labels": {"a": "b"}}],
     "spec.placementRules[0].resource", "required"),
    ("rule_without_operator_rejected", [{"resource": "Node", "labels": {"a": "b"}}],
     "spec.placementRules[0].operator", "required"),
    ("rule_without_labels_rejected", [{"resource": "Node", "operator": "Has"}],
     "spec.placementRules[0].labels", "required"),
    ("node_rule_with_within_rejected", [rule("Node", "Has", within="rack")],
     "spec.placementRules[0].within", "only allowed on Pod rules"),
    ("empty_within_rejected", [rule(within="")], "spec.placementRules[0].within", "non-empty"),
    ("blank_within_rejected", [rule(within="   ")], "spec.placementRules[0].within", "non-empty"),
    ("within_longer_than_128_rejected", [rule(within="r" * 129)], "spec.placementRules[0].within", "at most 128"),
    ("unknown_resource_rejected", [rule("metal_server")], "spec.placementRules[0].resource", "unknown value"),
    ("unknown_operator_rejected", [rule(operator="has")], "spec.placementRules[0].operator", "unknown value"),
    ("empty_labels_rejected", [{"resource": "Pod", "operator": "Has", "labels": {}}],
     "spec.placementRules[0].labels", "1 to 32"),
    ("more_than_32_pairs_rejected", [rule(labels={f"k{i}": "v" for i in range(33)})],
     "spec.placementRules[0].labels", "found 33"),
    ("key_longer_than_128_rejected", [rule(labels={"k" * 129: "v"})],
     "spec.placementRules[0].labels." + "k" * 129, "1 to 128"),
    ("key_empty_after_trimming_rejected", [rule(labels={"  ": "v"})], "spec.placementRules[0].labels", "1 to 128"),
    ("value_longer_than_1000_rejected", [rule(labels={"k": "v" * 1001})],
     "spec.placementRules[0].labels.k", "at most 1000"),
    ("duplicate_key_after_trimming_rejected", [rule(labels={"role": "a", " role ": "b"})],
     "spec.placementRules[0].labels.role", "duplicate"),
    ("non_string_label_value_rejected", [rule(labels={"k": 1})],  # type: ignore[dict-item]
     "spec.placementRules[0].labels.k", "strings"),
    ("empty_any_of_group_rejected", [{"anyOf": []}], "spec.placementRules[0].anyOf", "non-empty"),
    ("empty_all_of_group_rejected", [{"allOf": []}], "spec.placementRules[0].allOf", "non-empty"),
    ("group_with_more_than_one_key_rejected", [{"anyOf": [rule()], "allOf": [rule()]}],
     "spec.placementRules[0]", "exactly one key"),
    ("group_with_a_rule_field_beside_it_rejected", [{"anyOf": [rule()], "resource": "Pod"}],
     "spec.placementRules[0]", "exactly one key"),
    ("nested_group_error_names_its_path", [{"anyOf": [rule(), {"allOf": [rule(weight=1)]}]}],
     "spec.placementRules[0].anyOf[1].allOf[0].weight", "unknown field"),
    ("more_than_16_rules_in_total_rejected", [rule() for _ in range(10)] + [{"anyOf": [rule() for _ in range(7)]}],
     "spec.placementRules", "17 rules"),
    ("groups_nesting_more_than_5_deep_rejected", [nested(6)],
     "spec.placementRules[0]" + ".allOf[0]" * 5 + ".allOf", "more than 5 deep"),
    ("rule_that_is_not_an_object_rejected", ["has"], "spec.placementRules[0]", "must be a rule"),
    ("rules_that_are_not_a_list_rejected", {"resource": "Pod"}, "spec.placementRules", "list"),
]


@pytest.mark.parametrize(("name", "rules", "path", "problem"), INVALID, ids=[c[0] for c in INVALID])
def test_invalid_rules_are_refused_naming_the_path(name: str, rules: object, path: str, problem: str) -> None:
    with pytest.raises(InvalidPolicy) as caught:
        policy_from_manifest(make_policy().spec(placementRules=rules).obj())
    err = caught.value
    assert err.path == path if name != "key_empty_after_trimming_rejected" else err.path.startswith(path), err
    assert str(err).startswith(err.path + ": ")
    assert problem in err.problem, err


VALID = [
    ("absent_rules_mean_no_rules", None, 0),
    ("empty_list_means_no_rules", [], 0),
    ("exactly_16_rules_accepted", [rule() for _ in range(8)] + [{"allOf": [rule() for _ in range(8)]}], 9),
    ("groups_nesting_5_deep_accepted", [nested(5)], 1),
    ("exactly_32_pairs_accepted", [rule(labels={f"k{i}": "v" for i in range(32)})], 1),
    ("key_of_128_and_value_of_1000_accepted", [rule(labels={"k" * 128: "v" * 1000})], 1),
    ("within_of_128_accepted", [rule(within="r" * 128)], 1),
    ("empty_value_accepted", [rule(labels={"k": ""})], 1),
]


@pytest.mark.parametrize(("name", "rules", "top_level"), VALID, ids=[c[0] for c in VALID])
def test_valid_rules_are_accepted(name: str, rules: object, top_level: int) -> None:
    spec: dict[str, Any] = {} if rules is None else {"placementRules": rules}
    assert len(policy_from_manifest(make_policy().spec(**spec).obj()).rules) == top_level


def test_keys_and_values_are_trimmed() -> None:
    (parsed,) = parse_rules([{"resource": "Pod", "operator": "Has", "labels": {" role ": "  db  "},
                              "within": " rack "}])
    assert parsed == Rule(Resource.POD, Operator.HAS, {"role": "db"}, "rack")


def test_grammar_parses_groups() -> None:
    (parsed,) = parse_rules([{"anyOf": [rule("Node", "Has", {"type": "storage-optimised", "rack": "a"}),
                                        rule("Node", "Has", {"type": "memory-optimised"})]}])
    assert isinstance(parsed, Group) and parsed.any and len(parsed.members) == 2


# --- matching -------------------------------------------------------------------------------------------

def racks() -> tuple[Any, ...]:
    """host-1, host-3 in rack a; host-2, host-4 in rack b; host-5 has no rack."""
    return (make_node("host-1").labels({"rack": "a"}).info(), make_node("host-2").labels({"rack": "b"}).info(),
            make_node("host-3").labels({"rack": "a"}).info(),
            make_node("host-4").labels({"rack": "b"}).info(),
            make_node("host-5").info())


def replica(name: str, on: str, namespace: str = "shop") -> PodBuilder:
    return make_pod(name).on(on).labels({"role": "db-replica"}).namespace(namespace)


REPLICA_RULE = {"resource": "Pod", "operator": "HasNot", "labels": {"role": "db-replica"}, "within": "rack"}
ANY_HOST = frozenset({"host-1", "host-2", "host-3", "host-4", "host-5"})

MATCHING = [
    Scenario(
        "node_has_needs_every_pair_on_the_node",
        nodes=(make_node("a").labels({"type": "ssd", "rack": "x"}).info(),
               make_node("b").labels({"type": "ssd"}).info()),
        spec={"placementRules": [rule("Node", "Has", {"type": "ssd", "rack": "x"})]},
        passing=frozenset({"a"}), refused={"b": "placementRules[0] not met: Node Has {rack=x,type=ssd}"},
    ),
    Scenario(
        "node_has_not_needs_at_least_one_pair_missing",
        nodes=(make_node("a").labels({"type": "ssd", "rack": "x"}).info(),
               make_node("b").labels({"type": "ssd"}).info(),
               make_node("c").info()),
        spec={"placementRules": [rule("Node", "HasNot", {"type": "ssd", "rack": "x"})]},
        passing=frozenset({"b", "c"}),
    ),
    Scenario(
        "storage_optimised_in_rack_a_or_any_memory_optimised",
        nodes=(make_node("s-a").labels({"type": "storage-optimised", "rack": "a"}).info(),
               make_node("s-b").labels({"type": "storage-optimised", "rack": "b"}).info(),
               make_node("m-b").labels({"type": "memory-optimised", "rack": "b"}).info(),
               make_node("plain").labels({"rack": "a"}).info()),
        spec={"placementRules": [{"anyOf": [
            rule("Node", "Has", {"type": "storage-optimised", "rack": "a"}),
            rule("Node", "Has", {"type": "memory-optimised"})]}]},
        passing=frozenset({"s-a", "m-b"}),
    ),
    Scenario(
        "cargo_server_avoids_hosts_with_another_cargo_server",
        nodes=(make_node("a").info(), make_node("b").info()),
        pods=(make_pod("cargo-1").on("a").labels({"role": "cargo-server"}).info(),),
        pod=make_pod("cargo-2").labels({"role": "cargo-server"}).info(),
        spec={"selector": {"matchLabels": {"role": "cargo-server"}},
              "placementRules": [rule("Pod", "HasNot", {"role": "cargo-server"})]},
        passing=frozenset({"b"}),
    ),
    Scenario(
        "pod_has_needs_a_pod_on_the_node",
        nodes=(make_node("a").info(),
               make_node("b").info()), pods=(make_pod("cache").on("b").labels({"role": "cache"}).info(),),
        spec={"placementRules": [rule("Pod", "Has", {"role": "cache"})]}, passing=frozenset({"b"}),
    ),
    Scenario(
        "pod_rule_with_two_pairs_needs_one_pod_with_both",
        nodes=(make_node("a").info(), make_node("b").info()),
        pods=(make_pod("p1").on("a").labels({"role": "cache"}).info(),
              make_pod("p2").on("a").labels({"tier": "gold"}).info(),
              make_pod("p3").on("b").labels({"role": "cache", "tier": "gold"}).info()),
        spec={"placementRules": [rule("Pod", "Has", {"role": "cache", "tier": "gold"})]},
        passing=frozenset({"b"}),
    ),
    Scenario(
        "all_of_two_pod_rules_accepts_two_different_pods",
        nodes=(make_node("a").info(), make_node("b").info()),
        pods=(make_pod("p1").on("a").labels({"role": "cache"}).info(),
              make_pod("p2").on("a").labels({"tier": "gold"}).info()),
        spec={"placementRules": [{"allOf": [rule("Pod", "Has", {"role": "cache"}),
                                            rule("Pod", "Has", {"tier": "gold"})]}]},
        passing=frozenset({"a"}),
    ),
    Scenario(
        "top_level_rules_are_anded",
        nodes=(make_node("a").labels({"ssd": "1"}).info(),
               make_node("b").labels({"ssd": "1"}).info(),
               make_node("c").info()),
        pods=(make_pod("p1").on("a").labels({"role": "db"}).info(),),
        spec={"placementRules": [rule("Node", "Has", {"ssd": "1"}), rule("Pod", "HasNot", {"role": "db"})]},
        passing=frozenset({"b"}), refused={"a": "placementRules[1]", "c": "placementRules[0]"},
    ),
    Scenario(
        "within_rack_replica_blocks_whole_rack",
        # A replica on host 1 in rack a: host 3 in rack a fails although it runs none.
        nodes=racks(), pods=(replica("r1", "host-1").info(),),
        pod=make_pod("new").labels({"role": "db-replica"}).info(),
        spec={"selector": {"matchLabels": {"role": "db-replica"}}, "placementRules": [REPLICA_RULE]},
        passing=frozenset({"host-2", "host-4"}),
        refused={"host-1": "within rack", "host-3": "placementRules[0] not met"},
    ),
    Scenario(
        "host_without_within_key_fails_both_operators",
        nodes=racks(), pods=(replica("r1", "host-1").info(),),
        spec={"placementRules": [{"anyOf": [{**REPLICA_RULE, "operator": "Has"}, REPLICA_RULE]}]},
        passing=frozenset({"host-1", "host-2", "host-3", "host-4"}), refused={"host-5": "placementRules[0]"},
    ),
    Scenario(
        "within_has_needs_the_pod_somewhere_in_the_group",
        nodes=racks(), pods=(replica("r1", "host-1").info(),),
        spec={"placementRules": [{**REPLICA_RULE, "operator": "Has"}]},
        passing=frozenset({"host-1", "host-3"}),
    ),
    Scenario(
        "within_group_includes_hosts_whatever_their_status",
        nodes=(make_node("host-1").labels({"rack": "a"}).ready(False).info(),
               make_node("host-2").labels({"rack": "b"}).info(),
               make_node("host-3").labels({"rack": "a"}).info()),
        pods=(replica("r1", "host-1").info(),),
        spec={"placementRules": [REPLICA_RULE]},
        passing=frozenset({"host-2"}), refused={"host-1": "not Ready", "host-3": "placementRules[0]"},
    ),
    Scenario(
        "pod_rules_count_only_the_same_namespace",
        nodes=racks(), pods=(replica("r1", "host-1", "other-tenant").info(),),
        spec={"placementRules": [REPLICA_RULE]},
        passing=frozenset({"host-1", "host-2", "host-3", "host-4"}),
    ),
    Scenario(
        "terminating_pods_do_not_count_for_rules",
        nodes=racks(), pods=(replica("r1", "host-1").terminating().info(),),
        spec={"placementRules": [REPLICA_RULE]},
        passing=frozenset({"host-1", "host-2", "host-3", "host-4"}),
    ),
    Scenario(
        "the_pod_itself_does_not_count_for_rules",
        # The pod being judged (e.g. rechecked at bind or moved) already shows on host-1.
        nodes=racks(), pods=(replica("me", "host-1").uid("uid-me").info(),),
        pod=make_pod("me").uid("uid-me").labels({"role": "db-replica"}).info(),
        spec={"placementRules": [REPLICA_RULE]},
        passing=frozenset({"host-1", "host-2", "host-3", "host-4"}),
    ),
    Scenario(
        "pod_rule_still_counts_a_second_matching_pod_beside_the_pod_itself",
        nodes=racks(), pods=(replica("me", "host-1").uid("uid-me").info(), replica("other", "host-1").info()),
        pod=make_pod("me").uid("uid-me").labels({"role": "db-replica"}).info(),
        spec={"placementRules": [REPLICA_RULE]},
        passing=frozenset({"host-2", "host-4"}),
    ),
    Scenario(
        "rules_filter_only_when_a_meeting_node_has_room",
        nodes=(make_node("ssd").labels({"disk": "ssd"}).info(), make_node("hdd").info()),
        spec={"placementRules": [rule("Node", "Has", {"disk": "ssd"})]},
        passing=frozenset({"ssd"}), no_error=True,
    ),
    Scenario(
        "enforced_no_meeting_node_with_room_is_affinity_unsatisfied",
        nodes=(make_node("ssd").labels({"disk": "ssd"}).cpu("100m").info(), make_node("hdd").info()),
        pods=(make_pod("x").on("ssd").labels({}).info(),),
        spec={"placementRules": [rule("Node", "Has", {"disk": "ssd"})]},
        error=ErrorCode.AFFINITY_UNSATISFIED, passing=frozenset(),
        refused={"ssd": "insufficient capacity", "hdd": "placementRules[0] not met"},
    ),
    Scenario(
        "enforced_nothing_fits_anywhere_is_insufficient_resource_with_the_meeting_nodes_shortfall",
        # ssd meets the rule but is full; hdd breaks it and is full too: room is what is missing.
        nodes=(make_node("ssd").labels({"disk": "ssd"}).cpu("100m").info(), make_node("hdd").cpu("100m").info()),
        pods=(make_pod("x").on("ssd").labels({}).info(), make_pod("y").on("hdd").labels({}).info()),
        spec={"placementRules": [rule("Node", "Has", {"disk": "ssd"})]},
        error=ErrorCode.INSUFFICIENT_RESOURCE, passing=frozenset(),
        error_contains="ssd: insufficient capacity: cpu: needs 100m, 0 free of 100m allocatable (short by 100m)",
        refused={"ssd": "insufficient capacity", "hdd": "placementRules[0] not met"},
    ),
    Scenario(
        "enforced_nothing_fits_in_a_fixed_round_is_insufficient_resource",
        nodes=(make_node("ssd").labels({"disk": "ssd"}).cpu("100m").info(), make_node("hdd").cpu("100m").info()),
        pods=(make_pod("x").on("ssd").labels({}).info(), make_pod("y").on("hdd").labels({}).info()),
        spec={"strategy": "Fill", "count": 1, "placementRules": [rule("Node", "Has", {"disk": "ssd"})]},
        round=True, error=ErrorCode.INSUFFICIENT_RESOURCE, error_contains="ssd: insufficient capacity",
    ),
    Scenario(
        "enforced_is_the_default",
        nodes=(make_node("hdd").info(),),
        spec={"placementRules": [rule("Node", "Has", {"disk": "ssd"})]},
        error=ErrorCode.AFFINITY_UNSATISFIED,
    ),
    Scenario(
        "preferred_falls_back_to_every_node_when_no_meeting_node_has_room",
        nodes=(make_node("ssd").labels({"disk": "ssd"}).cpu("100m").info(), make_node("hdd").info()),
        pods=(make_pod("x").on("ssd").labels({}).info(),),
        spec={"affinityMatching": "Preferred", "placementRules": [rule("Node", "Has", {"disk": "ssd"})]},
        passing=frozenset({"hdd"}), no_error=True, warnings=("Preferred matching ignores the rules",),
    ),
    Scenario(
        "preferred_still_filters_when_a_meeting_node_has_room",
        nodes=(make_node("ssd").labels({"disk": "ssd"}).info(), make_node("hdd").info()),
        spec={"affinityMatching": "Preferred", "placementRules": [rule("Node", "Has", {"disk": "ssd"})]},
        passing=frozenset({"ssd"}),
    ),
    Scenario(
        "no_node_with_room_at_all_is_insufficient_resource_not_affinity",
        nodes=(make_node("a").memory("1Gi").info(),),
        pod=make_pod("new").memory("2Gi").info(),
        spec={"placementRules": [rule("Node", "HasNot", {"disk": "ssd"})]},
        error=ErrorCode.INSUFFICIENT_RESOURCE,
    ),
]


@pytest.mark.parametrize("s", MATCHING, ids=str)
def test_rule_matching(s: Scenario) -> None:
    run(s)


def test_assumed_pods_count_for_rules() -> None:
    view = cluster(racks())
    view.assume(make_pod("r1").labels({"role": "db-replica"}).info(), "host-1")
    decision = evaluate(view, make_pod("new").info(), make_policy().rules(REPLICA_RULE).build()).decision
    assert set(decision.ranking) == {"host-2", "host-4"}


def test_round_reads_its_own_earlier_pods() -> None:
    """Two cargo servers arriving together: the second reads the first and goes elsewhere."""
    view = cluster([make_node("a").info(), make_node("b").info(), make_node("c").info()])
    cargo = make_pod("cargo").labels({"role": "cargo-server"}).info()
    pol = (make_policy()
           .rules(rule("Pod", "HasNot", {"role": "cargo-server"}))
           .spec(selector={"matchLabels": {"role": "cargo-server"}})
           .build())
    result = plan(view, cargo, pol, count=3)
    assert result.error is None and result.plan == {"a": 1, "b": 1, "c": 1}
    too_many = plan(view, cargo, pol, count=4)
    assert too_many.error is not None and too_many.error.code is ErrorCode.AFFINITY_UNSATISFIED
    assert too_many.plan == {}


def test_round_preferred_keeps_placing_once_rules_cannot_be_met() -> None:
    view = cluster([make_node("a").info(), make_node("b").info()])
    cargo = make_pod("cargo").labels({"role": "cargo-server"}).info()
    pol = (make_policy()
           .rules(rule("Pod", "HasNot", {"role": "cargo-server"}))
           .spec(selector={"matchLabels": {"role": "cargo-server"}}, affinityMatching="Preferred")
           .build())
    result = plan(view, cargo, pol, count=3)
    assert result.error is None and sum(result.plan.values()) == 3
    assert set(result.plan) == {"a", "b"}


def test_rule_refusal_names_the_rule() -> None:
    view = cluster(racks(), [replica("r1", "host-1").info()])
    decision = evaluate(view, make_pod("new").info(), make_policy().rules(REPLICA_RULE).build()).decision
    assert decision.refused["host-3"].reason == ("placementRules[0] not met: Pod HasNot {role=db-replica} "
                                                 "within rack")
    assert decision.refused["host-3"].resolvable  # evicting the replica could mend it
