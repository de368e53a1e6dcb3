"""Debian's chromium through chromium-driver (Selenium), headless, for the page tests: where it is,
how it starts, and how a page is opened (with a screenshot, failing on console errors)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

SCREENSHOTS = Path(__file__).resolve().parents[1] / "artifacts" / "screenshots"
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--window-size=1400,1000")


def chromium_tools() -> tuple[str, str]:
    """The browser and its driver; without them the test fails in CI and skips elsewhere."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if browser and driver:
        return browser, driver
    message = "chromium and chromium-driver are needed (bash hack/install-deps.sh, or apt-get install -y " \
              "chromium chromium-driver)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


def open_page(browser: Any, url: str, shot: str) -> None:
    """Load ``url``, save its screenshot as ``shot``.png, and fail on any error in the console."""
    browser.get(url)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    height = browser.execute_script("return document.body.scrollHeight")
    browser.set_window_size(1400, max(1000, min(int(height) + 40, 6000)))
    browser.save_screenshot(str(SCREENSHOTS / f"{shot}.png"))
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert errors == [], errors


def click_away(browser: Any, element: Any, away_from: str) -> None:
    """Click ``element`` and wait until the browser has left the page whose URL holds ``away_from``:
    click() returns once a link is followed or a form sent, not once the page it leads to loads."""
    from selenium.webdriver.support.ui import WebDriverWait

    element.click()
    WebDriverWait(browser, 30).until(lambda b: away_from not in b.current_url,
                                     f"still on {away_from} 30 s after the click")
