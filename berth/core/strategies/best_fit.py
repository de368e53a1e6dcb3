"""Seed 002's best-fit: most projected use first, packing pods tightly and keeping other nodes
empty for large requests. Sleepy pods pack the same way as under Spread."""

from __future__ import annotations

from collections.abc import Callable

from berth.core.candidates import Candidate
from berth.core.model import PodInfo
from berth.core.strategies.spread import sleepy_key


def key(pod: PodInfo) -> Callable[[Candidate], tuple[object, ...]]:
    if pod.sleepy:
        return sleepy_key
    return lambda c: (-c.projected_use, c.name)
