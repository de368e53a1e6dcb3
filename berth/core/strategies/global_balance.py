"""Global (docs/behaviour.md#strategy-global): balance resource pressure, not instance counts. Each
pod goes to the node that would be least loaded after taking it (Usage + Rate, averaged over
every resource the pod asks for, ephemeral storage included); nodesLimit is ignored."""

from __future__ import annotations

from collections.abc import Callable

from berth.core.candidates import Candidate
from berth.core.model import PodInfo


def _key(c: Candidate) -> tuple[object, ...]:
    return (c.usage + c.rate, c.name)


def key(pod: PodInfo) -> Callable[[Candidate], tuple[object, ...]]:
    return _key
