"""Progress of a long command on standard error (rich), only when standard error is a terminal.

``berth simulate`` on a large snapshot runs for a while: reading the snapshot, then each strategy
placing the mix. :class:`Progress` shows a bar per strategy and one for them all, with the pods
done, the time spent and an estimate of the time left. :func:`progress_for` gives ``None`` when
standard error is not a terminal or ``--quiet`` is given: nothing is written then.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    import rich.progress


class Progress:
    """The bars of one run; :meth:`update` is a :data:`berth.cli.simulate.Progress`."""

    def __init__(self, stream: IO[str]) -> None:
        import rich.progress as bars
        from rich.console import Console

        self._bars = bars.Progress(
            bars.SpinnerColumn(), bars.TextColumn("{task.description:<8}"), bars.BarColumn(bar_width=24),
            bars.MofNCompleteColumn(), bars.TextColumn("pods"), bars.TimeElapsedColumn(), bars.TextColumn("left"),
            bars.TimeRemainingColumn(), console=Console(file=stream, force_terminal=True), transient=False)
        self._tasks: list[rich.progress.TaskID] = []
        self._overall: rich.progress.TaskID | None = None
        self._done: list[int] = []

    def __enter__(self) -> Progress:
        self._bars.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._bars.stop()

    @contextmanager
    def step(self, description: str) -> Iterator[None]:
        """A step with no count (reading the snapshot): a spinner while it lasts, gone after."""
        task = self._bars.add_task(description, total=None)
        try:
            yield
        finally:
            self._bars.remove_task(task)

    def strategies(self, names: Sequence[str], pods: int) -> None:
        """One bar per strategy (``pods`` each) and one for all of them."""
        self._overall = self._bars.add_task("all", total=pods * len(names))
        self._tasks = [self._bars.add_task(name, total=pods) for name in names]
        self._done = [0] * len(names)

    def update(self, index: int, done: int) -> None:
        """Strategy ``index`` has done ``done`` pods of the mix."""
        assert self._overall is not None, "strategies() first"
        self._bars.update(self._tasks[index], completed=done)
        self._done[index] = done
        self._bars.update(self._overall, completed=sum(self._done))


def progress_for(quiet: bool, stream: IO[str] | None = None) -> Progress | None:
    """Bars on ``stream`` (standard error), or None when quiet or not a terminal."""
    stream = stream if stream is not None else sys.stderr
    if quiet or not stream.isatty():
        return None
    return Progress(stream)
