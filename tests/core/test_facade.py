"""The shells (the extender, the operator, the CLI) reach the core through ``berth.core`` alone.

What is beneath the facade can then change without touching them; the facade itself stays the
handful of names they use, and importing it loads none of the shells or their libraries.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import berth.core

ROOT = Path(__file__).resolve().parents[2]
SHELLS = ("extender", "operator", "berth/cli")


def deep_imports(source: str, path: str) -> list[str]:
    """``path:line`` and the statement of every import in ``source`` that reaches beneath the facade:
    ``berth.core.<module>`` in any form, or a name ``berth.core`` does not export (a module of it)."""
    found = []
    for node in ast.walk(ast.parse(source, path)):
        if isinstance(node, ast.Import):
            deep = [a.name for a in node.names if a.name.startswith("berth.core.")]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            if node.module.startswith("berth.core."):
                deep = [node.module]
            elif node.module == "berth.core":
                deep = [f"berth.core.{a.name}" for a in node.names if a.name not in berth.core.__all__]
            elif node.module == "berth":
                deep = [f"berth.{a.name}" for a in node.names if a.name == "core"]
            else:
                deep = []
        else:
            continue
        found.extend(f"{path}:{node.lineno}: {name}" for name in deep)
    return found


def shell_files() -> list[Path]:
    return sorted(p for folder in SHELLS for p in (ROOT / folder).rglob("*.py"))


@pytest.mark.parametrize(("source", "expected"), [
    ("from berth.core import PodInfo, evaluate_pod\n", []),
    ("import berth.core\n", []),
    ("from berth.core.view import ClusterView\n", ["x.py:1: berth.core.view"]),
    ("import os\nimport berth.core.policy as p\n", ["x.py:2: berth.core.policy"]),
    ("from berth.core import nodedrain\n", ["x.py:1: berth.core.nodedrain"]),
    ("def f():\n    from berth.core.kube import parse_time\n", ["x.py:2: berth.core.kube"]),
    ("from berth import core\n", ["x.py:1: berth.core"]),
    ("from berth.extender.store import Store\n", []),
])
def test_deep_import_is_found_with_its_line(source: str, expected: list[str]) -> None:
    assert deep_imports(source, "x.py") == expected


def test_shells_import_the_core_through_its_facade_only() -> None:
    files = shell_files()
    assert len(files) > 30  # the scan sees the shells
    found = [hit for p in files for hit in deep_imports(p.read_text(), str(p.relative_to(ROOT)))]
    assert found == [], "import these from berth.core (add them to its __all__ if new):\n" + "\n".join(found)


def test_facade_exports_only_what_the_shells_use() -> None:
    used: set[str] = set()
    for p in shell_files():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "berth.core":
                used.update(a.name for a in node.names)
    assert sorted(set(berth.core.__all__) - used) == []
    assert len(berth.core.__all__) == len(set(berth.core.__all__))
    missing = [name for name in berth.core.__all__ if not hasattr(berth.core, name)]
    assert missing == []


def test_importing_the_core_loads_no_shell_and_no_library_of_theirs() -> None:
    code = ("import sys, berth.core\n"
            "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('fastapi', 'uvicorn', 'kubernetes', 'kopf', 'jinja2', 'prometheus_client', 'rich', 'matplotlib') "
            "or m.startswith(('berth.extender', 'berth.operator', 'berth.cli')))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split() == []


def test_every_file_the_readme_says_decides_something_exists() -> None:
    """The README's "Where things are decided" table names files; each must be there (a bare file
    name is in the folder of the path before it in the same cell; <name> stands for any)."""
    text = (ROOT / "README.md").read_text()
    table = text.split("## Where things are decided", 1)[1].split("\n## ", 1)[0]
    named = []
    for row in table.splitlines():
        if not row.startswith("|"):
            continue
        folder = ""
        for path in re.findall(r"`([\w./<>-]+\.(?:py|md|html))`", row.split("|")[2]):
            if "/" in path:
                folder = path.rsplit("/", 1)[0]
            else:
                path = f"{folder}/{path}"
            named.append(path)
    assert len(named) > 20
    assert sorted(n for n in named if "<" not in n and not (ROOT / n).exists()) == []
