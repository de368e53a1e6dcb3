"""The status the operator writes on a PlacementPolicy, as pydantic models.

The CRD's status schema is generated from these models (:mod:`berth.operator.crdgen`), so a
field the operator writes is always declared (a structural schema prunes undeclared fields).
The operator builds plain dicts and validates them here before it patches, so the two cannot
drift either.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from berth.core import ERROR_CODES, DecisionRecord

CONDITION_VALID = "Valid"
CONDITION_SATISFIED = "Satisfied"
CONDITION_READY = "Ready"

REASON_PATTERN = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
TYPE_PATTERN = (r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$")

LIST_LIMIT = 50
"""At most this many nodes in each list of the status copy of a decision (``considered``, the
refused nodes over every group, ``ranking``); the pod's ``berth.dev/decision`` annotation keeps
its own."""


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class Condition(_Model):
    """A ``metav1.Condition``."""

    type: str = Field(max_length=316, pattern=TYPE_PATTERN,
                      description="Valid, Satisfied or Ready.")
    status: Literal["True", "False", "Unknown"]
    observed_generation: int | None = Field(
        default=None, ge=0, description="The .metadata.generation the condition was set for.")
    last_transition_time: str = Field(
        json_schema_extra={"format": "date-time"},
        description="When the condition last changed from one status to another.")
    reason: str = Field(min_length=1, max_length=1024, pattern=REASON_PATTERN,
                        description="A CamelCase word for the condition's last transition.")
    message: str = Field(max_length=32768, description="Details, for a human.")


class PlacementErrorStatus(_Model):
    code: str = Field(description=f"One of {ERROR_CODES}.")
    message: str


class PolicyDrainStatus(_Model):
    """A NodeDrain that moves (or plans to move) pods of the policy, and where they go."""

    name: str = Field(description="The NodeDrain.")
    mode: Literal["Plan", "Execute"] = Field(description="Plan: nothing is evicted; Execute: pods are moved.")
    phase: str | None = Field(default=None, description="The NodeDrain's phase.")
    moved: dict[str, int] = Field(default_factory=dict, description=(
        "Execute: the policy's pods the drain moved, per destination node."))
    planned: dict[str, int] = Field(default_factory=dict, description=(
        "The policy's pods with a planned destination not reached yet (planned, or being evicted), per "
        "destination node."))
    blocked: int = Field(default=0, ge=0, description="The policy's pods no destination can take: they stay.")


class PolicyStatus(_Model):
    observed_generation: int | None = Field(
        default=None, ge=0, description="The .metadata.generation this status describes.")
    conditions: list[Condition] = Field(default_factory=list)
    strategy: str | None = Field(default=None,
                                 description="The strategy in force: the spec's, or Default.")
    selected: int | None = Field(default=None, ge=0,
                                 description="Live pods the policy selects in its namespace.")
    placed: dict[str, int] | None = Field(default=None,
                                          description="Pods of the policy placed, per node.")
    placed_total: int | None = Field(default=None, ge=0, description="Pods of the policy placed.")
    pending: int | None = Field(default=None, ge=0,
                                description="Pods of the policy waiting for a node.")
    plan: dict[str, int] | None = Field(
        default=None, description="Where the pending pods would go now: node -> count.")
    plan_error: PlacementErrorStatus | None = Field(
        default=None, description="Why the pending pods cannot be placed now.")
    latest_decision: DecisionRecord | None = Field(default=None, description=(
        f"The newest decision recorded on the policy's pods (their berth.dev/decision annotation), "
        f"with at most {LIST_LIMIT} nodes in each list; docs/decision-record.schema.json describes it."))
    drains: list[PolicyDrainStatus] | None = Field(default=None, description=(
        f"The NodeDrains that move the policy's pods, by name (at most {LIST_LIMIT})."))


def validated(status: dict[str, Any]) -> dict[str, Any]:
    """Check a status dict against the model (raises ``ValidationError``) and return it."""
    PolicyStatus.model_validate(status)
    return status
