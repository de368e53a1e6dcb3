"""The PlacementPolicy: the contract between the CLI, the extender, the operator and the CRD.

pydantic models with Kubernetes' field conventions. :func:`policy_from_manifest`
is the one way in: it validates everything (the placement rules' limits included) and raises
:class:`~berth.core.errors.InvalidPolicy` naming the first bad field path. A
:class:`PlacementPolicy` compiles its spec once into the frozen types of
:mod:`berth.core.compiled`, which is all evaluation reads: the wire model stays for the shells.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.alias_generators import to_camel

from berth.core import compiled
from berth.core.errors import InvalidPolicy
from berth.core.labels import LabelKey, LabelKeyField, LabelValue
from berth.core.model import LabelSelector, Requirement
from berth.core.placement_rules import RuleNode, parse_rules
from berth.core.settings import MIN_FREE_DISK_PERCENT, OVERCOMMIT_PERCENT

API_GROUP = "berth.dev"
"""The API group of berth's custom resources (PlacementPolicy, NodeDrain)."""
CRD_VERSION = "v1alpha1"
"""The version of berth's custom resources in that group."""
API_VERSION = f"{API_GROUP}/{CRD_VERSION}"
KIND = "PlacementPolicy"
PLURAL = "placementpolicies"


class Strategy(StrEnum):
    AUTO = "Auto"
    FILL = "Fill"
    EACH = "Each"
    GLOBAL = "Global"
    DRAINED = "Drained"
    BALANCED = "Balanced"
    SPREAD = "Spread"
    BEST_FIT = "BestFit"


ROUND_STRATEGIES = frozenset({Strategy.FILL, Strategy.EACH})
"""Strategies whose plan is fixed at the start of a round; the rest are greedy, pod by pod."""


class AffinityMatching(StrEnum):
    ENFORCED = "Enforced"
    PREFERRED = "Preferred"


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid",
                              frozen=True)


class SelectorRequirement(_Model):
    key: LabelKeyField
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[LabelValue] = Field(default_factory=list)

    @model_validator(mode="after")
    def _values_fit_operator(self) -> SelectorRequirement:
        if self.operator in ("In", "NotIn") and not self.values:
            raise ValueError(f"operator {self.operator} needs at least one value")
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            raise ValueError(f"operator {self.operator} takes no values")
        return self


class Selector(_Model):
    match_labels: dict[LabelKey, LabelValue] = Field(default_factory=dict)
    match_expressions: list[SelectorRequirement] = Field(default_factory=list)

    def to_core(self) -> LabelSelector:
        return LabelSelector(dict(self.match_labels), tuple(
            Requirement(r.key, r.operator, tuple(r.values)) for r in self.match_expressions))


class NodeFilter(_Model):
    """Where the policy's pods may go: includes short-circuits labels, all and excludes."""

    includes: list[str] = Field(default_factory=list)
    excludes: list[str] = Field(default_factory=list)
    labels: dict[LabelKey, LabelValue] = Field(default_factory=dict)
    all: bool = False


class TopologySpreadConstraint(_Model):
    max_skew: int = Field(default=1, ge=1)
    topology_key: LabelKeyField
    when_unsatisfiable: Literal["DoNotSchedule", "ScheduleAnyway"] = "DoNotSchedule"
    label_selector: Selector | None = None
    min_domains: int | None = Field(default=None, ge=1)
    node_affinity_policy: Literal["Honor", "Ignore"] = "Honor"
    node_taints_policy: Literal["Honor", "Ignore"] = "Ignore"
    match_label_keys: list[LabelKeyField] = Field(default_factory=list)

    @model_validator(mode="after")
    def _min_domains_needs_do_not_schedule(self) -> TopologySpreadConstraint:
        if self.min_domains is not None and self.when_unsatisfiable != "DoNotSchedule":
            raise ValueError("minDomains is only allowed with whenUnsatisfiable: DoNotSchedule")
        return self


class CapacityOverrides(_Model):
    """Per-policy overrides of the cluster's capacity settings; unset fields use the cluster's."""

    cpu_overcommit_percent: int | None = OVERCOMMIT_PERCENT.field(None)
    memory_overcommit_percent: int | None = OVERCOMMIT_PERCENT.field(None)
    min_free_disk_percent: int | None = MIN_FREE_DISK_PERCENT.field(None)
    reject_unknown_capacity: bool | None = None


class PlacementPolicySpec(_Model):
    selector: Selector = Field(default_factory=Selector)
    strategy: Strategy | None = None
    count: int = Field(default=1, ge=0)
    nodes_limit: int = Field(default=0, ge=0)
    node_filter: NodeFilter = Field(default_factory=NodeFilter)
    topology_spread_constraints: list[TopologySpreadConstraint] = Field(default_factory=list)
    placement_rules: list[Any] = Field(default_factory=list)
    affinity_matching: AffinityMatching = AffinityMatching.ENFORCED
    capacity: CapacityOverrides = Field(default_factory=CapacityOverrides)

    @field_validator("placement_rules", mode="before")
    @classmethod
    def _rules_are_a_list(cls, value: object) -> object:
        return [] if value is None else value


class PlacementPolicy:
    """A validated policy: its identity, its wire ``spec`` (what the API holds; the shells write
    and compare it) and that spec compiled once into core types, the only part evaluation reads.

    Compiling validates what pydantic cannot (the rule tree, the spread constraints' API rules)
    and raises :class:`~berth.core.errors.InvalidPolicy` naming the field."""

    __slots__ = ("affinity_matching", "capacity", "count", "generation", "name", "namespace", "node_filter",
                 "nodes_limit", "rules", "selector", "spec", "spread_constraints", "strategy")

    def __init__(self, name: str, namespace: str, spec: PlacementPolicySpec, generation: int = 0) -> None:
        self.name = name
        self.namespace = namespace
        self.spec = spec
        self.generation = generation
        self.rules: tuple[RuleNode, ...] = parse_rules(spec.placement_rules)
        _check_spread(spec.topology_spread_constraints, "spec.topologySpreadConstraints")
        self.selector: LabelSelector = spec.selector.to_core()
        self.strategy: Strategy | None = spec.strategy
        self.count: int = spec.count
        self.nodes_limit: int = spec.nodes_limit
        self.affinity_matching: AffinityMatching = spec.affinity_matching
        nf = spec.node_filter
        self.node_filter = compiled.NodeFilter(tuple(nf.includes), frozenset(nf.excludes), dict(nf.labels), nf.all)
        self.spread_constraints: tuple[compiled.SpreadConstraint, ...] = tuple(
            _spread_constraint(c, self.selector) for c in spec.topology_spread_constraints)
        c = spec.capacity
        self.capacity = compiled.CapacityOverrides(c.cpu_overcommit_percent, c.memory_overcommit_percent,
                                                   c.min_free_disk_percent, c.reject_unknown_capacity)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def strategy_name(self) -> str:
        return self.strategy.value if self.strategy else "Default"

    def governs(self, namespace: str, labels: Mapping[str, str]) -> bool:
        """A policy governs only pods in its own namespace (the tenant) that its selector matches."""
        return namespace == self.namespace and self.selector.matches(labels)


def checked_manifest(obj: object, kind: str, invalid: Callable[[str, str], ValueError],
                     ) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """A manifest of berth's ``kind`` and its metadata, once its apiVersion and kind are berth's and
    it has a name; else ``invalid(field, problem)`` is raised."""
    if not isinstance(obj, Mapping):
        raise invalid("(document)", f"a {kind} must be a YAML or JSON object")
    if obj.get("apiVersion") != API_VERSION:
        raise invalid("apiVersion", f"must be {API_VERSION}, found {obj.get('apiVersion')!r}")
    if obj.get("kind") != kind:
        raise invalid("kind", f"must be {kind}, found {obj.get('kind')!r}")
    meta = obj.get("metadata") or {}
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str) or not meta.get("name"):
        raise invalid("metadata.name", "is required")
    return obj, meta


def policy_from_manifest(obj: object, *, default_namespace: str = "default") -> PlacementPolicy:
    """Validate a PlacementPolicy manifest (a dict as kubectl would send it)."""
    manifest, meta = checked_manifest(obj, KIND, InvalidPolicy)
    spec = _spec_model(manifest.get("spec"), "spec")
    return PlacementPolicy(meta["name"], str(meta.get("namespace") or default_namespace), spec,
                           int(meta.get("generation") or 0))


def spec_from_dict(raw: object, path: str = "spec") -> PlacementPolicySpec:
    """Validate a spec alone (admission): the wire model, then what compiling it checks."""
    spec = _spec_model(raw, path)
    parse_rules(spec.placement_rules, f"{path}.placementRules")
    _check_spread(spec.topology_spread_constraints, f"{path}.topologySpreadConstraints")
    return spec


def _spec_model(raw: object, path: str) -> PlacementPolicySpec:
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise InvalidPolicy(path, "must be an object")
    try:
        spec = PlacementPolicySpec.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InvalidPolicy(_path(path, first["loc"]), _problem(first)) from None
    return spec


def _spread_constraint(c: TopologySpreadConstraint, policy_selector: LabelSelector) -> compiled.SpreadConstraint:
    return compiled.SpreadConstraint(
        topology_key=c.topology_key,
        selector=c.label_selector.to_core() if c.label_selector is not None else policy_selector,
        max_skew=c.max_skew,
        when_unsatisfiable=compiled.WhenUnsatisfiable(c.when_unsatisfiable),
        min_domains=c.min_domains,
        node_affinity_policy=compiled.InclusionPolicy(c.node_affinity_policy),
        node_taints_policy=compiled.InclusionPolicy(c.node_taints_policy),
        match_label_keys=tuple(c.match_label_keys),
    )


def _check_spread(constraints: list[TopologySpreadConstraint], path: str) -> None:
    """What the Kubernetes API refuses in a pod's topology spread constraints, in its order."""
    for i, c in enumerate(constraints):
        here = f"{path}[{i}]"
        for later in constraints[i + 1:]:
            if (later.topology_key, later.when_unsatisfiable) == (c.topology_key, c.when_unsatisfiable):
                raise InvalidPolicy(f"{here}.{{topologyKey, whenUnsatisfiable}}",
                                    f"duplicate value {{{c.topology_key}, {c.when_unsatisfiable}}}: another "
                                    "constraint has the same topologyKey and whenUnsatisfiable")
        if not c.match_label_keys:
            continue
        if c.label_selector is None:
            raise InvalidPolicy(f"{here}.matchLabelKeys", "must not be specified when labelSelector is not set")
        selector_keys = set(c.label_selector.match_labels) | {r.key for r in c.label_selector.match_expressions}
        for j, key in enumerate(c.match_label_keys):  # each a label key already (LabelKeyField)
            if key in selector_keys:
                raise InvalidPolicy(f"{here}.matchLabelKeys[{j}]",
                                    f"{key!r} exists in both matchLabelKeys and labelSelector")


def _path(prefix: str, loc: tuple[int | str, ...]) -> str:
    out = prefix
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part not in ("function-after", "function-before") and not str(part).startswith("function-"):
            out += f".{part}"
    return out


def _problem(error: Mapping[str, Any]) -> str:
    kind = error.get("type")
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == "missing":
        return "is required"
    if kind == "enum":
        expected = (error.get("ctx") or {}).get("expected", "")
        return f"unknown value {error.get('input')!r}; expected {expected}"
    message = str(error.get("msg", "is invalid"))
    return message.removeprefix("Value error, ")
