"""Liveness and the node filter (docs/behaviour.md#liveness and docs/behaviour.md#node-filter):
Ready, node Leases, the bypass annotation, test nodes; includes / labels / all / excludes with
includes short-circuiting the rest; and kube-scheduler's own node constraints on the pod."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from berth.core.index.leases import lease_suspects
from berth.core.kube import pod_from_object
from berth.core.model import NodeAffinity, NodeSelectorTerm, PodInfo, Requirement, Taint, Toleration
from berth.core.plugins.liveness import lease_down_reason
from berth.core.settings import Settings
from berth.core.view import ClusterView
from tests.builders import make_node, make_pod, make_policy

from .builders import NOW, Scenario, cluster, evaluate, run

TEST = {"berth.dev/test-node": "true"}
FRESH = NOW - 5

LIVENESS = [
    Scenario(
        "ready_node_is_up",
        nodes=(make_node("a").info(),), passing=frozenset({"a"}),
    ),
    Scenario(
        "not_ready_node_is_down",
        nodes=(make_node("a").ready(False).info(), make_node("b").info()), passing=frozenset({"b"}),
        refused={"a": "node is down: not Ready"},
    ),
    Scenario(
        "node_without_ready_condition_is_down",
        nodes=(make_node("a").ready(None).info(), make_node("b").info()), passing=frozenset({"b"}),
        refused={"a": "node is down: it reports no Ready condition"},
    ),
    Scenario(
        "stale_lease_older_than_threshold_is_down",
        nodes=(make_node("a").info(),
               make_node("b").info()), leases={"a": NOW - 41, "b": FRESH}, passing=frozenset({"b"}),
        refused={"a": "node is down: Lease not renewed for 41s (threshold 40s)"},
    ),
    Scenario(
        "lease_exactly_at_threshold_is_up",
        nodes=(make_node("a").info(),), leases={"a": NOW - 40}, passing=frozenset({"a"}),
    ),
    Scenario(
        "liveness_threshold_is_a_setting",
        nodes=(make_node("a").info(),), leases={"a": NOW - 100}, settings=Settings(liveness_threshold_seconds=120),
        passing=frozenset({"a"}),
    ),
    Scenario(
        "missing_lease_when_leases_are_tracked_is_down",
        nodes=(make_node("a").info(), make_node("b").info()), leases={"b": FRESH}, passing=frozenset({"b"}),
        refused={"a": "node is down: no Lease in kube-node-lease"},
    ),
    Scenario(
        "lease_without_renew_time_is_down",
        nodes=(make_node("a").info(), make_node("b").info()), leases={"a": None, "b": FRESH}, passing=frozenset({"b"}),
        refused={"a": "no Lease"},
    ),
    Scenario(
        "leases_are_ignored_when_not_tracked",
        nodes=(make_node("a").info(),), leases=None, passing=frozenset({"a"}),
    ),
    Scenario(
        "bypass_annotation_means_down",
        nodes=(make_node("a").bypassed().info(), make_node("b").info()), passing=frozenset({"b"}),
        refused={"a": "node is down: bypassed (berth.dev/bypass)"},
    ),
    Scenario(
        "test_node_label_skips_liveness",
        nodes=(make_node("a").labels(TEST).ready(False).info(),
               make_node("b").labels(TEST).ready(None).info(),
               make_node("c").labels(TEST).info()),
        leases={"a": NOW - 1000}, passing=frozenset({"a", "b", "c"}),
    ),
    Scenario(
        "test_node_label_does_not_skip_bypass",
        nodes=(make_node("a").labels(TEST).bypassed().info(), make_node("b").info()), passing=frozenset({"b"}),
        refused={"a": "bypassed"},
    ),
    Scenario(
        "down_and_filtered_nodes_are_unresolvable_refusals",
        nodes=(make_node("a").ready(False).info(),
               make_node("b").memory("1Gi").info()), pod=make_pod("new").memory("2Gi").info(),
        refused={"a": "not Ready", "b": "insufficient capacity"},
    ),
]

ASSORTED = (make_node("a").labels({"disk": "ssd", "tier": "gold"}).info(),
            make_node("b").labels({"disk": "ssd"}).info(),
            make_node("c").labels({"disk": "ssd", "tier": "gold"}).ready(False).info(),
            make_node("d").labels({"disk": "ssd", "tier": "gold"}).info())

NODE_FILTER = [
    Scenario(
        "includes_fetches_exactly_these_nodes",
        nodes=ASSORTED, spec={"nodeFilter": {"includes": ["a", "b"]}}, passing=frozenset({"a", "b"}),
        refused={"d": "not in nodeFilter.includes"},
    ),
    Scenario(
        "includes_naming_a_node_that_does_not_exist_is_said",
        nodes=ASSORTED, spec={"nodeFilter": {"includes": ["a", "gone", "b", "typo-node"]}},
        passing=frozenset({"a", "b"}),
        warnings=("nodeFilter.includes names 2 nodes berth has not seen: gone, typo-node",),
    ),
    Scenario(
        "includes_naming_a_missing_node_is_said_in_a_plan_too",
        nodes=ASSORTED, spec={"strategy": "Auto", "nodeFilter": {"includes": ["a", "gone"]}}, count=1,
        plan={"a": 1}, warnings=("nodeFilter.includes names 1 node berth has not seen: gone",),
    ),
    Scenario(
        "includes_naming_a_missing_node_is_said_in_a_fixed_round",
        nodes=ASSORTED, spec={"strategy": "Fill", "count": 1, "nodeFilter": {"includes": ["a", "gone"]}},
        round=True, plan={"a": 1}, warnings=("nodeFilter.includes names 1 node berth has not seen: gone",),
    ),
    Scenario(
        "includes_short_circuits_liveness_and_excludes",
        nodes=ASSORTED,
        spec={"nodeFilter": {"includes": ["b", "c"], "excludes": ["b", "c"], "labels": {"tier": "gold"}}},
        passing=frozenset({"b", "c"}),
    ),
    Scenario(
        "includes_short_circuits_bypass_too",
        nodes=(make_node("a").bypassed().info(), make_node("b").info()), spec={"nodeFilter": {"includes": ["a"]}},
        passing=frozenset({"a"}),
    ),
    Scenario(
        "labels_node_must_carry_all_of_them",
        nodes=ASSORTED, spec={"nodeFilter": {"labels": {"disk": "ssd", "tier": "gold"}}},
        passing=frozenset({"a", "d"}), refused={"b": "nodeFilter.labels needs tier=gold (absent)"},
    ),
    Scenario(
        "labels_refusal_names_the_wrong_value",
        nodes=(make_node("a").labels({"tier": "iron"}).info(),), spec={"nodeFilter": {"labels": {"tier": "gold"}}},
        refused={"a": "nodeFilter.labels needs tier=gold (tier=iron)"},
    ),
    Scenario(
        "all_false_drops_down_nodes",
        nodes=ASSORTED, spec={"nodeFilter": {"all": False}}, refused={"c": "not Ready"},
        passing=frozenset({"a", "b", "d"}),
    ),
    Scenario(
        "all_true_keeps_down_nodes",
        nodes=(*ASSORTED, make_node("e").bypassed().info()), spec={"nodeFilter": {"all": True}},
        passing=frozenset({"a", "b", "c", "d", "e"}),
    ),
    Scenario(
        "excludes_are_removed_from_what_is_left",
        nodes=ASSORTED, spec={"nodeFilter": {"excludes": ["a"], "labels": {"tier": "gold"}}},
        passing=frozenset({"d"}), refused={"a": "excluded by nodeFilter.excludes", "b": "labels", "c": "down"},
    ),
    Scenario(
        "without_a_policy_liveness_still_applies",
        nodes=ASSORTED, passing=frozenset({"a", "b", "d"}), refused={"c": "not Ready"},
    ),
]

CONSTRAINTS = [
    Scenario(
        "cordoned_node_is_refused",
        nodes=(make_node("a").cordoned().info(), make_node("b").info()), passing=frozenset({"b"}),
        refused={"a": "cordoned"},
    ),
    Scenario(
        "cordon_applies_even_to_included_nodes",
        nodes=(make_node("a").cordoned().info(), make_node("b").info()), spec={"nodeFilter": {"includes": ["a", "b"]}},
        passing=frozenset({"b"}), refused={"a": "cordoned"},
    ),
    Scenario(
        "pod_tolerating_unschedulable_may_use_a_cordoned_node",
        nodes=(make_node("a").cordoned().info(),),
        pod=(make_pod("new")
             .tolerations((Toleration("node.kubernetes.io/unschedulable", "Exists", "", "NoSchedule"),))
             .info()),
        passing=frozenset({"a"}),
    ),
    Scenario(
        "untolerated_no_schedule_taint_refuses",
        nodes=(make_node("a").taints((Taint("gpu", "true", "NoSchedule"),)).info(), make_node("b").info()),
        passing=frozenset({"b"}), refused={"a": "untolerated taint gpu=true:NoSchedule"},
    ),
    Scenario(
        "untolerated_no_execute_taint_refuses",
        nodes=(make_node("a").taints((Taint("broken", "", "NoExecute"),)).info(),), refused={"a": "broken:NoExecute"},
    ),
    Scenario(
        "prefer_no_schedule_taint_does_not_filter",
        nodes=(make_node("a").taints((Taint("gpu", "true", "PreferNoSchedule"),)).info(),), passing=frozenset({"a"}),
    ),
    Scenario(
        "tolerated_taint_passes",
        nodes=(make_node("a").taints((Taint("gpu", "true", "NoSchedule"),)).info(),),
        pod=make_pod("new").tolerations((Toleration("gpu", "Equal", "true", ""),)).info(), passing=frozenset({"a"}),
    ),
    Scenario(
        "node_selector_must_match",
        nodes=(make_node("a").labels({"disk": "ssd"}).info(), make_node("b").info()),
        pod=replace(make_pod("new").info(), node_affinity=NodeAffinity(node_selector={"disk": "ssd"})),
        passing=frozenset({"a"}), refused={"b": "nodeSelector"},
    ),
    Scenario(
        "required_node_affinity_terms_are_ored",
        nodes=(make_node("a").labels({"zone": "1"}).info(),
               make_node("b").labels({"zone": "2"}).info(),
               make_node("c").labels({"zone": "3"}).info()),
        pod=replace(make_pod("new").info(), node_affinity=NodeAffinity(required_terms=(
            NodeSelectorTerm((Requirement("zone", "In", ("1",)),)),
            NodeSelectorTerm((Requirement("zone", "In", ("3",)),))))),
        passing=frozenset({"a", "c"}),
    ),
]


@pytest.mark.parametrize("s", LIVENESS, ids=str)
def test_liveness(s: Scenario) -> None:
    decision = run(s)
    for name, refusal in decision.refused.items():
        if "down" in refusal.reason:
            assert not refusal.resolvable, name


@pytest.mark.parametrize("s", NODE_FILTER, ids=str)
def test_node_filter(s: Scenario) -> None:
    decision = run(s)
    assert all(not r.resolvable for r in decision.refused.values())


@pytest.mark.parametrize("s", CONSTRAINTS, ids=str)
def test_pod_constraints(s: Scenario) -> None:
    run(s)


def test_capacity_refusals_are_resolvable_filter_refusals_are_not() -> None:
    view = cluster([make_node("a").ready(False).info(), make_node("b").memory("1Gi").info()])
    decision = evaluate(view, make_pod("new").memory("2Gi").info(), make_policy().build()).decision
    assert not decision.refused["a"].resolvable
    assert decision.refused["b"].resolvable


REQUIREMENTS = [
    ("in_matches_listed_value", Requirement("k", "In", ("a", "b")), {"k": "b"}, True),
    ("in_needs_the_key", Requirement("k", "In", ("a",)), {}, False),
    ("not_in_matches_absent_key", Requirement("k", "NotIn", ("a",)), {}, True),
    ("not_in_refuses_listed_value", Requirement("k", "NotIn", ("a",)), {"k": "a"}, False),
    ("exists", Requirement("k", "Exists"), {"k": ""}, True),
    ("does_not_exist", Requirement("k", "DoesNotExist"), {"k": "x"}, False),
    ("gt_compares_integers", Requirement("k", "Gt", ("9",)), {"k": "10"}, True),
    ("lt_compares_integers", Requirement("k", "Lt", ("9",)), {"k": "10"}, False),
    ("gt_on_non_integer_is_false", Requirement("k", "Gt", ("1",)), {"k": "x"}, False),
]


@pytest.mark.parametrize(("name", "req", "labels", "expected"), REQUIREMENTS, ids=[c[0] for c in REQUIREMENTS])
def test_requirement_operators(name: str, req: Requirement, labels: dict[str, str], expected: bool) -> None:
    assert req.matches(labels) is expected


LEASE_EVENTS = st.lists(st.tuples(
    st.sampled_from(["renew", "unreadable", "remove", "evaluate", "node"]),
    st.sampled_from(["a", "b", "c"]),
    st.sampled_from([NOW - 100, NOW - 41, NOW - 40, NOW - 5, NOW, NOW + 30]),
), max_size=25)


@settings(max_examples=300, deadline=None)
@given(events=LEASE_EVENTS)
def test_lease_suspects_kept_incrementally_include_every_node_whose_lease_is_down(
        events: list[tuple[str, str, float]]) -> None:
    """The suspects a long-lived view keeps, caught up from its lease and node logs while nodes
    come and go and the clock moves on and back, include every node a fresh reading finds down."""
    view = ClusterView(leases_tracked=True)
    s = Settings()
    for kind, name, t in events:
        if kind == "renew":
            view.set_lease(name, t)
        elif kind == "unreadable":
            view.set_lease(name, None)
        elif kind == "remove":
            view.remove_lease(name)
        elif kind == "node":
            view.upsert_node(make_node(name).info())
        at = t if kind == "evaluate" else NOW
        suspects = lease_suspects(view, s, at)
        down = {n for n in view.nodes if lease_down_reason(n, view, s, at) is not None}
        assert down <= suspects, (down - suspects, kind, name, t)


def affinity_pod(*terms: dict[str, Any] | None, node_selector: dict[str, str] | None = None) -> PodInfo:
    """The web pod with the nodeSelector and required node affinity terms of a pod manifest,
    read as the extender and the CLI read them (``terms`` of ``(None,)``: the block with no terms)."""
    spec: dict[str, Any] = {"containers": []}
    if node_selector is not None:
        spec["nodeSelector"] = node_selector
    if terms:
        listed = [t for t in terms if t is not None]
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": listed}}}
    parsed = pod_from_object({"kind": "Pod", "metadata": {"name": "new", "namespace": "shop"}, "spec": spec})
    return replace(make_pod("new").info(), node_affinity=parsed.node_affinity)


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)} if values else {"key": key, "operator": operator}


def term(*expressions: dict[str, Any], fields: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if expressions:
        out["matchExpressions"] = list(expressions)
    if fields:
        out["matchFields"] = list(fields)
    return out


def name_is(*values: str, operator: str = "In") -> dict[str, Any]:
    return {"key": "metadata.name", "operator": operator, "values": list(values)}


def one_node(name: str, labels: dict[str, str], p: PodInfo, matches: bool, case: str) -> Scenario:
    n = make_node(name).labels(labels).info()
    if matches:
        return Scenario(case, nodes=(n,), pod=p, passing=frozenset({name}))
    return Scenario(case, nodes=(n,), pod=p, passing=frozenset(), refused={name: "required node affinity"})


# kube-scheduler's NodeAffinity filter table (pkg/scheduler/framework/plugins/nodeaffinity), case by
# case: one node with the case's name and labels, the case's pod, whether the filter lets it pass.
# The cases with the scheduler's AddedAffinity argument are left out: berth has no such setting.
NODE_AFFINITY = [
    one_node("node1", {}, affinity_pod(node_selector={"foo": "bar"}), False, "missing_labels"),
    one_node("node1", {"foo": "bar"}, affinity_pod(node_selector={"foo": "bar"}), True, "same_labels"),
    one_node("node1", {"foo": "bar", "baz": "blah"}, affinity_pod(node_selector={"foo": "bar"}), True,
             "node_labels_are_superset"),
    one_node("node1", {"foo": "bar"}, affinity_pod(node_selector={"foo": "bar", "baz": "blah"}), False,
             "node_labels_are_subset"),
    one_node("node1", {"foo": "bar"}, affinity_pod(term(expr("foo", "In", "bar", "value2"))), True,
             "match_expressions_in_matches"),
    one_node("node1", {"kernel-version": "0206"}, affinity_pod(term(expr("kernel-version", "Gt", "0204"))), True,
             "match_expressions_gt_matches"),
    one_node("node1", {"mem-type": "DDR3"}, affinity_pod(term(expr("mem-type", "NotIn", "DDR", "DDR2"))), True,
             "match_expressions_not_in_matches"),
    one_node("node1", {"GPU": "NVIDIA-GRID-K1"}, affinity_pod(term(expr("GPU", "Exists"))), True,
             "match_expressions_exists_matches"),
    one_node("node1", {"foo": "bar"}, affinity_pod(term(expr("foo", "In", "value1", "value2"))), False,
             "affinity_not_matching_labels_refuses"),
    one_node("node1", {"foo": "bar"}, affinity_pod({"matchExpressions": []}), False,
             "empty_match_expressions_match_no_node"),
    one_node("node1", {"foo": "bar"}, affinity_pod(), True, "no_affinity_matches"),
    one_node("node1", {"GPU": "NVIDIA-GRID-K1"},
             affinity_pod(term(expr("GPU", "Exists"), expr("GPU", "NotIn", "AMD", "INTER"))), True,
             "expressions_anded_all_match"),
    one_node("node1", {"GPU": "NVIDIA-GRID-K1"},
             affinity_pod(term(expr("GPU", "Exists"), expr("GPU", "In", "AMD", "INTER"))), False,
             "expressions_anded_one_fails"),
    one_node("node1", {"foo": "bar"},
             affinity_pod(term(expr("foo", "In", "bar", "value2")), term(expr("diffkey", "In", "wrong", "value2"))),
             True, "terms_ored_one_matches"),
    one_node("node1", {"foo": "bar"}, affinity_pod(term(expr("foo", "Exists")), node_selector={"foo": "bar"}), True,
             "affinity_and_node_selector_both_satisfied"),
    one_node("node1", {"foo": "barrrrrr"}, affinity_pod(term(expr("foo", "Exists")), node_selector={"foo": "bar"}),
             False, "affinity_matches_but_node_selector_does_not"),
    one_node("node1", {"foo": "bar"}, affinity_pod(term(expr("foo", "NotIn", "invalid value: ___@#$%^"))), False,
             "invalid_label_value_makes_the_term_match_nothing"),
    one_node("node1", {}, affinity_pod(term(fields=(name_is("node1"),))), True, "match_fields_in_matches"),
    one_node("node2", {}, affinity_pod(term(fields=(name_is("node1"),))), False, "match_fields_in_does_not_match"),
    one_node("node2", {"foo": "bar"},
             affinity_pod(term(fields=(name_is("node1"), name_is("node2"))), term(expr("foo", "In", "bar"))), True,
             "two_terms_fields_fail_expressions_match"),
    one_node("node2", {"foo": "bar"}, affinity_pod(term(expr("foo", "In", "bar"), fields=(name_is("node1"),))),
             False, "one_term_fields_fail_expressions_match"),
    one_node("node1", {"foo": "bar"}, affinity_pod(term(expr("foo", "In", "bar"), fields=(name_is("node1"),))),
             True, "one_term_fields_and_expressions_match"),
    one_node("node2", {"foo": "bar"},
             affinity_pod(term(fields=(name_is("node1"),)), term(expr("foo", "In", "not-match-to-bar"))), False,
             "two_terms_neither_matches"),
    one_node("node2", {}, affinity_pod(term(fields=(name_is("node1"),)), term(fields=(name_is("node2"),))), True,
             "two_terms_of_node_name"),
    one_node("node2", {"foo": "bar"}, affinity_pod(term(fields=(name_is("node1"), name_is("node2")))), False,
             "two_conflicting_field_requirements"),
    one_node("node1", {"foo": "bar", "baz": "blah"}, affinity_pod(node_selector={"foo": "bar"}), True,
             "node_selector_matches_without_prefilter"),
    # berth's own cases for the parsing rules the table above touches once
    one_node("node2", {}, affinity_pod(term(fields=(name_is("node1", operator="NotIn"),))), True,
             "match_fields_not_in_matches_another_node"),
    one_node("node1", {}, affinity_pod(term(fields=(name_is("node1", "node2"),))), False,
             "match_fields_with_two_values_match_nothing"),
    one_node("node1", {}, affinity_pod(term(fields=({"key": "metadata.name", "operator": "Exists"},))), False,
             "match_fields_exists_operator_matches_nothing"),
    one_node("node1", {"gen": "5"}, affinity_pod(term(expr("gen", "Gt", "-1"))), False,
             "gt_value_not_a_label_value_matches_nothing"),
    one_node("node1", {"gen": "5"}, affinity_pod(term(expr("gen", "Gt", "four"))), False,
             "gt_value_not_an_integer_matches_nothing"),
    one_node("node1", {"gen": "5"}, affinity_pod(term(expr("gen", "Lt", "6", "7"))), False,
             "lt_with_two_values_matches_nothing"),
    one_node("node1", {"gen": "1_0"}, affinity_pod(term(expr("gen", "Gt", "4"))), False,
             "gt_node_label_not_a_go_integer_does_not_match"),
    one_node("node1", {"gen": "3"}, affinity_pod(term(expr("gen", "Lt", "4"))), True, "lt_matches"),
    one_node("node1", {"foo": "bar"}, affinity_pod(term(expr("foo", "In"))), False,
             "in_without_values_matches_nothing"),
    one_node("node1", {"foo": "bar"}, affinity_pod(term(expr("foo", "Exists", "bar"))), False,
             "exists_with_values_matches_nothing"),
    one_node("node1", {"foo": "bar"}, affinity_pod(term(expr("foo", "Equals", "bar"))), False,
             "unknown_operator_matches_nothing"),
    one_node("node1", {"bad key": "x"}, affinity_pod(term(expr("bad key", "Exists"))), False,
             "invalid_label_key_matches_nothing"),
    one_node("node1", {"foo": "bar"},
             affinity_pod(term(expr("foo", "NotIn", "bad value!")), term(expr("foo", "Exists"))), True,
             "an_invalid_term_leaves_the_other_terms_working"),
    one_node("node1", {"foo": "bar"}, affinity_pod(None), False, "required_affinity_without_terms_matches_nothing"),
]


@pytest.mark.parametrize("s", NODE_AFFINITY, ids=str)
def test_required_node_affinity(s: Scenario) -> None:
    run(s)
