"""Spread (docs/behaviour.md#strategy-spread): keep nodes evenly used, least projected use first.
Sleepy pods pack onto the node with the most subscribed sleepy memory, so sleepy nodes fill one
at a time. Projected use is the dominant share after placing, over the CPU and memory the pod
asks for (both for a pod that asks for neither); a resource the node does not report is left
out, never full."""

from __future__ import annotations

from collections.abc import Callable

from berth.core.candidates import Candidate
from berth.core.model import PodInfo


def sleepy_key(c: Candidate) -> tuple[object, ...]:
    return (-c.sleepy_memory, -c.projected_use, c.name)


def _key(c: Candidate) -> tuple[object, ...]:
    return (c.projected_use, c.name)


def key(pod: PodInfo) -> Callable[[Candidate], tuple[object, ...]]:
    return sleepy_key if pod.sleepy else _key
