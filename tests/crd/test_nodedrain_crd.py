"""The NodeDrain CRD: generated from the models (no drift), cluster-scoped, structural, its CEL
rules sane, its printer columns reading declared fields, and its schema agreeing with the core's
validation on a table of manifests."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from berth.core.drain import InvalidDrain
from berth.core.nodedrain import (
    MAX_NODES,
    NODE_NAME_MAX,
    NodeDrainSpec,
    nodedrain_from_manifest,
)
from berth.operator import crdgen
from berth.operator.drain_status import REFUSED_LIMIT, DrainPodStatus, NodeDrainStatus
from tests.crd.crd_checks import FORBIDDEN, SELF_FIELD, agree, balanced, walk
from tests.crd.nodedrain_manifests import INVALID, SCHEMA, VALID
from tests.crd.schema_check import check

ROOT = Path(__file__).resolve().parents[2]
CRD_FILE = ROOT / "crds" / "nodedrains.berth.dev.yaml"


@pytest.fixture(scope="module")
def crd() -> dict[str, Any]:
    return yaml.safe_load(CRD_FILE.read_text())


@pytest.fixture(scope="module")
def root(crd: dict[str, Any]) -> dict[str, Any]:
    (version,) = crd["spec"]["versions"]
    return version["schema"]["openAPIV3Schema"]


def test_committed_crd_is_what_the_generator_makes() -> None:
    assert CRD_FILE.read_text() == crdgen.render_nodedrain(), (
        "crds/nodedrains.berth.dev.yaml is stale: run `python -m berth.operator.crdgen nodedrains > "
        "crds/nodedrains.berth.dev.yaml`")


def test_generator_refuses_an_unknown_crd(capsys: pytest.CaptureFixture[str]) -> None:
    assert crdgen.main(["widgets"]) == 2
    assert "usage:" in capsys.readouterr().err


def test_crd_identity(crd: dict[str, Any]) -> None:
    assert crd["metadata"]["name"] == "nodedrains.berth.dev"
    spec = crd["spec"]
    assert (spec["group"], spec["scope"], spec["names"]["kind"]) == ("berth.dev", "Cluster", "NodeDrain")
    (version,) = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}


def test_schema_is_structural(root: dict[str, Any]) -> None:
    for path, node in walk(root):
        assert "type" in node, f"{path}: no type"
        assert not (FORBIDDEN & node.keys()), f"{path}: {FORBIDDEN & node.keys()}"
        if node["type"] == "array":
            assert "items" in node, f"{path}: array without items"
        if node["type"] == "object" and path != ".metadata":
            assert "properties" in node or "additionalProperties" in node, f"{path}: prunes everything"
        if "default" in node:
            assert check(node, node["default"]) is None, path


def test_cel_rules_are_sane_and_bounded(root: dict[str, Any]) -> None:
    spec = root["properties"]["spec"]
    rules = spec["x-kubernetes-validations"]
    assert len(rules) == 4
    for rule in rules:
        assert balanced(rule["rule"]) and rule["message"].strip()
        for name in SELF_FIELD.findall(rule["rule"]):
            assert name in spec["properties"], f"rule reads undeclared self.{name}"
        if "fieldPath" in rule:
            assert rule["fieldPath"][1:] in spec["properties"]
    # the apiserver prices a rule over lists by their maxItems: both lists are bounded
    for name in ("nodes", "destinations"):
        assert spec["properties"][name]["maxItems"] == MAX_NODES
        assert spec["properties"][name]["items"]["maxLength"] == NODE_NAME_MAX


def test_spec_and_status_schemas_agree_with_the_models(root: dict[str, Any]) -> None:
    spec = root["properties"]["spec"]
    agree(NodeDrainSpec, spec, "spec", frozenset({"nodes", "destinations"}))
    agree(NodeDrainStatus, root["properties"]["status"], "status", frozenset({"pods"}))
    pods = root["properties"]["status"]["properties"]["pods"]
    agree(DrainPodStatus, pods["items"], "status.pods[]", frozenset({"refused"}))
    assert pods["items"]["properties"]["refused"]["maxProperties"] == REFUSED_LIMIT


def test_printer_columns_read_declared_fields(crd: dict[str, Any], root: dict[str, Any]) -> None:
    (version,) = crd["spec"]["versions"]
    columns = version["additionalPrinterColumns"]
    assert [c["name"] for c in columns if c.get("priority", 0) == 0] == ["Phase", "Moved", "Planned", "Blocked",
                                                                         "Age"]
    for column in columns:
        if column["jsonPath"].startswith(".metadata"):
            continue
        node: Mapping[str, Any] = root
        for part in column["jsonPath"].strip(".").split("."):
            node = node["properties"][part]
        assert node["type"] == column["type"], column


@pytest.mark.parametrize(("name", "obj"), VALID, ids=[v[0] for v in VALID])
def test_valid_drains_pass_schema_and_core(name: str, obj: dict[str, Any], root: dict[str, Any]) -> None:
    assert check(root, obj) is None
    drain_name, spec = nodedrain_from_manifest(obj)
    assert drain_name == "drain-n1" and spec.to_request() is not None


@pytest.mark.parametrize(("name", "obj", "path", "refused_by"), INVALID, ids=[v[0] for v in INVALID])
def test_invalid_drains_are_refused_naming_the_field(name: str, obj: dict[str, Any], path: str, refused_by: str,
                                                     root: dict[str, Any]) -> None:
    with pytest.raises(InvalidDrain) as caught:
        nodedrain_from_manifest(obj)
    assert caught.value.field == path, caught.value
    problem = check(root, obj)
    if refused_by == SCHEMA:
        assert problem is not None and problem.startswith(path.split("[")[0]), problem
    else:  # the structural schema lets it through; a CEL rule with this message refuses it
        assert problem is None, problem
        messages = {r["message"] for _, n in walk(root) for r in n.get("x-kubernetes-validations", ())}
        assert refused_by in messages
