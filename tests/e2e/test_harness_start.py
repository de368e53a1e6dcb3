"""The harness starts each control-plane binary on ports it picked before the binary binds them: a
launch whose address was taken meanwhile is launched again on new ports, a few times at most, and
any other failure is raised at once. Real child processes, no control plane."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.harness.process import START_ATTEMPTS, HarnessError, ManagedProcess, started_on_free_ports

CLASH = "print('listen tcp 127.0.0.1:4001: bind: address already in use'); raise SystemExit(1)"
BROKEN = "print('flag provided but not defined: -bogus'); raise SystemExit(2)"
UP = "import time; time.sleep(60)"

STARTS = [
    # name, what each launch runs in turn (the last one again for any launch after), launches made,
    # launches that failed (each stopped and undone), whether a process is returned
    ("ready_at_once", [UP], 1, 0, True),
    ("address_taken_once_then_ready", [CLASH, UP], 2, 1, True),
    ("address_taken_on_every_attempt", [CLASH], START_ATTEMPTS, START_ATTEMPTS, False),
    ("another_failure_is_not_retried", [BROKEN, UP], 1, 1, False),
]


@pytest.mark.parametrize(("name", "programs", "launches", "failed", "started"), STARTS, ids=[c[0] for c in STARTS])
def test_a_start_is_retried_only_when_its_address_was_taken(tmp_path: Path, name: str, programs: list[str],
                                                             launches: int, failed: int, started: bool) -> None:
    made: list[ManagedProcess] = []
    undone: list[int] = []

    def launch() -> tuple[ManagedProcess, Callable[[], bool]]:
        program = programs[min(len(made), len(programs) - 1)]
        proc = ManagedProcess(f"child-{len(made)}", [sys.executable, "-c", program],
                              tmp_path / f"child-{len(made)}.log").start()
        made.append(proc)
        return proc, lambda: program == UP

    def undo() -> None:
        undone.append(len(made))

    try:
        if started:
            proc = started_on_free_ports(launch, timeout=10, what="up", interval=0.05, undo=undo)
            assert proc is made[-1] and proc.alive()
        else:
            with pytest.raises(HarnessError, match="exited while waiting for up"):
                started_on_free_ports(launch, timeout=10, what="up", interval=0.05, undo=undo)
        assert len(made) == launches
        assert undone == list(range(1, failed + 1))  # once after each failed launch, before the next
        assert [p.alive() for p in made] == [False] * failed + [True] * (launches - failed)
    finally:
        for p in made:
            p.stop(grace=1)
