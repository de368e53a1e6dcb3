"""What berth records about one placement: the nodes considered, which were refused and
why, the winner and the warnings. Stored on the pod (annotation), in the policy status and
served by the explain API; it round-trips through JSON unchanged."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from berth.core.errors import ErrorCode, PlacementError

DECISION_ANNOTATION = "berth.dev/decision"


@dataclass(frozen=True, slots=True)
class Refusal:
    reason: str
    resolvable: bool = True  # False: preemption cannot fix it (node filter, node rules, liveness)


@dataclass
class Decision:
    pod: str  # namespace/name, or a shape's description
    policy: str | None  # namespace/name
    strategy: str
    considered: list[str] = field(default_factory=list)
    refused: dict[str, Refusal] = field(default_factory=dict)
    ranking: list[str] = field(default_factory=list)  # passing nodes, best first
    warnings: list[str] = field(default_factory=list)
    error: PlacementError | None = None
    trigger: str = "preview"  # filter | bind | plan | preview
    time: str | None = None  # RFC 3339, stamped by the shell that records it
    plan: dict[str, int] | None = None  # the round's node -> count plan, when one was made

    @property
    def winner(self) -> str | None:
        return self.ranking[0] if self.ranking and self.error is None else None

    def refusal_lines(self) -> list[str]:
        """``node-a: insufficient capacity: ...`` for every refused node, in name order."""
        return [f"{node}: {self.refused[node].reason}" for node in sorted(self.refused)]

    def to_dict(self, *, ranking_limit: int = 10) -> dict[str, Any]:
        return {
            "pod": self.pod,
            "policy": self.policy,
            "strategy": self.strategy,
            "trigger": self.trigger,
            "time": self.time,
            "considered": list(self.considered),
            "refused": {node: self.refused[node].reason for node in sorted(self.refused)},
            "winner": self.winner,
            "ranking": self.ranking[:ranking_limit],
            "warnings": list(self.warnings),
            "error": self.error.to_dict() if self.error else None,
            "plan": dict(self.plan) if self.plan is not None else None,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Decision:
        error = data.get("error")
        return cls(
            pod=str(data.get("pod", "")),
            policy=data.get("policy"),
            strategy=str(data.get("strategy", "")),
            considered=list(data.get("considered") or []),
            refused={n: Refusal(str(r)) for n, r in (data.get("refused") or {}).items()},
            ranking=list(data.get("ranking") or []),
            warnings=list(data.get("warnings") or []),
            error=PlacementError(ErrorCode(error["code"]), str(error["message"])) if error else None,
            trigger=str(data.get("trigger", "preview")),
            time=data.get("time"),
            plan={str(k): int(v) for k, v in data["plan"].items()} if data.get("plan") else None,
        )
