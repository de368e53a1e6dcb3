"""Keeping Python's cyclic garbage collector out of the way of a large, long-lived view.

A view of 150,000 pods is millions of objects that live as long as the process. Left alone,
the collector scans them again and again while a full list is decoded (every few hundred
allocations) and at every full collection afterwards: seconds of build time and tens of
milliseconds added to an unlucky request. So the collector pauses while a list is applied,
and once the first full list is in, the view is collected once and frozen (``gc.freeze``):
those objects leave the collector's generations; they are still freed by reference counting.
Young collections then come every :data:`YOUNG_THRESHOLD` new objects: often enough that each
is short, since every reply waiting on the event loop waits out a pause whole.
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


YOUNG_THRESHOLD = 2_000
"""Net container allocations between young collections (Python's default: 700). A young collection
scans every object allocated and still alive since the last one, and the time it holds the
interpreter is time no reply waits less: every bind in flight (tens of them while the API server
is slow) waits out the whole pause. At 10,000 the pauses were long (measured at 500 nodes, 2,000
filter + bind pairs on a loaded 2-core machine: young 4.6 ms median, 12 to 73 ms at worst, middle
11 to 21 ms) and took more time in all (190 to 280 ms) than at 2,000 (young 0.6 ms median, 1 to
4 ms at worst, middle 1 to 2 ms, one full collection of 6 to 9 ms; 100 to 120 ms in all: a smaller
young generation is scanned while still in the processor's caches). Below it (700, 1,000) the
pauses shrink little further and come on more requests."""


def settle() -> None:
    """Collect once, then move every object alive now out of the collector's generations, and
    let young collections come less often (:data:`YOUNG_THRESHOLD`)."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, oldest)
