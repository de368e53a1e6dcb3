"""A PlacementPolicy is compiled once into frozen core types; evaluation reads those alone.

Every scenario of the core's tests runs again with the policy's wire spec replaced by an object
that fails on any read: the same answers, and no read. Compiling is checked field by field.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import FrozenInstanceError
from typing import Any

import pytest

import berth.core.policy as policy_module
import tests.core
from berth.core.capacity import capacity_report
from berth.core.compiled import CapacityOverrides, InclusionPolicy, NodeFilter, SpreadConstraint, WhenUnsatisfiable
from berth.core.model import LabelSelector, Requirement
from berth.core.plan import shared_plan_key
from berth.core.policy import PlacementPolicy
from berth.core.settings import Settings
from tests.builders import ZONE, make_pod, make_policy

from . import builders
from .builders import NOW, Scenario, cluster


class WireSpecRead(AssertionError):
    pass


class _Unreadable:
    """Stands for a policy's wire spec: any read of it fails the test."""

    def __getattr__(self, name: str) -> Any:
        raise WireSpecRead(f"evaluation read spec.{name}")


def compiled_only(pol: PlacementPolicy) -> PlacementPolicy:
    pol.spec = _Unreadable()  # type: ignore[assignment]
    return pol


def every_scenario() -> list[Scenario]:
    found: dict[str, Scenario] = {}
    for info in pkgutil.iter_modules(tests.core.__path__):
        if not info.name.startswith("test_") or info.name == "test_compiled_policy":
            continue
        module = importlib.import_module(f"tests.core.{info.name}")
        for value in vars(module).values():
            items = value if isinstance(value, (list, tuple)) else [value]
            for item in items:
                if isinstance(item, Scenario) and item.spec is not None:
                    found[f"{info.name}::{item.name}"] = item
    return [found[k] for k in sorted(found)]


SCENARIOS = every_scenario()


def test_the_scenarios_are_found() -> None:
    assert len(SCENARIOS) > 100


@pytest.mark.parametrize("s", SCENARIOS, ids=str)
def test_scenario_answers_alike_from_the_compiled_policy_alone(s: Scenario, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(builders, "scenario_policy", lambda spec: compiled_only(make_policy().spec(**spec).build()))
    builders.run(s)  # every expectation of the scenario, checked as in its own test
    assert s.spec is not None
    view = cluster(s.nodes, s.pods, leases=s.leases)
    wire = capacity_report(view, s.pod, make_policy().spec(**s.spec).build(), s.settings, NOW, limit=20).to_dict()
    view = cluster(s.nodes, s.pods, leases=s.leases)
    assert capacity_report(view, s.pod, compiled_only(make_policy()
                                                       .spec(**s.spec)
                                                       .build()), s.settings, NOW, limit=20).to_dict() == wire


def test_the_wire_spec_stand_in_fails_when_read() -> None:
    pol = compiled_only(make_policy().build())
    with pytest.raises(WireSpecRead, match=r"spec\.strategy"):
        _ = pol.spec.strategy


COMPILED = [
    ("no spread constraint", {}, ()),
    ("a constraint without a selector counts the policy's pods",
     {"topologySpreadConstraints": [{"topologyKey": ZONE}]},
     (SpreadConstraint(ZONE, LabelSelector({"app": "web"})),)),
    ("every field, its own selector",
     {"topologySpreadConstraints": [{
         "topologyKey": ZONE, "maxSkew": 2, "whenUnsatisfiable": "ScheduleAnyway",
         "labelSelector": {"matchLabels": {"tier": "front"},
                           "matchExpressions": [{"key": "env", "operator": "In", "values": ["prod"]}]},
         "nodeAffinityPolicy": "Ignore", "nodeTaintsPolicy": "Honor", "matchLabelKeys": ["version"]}]},
     (SpreadConstraint(ZONE, LabelSelector({"tier": "front"}, (Requirement("env", "In", ("prod",)),)), max_skew=2,
                       when_unsatisfiable=WhenUnsatisfiable.SCHEDULE_ANYWAY,
                       node_affinity_policy=InclusionPolicy.IGNORE, node_taints_policy=InclusionPolicy.HONOR,
                       match_label_keys=("version",)),)),
    ("minDomains", {"topologySpreadConstraints": [{"topologyKey": ZONE, "minDomains": 3}]},
     (SpreadConstraint(ZONE, LabelSelector({"app": "web"}), min_domains=3),)),
]


@pytest.mark.parametrize(("name", "spec", "expected"), COMPILED, ids=[c[0] for c in COMPILED])
def test_spread_constraints_compile_to_core_types(name: str, spec: dict[str, Any],
                                                   expected: tuple[SpreadConstraint, ...]) -> None:
    compiled = make_policy().spec(**spec).build().spread_constraints
    assert compiled == expected
    assert all(c.when_unsatisfiable is e.when_unsatisfiable for c, e in zip(compiled, expected, strict=True))
    assert [c.hard for c in compiled] == [c.when_unsatisfiable == "DoNotSchedule" for c in expected]


def test_node_filter_capacity_and_scalars_compile_to_core_types() -> None:
    pol = (make_policy()
           .strategy("Fill")
           .count(3)
           .nodes_limit(2)
           .node_filter({"includes": ["b", "a", "b"], "excludes": ["c"], "labels": {"disk": "ssd"}})
           .spec(affinityMatching="Preferred", capacity={"cpuOvercommitPercent": 150, "rejectUnknownCapacity": True})
           .build())
    assert pol.node_filter == NodeFilter(("b", "a", "b"), frozenset({"c"}), {"disk": "ssd"}, False)
    assert pol.node_filter.included == frozenset({"a", "b"})
    assert pol.capacity == CapacityOverrides(cpu_overcommit_percent=150, reject_unknown_capacity=True)
    assert (pol.strategy, pol.count, pol.nodes_limit, pol.affinity_matching) == ("Fill", 3, 2, "Preferred")
    assert pol.selector == LabelSelector({"app": "web"})
    settings = Settings().for_policy(pol)
    assert (settings.cpu_overcommit_percent, settings.memory_overcommit_percent) == (150, 100)
    assert settings.reject_unknown_capacity is True


def test_node_filters_alike_share_one_key_and_differ_from_others() -> None:
    a = make_policy().node_filter({"labels": {"disk": "ssd", "zone": "a"}, "excludes": ["x", "y"]}).build().node_filter
    b = (make_policy("other")
         .node_filter({"labels": {"zone": "a", "disk": "ssd"}, "excludes": ["y", "x"]})
         .build()).node_filter
    c = make_policy().node_filter({"labels": {"disk": "ssd", "zone": "a"}, "excludes": ["x"]}).build().node_filter
    assert a.key == b.key != c.key
    assert make_policy().build().node_filter.key != make_policy().node_filter({"all": True}).build().node_filter.key


def test_compiled_types_are_frozen() -> None:
    pol = make_policy().spread({"topologyKey": ZONE}).build()
    with pytest.raises(FrozenInstanceError):
        pol.spread_constraints[0].max_skew = 5  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        pol.node_filter.all = True  # type: ignore[misc]


def test_the_rule_tree_is_parsed_once_per_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    parse = policy_module.parse_rules

    def counted(raw: object, path: str = "spec.placementRules") -> Any:
        calls.append(path)
        return parse(raw, path)

    monkeypatch.setattr(policy_module, "parse_rules", counted)
    rules = [{"anyOf": [{"resource": "Node", "operator": "Has", "labels": {"disk": "ssd"}},
                        {"resource": "Pod", "operator": "HasNot", "labels": {"app": "db"}, "within": ZONE}]}]
    pol = policy_module.policy_from_manifest(make_policy().spec(placementRules=rules).obj())
    assert calls == ["spec.placementRules"]
    assert pol.rules[0].describe().startswith("anyOf(Node Has {disk=ssd}")


@pytest.mark.parametrize(("spec", "path"), [
    ({"placementRules": [{"resource": "Rack", "operator": "Has", "labels": {"a": "b"}}]},
     "spec.placementRules[0].resource"),
    ({"topologySpreadConstraints": [{"topologyKey": ZONE}, {"topologyKey": ZONE}]},
     "spec.topologySpreadConstraints[0].{topologyKey, whenUnsatisfiable}"),
    ({"placementRules": [{"resource": "Rack", "operator": "Has", "labels": {"a": "b"}}],
      "topologySpreadConstraints": [{"topologyKey": ZONE}, {"topologyKey": ZONE}]},
     "spec.placementRules[0].resource"),
])
def test_a_manifest_compiling_fails_names_the_first_bad_field(spec: dict[str, Any], path: str) -> None:
    with pytest.raises(policy_module.InvalidPolicy) as caught:
        policy_module.policy_from_manifest(make_policy().spec(**spec).obj())
    assert caught.value.path == path
    with pytest.raises(policy_module.InvalidPolicy) as again:
        policy_module.spec_from_dict(make_policy().spec(**spec).obj()["spec"])
    assert again.value.path == path


@pytest.mark.parametrize("spec", [{}, {"strategy": "Spread", "nodeFilter": {"labels": {"disk": "ssd"}}},
                                  {"strategy": "Fill", "count": 2},
                                  {"capacity": {"memoryOvercommitPercent": 120}, "nodesLimit": 3}], ids=str)
def test_the_key_of_a_shared_plan_reads_the_compiled_policy_alone(spec: dict[str, Any]) -> None:
    pod = make_pod("new").info()
    assert shared_plan_key(pod, compiled_only(make_policy().spec(**spec).build()), 4) == shared_plan_key(pod,
                                              make_policy().spec(**spec).build(), 4)


@pytest.mark.parametrize(("case", "selector"), [
    ("empty", LabelSelector()),
    ("one label", LabelSelector({"app": "web"})),
    ("two labels", LabelSelector({"app": "web", "tier": "front"})),
    ("an expression", LabelSelector({}, (Requirement("app", "In", ("web", "db")),))),
    ("a label and an expression", LabelSelector({"app": "web"}, (Requirement("tier", "DoesNotExist", ()),))),
])
def test_a_selectors_matcher_answers_as_it_matches(case: str, selector: LabelSelector) -> None:
    matches = selector.matcher()
    for labels in ({"app": "web"}, {"app": "web", "tier": "front"}, {"app": "db"}, {"app": "webs"}, {},
                   {"tier": "front"}):
        assert matches(labels) == selector.matches(labels), (case, labels)
