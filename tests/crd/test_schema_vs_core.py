"""Property: the CRD's schema never refuses a spec the core accepts (the webhook and the core
refuse the rest), over random specs and rule trees, valid and invalid alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from berth.core.errors import InvalidPolicy
from berth.core.policy import policy_from_manifest
from tests.crd.schema_check import check

ROOT = Path(__file__).resolve().parents[2]

words = st.sampled_from(["a", "rack", "zone", " role ", "role", "", "x" * 129, "gpu", "k" * 128])
values = st.sampled_from(["a", "", "v" * 1000, "v" * 1001, " db ", "true"])
any_labels = st.dictionaries(words, values, max_size=4) | st.dictionaries(
    st.text("abcdefghij", min_size=1, max_size=3), st.just("v"), min_size=30, max_size=34)
good_labels = st.dictionaries(st.sampled_from(["a", "rack", "zone", "role", "gpu", "k" * 128]),
                              st.sampled_from(["a", "", "v" * 1000, "db"]), min_size=1, max_size=3)


def any_rule() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional={
        "resource": st.sampled_from(["Node", "Pod", "VirtualMachine"]),
        "operator": st.sampled_from(["Has", "HasNot", "Contains"]),
        "labels": any_labels,
        "within": st.sampled_from(["rack", "", "r" * 129, " zone "]),
        "weight": st.integers(0, 3),
    })


def good_rule() -> st.SearchStrategy[dict[str, Any]]:
    node = st.fixed_dictionaries({"resource": st.just("Node"), "operator": st.sampled_from(["Has", "HasNot"]),
                                  "labels": good_labels})
    pod = st.fixed_dictionaries({"resource": st.just("Pod"), "operator": st.sampled_from(["Has", "HasNot"]),
                                 "labels": good_labels}, optional={"within": st.sampled_from(["rack", "r" * 128])})
    return node | pod


def groups(children: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    members = st.lists(children, min_size=1, max_size=3)
    odd = st.lists(children, max_size=2)
    return st.one_of(st.builds(lambda m: {"anyOf": m}, members), st.builds(lambda m: {"allOf": m}, members),
                     st.builds(lambda m: {"anyOf": m}, odd),
                     st.builds(lambda a, b: {"anyOf": a, "allOf": b}, members, members))


trees = st.recursive(good_rule() | good_rule() | good_rule() | any_rule(), groups, max_leaves=18)

specs = st.fixed_dictionaries({}, optional={
    "strategy": st.sampled_from(["Auto", "Fill", "BestFit", "Spread", "RoundRobin"]),
    "count": st.integers(-1, 5),
    "nodesLimit": st.integers(-1, 3),
    "placementRules": st.lists(trees, max_size=5),
    "affinityMatching": st.sampled_from(["Enforced", "Preferred", "Sometimes"]),
    "capacity": st.fixed_dictionaries({}, optional={"cpuOvercommitPercent": st.integers(0, 10001),
                                                    "minFreeDiskPercent": st.integers(-1, 101)}),
    "topologySpreadConstraints": st.lists(st.fixed_dictionaries(
        {"topologyKey": st.sampled_from(["zone", "zone", ""])},
        optional={"maxSkew": st.integers(0, 2),
                  "whenUnsatisfiable": st.sampled_from(["DoNotSchedule", "ScheduleAnyway", "Never"]),
                  "minDomains": st.integers(0, 2)}), max_size=2),
})


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    crd = yaml.safe_load((ROOT / "crds" / "placementpolicies.berth.dev.yaml").read_text())
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def _core_accepts(body: dict[str, Any]) -> bool:
    try:
        policy_from_manifest(body)
    except InvalidPolicy:
        return False
    return True


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(specs)
def test_the_schema_is_never_stricter_than_the_core(schema: dict[str, Any], spec: dict[str, Any]) -> None:
    body = {"apiVersion": "berth.dev/v1alpha1", "kind": "PlacementPolicy",
            "metadata": {"name": "p", "namespace": "n"}, "spec": spec}
    if _core_accepts(body):
        assert check(schema, body) is None, spec
