"""How late the extender's event loop runs what is due: the time a bind's reply, already read
from the socket, may wait before the bind goes on.

kube-scheduler's verbs, the Binding calls, the nominator and the Event writer share one event
loop; the view's watches run in threads that take the interpreter lock from it. A coroutine whose
I/O is ready waits until the loop comes round to it, and that wait counts in the bind latency
kube-scheduler sees without being the API server's. :class:`LoopLag` sleeps a short interval again
and again and observes how much later than asked each sleep ends
(``berth_event_loop_lag_seconds``): a loop that keeps up observes about nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

INTERVAL_SECONDS = 0.025
"""How often the loop's lateness is sampled: 40 wake-ups a second, a negligible load."""


class LoopLag:
    """Samples the running loop's lateness into ``observe`` (seconds) every ``interval``, from
    :meth:`start` (on the loop) to :meth:`stop`."""

    def __init__(self, observe: Callable[[float], None], *, interval: float = INTERVAL_SECONDS) -> None:
        self.observe = observe
        self.interval = interval
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while True:
            due = time.perf_counter() + self.interval
            await asyncio.sleep(self.interval)
            self.observe(max(time.perf_counter() - due, 0.0))
