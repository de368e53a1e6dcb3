"""Cluster-wide placement settings, resolved against a policy's overrides.

Plain data: the extender reads them from the environment (and logs and replaces invalid
values with the safe defaults: docs/behaviour.md#overcommit); the CLI takes them from flags.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import Field

if TYPE_CHECKING:
    from berth.core.policy import PlacementPolicy, Strategy


@dataclass(frozen=True, slots=True)
class Settings:
    cpu_overcommit_percent: int = 100  # 100 never overcommits; above 100 allows it
    memory_overcommit_percent: int = 100
    min_free_disk_percent: int = 10  # a node is refused when placing would leave less free disk
    reject_unknown_capacity: bool = False  # unknown capacity: rank last with a warning, or refuse
    liveness_threshold_seconds: float = 40.0  # a node Lease older than this means the node is down
    sleepy_memory_factor: float = 2.0  # sleepy memory divided by this when ranking (Balanced)
    default_strategy: Strategy | None = None  # for pods no policy selects; None lets them pass through
    # False runs every check plainly over every node, with no cache, table or kept order: the
    # reference the indexed path must answer like. None: the environment decides (BERTH_INDEX=off)
    index: bool | None = None

    def for_policy(self, policy: PlacementPolicy | None) -> Settings:
        if policy is None:
            return self
        c = policy.capacity
        return replace(
            self,
            cpu_overcommit_percent=_pick(c.cpu_overcommit_percent, self.cpu_overcommit_percent),
            memory_overcommit_percent=_pick(c.memory_overcommit_percent, self.memory_overcommit_percent),
            min_free_disk_percent=_pick(c.min_free_disk_percent, self.min_free_disk_percent),
            reject_unknown_capacity=_pick(c.reject_unknown_capacity, self.reject_unknown_capacity),
        )

    @property
    def indexed(self) -> bool:
        """Whether evaluation reads the index (:mod:`berth.core.index`) or judges plainly."""
        return self.index if self.index is not None else index_from_environment()

    def overcommit_percent(self, resource: str) -> int:
        if resource == "cpu":
            return self.cpu_overcommit_percent
        if resource == "memory":
            return self.memory_overcommit_percent
        return 100


INDEX_VARIABLE = "BERTH_INDEX"
_OFF = frozenset({"off", "false", "0", "no"})


def index_from_environment() -> bool:
    """Whether the index is on: unless ``BERTH_INDEX`` says off (``off``, ``false``, ``0``, ``no``)."""
    return os.environ.get(INDEX_VARIABLE, "on").strip().lower() not in _OFF


T = TypeVar("T")


def _pick(override: T | None, default: T) -> T:
    return default if override is None else override


@dataclass(frozen=True, slots=True)
class Bounds:
    """The values a setting accepts, from ``low`` to ``high`` (both allowed, unless ``above_low``:
    then ``low`` itself is refused, as a duration of 0 is). Defined once here: the extender's
    environment, a policy's ``spec.capacity``, the CLI's flags and the CRD's schema follow them."""

    low: float
    high: float
    above_low: bool = False
    unit: str = ""  # said after the bounds in a refusal ("seconds")

    def field(self, default: object) -> Any:
        """A pydantic field with these bounds and ``default``."""
        if self.above_low:
            return Field(default=default, gt=self.low, le=self.high)
        return Field(default=default, ge=self.low, le=self.high)

    def problem(self, value: float) -> str | None:
        """Why ``value`` is out of bounds (``must be between 1 and 10000, found 0``), or None."""
        unit = f" {self.unit}" if self.unit else ""
        found = f"{value:g}" if isinstance(value, float) else str(value)
        if self.above_low:
            if self.low < value <= self.high:
                return None
            return f"must be more than {self.low:g} and at most {self.high:g}{unit}, found {found}"
        if self.low <= value <= self.high:
            return None
        return f"must be between {self.low:g} and {self.high:g}{unit}, found {found}"

    def range_text(self) -> str:
        """The bounds as a flag's help says them (``1-10000``)."""
        return f"{self.low:g}-{self.high:g}" if not self.above_low else f"above {self.low:g}, at most {self.high:g}"


OVERCOMMIT_PERCENT = Bounds(1, 10000)
MIN_FREE_DISK_PERCENT = Bounds(0, 100)
LIVENESS_THRESHOLD_SECONDS = Bounds(0, 86400, above_low=True, unit="seconds")
SLEEPY_MEMORY_FACTOR = Bounds(1, 100)
