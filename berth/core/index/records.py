"""The record a bind keeps (the pod's ``berth.dev/decision`` annotation), made from filter's record
as JSON data: filter's judgement of every node, with the node bound as the winner and the
bind's own time, warnings and round, cut to a bound number of nodes.

The plain path (the extender's ``_bind_record``) reads filter's record into the
:class:`~berth.core.decision.DecisionRecord` model, copies it and encodes it again, which costs a
bind about as much as its recheck; filter's record is berth's own encoding of that model's fields,
every field present, so the same record is the same JSON data changed field by field. The tests
hold both to the same bytes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from berth.core.decision import Decision, ranked_score, round_plan_data


def bind_record_data(node: str, earlier: Mapping[str, Any], recheck: Decision, *, whole_plan: bool,
                     limit: int) -> dict[str, Any]:
    """The bind's record as JSON data, every field by its JSON name in the record's order:
    ``earlier`` (filter's record, as JSON data) with ``node`` the winner at its place in filter's
    ranking, ``recheck``'s time and warnings (stamped, the bind's own judgement of ``node``) and
    round (by id, size and the node's places; the whole plan when ``whole_plan``), and at most
    ``limit`` nodes in each list (refused: over every group, the first groups first)."""
    ranking: list[str] = earlier["ranking"]
    position = ranking.index(node) if node in ranking else None
    warnings = list(dict.fromkeys([*earlier["warnings"], *recheck.warnings]))
    if ranking and ranking[0] != node:
        warnings.append(f"kube-scheduler chose {node}; berth ranked {ranking[0]} first")
    winner = {"node": node, "rank": None, "score": None} if position is None else {
        "node": node, "rank": position + 1,
        "score": ranked_score(position, max(earlier["rankingCount"], position + 1))}
    plan = recheck.plan
    refused = []
    room = limit
    for group in earlier["refused"]:
        nodes = group["nodes"][:room]
        room -= len(nodes)
        refused.append({**group, "nodes": nodes,
                        "details": {name: text for name, text in group["details"].items() if name in nodes}})
    return {**earlier, "trigger": "bind", "time": recheck.time,
            "round": round_plan_data(recheck.round_id, plan, node, whole=whole_plan) if plan is not None
            else earlier["round"],
            "considered": earlier["considered"][:limit], "refused": refused, "winner": winner,
            "ranking": ranking[:limit], "warnings": warnings, "error": None}
