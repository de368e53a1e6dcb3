"""The interactive API pages are not served unless asked for (BERTH_DOCS): their pages load
scripts from a CDN outside the cluster."""

from __future__ import annotations

import httpx
import pytest

from tests.abuse.conftest import Extender


@pytest.mark.parametrize("path", ["/docs", "/redoc", "/docs/oauth2-redirect"])
def test_the_api_pages_are_not_served(extender: Extender, path: str) -> None:
    for base in (extender.verbs, extender.api):
        assert httpx.get(base + path, timeout=5).status_code == 404


def test_the_api_pages_are_served_for_development() -> None:
    from fastapi.testclient import TestClient

    from berth.extender.app import create_app
    from berth.extender.settings import ExtenderSettings
    from berth.extender.store import ClusterStore

    client = TestClient(create_app(ClusterStore(), ExtenderSettings(docs=True)))
    assert client.get("/docs").status_code == 200 and client.get("/redoc").status_code == 200
