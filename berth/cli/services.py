"""``berth extender`` and ``berth operator``: thin launchers for the long-running parts.

Their modules are imported only when the subcommand runs, so the rest of the CLI works even
when they (or their dependencies) cannot be imported. Placement settings given as flags are
handed over as the ``BERTH_*`` environment variables the extender and operator read.
"""

from __future__ import annotations

import importlib
import inspect
import os
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

SETTING_ENV = {
    "cpu_overcommit": "BERTH_CPU_OVERCOMMIT_PERCENT",
    "memory_overcommit": "BERTH_MEMORY_OVERCOMMIT_PERCENT",
    "min_free_disk": "BERTH_MIN_FREE_DISK_PERCENT",
    "reject_unknown_capacity": "BERTH_REJECT_UNKNOWN_CAPACITY",
    "liveness_threshold": "BERTH_LIVENESS_THRESHOLD_SECONDS",
}


class Unavailable(RuntimeError):
    """The subcommand's module or entry point cannot be loaded."""


def export_settings(given: Mapping[str, object]) -> None:
    """Set ``BERTH_*`` for every placement setting given on the command line."""
    for key, env in SETTING_ENV.items():
        value = given.get(key)
        if value is not None:
            os.environ[env] = str(value).lower() if isinstance(value, bool) else str(value)


def load_module(module: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except Exception as exc:  # any failure while importing: the CLI must still answer
        raise Unavailable(f"cannot import {module}: {type(exc).__name__}: {exc}") from None


def entry_point(module: str, *functions: str) -> Callable[..., Any]:
    """The first of ``functions`` that ``module`` defines."""
    loaded = load_module(module)
    for name in functions:
        fn = getattr(loaded, name, None)
        if callable(fn):
            return fn  # type: ignore[no-any-return]
    raise Unavailable(f"{module} has no function {' or '.join(f'{f}()' for f in functions)}")


def call_with(fn: Callable[..., Any], positional: tuple[Any, ...] = (), **named: Any) -> Any:
    """Call ``fn`` with the named arguments it accepts (all of them if it takes ``**kwargs``)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return fn(*positional, **named)
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        named = {k: v for k, v in named.items() if k in params}
    return fn(*positional, **named)


def exit_status(result: object) -> int:
    if isinstance(result, bool):
        return 0 if result else 1
    if isinstance(result, int):
        return result
    return 0


def run_extender(host: str, port: int, snapshot: str | None, dev_insecure: bool = False) -> int:
    serve = entry_point("berth.extender.server", "serve")
    if dev_insecure:
        return exit_status(call_with(serve, host=host, port=port, snapshot=snapshot, dev_insecure=True))
    return exit_status(call_with(serve, host=host, port=port, snapshot=snapshot))


def run_operator(argv: list[str]) -> int:
    """The operator's own command line (``main(argv)``) when it has one, else ``run()``."""
    entry = entry_point("berth.operator.main", "main", "run")
    if _takes_no_arguments(entry):
        if argv:
            raise Unavailable(f"{entry.__module__}.{entry.__name__}() takes no arguments: {' '.join(argv)}")
        return exit_status(entry())
    if entry.__name__ == "main":
        return exit_status(entry(argv))
    if argv:
        raise Unavailable(f"{entry.__module__}.run() takes no command-line arguments: {' '.join(argv)}")
    return exit_status(entry())


def _takes_no_arguments(fn: Callable[..., Any]) -> bool:
    try:
        return not inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
