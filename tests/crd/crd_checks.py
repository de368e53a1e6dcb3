"""What the tests of each berth CRD check alike: a walk over the schema, the keywords a structural
schema may not use, two sanity checks of CEL rules, and the agreement of a schema with the pydantic
model it is generated from."""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Iterator, Mapping
from enum import Enum
from typing import Any

import annotated_types
from pydantic import BaseModel, WithJsonSchema


def walk(node: Mapping[str, Any], path: str = "") -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every node of a schema with its path (``.spec.rules[]``, ``.labels{}``), the root first."""
    yield path, node
    for name, sub in (node.get("properties") or {}).items():
        yield from walk(sub, f"{path}.{name}")
    if "items" in node:
        yield from walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), Mapping):
        yield from walk(node["additionalProperties"], f"{path}{{}}")


FORBIDDEN = {"$ref", "anyOf", "allOf", "oneOf", "not", "definitions", "additionalItems", "patternProperties",
             "dependencies", "id", "$schema", "uniqueItems", "title", "nullable"}
"""Keywords berth's CRD schemas never use: those a structural schema forbids or restricts, and a few it
may (``title``, ``nullable``) that berth keeps out."""

SELF_FIELD = re.compile(r"\bself\.([A-Za-z_][A-Za-z0-9_]*)")
"""A field a CEL rule reads from its object (``self.name``)."""


def balanced(rule: str) -> bool:
    """Whether a CEL rule's brackets close and its quotes end."""
    depth, quote = 0, ""
    for ch in rule:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
            if depth < 0:
                return False
    return depth == 0 and not quote


SCALARS = {int: "integer", str: "string", bool: "boolean", float: "number"}


def unwrap(annotation: Any) -> tuple[Any, bool]:
    """(the type without ``None``, whether None was allowed)."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        assert len(args) == 1, annotation
        return args[0], True
    return annotation, False


def plain(kind: Any) -> Any:
    """``Annotated[str, ...]`` (a label key or value) is a string in the schema."""
    return typing.get_args(kind)[0] if typing.get_origin(kind) is typing.Annotated else kind


def agree(model: type[BaseModel], node: Mapping[str, Any], path: str, skip: frozenset[str]) -> None:
    """Assert that a schema node and a pydantic model declare the same fields, types, bounds and
    defaults, both ways, but for the fields in ``skip``."""
    fields = {f.alias or name: f for name, f in model.model_fields.items()}
    props = node["properties"]
    assert set(fields) == set(props), f"{path}: model {sorted(fields)} vs CRD {sorted(props)}"
    required = {alias for alias, f in fields.items() if f.is_required()}
    assert required == set(node.get("required", ())), f"{path}: required"
    for alias, f in fields.items():
        if alias in skip:
            continue
        sub = props[alias]
        where = f"{path}.{alias}"
        kind, _ = unwrap(f.annotation)
        origin = typing.get_origin(kind)
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            assert sub["type"] == "object", where
            agree(kind, sub, where, frozenset())
        elif isinstance(kind, type) and issubclass(kind, Enum):
            assert sub["type"] == "string" and sub["enum"] == [e.value for e in kind], where
        elif origin is typing.Literal:
            assert sub["type"] == "string" and sub["enum"] == list(typing.get_args(kind)), where
        elif origin is list:
            (item,) = typing.get_args(kind)
            assert sub["type"] == "array", where
            if isinstance(item, type) and issubclass(item, BaseModel):
                agree(item, sub["items"], f"{where}[]", frozenset())
            else:
                assert sub["items"]["type"] == SCALARS[plain(item)], where
        elif origin is dict:
            key, value = typing.get_args(kind)
            assert plain(key) is str and sub["type"] == "object"
            assert sub["additionalProperties"]["type"] == SCALARS[plain(value)], where
        else:
            assert sub["type"] == SCALARS[kind], where
        bounds = {"minimum": None, "maximum": None, "minLength": None, "maxLength": None, "pattern": None}
        for meta in f.metadata:
            if isinstance(meta, annotated_types.Ge):
                bounds["minimum"] = meta.ge
            elif isinstance(meta, annotated_types.Le):
                bounds["maximum"] = meta.le
            elif isinstance(meta, annotated_types.MinLen):
                bounds["minLength"] = meta.min_length
            elif isinstance(meta, annotated_types.MaxLen):
                bounds["maxLength"] = meta.max_length
            elif hasattr(meta, "pattern"):
                bounds["pattern"] = meta.pattern
            elif isinstance(meta, WithJsonSchema) and meta.json_schema:  # a label key (berth.core.labels)
                bounds.update({k: v for k, v in meta.json_schema.items() if k in bounds})
        for key, value in bounds.items():
            assert sub.get(key) == value, f"{where}: {key} {sub.get(key)} vs model {value}"
        default = None if f.is_required() else f.get_default(call_default_factory=True)
        scalar = default is not None and not isinstance(default, (list, dict, BaseModel))
        expected = default.value if isinstance(default, Enum) else default
        assert sub.get("default") == (expected if scalar else None), f"{where}: default"
