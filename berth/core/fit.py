"""Will it fit, and how many more pods of a shape fit on a node (docs/behaviour.md#fit).

Allocatable (times the overcommit percent) against the effective requests of every pod bound
or assumed on the node. Disk is a free-share floor rather than a request sum. A dimension the
node does not report is *unknown*: never zero, never unlimited.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from berth.core.model import PodInfo
from berth.core.quantity import CPU, DISK, MEMORY, PODS, format_amount
from berth.core.settings import Settings

UNVERIFIED_CAPACITY = 1
"""Capacity of a node that cannot verify a dimension the pod asks for: one pod, never more (unknown
is never unlimited). Such a node stays eligible pod by pod, ranked after every verified node
(docs/behaviour.md#unknown-capacity)."""

SHARE_DIMENSIONS = (CPU, MEMORY, DISK)
REPORTED_DIMENSIONS = frozenset({CPU, MEMORY, DISK, PODS})
"""What every node reports of itself; missing one means the figure is unknown. An extended
resource (``nvidia.com/gpu``, ``hugepages-2Mi``) missing from allocatable means the node has none."""


def demand(pod: PodInfo) -> dict[str, int]:
    """What one more pod of this shape takes from a node: its requests and one pod slot."""
    need = {name: amount for name, amount in pod.requests.items() if amount > 0}
    need[PODS] = 1
    return need


@dataclass(frozen=True, slots=True)
class Fit:
    refusal: str | None  # "insufficient capacity: memory: needs ..." or None when it fits
    capacity: int  # how many more pods of this shape fit
    unverified: tuple[str, ...] = ()  # dimensions the node does not report


def check_fit(allocatable: Mapping[str, int], requested: Mapping[str, int], need: Mapping[str, int],
              settings: Settings) -> Fit:
    shortfalls: list[str] = []
    unknown: list[str] = []
    capacity: int | None = None
    for name, amount in need.items():
        if name == DISK:
            continue
        total = allocatable.get(name)
        if total is None:
            if name in REPORTED_DIMENSIONS:
                unknown.append(name)
                continue
            total = 0  # Kubernetes: a node that lists no extended resource has none of it
        percent = settings.overcommit_percent(name)
        limit = total * percent // 100
        free = limit - requested.get(name, 0)
        fits_n = max(free, 0) // amount
        capacity = fits_n if capacity is None else min(capacity, fits_n)
        if amount > free:
            # The shortfall is what the message shows missing: a node past its limit shows 0 free.
            shown = max(free, 0)
            over = f" at {percent}% overcommit" if percent != 100 else ""
            shortfalls.append(
                f"{name}: needs {format_amount(name, amount)}, {format_amount(name, shown)} free of "
                f"{format_amount(name, total)} allocatable{over} (short by {format_amount(name, amount - shown)})")
    disk_total = allocatable.get(DISK)
    if disk_total is None:
        unknown.append(DISK)
    else:
        disk_need = need.get(DISK, 0)
        floor = disk_total * settings.min_free_disk_percent // 100
        room = disk_total - floor - requested.get(DISK, 0)
        if disk_need > 0:
            fits_n = max(room, 0) // disk_need
            capacity = fits_n if capacity is None else min(capacity, fits_n)
        elif room < 0:
            capacity = 0
        if disk_need > room:
            left = max(disk_total - requested.get(DISK, 0) - disk_need, 0)  # as the message shows it
            shortfalls.append(
                f"{DISK}: placing leaves {format_amount(DISK, left)} free of "
                f"{format_amount(DISK, disk_total)} allocatable, below the {settings.min_free_disk_percent}% "
                f"free floor (short by {format_amount(DISK, floor - left)})")
    if unknown and settings.reject_unknown_capacity:
        shortfalls.append(f"unknown capacity: the node reports no {', '.join(sorted(unknown))}")
    refusal = "insufficient capacity: " + "; ".join(shortfalls) if shortfalls else None
    if refusal and unknown and settings.reject_unknown_capacity and len(shortfalls) == 1:
        refusal = shortfalls[0]
    if unknown:
        # Unknown is never unlimited: what cannot be verified takes at most one pod at a time.
        capacity = UNVERIFIED_CAPACITY if capacity is None else min(capacity, UNVERIFIED_CAPACITY)
    return Fit(refusal, UNVERIFIED_CAPACITY if capacity is None else capacity, tuple(sorted(unknown)))


def unverified_warning(node: str, dims: tuple[str, ...]) -> str:
    return f"{node}: capacity unverified for {', '.join(dims)}; ranked after verified nodes"


def room_text(node: str, more: int, capacity: int, unverified: tuple[str, ...]) -> str:
    """Why a node cannot take ``more`` pods of a round: its room, or that its room is unknown."""
    if unverified:
        return f"{node} needs {more} more but its capacity is unknown (the node reports no {', '.join(unverified)})"
    return f"{node} needs {more} more but has room for {capacity}"
