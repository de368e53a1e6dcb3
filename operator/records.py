"""What a policy's status reads of one pod: the core's plain data plus the few fields the status
needs (:meth:`berth.operator.cluster.OperatorStore.records` makes them)."""

from __future__ import annotations

from dataclasses import dataclass

from berth.core import PodInfo


@dataclass(frozen=True, slots=True)
class PodRecord:
    info: PodInfo
    terminal: bool  # phase Succeeded or Failed: holds no resources, is not the policy's anymore
    created: str  # metadata.creationTimestamp (RFC 3339), orders the pending pods
    decision: str | None  # the raw berth.dev/decision annotation, parsed only when needed
    round: str | None = None  # the raw berth.dev/round annotation: the round berth placed it in

    @property
    def live(self) -> bool:
        return not self.terminal and not self.info.terminating

    @property
    def pending(self) -> bool:
        return self.live and not self.info.node_name

    @property
    def placed(self) -> bool:
        return self.live and bool(self.info.node_name)
