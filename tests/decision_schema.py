"""The published decision record schema, for the tests of every writer of a decision."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema_rs

from berth.core.decision import DECISION_API_VERSION, DecisionRecord

SCHEMA_FILE = Path(__file__).resolve().parents[1] / "docs" / "decision-record.schema.json"


@cache
def _validator() -> Any:
    return jsonschema_rs.validator_for(json.loads(SCHEMA_FILE.read_text()))


def schema_problems(data: Any) -> list[str]:
    """What in ``data`` the published schema refuses (empty: valid)."""
    return [f"{'/'.join(map(str, error.instance_path)) or '(root)'}: {error.message}"
            for error in _validator().iter_errors(data)]


def valid_record(data: Any) -> DecisionRecord:
    """``data`` checked against the published schema and read back as the model."""
    problems = schema_problems(data)
    assert not problems, problems
    assert data["apiVersion"] == DECISION_API_VERSION
    return DecisionRecord.model_validate(data)
