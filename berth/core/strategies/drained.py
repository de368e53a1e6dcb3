"""Drained (docs/behaviour.md#strategy-drained): pack the tightest nodes first. Nodes by capacity
ascending (ties to the higher usage, weighed as Global weighs it), each filled to capacity
before the next; roomy nodes stay empty."""

from __future__ import annotations

from collections.abc import Callable

from berth.core.candidates import Candidate
from berth.core.model import PodInfo


def _key(c: Candidate) -> tuple[object, ...]:
    return (c.capacity, -c.usage, c.name)


def key(pod: PodInfo) -> Callable[[Candidate], tuple[object, ...]]:
    return _key
