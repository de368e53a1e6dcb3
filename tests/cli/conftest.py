from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from berth.cli.main import main
from tests.builders import make_pod, make_policy
from tests.cli import kube


@dataclass
class Result:
    code: int
    out: str
    err: str


@dataclass
class Files:
    json: Path  # the snapshot as kubectl get nodes,pods -A -o json prints it
    yaml: Path  # the same objects, one YAML document each
    policy: Path
    pod: Path
    dir: Path

    def write_policy(self, name: str, obj: object) -> Path:
        return kube.write_yaml(self.dir / name, obj)


@pytest.fixture
def files(tmp_path: Path) -> Files:
    return Files(
        json=kube.write_json(tmp_path / "snapshot.json", kube.cluster()),
        yaml=kube.write_yaml_docs(tmp_path / "snapshot.yaml", kube.cluster()),
        policy=kube.write_yaml(tmp_path / "policy.yaml", make_policy().strategy("Auto").obj()),
        pod=kube.write_yaml(tmp_path / "pod.yaml", {k: v for k, v in (make_pod("web-new")
                                                                      .cpu("500m")
                                                                      .memory("1Gi")
                                                                      .phase("Running")
                                                                      .obj()).items()
                                                   if k != "status"}),
        dir=tmp_path,
    )


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., Result]:
    """Run the CLI in-process: main(argv)."""

    def run(*argv: str | Path) -> Result:
        code = main([str(a) for a in argv])
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


def run_process(argv: Sequence[str | Path], stdin: str | None = None) -> Result:
    """Run the CLI as a separate process, for exit statuses and stderr as a user sees them."""
    proc = subprocess.run([sys.executable, "-m", "berth.cli.main", *map(str, argv)], input=stdin,
                          capture_output=True, text=True, timeout=120)
    return Result(proc.returncode, proc.stdout, proc.stderr)


def run_in_terminal(argv: Sequence[str | Path], timeout: float = 120) -> Result:
    """Run the CLI as a process whose standard error is a terminal (a pseudo-terminal read here);
    standard output stays a pipe (a file)."""
    import pty
    import tempfile

    master, slave = pty.openpty()
    env = dict(os.environ, COLUMNS="120", TERM="xterm")
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen([sys.executable, "-m", "berth.cli.main", *map(str, argv)], stdout=out,
                                stderr=slave, stdin=subprocess.DEVNULL, env=env)
        os.close(slave)
        err = bytearray()
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the terminal closed: the process is done with it
                break
            if not chunk:
                break
            err += chunk
        os.close(master)
        code = proc.wait(timeout)
        out.seek(0)
        return Result(code, out.read().decode(), err.decode(errors="replace"))


@pytest.fixture(autouse=True)
def _berth_environment_restored() -> Iterator[None]:
    """The service launchers hand settings over as BERTH_* variables of this process; put them
    back after each test so no later test (in any folder) inherits them."""
    before = {k: v for k, v in os.environ.items() if k.startswith("BERTH_")}
    yield
    for key in [k for k in os.environ if k.startswith("BERTH_")]:
        if key not in before:
            del os.environ[key]
    os.environ.update(before)
