"""The examples the README points at: every valid one passes the CRD's schema and the core;
every invalid one is refused by the core with the message its ``# berth:`` line states (the
webhook's message), and by the schema too where the schema can tell."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from berth.core.errors import InvalidPolicy
from berth.core.policy import Strategy, policy_from_manifest
from tests.crd.schema_check import check

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
VALID = sorted((EXAMPLES / "valid").glob("*.yaml"))
INVALID = sorted((EXAMPLES / "invalid").glob("*.yaml"))

# What the structural schema alone cannot refuse (the webhook and the Valid condition do), or
# refuses only through CEL (checked against a real API server by tests/e2e).
NOT_BY_OPENAPI = {
    "rule-missing-resource", "rule-missing-operator", "rule-missing-labels",  # CEL at depths 1-4
    "within-on-node-rule", "group-two-keys",  # CEL
    "min-domains-without-do-not-schedule", "selector-in-without-values",  # CEL
    "label-key-too-long", "label-key-empty", "labels-duplicate-after-trim", "too-many-rules",  # webhook only
    "spread-match-label-keys-without-selector",  # CEL
    "spread-match-label-keys-in-selector", "spread-duplicate-constraint",  # webhook only
}


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    crd = yaml.safe_load((ROOT / "crds" / "placementpolicies.berth.dev.yaml").read_text())
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def expected_message(path: Path) -> str:
    for line in path.read_text().splitlines():
        if line.startswith("# berth: "):
            return line.removeprefix("# berth: ")
    raise AssertionError(f"{path.name} has no '# berth: <message>' line")


def test_there_is_an_example_for_every_strategy_and_validation_rule() -> None:
    names = {p.stem for p in VALID}
    for strategy in Strategy:
        slug = {"BestFit": "best-fit"}.get(strategy.value, strategy.value.lower())
        assert f"strategy-{slug}" in names
    assert {"default-ranking", "topology-spread", "rules-nested", "web"} <= names
    assert len(INVALID) >= 19  # docs/behaviour.md#rule-limits, one file per limit


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.stem)
def test_valid_example(path: Path, schema: dict[str, Any]) -> None:
    body = yaml.safe_load(path.read_text())
    policy = policy_from_manifest(body)
    assert policy.name == path.stem
    assert check(schema, body) is None


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_invalid_example(path: Path, schema: dict[str, Any]) -> None:
    body = yaml.safe_load(path.read_text())
    assert body["metadata"]["name"] == path.stem
    with pytest.raises(InvalidPolicy) as refused:
        policy_from_manifest(body)
    assert str(refused.value) == expected_message(path)
    assert refused.value.path.startswith("spec")
    by_schema = check(schema, body)
    if path.stem in NOT_BY_OPENAPI:
        assert by_schema is None, f"{path.stem} is refused by the schema after all: {by_schema}"
    else:
        assert by_schema is not None, f"the schema accepts {path.stem}"
