"""The placement rule language of the PlacementPolicy (docs/behaviour.md#placement-rules).

    placementRules = [node, ...]          every node must hold (AND)
    node           = rule | {anyOf: [node, ...]} | {allOf: [node, ...]}
    rule           = {resource: Node | Pod, operator: Has | HasNot, labels: {k: v}, within: key}

Parsing validates every limit (docs/behaviour.md#rule-limits) and names the field path of
the first problem found, so ``kubectl apply`` and the CLI can say exactly what is wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from berth.core.errors import InvalidPolicy

MAX_RULES = 16
MAX_DEPTH = 5
MAX_PAIRS = 32
MAX_KEY = 128
MAX_VALUE = 1000
MAX_WITHIN = 128


@dataclass(frozen=True, slots=True)
class RuleLimits:
    """The limits parsing enforces, as one value for what states them elsewhere (the CRD's schema)."""

    rules: int = MAX_RULES  # rules in total, those in groups included
    depth: int = MAX_DEPTH  # how deep groups nest
    pairs: int = MAX_PAIRS  # label pairs of one rule
    key: int = MAX_KEY  # characters of a label key, after trimming
    value: int = MAX_VALUE  # characters of a label value, after trimming
    within: int = MAX_WITHIN  # characters of a within key, after trimming


RULE_LIMITS = RuleLimits()

_RULE_FIELDS = frozenset({"resource", "operator", "labels", "within"})


class Resource(StrEnum):
    NODE = "Node"  # reads the node's labels
    POD = "Pod"  # reads the labels of the pods on the node


class Operator(StrEnum):
    HAS = "Has"
    HAS_NOT = "HasNot"


@dataclass(frozen=True, slots=True)
class Rule:
    resource: Resource
    operator: Operator
    labels: Mapping[str, str]
    within: str | None = None

    def describe(self) -> str:
        pairs = ",".join(f"{k}={v}" for k, v in sorted(self.labels.items()))
        within = f" within {self.within}" if self.within else ""
        return f"{self.resource.value} {self.operator.value} {{{pairs}}}{within}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"resource": self.resource.value, "operator": self.operator.value,
                               "labels": dict(self.labels)}
        if self.within:
            out["within"] = self.within
        return out


@dataclass(frozen=True, slots=True)
class Group:
    any: bool  # anyOf when true, allOf otherwise
    members: tuple[RuleNode, ...]

    def describe(self) -> str:
        word = "anyOf" if self.any else "allOf"
        return f"{word}({'; '.join(m.describe() for m in self.members)})"

    def to_dict(self) -> dict[str, Any]:
        return {"anyOf" if self.any else "allOf": [m.to_dict() for m in self.members]}


RuleNode = Rule | Group


def parse_rules(raw: object, path: str = "spec.placementRules") -> tuple[RuleNode, ...]:
    """Parse and validate a rule list; absent or [] means no rules."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InvalidPolicy(path, "must be a list of rules")
    counter = [0]
    nodes = tuple(_parse_node(item, f"{path}[{i}]", 1, counter) for i, item in enumerate(raw))
    if counter[0] > MAX_RULES:
        raise InvalidPolicy(path, f"has {counter[0]} rules in total, including rules in groups; at most "
                                  f"{MAX_RULES} are allowed")
    return nodes


def _parse_node(raw: object, path: str, depth: int, counter: list[int]) -> RuleNode:
    if not isinstance(raw, Mapping):
        raise InvalidPolicy(path, "must be a rule or an anyOf / allOf group")
    group_keys = [k for k in ("anyOf", "allOf") if k in raw]
    if group_keys:
        if len(raw) != 1:
            raise InvalidPolicy(path, f"a group object must have exactly one key (anyOf or allOf), "
                                      f"found {', '.join(sorted(map(str, raw)))}")
        key = group_keys[0]
        if depth > MAX_DEPTH:
            raise InvalidPolicy(f"{path}.{key}", f"groups nest more than {MAX_DEPTH} deep")
        members = raw[key]
        if not isinstance(members, list) or not members:
            raise InvalidPolicy(f"{path}.{key}", "must be a non-empty list of rules or groups")
        return Group(key == "anyOf", tuple(
            _parse_node(m, f"{path}.{key}[{i}]", depth + 1, counter) for i, m in enumerate(members)))
    counter[0] += 1
    return _parse_rule(raw, path)


def _parse_rule(raw: Mapping[str, Any], path: str) -> Rule:
    unknown = sorted(str(k) for k in raw if k not in _RULE_FIELDS)
    if unknown:
        raise InvalidPolicy(f"{path}.{unknown[0]}", "unknown field; a rule has resource, operator, labels "
                                                    "and within")
    for required in ("resource", "operator", "labels"):
        if required not in raw:
            raise InvalidPolicy(f"{path}.{required}", "is required")
    try:
        resource = Resource(raw["resource"])
    except ValueError:
        raise InvalidPolicy(f"{path}.resource", f"unknown value {raw['resource']!r}; use Node or Pod") from None
    try:
        operator = Operator(raw["operator"])
    except ValueError:
        raise InvalidPolicy(f"{path}.operator", f"unknown value {raw['operator']!r}; use Has or HasNot") from None
    labels = _parse_labels(raw["labels"], f"{path}.labels")
    within: str | None = None
    if "within" in raw:
        if resource is Resource.NODE:
            raise InvalidPolicy(f"{path}.within", "is only allowed on Pod rules")
        value = raw["within"]
        if not isinstance(value, str) or not value.strip():
            raise InvalidPolicy(f"{path}.within", "must be a non-empty node label key")
        within = value.strip()
        if len(within) > MAX_WITHIN:
            raise InvalidPolicy(f"{path}.within", f"is {len(within)} characters; at most {MAX_WITHIN}")
    return Rule(resource, operator, labels, within)


def _parse_labels(raw: object, path: str) -> dict[str, str]:
    if not isinstance(raw, Mapping):
        raise InvalidPolicy(path, "must be a map of label keys to values")
    if not raw:
        raise InvalidPolicy(path, f"must have 1 to {MAX_PAIRS} pairs, found none")
    if len(raw) > MAX_PAIRS:
        raise InvalidPolicy(path, f"must have 1 to {MAX_PAIRS} pairs, found {len(raw)}")
    labels: dict[str, str] = {}
    for key, value in raw.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise InvalidPolicy(f"{path}.{key}", "keys and values must be strings")
        k, v = key.strip(), value.strip()
        if not 1 <= len(k) <= MAX_KEY:
            raise InvalidPolicy(f"{path}.{key}", f"key must have 1 to {MAX_KEY} characters after trimming")
        if len(v) > MAX_VALUE:
            raise InvalidPolicy(f"{path}.{k}", f"value has {len(v)} characters; at most {MAX_VALUE}")
        if k in labels:
            raise InvalidPolicy(f"{path}.{k}", "duplicate key after trimming")
        labels[k] = v
    return labels


def reads_pods(rules: tuple[RuleNode, ...]) -> bool:
    """Whether any rule reads pods (so placing a pod can change other nodes' verdicts)."""
    return any(map(_reads_pods, rules))


def _reads_pods(rule: RuleNode) -> bool:
    # Module-level, not nested: a nested recursive function is a reference cycle, left for the
    # cyclic collector on every call (this runs in every scheduling cycle).
    if isinstance(rule, Group):
        return any(map(_reads_pods, rule.members))
    return rule.resource is Resource.POD
