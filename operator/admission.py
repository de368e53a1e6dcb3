"""The validating admission webhook's check: what the CRD's schema cannot express (at most 16
rules in all, keys unique after trimming, the rest of docs/behaviour.md#rule-limits) is refused
here, with the core's message naming the field path, e.g.
``spec.placementRules[0].labels.role: duplicate key after trimming``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from berth.core import API_VERSION, POLICY_KIND, InvalidPolicy, spec_from_dict

REFUSAL_CODE = 422  # Unprocessable Entity, as the apiserver answers a schema violation


def admission_problem(new: Mapping[str, Any] | None, old: Mapping[str, Any] | None, operation: str) -> str | None:
    """Why the API server must refuse this CREATE or UPDATE, or None to allow it.

    An UPDATE that leaves the spec as it was is allowed even when the spec is invalid (a policy
    that got in while the webhook was down): refusing it would block metadata and finalizer
    changes, and the policy's ``Valid`` condition already says what is wrong."""
    if operation not in ("CREATE", "UPDATE") or new is None:
        return None
    if operation == "UPDATE" and old is not None and old.get("spec") == new.get("spec"):
        return None
    if new.get("apiVersion") not in (None, API_VERSION) or new.get("kind") not in (None, POLICY_KIND):
        return None  # another version or kind: not ours to judge
    try:
        spec_from_dict(new.get("spec"))
    except InvalidPolicy as exc:
        return str(exc)
    return None
