"""A pod shape's fit verdict (:func:`berth.core.plugins.fit.judge`) worked out once per shape
rather than once per node: the first filter of a new shape judges every node of the view (its
fit table, :mod:`.judge`), 5,000 of them in a large cluster, on the scheduling path.

What ``judge`` works out from the shape alone for each node (the resources weighed, the
overcommit percent of each resource, the dimensions of the free share after placing) is worked
out here once, and a node that fits, the common case, gets its verdict without the refusal's
message being prepared; one that does not is judged by ``check_fit`` itself, so its message is
the plain path's. The arithmetic is the plain path's, in the same order, so the verdicts are the
same (``tests/core/test_index_shape.py`` holds it to that).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from berth.core.fit import REPORTED_DIMENSIONS, SHARE_DIMENSIONS, UNVERIFIED_CAPACITY, Fit, check_fit
from berth.core.model import NodeInfo, PodInfo
from berth.core.plugins.fit import PROJECTED_DIMENSIONS, Candidate, Fitted, NodeUse, weighed_dimensions
from berth.core.quantity import CPU, DISK, MEMORY, PODS
from berth.core.settings import Settings

ShapeJudge = Callable[[NodeInfo, NodeUse, int], Fitted]
"""(node, its use, the workload's pods there) -> the node's fit verdict for one shape."""


def shape_judge(need: Mapping[str, int], pod: PodInfo, settings: Settings) -> ShapeJudge:
    """:func:`berth.core.plugins.fit.judge` for pods of ``need``'s shape (``pod``: one of them)."""
    counted = [(name, amount, settings.overcommit_percent(name), name in REPORTED_DIMENSIONS)
               for name, amount in need.items() if name != DISK]
    disk_need = need.get(DISK, 0)
    disk_floor_percent = settings.min_free_disk_percent
    weighed = [(dim, need.get(dim, 0)) for dim in weighed_dimensions(need)]
    projected = [(dim, need.get(dim, 0)) for dim in weighed_dimensions(need, PROJECTED_DIMENSIONS)]
    shares = [(dim, need.get(dim, 0))
              for dim in (*SHARE_DIMENSIONS, *(d for d in need if d not in SHARE_DIMENSIONS and d != PODS))]
    cpu_need, mem_need, disk_share_need = need.get(CPU, 0), need.get(MEMORY, 0), need.get(DISK, 0)
    factor = settings.sleepy_memory_factor
    mem_added = mem_need / factor if pod.sleepy else mem_need

    def fit_of(alloc: Mapping[str, int], requested: Mapping[str, int]) -> Fit:
        capacity: int | None = None
        for name, amount, percent, reported in counted:
            total = alloc.get(name)
            if total is None:
                if reported:
                    return check_fit(alloc, requested, need, settings)  # unknown: the plain path's words
                total = 0
            free = total * percent // 100 - requested.get(name, 0)
            if amount > free:
                return check_fit(alloc, requested, need, settings)  # refused: the plain path's message
            fits_n = max(free, 0) // amount
            capacity = fits_n if capacity is None else min(capacity, fits_n)
        disk_total = alloc.get(DISK)
        if disk_total is None:
            return check_fit(alloc, requested, need, settings)
        room = disk_total - disk_total * disk_floor_percent // 100 - requested.get(DISK, 0)
        if disk_need > 0:
            fits_n = max(room, 0) // disk_need
            capacity = fits_n if capacity is None else min(capacity, fits_n)
        elif room < 0:
            capacity = 0
        if disk_need > room:
            return check_fit(alloc, requested, need, settings)
        return Fit(None, UNVERIFIED_CAPACITY if capacity is None else capacity, ())

    def judge(node: NodeInfo, use: NodeUse, count: int) -> Fitted:
        alloc, requested = node.allocatable, use.requested
        fit = fit_of(alloc, requested)
        usage = rate = 0.0
        known = 0
        for dim, added in weighed:
            total = alloc.get(dim)
            if total:
                known += 1
                usage += requested.get(dim, 0) / total
                rate += added / total
        if known:
            usage, rate = usage / known, rate / known
        # max and min as loops (no generator a node): the first extreme kept, as max and min keep it
        projected_use = None
        for dim, added in projected:
            total = alloc.get(dim)
            if total:
                share = (requested.get(dim, 0) + added) / total
                if projected_use is None or share > projected_use:
                    projected_use = share
        free_after = None
        for dim, added in shares:
            total = alloc.get(dim)
            if total:
                share = (total - requested.get(dim, 0) - added) / total
                if free_after is None or share < free_after:
                    free_after = share
        mem_total = alloc.get(MEMORY)
        mem_used = requested.get(MEMORY, 0)
        sleepy = use.sleepy_memory
        discounted = mem_used - sleepy + sleepy / factor + mem_added
        cpu_total, disk_total = alloc.get(CPU), alloc.get(DISK)
        candidate = Candidate(
            node.name, fit.capacity if fit.refusal is None else 0, count, usage, rate,
            0.0 if free_after is None else free_after, use.pod_count,
            (requested.get(CPU, 0) + cpu_need) / cpu_total if cpu_total else 1.0,
            (mem_used + mem_need) / mem_total if mem_total else 1.0,
            discounted / mem_total if mem_total else 1.0,
            (requested.get(DISK, 0) + disk_share_need) / disk_total if disk_total else 1.0,
            sleepy, 0.0 if projected_use is None else projected_use, fit.unverified)
        return Fitted(fit, candidate)

    return judge
