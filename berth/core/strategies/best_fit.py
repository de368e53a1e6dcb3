"""BestFit (docs/behaviour.md#strategy-best-fit): most projected use first, packing pods tightly
and keeping other nodes empty for large requests. Sleepy pods pack the same way as under Spread."""

from __future__ import annotations

from collections.abc import Callable

from berth.core.candidates import Candidate
from berth.core.model import PodInfo
from berth.core.strategies.spread import sleepy_key


def _key(c: Candidate) -> tuple[object, ...]:
    return (-c.projected_use, c.name)


def key(pod: PodInfo) -> Callable[[Candidate], tuple[object, ...]]:
    return sleepy_key if pod.sleepy else _key
