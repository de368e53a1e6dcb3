"""Child processes of the harness: started in their own process group, logged to a file, and
always ended (SIGTERM to the group, then SIGKILL) when the harness stops or the interpreter
exits.

On Linux, a process started from the main thread also gets ``SIGKILL`` from the kernel when
the test process dies without cleaning up (``setpriv --pdeathsig``), so no etcd or API server
outlives a killed pytest.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

_LIVE: set[ManagedProcess] = set()
_LIVE_LOCK = threading.Lock()


class HarnessError(RuntimeError):
    """A component of the test control plane could not be started or reached."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` right now (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def _tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


class ManagedProcess:
    """One long-running binary of the control plane.

    ``start()`` launches it in a new session (so it leads its own process group) with stdout
    and stderr appended to ``log_path``; ``stop()`` sends SIGTERM to the whole group, waits
    ``grace`` seconds, then sends SIGKILL.
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str | os.PathLike[str]],
        log_path: Path,
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.argv = [str(a) for a in argv]
        self.log_path = log_path
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.popen: subprocess.Popen[bytes] | None = None

    def __repr__(self) -> str:
        pid = self.popen.pid if self.popen else None
        return f"ManagedProcess({self.name!r}, pid={pid})"

    @property
    def pid(self) -> int | None:
        """The process id (also its process-group id), once started."""
        return self.popen.pid if self.popen else None

    def start(self) -> ManagedProcess:
        """Launch the process; returns self."""
        if self.popen is not None:
            raise HarnessError(f"{self.name} already started")
        argv = list(self.argv)
        setpriv = shutil.which("setpriv")
        # PR_SET_PDEATHSIG fires when the *thread* that forked dies: only use it from the main
        # thread, whose end is the end of the interpreter.
        if setpriv and threading.current_thread() is threading.main_thread():
            argv = [setpriv, "--pdeathsig", "KILL", "--", *argv]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **self.env} if self.env is not None else None
        with open(self.log_path, "ab") as log:
            log.write(f"==> {' '.join(self.argv)}\n".encode())
            log.flush()
            self.popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.cwd,
                start_new_session=True,
            )
        with _LIVE_LOCK:
            _LIVE.add(self)
        return self

    def alive(self) -> bool:
        """True while the process runs."""
        return self.popen is not None and self.popen.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the process' log."""
        return _tail(self.log_path, lines)

    def failure(self, what: str) -> HarnessError:
        """An error that carries the process' state and the end of its log."""
        state = "running"
        if self.popen is not None and self.popen.poll() is not None:
            state = f"exited with code {self.popen.returncode}"
        return HarnessError(f"{self.name}: {what} ({state}); log {self.log_path}, last lines:\n{self.log_tail()}")

    def wait_until(self, check: Callable[[], bool], timeout: float, what: str, interval: float = 0.2) -> None:
        """Poll ``check`` until it returns True; fail early if the process exits."""
        deadline = time.monotonic() + timeout
        while True:
            if not self.alive():
                raise self.failure(f"exited while waiting for {what}")
            try:
                if check():
                    return
            except Exception:  # the component is not up yet
                pass
            if time.monotonic() >= deadline:
                raise self.failure(f"not {what} after {timeout:.0f}s")
            time.sleep(interval)

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM the process group, then SIGKILL it after ``grace`` seconds. Idempotent."""
        popen = self.popen
        if popen is None:
            return
        try:
            if popen.poll() is None:
                _signal_group(popen.pid, signal.SIGTERM)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    popen.wait(timeout=grace)
            # The leader may be gone while children of the group are not.
            _signal_group(popen.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                popen.wait(timeout=10)
        finally:
            with _LIVE_LOCK:
                _LIVE.discard(self)


START_ATTEMPTS = 3
"""How many times :func:`started_on_free_ports` launches a process whose ports were taken."""


def started_on_free_ports(launch: Callable[[], tuple[ManagedProcess, Callable[[], bool]]], *, timeout: float,
                          what: str, interval: float = 0.2, undo: Callable[[], None] = lambda: None) -> ManagedProcess:
    """The process ``launch`` starts, once its check (the pair's second item) says it is ``what``.

    ``launch`` picks its ports with :func:`free_port`, before the child binds them, so another
    process can take one in between. When a launch fails and the child's log says its address was
    in use, the child is stopped, ``undo`` clears what the launch left, and it is launched again on
    new ports, :data:`START_ATTEMPTS` times at most. Any other failure is raised at once (after the
    same stop and ``undo``)."""
    for attempt in range(1, START_ATTEMPTS + 1):
        proc, ready = launch()
        try:
            proc.wait_until(ready, timeout, what, interval=interval)
        except HarnessError:
            proc.stop()
            undo()
            if attempt < START_ATTEMPTS and "address already in use" in proc.log_tail(200):
                continue
            raise
        return proc
    raise AssertionError("the last attempt returns or raises")


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def stop_all(grace: float = 5.0) -> None:
    """Stop every process the harness started that is still registered as live."""
    with _LIVE_LOCK:
        procs = list(_LIVE)
    for proc in procs:
        proc.stop(grace=grace)


atexit.register(stop_all)


def https_get(
    url: str,
    *,
    ca_file: Path | None = None,
    cert_file: Path | None = None,
    key_file: Path | None = None,
    verify: bool = True,
    timeout: float = 5.0,
) -> tuple[int, str]:
    """GET ``url``; returns (status, body). HTTP errors are returned, not raised."""
    ctx = ssl.create_default_context(cafile=str(ca_file) if ca_file else None)
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if cert_file and key_file:
        ctx.load_cert_chain(str(cert_file), str(key_file))
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=ctx) as resp:
            return resp.status, resp.read().decode(errors="replace")
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(errors="replace")
