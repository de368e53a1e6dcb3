"""JSON merge patches (RFC 7386) between two statuses: the operator patches only what changed,
and a map entry that disappeared is removed (``null``) rather than merged into the old map."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def merge_patch(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> dict[str, Any]:
    """The patch that turns ``old`` into ``new``; empty when they are equal. ``None`` values in
    ``new`` mean absent."""
    old = old or {}
    patch: dict[str, Any] = {}
    for key in old.keys() | new.keys():
        before, after = old.get(key), new.get(key)
        if after is None:
            if before is not None:
                patch[key] = None
        elif isinstance(after, Mapping) and isinstance(before, Mapping):
            sub = merge_patch(before, after)
            if sub:
                patch[key] = sub
        elif before != after:
            patch[key] = _without_nulls(after)
    return patch


def _without_nulls(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def apply_merge_patch(target: Mapping[str, Any] | None, patch: Mapping[str, Any]) -> dict[str, Any]:
    """RFC 7386 application, for tests and for predicting the status after a patch."""
    out = dict(target or {})
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping):
            current = out.get(key)
            out[key] = apply_merge_patch(current if isinstance(current, Mapping) else {}, value)
        else:
            out[key] = value
    return out
