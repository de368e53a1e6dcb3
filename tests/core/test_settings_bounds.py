"""Each placement setting's bounds are defined once (berth.core.settings); the extender's
environment, a policy's spec.capacity, the CLI's flags and the chart's values schema follow them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from berth.core import policy_from_manifest
from berth.core.errors import InvalidPolicy
from berth.core.settings import (
    LIVENESS_THRESHOLD_SECONDS,
    MIN_FREE_DISK_PERCENT,
    OVERCOMMIT_PERCENT,
    SLEEPY_MEMORY_FACTOR,
    Bounds,
)
from berth.extender.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]

BOUNDS = {  # setting (its chart value name) -> its bounds
    "cpuOvercommitPercent": OVERCOMMIT_PERCENT,
    "memoryOvercommitPercent": OVERCOMMIT_PERCENT,
    "minFreeDiskPercent": MIN_FREE_DISK_PERCENT,
    "livenessThresholdSeconds": LIVENESS_THRESHOLD_SECONDS,
    "sleepyMemoryFactor": SLEEPY_MEMORY_FACTOR,
}


@pytest.mark.parametrize(("case", "bounds", "value", "problem"), [
    ("low_is_allowed", Bounds(1, 10000), 1, None),
    ("high_is_allowed", Bounds(1, 10000), 10000, None),
    ("below_low", Bounds(1, 10000), 0, "must be between 1 and 10000, found 0"),
    ("above_high_an_integer_in_full", Bounds(1, 10000), 1234567, "must be between 1 and 10000, found 1234567"),
    ("above_low_refuses_low", Bounds(0, 86400, above_low=True, unit="seconds"), 0.0,
     "must be more than 0 and at most 86400 seconds, found 0"),
    ("above_low_takes_a_fraction", Bounds(0, 86400, above_low=True), 0.5, None),
])
def test_bounds_say_what_is_wrong(case: str, bounds: Bounds, value: float, problem: str | None) -> None:
    assert bounds.problem(value) == problem, case


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


@pytest.mark.parametrize("name", list(BOUNDS))
def test_the_extender_environment_refuses_what_the_bounds_refuse(name: str) -> None:
    bounds = BOUNDS[name]
    field = _snake(name)
    default = getattr(load_settings(), field)
    outside = bounds.high + 1
    inside = bounds.high
    assert getattr(load_settings(**{field: inside}), field) == inside
    assert getattr(load_settings(**{field: outside}), field) == default  # logged, the safe default used


@pytest.mark.parametrize("name", ["cpuOvercommitPercent", "memoryOvercommitPercent", "minFreeDiskPercent"])
def test_a_policy_override_refuses_what_the_bounds_refuse(name: str) -> None:
    bounds = BOUNDS[name]

    def policy(value: float) -> object:
        return policy_from_manifest({"apiVersion": "berth.dev/v1alpha1", "kind": "PlacementPolicy",
                                     "metadata": {"name": "p"}, "spec": {"capacity": {name: value}}})

    policy(int(bounds.high))
    with pytest.raises(InvalidPolicy, match=f"spec.capacity.{name}"):
        policy(int(bounds.high) + 1)


def test_the_chart_values_schema_has_the_same_bounds() -> None:
    schema = json.loads((ROOT / "charts" / "berth" / "values.schema.json").read_text())
    settings = schema["properties"]["settings"]["properties"]
    for name, bounds in BOUNDS.items():
        low = "exclusiveMinimum" if bounds.above_low else "minimum"
        assert (settings[name].get(low), settings[name].get("maximum")) == (bounds.low, bounds.high), name
