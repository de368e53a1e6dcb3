"""The ways a placement can fail, each with a stable code that the CLI, the extender's
API and the policy status all report the same way."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class ErrorCode(StrEnum):
    INSUFFICIENT_RESOURCE = "insufficient_resource"  # no node has room, or too few for the round
    ALREADY_FILLED = "already_filled"  # a Fill round has nothing left to add
    AFFINITY_UNSATISFIED = "affinity_unsatisfied"  # nodes with room, none meeting the Enforced rules
    SPREAD_UNSATISFIED = "spread_unsatisfied"  # nodes with room, every one refused by topology spread


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
