"""Balanced (docs/behaviour.md#strategy-balanced): lowest projected memory use in 5% bands, then
disk, then CPU, then name.
For a sleepy pod, sleepy memory is divided by the sleepy factor when ranking (the capacity
check still uses real memory)."""

from __future__ import annotations

import math
from collections.abc import Callable

from berth.core.candidates import Candidate
from berth.core.model import PodInfo

BAND = 0.05


def memory_band(share: float) -> int:
    # A tiny epsilon keeps 40% in the 40% band despite binary floating point.
    return math.floor(share / BAND + 1e-9)


def _key(c: Candidate) -> tuple[object, ...]:
    return (memory_band(c.memory_after), c.disk_after, c.cpu_after, c.name)


def _sleepy_key(c: Candidate) -> tuple[object, ...]:
    return (memory_band(c.memory_after_discounted), c.disk_after, c.cpu_after, c.name)


def key(pod: PodInfo) -> Callable[[Candidate], tuple[object, ...]]:
    return _sleepy_key if pod.sleepy else _key
