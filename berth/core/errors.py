"""The ways a placement can fail, each with a stable code that the CLI, the extender's
API and the policy status all report the same way."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class ErrorCode(StrEnum):
    INSUFFICIENT_RESOURCE = "insufficient_resource"  # seed 000 ErrInsufficientResource, seed 002 out_of_capacity
    ALREADY_FILLED = "already_filled"  # seed 000 ErrAlreadyFilled
    AFFINITY_UNSATISFIED = "affinity_unsatisfied"  # nodes with room, none meeting the Enforced rules
    SPREAD_UNSATISFIED = "spread_unsatisfied"  # nodes with room, every one refused by topology spread
    PLACEMENT_BUSY = "placement_busy"  # seed 002: every fitting node locked until the deadline


ERROR_CODES = ", ".join(code.value for code in ErrorCode)
"""Every code, as the CRD's schema and the API document them."""


@dataclass(frozen=True, slots=True)
class PlacementError:
    code: ErrorCode
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code.value, "message": self.message}


class InvalidPolicy(ValueError):
    """A PlacementPolicy that must be refused. ``path`` is the offending field, e.g.
    ``spec.placementRules[1].anyOf[0].labels``."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem
