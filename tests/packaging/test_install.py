"""Python's tools work from the repository root, in a fresh venv, with no special environment.

The folders ``extender/`` and ``operator/`` are the import packages ``berth.extender`` and
``berth.operator`` (through the links ``berth/extender`` and ``berth/operator``). ``operator/``
has no ``__init__.py``: Python puts the working directory first on its import path, and a
regular package named ``operator`` there would shadow the standard library's ``operator`` (pip,
pytest and most of the standard library import it). Each test copies the repository's files to a
fresh directory and runs the commands a contributor types there, from its root.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ["berth", "berth.core", "berth.core.strategies", "berth.cli", "berth.extender", "berth.operator",
            "berth.operator.reconcile", "berth.extender.app", "berth.core.index", "berth.core.plugins",
            "berth.extender.routes.scheduler"]
CHECK = (
    "import importlib, operator\n"
    f"mods = {PACKAGES!r}\n"
    "for m in mods: importlib.import_module(m)\n"
    "assert operator.eq(1, 1) and hasattr(operator, 'itemgetter'), 'stdlib operator shadowed'\n"
    "import berth.operator.main as bo\n"
    "print('imported', len(mods), bo.__file__)\n"
)

pytestmark = pytest.mark.packaging


def _clean_env() -> dict[str, str]:
    """The environment without the variables that would hide a shadowed standard library."""
    return {k: v for k, v in os.environ.items() if k not in {"PYTHONSAFEPATH", "PYTHONPATH"}}


def _run(*args: str | Path, cwd: Path) -> str:
    done = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=600,
                          env=_clean_env())
    assert done.returncode == 0, f"{args} in {cwd} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _checkout(tmp: Path) -> Path:
    """The repository's files (tracked and new, links kept as links) in a fresh directory."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0")
    dest = tmp / "repo"
    for name in filter(None, listed):
        src = ROOT / name
        if not src.exists() and not src.is_symlink():
            continue  # deleted in the work tree, not yet in the index
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / name, follow_symlinks=False)
    assert (dest / "berth" / "operator").is_symlink(), "berth/operator must be the link to operator/"
    return dest


def _venv(tmp: Path) -> Path:
    """A fresh venv whose dependencies come from the running interpreter's site-packages (no
    network needed for them) while berth itself must come from what the test installs. No system
    site-packages and no .pth file that imports anything: such imports load the standard library's
    operator at start-up and would hide a shadowing operator/ package."""
    venv.EnvBuilder(with_pip=False, system_site_packages=False).create(tmp)
    python = tmp / "bin" / "python"
    site = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))", cwd=tmp).strip())
    outer = [p for p in sys.path if p.endswith("site-packages")]
    (site / "outer-dependencies.pth").write_text("\n".join(outer) + "\n")
    return python


def test_every_package_folder_is_in_the_distribution() -> None:
    """setuptools ships only the packages named in pyproject.toml: a new sub-package left out
    imports from the source tree and fails in the wheel and the image."""
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {".".join(Path(folder).relative_to(ROOT).parts)  # through the links berth/extender, berth/operator
               for folder, _, files in os.walk(ROOT / "berth", followlinks=True) if "__init__.py" in files}
    assert on_disk - listed == set()


def test_operator_folder_is_no_regular_package() -> None:
    assert not (ROOT / "operator" / "__init__.py").exists(), "operator/__init__.py shadows the standard library"


def test_pip_install_dot_from_the_root_installs_the_wheel(tmp_path: Path) -> None:
    repo = _checkout(tmp_path)
    python = _venv(tmp_path / "venv")
    stdlib = _run(python, "-c", "import sys; print('operator' in sys.modules)", cwd=repo)
    assert stdlib.strip() == "False", "the venv must not import operator at start-up"
    out = _run(python, "-c", "import operator; print(operator.eq(2, 2), operator.__file__)", cwd=repo)
    assert out.startswith("True ") and str(repo) not in out, out
    # Exactly what a user types (build isolation included: the build backend comes from the index).
    _run(python, "-m", "pip", "install", "--quiet", ".", cwd=repo)
    out = _run(python, "-c", CHECK, cwd=tmp_path)
    assert f"imported {len(PACKAGES)}" in out
    assert "site-packages" in out, f"the wheel must be imported, not the source tree: {out}"
    _run(tmp_path / "venv" / "bin" / "berth", "--help", cwd=repo)
    # the page's templates ship with the wheel (package data), and kubectl finds the plugin
    page = ("from berth.extender.page import environment\n"
            "for name in ('nodes.html', 'policies.html', 'placement.html', 'signin.html'):\n"
            "    environment().get_template(name)\n"
            "print('templates ok')\n")
    assert "templates ok" in _run(python, "-c", page, cwd=tmp_path)
    assert (tmp_path / "venv" / "bin" / "kubectl-berth").exists(), "the kubectl plugin executable"


def test_editable_install_and_pytest_from_the_root(tmp_path: Path) -> None:
    repo = _checkout(tmp_path)
    python = _venv(tmp_path / "venv")
    _run(python, "-m", "pip", "install", "--quiet", "-e", ".", cwd=repo)
    out = _run(python, "-c", CHECK, cwd=tmp_path)
    assert f"imported {len(PACKAGES)}" in out
    assert f"{repo}/berth/operator/main.py" in out, f"the editable install must import the source tree: {out}"
    # pytest from the root imports every test module (conftest, builders, the packages under test).
    # (pytest exits non-zero on any collection error, which _run refuses).
    collected = _run(python, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", cwd=repo)
    assert " tests collected" in collected, collected[-2000:]
    _run(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/core/test_fit.py", cwd=repo)
