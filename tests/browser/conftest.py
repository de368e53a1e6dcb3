"""The page tests' ``browser`` fixture: one headless Chromium a test module (:mod:`tests.browser.chromium`)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

from tests.browser.chromium import CHROMIUM_FLAGS, chromium_tools


@pytest.fixture(scope="module")
def browser(extender: str) -> Iterator[Any]:
    """Headless Chromium through chromium-driver, for the module; it asks for the module's
    ``extender`` fixture so that the server is up first."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, driver_path = chromium_tools()
    profile = tempfile.mkdtemp(prefix="berth-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=driver_path))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
