"""A small validator with the semantics of a CRD's structural schema (without CEL): types, enums,
bounds, required fields, and unknown fields refused as kubectl's strict field validation does.
Returns the first problem as ``path: problem``, or None."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Schema = Mapping[str, Any]

_TYPES = {"object": Mapping, "array": list, "string": str, "boolean": bool}


def check(schema: Schema, value: Any, path: str = "") -> str | None:
    kind = schema.get("type")
    if value is None:
        return None  # the apiserver drops nulls of non-nullable fields
    if kind == "integer":
        if not isinstance(value, int) or isinstance(value, bool):
            return f"{path}: must be an integer"
    elif kind in _TYPES and not isinstance(value, _TYPES[kind]):
        return f"{path}: must be of type {kind}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{path}: unsupported value {value!r}"
    for key, test in (("minimum", lambda v, b: v >= b), ("maximum", lambda v, b: v <= b),
                      ("minLength", lambda v, b: len(v) >= b), ("maxLength", lambda v, b: len(v) <= b),
                      ("minItems", lambda v, b: len(v) >= b), ("maxItems", lambda v, b: len(v) <= b),
                      ("minProperties", lambda v, b: len(v) >= b), ("maxProperties", lambda v, b: len(v) <= b)):
        if key in schema and not test(value, schema[key]):
            return f"{path}: violates {key} {schema[key]}"
    if kind == "array":
        for i, item in enumerate(value):
            problem = check(schema["items"], item, f"{path}[{i}]")
            if problem:
                return problem
    if kind == "object":
        for name in schema.get("required", ()):
            if name not in value:
                return f"{path}.{name}: Required value"
        properties = schema.get("properties")
        extra = schema.get("additionalProperties")
        for name, item in value.items():
            sub = f"{path}.{name}" if path else name
            if properties is not None and name in properties:
                problem = check(properties[name], item, sub)
            elif isinstance(extra, Mapping):
                problem = check(extra, item, sub)
            elif schema.get("x-kubernetes-preserve-unknown-fields") or (properties is None and extra is None):
                problem = None
            else:
                problem = f"{sub}: unknown field"
            if problem:
                return problem
    return None
