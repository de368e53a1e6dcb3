"""The event loop's lateness, sampled (berth.extender.loop_lag): what a blocked loop costs the
calls waiting on it, apart from the API server's time."""

from __future__ import annotations

import asyncio
import time

from fastapi.testclient import TestClient

from berth.extender.app import create_app
from berth.extender.loop_lag import LoopLag
from berth.extender.settings import ExtenderSettings
from tests.builders import make_node
from tests.extender.helpers import Clock, make_store


def test_a_loop_blocked_for_a_while_is_observed_that_late() -> None:
    observed: list[float] = []

    async def run() -> None:
        lag = LoopLag(observed.append, interval=0.01)
        lag.start()
        await asyncio.sleep(0.05)  # a loop that keeps up
        time.sleep(0.2)  # then blocked: the sampler's wake-up is due meanwhile
        await asyncio.sleep(0.05)
        await lag.stop()

    asyncio.run(run())
    assert len(observed) >= 3
    assert max(observed) >= 0.15
    assert min(observed) < 0.05


def test_the_loops_lateness_is_exported_while_the_app_runs() -> None:
    app = create_app(make_store([make_node("a").cpu("2").obj()]), ExtenderSettings(), clock=Clock())
    with TestClient(app) as http:
        time.sleep(0.1)
        text = http.get("/metrics").text
    count = next(line for line in text.splitlines() if line.startswith("berth_event_loop_lag_seconds_count"))
    assert float(count.split()[-1]) >= 1
