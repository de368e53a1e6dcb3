"""The default ranking (docs/behaviour.md#strategy-default), used when a policy names no
strategy: the node that keeps the most free share of its tightest resource after the placement
wins; ties go to the node with fewer pods, then to the lowest name."""

from __future__ import annotations

from collections.abc import Callable

from berth.core.candidates import Candidate
from berth.core.model import PodInfo


def _key(c: Candidate) -> tuple[object, ...]:
    return (-c.free_share_after, c.pod_count, c.name)


def key(pod: PodInfo) -> Callable[[Candidate], tuple[object, ...]]:
    return _key
