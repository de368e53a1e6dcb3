"""How ``berth drain`` shows a drain's plan: one row per pod, its destination or why it has none."""

from __future__ import annotations

from collections.abc import Sequence

from berth.core import DrainPlan, PodState

_HEADERS = ("POD", "SOURCE", "STATE", "DESTINATION", "WHY")


SHOWN_DESTINATIONS = 6
SHOWN_REFUSALS = 10
"""A blocked pod's refusals shown in the table; ``--output json`` lists every destination's."""


def _names(names: Sequence[str]) -> str:
    if not names:
        return "(none)"
    if len(names) <= SHOWN_DESTINATIONS:
        return ", ".join(names)
    return f"{len(names)} nodes ({', '.join(names[:SHOWN_DESTINATIONS])}, ...)"


def table(plan: DrainPlan, notes: Sequence[str] = ()) -> str:
    """The plan as text: a row per pod; under a blocked pod, every destination's refusal; under any
    pod, its warnings; then a summary line and the notes."""
    rows = [_HEADERS]
    details: list[list[str]] = [[]]
    for p in plan.pods:
        why = p.code.value if p.state is PodState.BLOCKED and p.code else (p.reason or "")
        rows.append((p.pod, p.source, p.state.value, p.destination or "-", why))
        lines = [f"{node}: {reason}" for node, reason in list(p.refused.items())[:SHOWN_REFUSALS]]
        if len(p.refused) > SHOWN_REFUSALS:
            lines.append(f"... and {len(p.refused) - SHOWN_REFUSALS} more destinations (--output json lists them)")
        lines += [f"warning: {w}" for w in p.warnings]
        details.append(lines)
    widths = [max(len(row[i]) for row in rows) for i in range(len(_HEADERS) - 1)]
    indent = " " * (sum(widths) + 2 * len(widths))
    out = []
    for row, lines in zip(rows, details, strict=True):
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])]
        out.append("  ".join([*cells, row[-1]]).rstrip())
        out.extend(indent + line for line in lines)
    if not plan.pods:
        out.append("(no pod on the drained nodes is affected)")
    out.append("")
    out.append(f"{plan.count(PodState.PLANNED)} planned, {plan.count(PodState.BLOCKED)} blocked, "
               f"{plan.count(PodState.LEFT)} left where they are; drained: {', '.join(plan.nodes)}; "
               f"destinations: {_names(plan.destinations)}")
    out.extend(f"warning: {note}" for note in notes)
    return "\n".join(out) + "\n"
