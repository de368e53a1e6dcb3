"""The distribution installs and imports cleanly, both editable and as a built wheel.

The folders ``extender/`` and ``operator/`` are mapped to ``berth.extender`` and
``berth.operator``: a top-level ``operator`` package would be shadowed by the standard library,
which imports its own ``operator`` before any user code runs.
"""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ["berth", "berth.core", "berth.core.strategies", "berth.cli", "berth.extender", "berth.operator"]
CHECK = (
    "import importlib, operator, sys\n"
    f"mods = {PACKAGES!r}\n"
    "for m in mods: importlib.import_module(m)\n"
    "assert hasattr(operator, 'itemgetter'), 'stdlib operator shadowed'\n"
    "import berth.operator as bo\n"
    "assert bo.__name__ == 'berth.operator'\n"
    "print('imported', len(mods))\n"
)

pytestmark = pytest.mark.packaging


def _venv(tmp: Path) -> Path:
    """A fresh venv whose dependencies come from the running interpreter's site-packages (no
    network needed) while berth itself must come from what the test installs."""
    venv.EnvBuilder(with_pip=False, system_site_packages=True).create(tmp)
    python = tmp / "bin" / "python"
    site = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))").strip())
    outer = [p for p in sys.path if p.endswith("site-packages")]
    (site / "outer-dependencies.pth").write_text("\n".join(outer) + "\n")
    return python


def _run(*args: str | Path, cwd: Path | None = None) -> str:
    done = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{args} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_built_wheel_imports_every_package(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    _run(sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", dist, ROOT, cwd=tmp_path)
    wheel = next(dist.glob("berth-*.whl"))
    python = _venv(tmp_path / "venv")
    _run(python, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet", wheel)
    out = _run(python, "-c", CHECK, cwd=tmp_path)
    assert f"imported {len(PACKAGES)}" in out
    installed = _run(python, "-c", "import berth, pathlib; print(pathlib.Path(berth.__file__).parent)",
                     cwd=tmp_path)
    assert "site-packages" in installed, "the wheel must be imported, not the source tree"


def test_editable_install_imports_every_package(tmp_path: Path) -> None:
    python = _venv(tmp_path / "venv")
    _run(python, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--quiet", "-e", ROOT)
    out = _run(python, "-c", CHECK, cwd=tmp_path)
    assert f"imported {len(PACKAGES)}" in out
    where = _run(python, "-c", "import berth.operator as m; print(m.__file__)", cwd=tmp_path)
    assert Path(where.strip()).parent == ROOT / "operator"
