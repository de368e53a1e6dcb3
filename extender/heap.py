"""Keeping Python's cyclic garbage collector out of the way of a large, long-lived view.

A view of 150,000 pods is millions of objects that live as long as the process. Left alone,
the collector scans them again and again while a full list is decoded (every few hundred
allocations) and at every full collection afterwards: seconds of build time and tens of
milliseconds added to an unlucky request. So the collector pauses while a list is applied,
and once the first full list is in, the view is collected once and frozen (``gc.freeze``):
those objects leave the collector's generations; they are still freed by reference counting.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_paused = 0


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic collection inside the block (nested and concurrent blocks are counted)."""
    global _paused
    with _lock:
        _paused += 1
        if _paused == 1:
            gc.disable()
    try:
        yield
    finally:
        with _lock:
            _paused -= 1
            if _paused == 0:
                gc.enable()


YOUNG_THRESHOLD = 10_000
"""Net container allocations between young collections (Python's default: 700). Nearly all that
a request allocates is freed by reference counting, and a request pair leaves about 30 objects
behind (its assumption, the pod it remembers): at the default a collection fell on one request
pair in twenty (measured: 22 young and 2 middle collections in 520 pairs at 500 nodes, pauses up
to 7 ms, each added to one request's latency); at this threshold about one in three hundred does,
scanning at most 10,000 young objects."""


def settle() -> None:
    """Collect once, then move every object alive now out of the collector's generations, and
    let young collections come less often (:data:`YOUNG_THRESHOLD`)."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, oldest)
