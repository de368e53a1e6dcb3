"""Every test of the core runs twice: with the index (the tables, orders and counts kept in step
with the view) and without it (every check over every node, nothing kept). Both must answer alike.
The property tests compare the two paths within each example, so they run once."""

from __future__ import annotations

import pytest

from berth.core.settings import INDEX_VARIABLE

PATHS = ["indexed", "naive"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "index_path" in metafunc.fixturenames and not metafunc.module.__name__.endswith("test_properties"):
        metafunc.parametrize("index_path", PATHS, indirect=True)


@pytest.fixture
def index_path(request: pytest.FixtureRequest) -> str:
    return getattr(request, "param", "indexed")


@pytest.fixture(autouse=True)
def index_switch(index_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``BERTH_INDEX`` for the test: every Settings made in it takes the path."""
    monkeypatch.setenv(INDEX_VARIABLE, "on" if index_path == "indexed" else "off")
