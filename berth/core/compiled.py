"""A PlacementPolicy as evaluation reads it: frozen core types, made once from the validated wire
model (:mod:`berth.core.policy`) when the policy is read, and never again per evaluation.

The API's spellings (``"DoNotSchedule"``, ``"Honor"``) become enums, label selectors become
:class:`~berth.core.model.LabelSelector`, and a spread constraint without a selector gets the
policy's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from berth.core.model import LabelSelector


class WhenUnsatisfiable(StrEnum):
    """What a spread constraint does with a node that breaks it."""

    DO_NOT_SCHEDULE = "DoNotSchedule"  # refuse the node
    SCHEDULE_ANYWAY = "ScheduleAnyway"  # keep it, ranked by skew


class InclusionPolicy(StrEnum):
    """Whether a spread constraint counts only the nodes the pod may go to (kube-scheduler's
    nodeAffinityPolicy and nodeTaintsPolicy)."""

    HONOR = "Honor"
    IGNORE = "Ignore"


@dataclass(frozen=True, slots=True)
class NodeFilter:
    """The policy's node filter: ``includes`` short-circuits labels, liveness (unless ``all``) and
    ``excludes``."""

    includes: tuple[str, ...] = ()  # in the policy's order, in which a warning names unknown ones
    excludes: frozenset[str] = frozenset()
    labels: Mapping[str, str] = field(default_factory=dict)
    all: bool = False
    included: frozenset[str] = field(init=False, repr=False, compare=False)  # ``includes`` as a set
    key: tuple[object, ...] = field(init=False, repr=False, compare=False)
    """What the filter's verdicts depend on, as a value: filters alike share one verdict table."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "included", frozenset(self.includes))
        object.__setattr__(self, "key", (self.includes, tuple(sorted(self.excludes)),
                                         tuple(sorted(self.labels.items())), self.all))


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """One topology spread constraint, with kube-scheduler's PodTopologySpread semantics."""

    topology_key: str
    selector: LabelSelector  # the constraint's own, else the policy's
    max_skew: int = 1
    when_unsatisfiable: WhenUnsatisfiable = WhenUnsatisfiable.DO_NOT_SCHEDULE
    min_domains: int | None = None
    node_affinity_policy: InclusionPolicy = InclusionPolicy.HONOR
    node_taints_policy: InclusionPolicy = InclusionPolicy.IGNORE
    match_label_keys: tuple[str, ...] = ()

    @property
    def hard(self) -> bool:
        """Whether the constraint refuses nodes (DoNotSchedule) rather than ranking them."""
        return self.when_unsatisfiable is WhenUnsatisfiable.DO_NOT_SCHEDULE


@dataclass(frozen=True, slots=True)
class CapacityOverrides:
    """The policy's overrides of the cluster's capacity settings; None keeps the cluster's."""

    cpu_overcommit_percent: int | None = None
    memory_overcommit_percent: int | None = None
    min_free_disk_percent: int | None = None
    reject_unknown_capacity: bool | None = None
