"""The PlacementPolicy CRD: generated from the models (no drift), structural, its CEL rules sane,
its rule tree nested to the rule language's limit, and in agreement with the pydantic models field by
field, in both directions."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from berth.core import placement_rules as pr
from berth.core.errors import ERROR_CODES, ErrorCode
from berth.core.policy import PlacementPolicySpec
from berth.operator import crdgen
from berth.operator.status_model import PolicyStatus
from tests.crd.crd_checks import FORBIDDEN, SELF_FIELD, agree, balanced, walk
from tests.crd.schema_check import check

ROOT = Path(__file__).resolve().parents[2]
CRD_FILE = ROOT / "crds" / "placementpolicies.berth.dev.yaml"
PEERING_FILE = ROOT / "crds" / "kopfpeerings.kopf.dev.yaml"


@pytest.fixture(scope="module")
def crd() -> dict[str, Any]:
    return yaml.safe_load(CRD_FILE.read_text())


@pytest.fixture(scope="module")
def root(crd: dict[str, Any]) -> dict[str, Any]:
    (version,) = crd["spec"]["versions"]
    return version["schema"]["openAPIV3Schema"]


# -- generated, not hand-edited ----------------------------------------------------------------------

def test_crd_fits_kubectl_apply() -> None:
    """Client-side ``kubectl apply`` keeps the object as JSON in an annotation (256 KiB at most)."""
    import json

    assert len(json.dumps(yaml.safe_load(CRD_FILE.read_text()), separators=(",", ":"))) < 200_000


def test_committed_crd_is_what_the_generator_makes() -> None:
    assert CRD_FILE.read_text() == crdgen.render(), (
        "crds/placementpolicies.berth.dev.yaml is stale: run `python -m berth.operator.crdgen > "
        "crds/placementpolicies.berth.dev.yaml`")


def test_crd_identity(crd: dict[str, Any]) -> None:
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["metadata"]["name"] == "placementpolicies.berth.dev"
    spec = crd["spec"]
    assert (spec["group"], spec["scope"], spec["names"]["kind"]) == ("berth.dev", "Namespaced", "PlacementPolicy")
    (version,) = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}


# -- structural ---------------------------------------------------------------------------------------

def test_schema_is_structural(root: dict[str, Any]) -> None:
    for path, node in walk(root):
        assert "type" in node, f"{path}: no type"
        assert node["type"] in ("object", "array", "string", "integer", "number", "boolean"), path
        assert not (FORBIDDEN & node.keys()), f"{path}: {FORBIDDEN & node.keys()}"
        assert not ("properties" in node and "additionalProperties" in node), f"{path}: both kinds of properties"
        if node["type"] == "array":
            assert "items" in node, f"{path}: array without items"
        if node["type"] == "object" and path not in (".metadata",):
            assert "properties" in node or "additionalProperties" in node or node.get(
                "x-kubernetes-preserve-unknown-fields"), f"{path}: an object that prunes everything"
        for name in node.get("required", ()):
            assert name in node["properties"], f"{path}: requires undeclared {name}"
        if "default" in node:
            assert check(node, node["default"]) is None, f"{path}: default breaks its own schema"
    assert root["properties"]["metadata"] == {"type": "object"}


def test_the_schema_does_not_recurse(root: dict[str, Any]) -> None:
    """No node is the same object as one of its ancestors (YAML anchors would make a cycle)."""
    def visit(node: Mapping[str, Any], ancestors: tuple[int, ...]) -> None:
        assert id(node) not in ancestors
        for sub in (node.get("properties") or {}).values():
            visit(sub, (*ancestors, id(node)))
        if "items" in node:
            visit(node["items"], (*ancestors, id(node)))
    visit(root, ())
    assert "&" not in CRD_FILE.read_text().split("\n", 2)[2].replace("&&", "")  # no anchors



def test_cel_rules_are_sane(root: dict[str, Any]) -> None:
    seen = 0
    for path, node in walk(root):
        for rule in node.get("x-kubernetes-validations", ()):
            seen += 1
            assert set(rule) <= {"rule", "message", "fieldPath", "reason", "messageExpression"}, path
            assert rule["message"].strip(), f"{path}: a rule without a message"
            assert balanced(rule["rule"]), f"{path}: unbalanced {rule['rule']}"
            assert "self" in rule["rule"]
            for name in SELF_FIELD.findall(rule["rule"]):
                assert name in node.get("properties", {}), f"{path}: rule reads undeclared self.{name}"
            if "fieldPath" in rule:
                assert rule["fieldPath"].startswith(".")
                assert rule["fieldPath"][1:] in node["properties"], f"{path}: fieldPath {rule['fieldPath']}"
            for literal in re.findall(r"'([^']*)'", rule["rule"]):
                enums = [sub.get("enum", ()) for sub in node.get("properties", {}).values()]
                assert any(literal in e for e in enums), f"{path}: {literal!r} is no enum value here"
    assert seen >= 10


def test_cel_checks_what_the_issue_asks(root: dict[str, Any]) -> None:
    spec = root["properties"]["spec"]
    rules = " ".join(r["rule"] for _, n in walk(spec) for r in n.get("x-kubernetes-validations", ()))
    assert "self.within" in rules and "'Pod'" in rules  # within only on Pod rules
    assert "has(self.anyOf) != has(self.allOf)" in rules  # a group object has exactly one key
    assert "self.minDomains" in rules and "'DoNotSchedule'" in rules
    assert "!has(self.matchLabelKeys) || size(self.matchLabelKeys) == 0 || has(self.labelSelector)" in rules


# -- the rule tree ------------------------------------------------------------------------------------

def _rule_nodes(root: dict[str, Any]) -> Iterator[tuple[int, Mapping[str, Any]]]:
    def visit(node: Mapping[str, Any], depth: int) -> Iterator[tuple[int, Mapping[str, Any]]]:
        yield depth, node
        for key in ("anyOf", "allOf"):
            if key in node["properties"]:
                yield from visit(node["properties"][key]["items"], depth + 1)
    yield from visit(root["properties"]["spec"]["properties"]["placementRules"]["items"], 1)


def test_rule_groups_nest_five_deep_and_no_deeper(root: dict[str, Any]) -> None:
    nodes = list(_rule_nodes(root))
    depths = sorted({d for d, _ in nodes})
    assert depths == [1, 2, 3, 4, 5, 6]
    for depth, node in nodes:
        props = node["properties"]
        assert {"resource", "operator", "labels", "within"} <= props.keys()
        assert set(props) - {"anyOf", "allOf"} == set(pr._RULE_FIELDS)
        if depth <= pr.MAX_DEPTH:
            for key in ("anyOf", "allOf"):
                assert props[key]["minItems"] == 1 and props[key]["maxItems"] == pr.MAX_RULES
        else:
            assert "anyOf" not in props and "allOf" not in props
            assert set(node["required"]) == {"resource", "operator", "labels"}


def test_rule_limits_come_from_the_core(root: dict[str, Any]) -> None:
    top = root["properties"]["spec"]["properties"]["placementRules"]
    assert top["maxItems"] == pr.MAX_RULES
    for _, node in _rule_nodes(root):
        props = node["properties"]
        assert props["resource"]["enum"] == [r.value for r in pr.Resource]
        assert props["operator"]["enum"] == [o.value for o in pr.Operator]
        labels = props["labels"]
        assert (labels["minProperties"], labels["maxProperties"]) == (1, pr.MAX_PAIRS)
        assert labels["additionalProperties"] == {"type": "string", "maxLength": pr.MAX_VALUE}
        assert (props["within"]["minLength"], props["within"]["maxLength"]) == (1, pr.MAX_WITHIN)


def test_rule_cel_stays_within_the_apiservers_budget(root: dict[str, Any]) -> None:
    """A rule at depth d can have 16**d instances; the apiserver refuses a rule whose cost
    times that exceeds 10**7 (and a CRD whose rules add up to 10**8), so the tree's CEL rules
    stop at CEL_RULE_DEPTH; the sixth level, plain rules only, has ``required`` instead. The
    e2e tests apply the CRD to a real kube-apiserver, which checks the actual budget."""
    for depth, node in _rule_nodes(root):
        rules = node.get("x-kubernetes-validations", [])
        if depth <= crdgen.CEL_RULE_DEPTH:
            assert len(rules) == 3
        elif depth <= pr.MAX_DEPTH:
            assert rules == []


# -- agreement with the pydantic models, both directions ---------------------------------------------

def test_spec_schema_and_modelagree(root: dict[str, Any]) -> None:
    agree(PlacementPolicySpec, root["properties"]["spec"], "spec", frozenset({"placementRules"}))


def test_status_schema_and_modelagree(root: dict[str, Any]) -> None:
    status = root["properties"]["status"]
    agree(PolicyStatus, status, "status", frozenset())
    conditions = status["properties"]["conditions"]
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    condition = conditions["items"]
    assert set(condition["required"]) == {"type", "status", "lastTransitionTime", "reason", "message"}
    assert condition["properties"]["lastTransitionTime"]["format"] == "date-time"


def test_printer_columns_read_declared_fields(crd: dict[str, Any], root: dict[str, Any]) -> None:
    (version,) = crd["spec"]["versions"]
    columns = {c["name"]: c for c in version["additionalPrinterColumns"]}
    assert [n for n, c in columns.items() if c.get("priority", 0) == 0] == ["Strategy", "Ready", "Placed", "Age"]
    for column in columns.values():
        path = re.sub(r"\[\?\(@\.type==\"(\w+)\"\)\]", "[]", column["jsonPath"])
        node: Mapping[str, Any] = root
        for part in path.strip(".").split("."):
            name = part.removesuffix("[]")
            node = node["properties"][name] if name != "metadata" else {"type": "object", "properties": {
                "creationTimestamp": {"type": "string"}}}
            if part.endswith("[]"):
                node = node["items"]
        assert column["type"] in ("string", "integer", "date")


def test_peering_crds() -> None:
    docs = [d for d in yaml.safe_load_all(PEERING_FILE.read_text()) if d]
    kinds = {(d["spec"]["names"]["kind"], d["spec"]["scope"], d["spec"]["group"]) for d in docs}
    assert kinds == {("ClusterKopfPeering", "Cluster", "kopf.dev"), ("KopfPeering", "Namespaced", "kopf.dev")}
    for doc in docs:
        status = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
        assert status["x-kubernetes-preserve-unknown-fields"] is True


@pytest.mark.parametrize("code", [c.value for c in ErrorCode])
def test_every_error_code_is_documented(root: dict[str, Any], code: str) -> None:
    """Tooling keys on the codes: the CRD's planError, the README and the explain API list each."""
    plan_error = root["properties"]["status"]["properties"]["planError"]["properties"]["code"]
    assert code in plan_error["description"]
    assert f"| `{code}` |" in (ROOT / "README.md").read_text()
    assert code in ERROR_CODES
