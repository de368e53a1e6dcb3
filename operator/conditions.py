"""``metav1.Condition`` bookkeeping: a condition keeps its ``lastTransitionTime`` until its
status changes, and carries the generation it was computed for."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

ConditionStatus = Literal["True", "False", "Unknown"]

MESSAGE_LIMIT = 32768
"""``metav1.Condition.message`` holds at most this many bytes: the API server refuses the whole
status patch otherwise (a plan refused by every node of a large cluster names each one)."""
CUT = " ... (cut)"


@dataclass(frozen=True, slots=True)
class ConditionUpdate:
    type: str
    status: ConditionStatus
    reason: str
    message: str


def find(conditions: Iterable[Mapping[str, Any]] | None, kind: str) -> Mapping[str, Any] | None:
    for condition in conditions or ():
        if isinstance(condition, Mapping) and condition.get("type") == kind:
            return condition
    return None


def apply(previous: Iterable[Mapping[str, Any]] | None, updates: Iterable[ConditionUpdate], generation: int,
          now: str) -> list[dict[str, Any]]:
    """The new condition list: each update replaces its type, keeping ``lastTransitionTime``
    when the status did not change. Conditions of other types are kept as they were."""
    before = [dict(c) for c in previous or () if isinstance(c, Mapping)]
    updated = {u.type: u for u in updates}
    out: list[dict[str, Any]] = [c for c in before if c.get("type") not in updated]
    for update in updated.values():
        old = find(before, update.type)
        since = old.get("lastTransitionTime") if old and old.get("status") == update.status else None
        out.append({
            "type": update.type,
            "status": update.status,
            "observedGeneration": generation,
            "lastTransitionTime": since or now,
            "reason": update.reason,
            "message": bounded(update.message),
        })
    order = {u: i for i, u in enumerate(updated)}
    out.sort(key=lambda c: order.get(str(c.get("type")), -1))
    return out


def bounded(message: str, limit: int = MESSAGE_LIMIT) -> str:
    """``message``, or as much of its beginning as fits in ``limit`` bytes of UTF-8 with
    :data:`CUT` after it."""
    encoded = message.encode()
    if len(encoded) <= limit:
        return message
    return encoded[:limit - len(CUT.encode())].decode(errors="ignore") + CUT


def camel(code: str) -> str:
    """``insufficient_resource`` -> ``InsufficientResource`` (a condition reason)."""
    return "".join(part[:1].upper() + part[1:] for part in code.split("_") if part)
