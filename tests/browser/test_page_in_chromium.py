"""The page in a real browser: Debian's chromium, driven by Selenium through chromium-driver,
against ``berth extender`` in snapshot mode started as a subprocess on 127.0.0.1.

Checks what a person sees: the bars carry the allocations API's figures, a Pending pod's card names
each node's reason, nothing is logged to the console. Screenshots of every view are saved under
``tests/artifacts/screenshots/`` (gitignored; CI keeps them as artefacts). In CI (``CI=true``) a
missing browser fails these tests; elsewhere it skips them with the command that installs it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.browser.chromium import chromium_tools, click_away, open_page
from tests.builders import make_node, make_pod, make_policy
from tests.e2e.harness.process import free_port

WEB = {"app": "web"}
ZONE = "topology.kubernetes.io/zone"


def _snapshot() -> dict[str, Any]:
    gpu = (make_node("gpu-1")
           .cpu("16")
           .memory("64Gi")
           .labels({ZONE: "b", "pool": "gpu"})
           .taints([{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}])
           .obj())
    gpu["status"]["allocatable"]["nvidia.com/gpu"] = "4"
    no_memory = make_node("edge-1").cpu("2").memory(None).labels({ZONE: "c"}).obj()
    web = make_policy("web").strategy("Spread").obj()
    web["status"] = {"conditions": [{"type": "Ready", "status": "True", "reason": "Placed", "message": "ok"},
                                    {"type": "Satisfied", "status": "False", "reason": "InsufficientResource",
                                     "message": "web-big fits nowhere"}], "plan": {"app-1": 1}}
    return {"apiVersion": "v1", "kind": "List", "items": [
        make_node("app-1").cpu("8").memory("32Gi").labels({ZONE: "a", "pool": "app"}).obj(),
        make_node("app-2").cpu("8").memory("32Gi").labels({ZONE: "b", "pool": "app"}).obj(),
        make_node("app-3").cpu("4").memory("16Gi").labels({ZONE: "a", "pool": "app"}).cordoned().obj(),
        gpu, no_memory, web,
        make_pod("web-0").labels(WEB).cpu("6").memory("20Gi").on("app-1").obj(),
        make_pod("web-1").labels(WEB).cpu("3").memory("8Gi").on("app-2").obj(),
        make_pod("web-2").labels(WEB).cpu("1").memory("1Gi").on("app-2").obj(),
        make_pod("batch-0").labels({}).namespace("batch").cpu("2").memory("4Gi").on("app-1").obj(),
        make_pod("web-big").labels(WEB).cpu("7").memory("8Gi").obj(),
    ]}


@pytest.fixture(scope="module")
def extender() -> Iterator[str]:
    chromium_tools()
    workdir = Path(tempfile.mkdtemp(prefix="berth-browser-"))
    path = workdir / "snapshot.json"
    path.write_text(json.dumps(_snapshot()))
    port = free_port()
    env = {**os.environ, "BERTH_API_ANONYMOUS": "true", "BERTH_TRACK_LEASES": "false"}
    code = f"from berth.extender.server import serve; serve('127.0.0.1', {port}, {str(path)!r}, dev_insecure=True)"
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, cwd=workdir, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(base + "/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        assert httpx.get(base + "/readyz").status_code == 200
        yield base
    finally:
        proc.terminate()
        proc.communicate(timeout=20)
        shutil.rmtree(workdir, ignore_errors=True)


def test_the_bars_show_the_allocations_api_figures(extender: str, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    api = httpx.get(extender + "/api/v1/nodes/allocations").json()["nodes"]
    open_page(browser, extender + "/ui/nodes", "nodes")
    shown = {}
    for card in browser.find_elements(By.CSS_SELECTOR, "section[data-node]"):
        for bar in card.find_elements(By.CSS_SELECTOR, '[role="progressbar"]'):
            shown[card.get_attribute("data-node"), bar.get_attribute("data-dimension")] = (
                int(bar.get_attribute("aria-valuenow")), int(bar.get_attribute("aria-valuemax")))
    assert shown == {(name, dim): (entry["requested"][dim], entry["allocatable"][dim])
                     for name, entry in api.items() for dim in entry["allocatable"]}
    unknown = browser.find_element(By.CSS_SELECTOR, 'section[data-node="edge-1"] [data-unknown="true"]')
    assert unknown.get_attribute("data-dimension") == "memory" and "unknown" in unknown.text
    order = [card.get_attribute("data-node") for card in browser.find_elements(By.CSS_SELECTOR, "section[data-node]")]
    assert order[0] == "app-1"  # the fullest node first: 8 of 8 cpu requested


def test_a_pending_pods_card_names_each_nodes_reason(extender: str, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    open_page(browser, extender + "/ui/policies", "policies")
    click_away(browser, browser.find_element(By.LINK_TEXT, "web-big"), "/ui/policies")  # one click to the answer
    open_page(browser, browser.current_url, "placement-pending")
    reasons = {row.get_attribute("data-node"): row.find_element(By.CSS_SELECTOR, '[data-verdict="fresh"]').text
               for row in browser.find_elements(By.CSS_SELECTOR, "tr[data-node]")}
    assert reasons == {
        "app-1": "insufficient capacity: cpu: needs 7, 0 free of 8 allocatable (short by 7)",
        "app-2": "insufficient capacity: cpu: needs 7, 4 free of 8 allocatable (short by 3)",
        "app-3": "node is cordoned (spec.unschedulable)",
        "gpu-1": "untolerated taint nvidia.com/gpu=present:NoSchedule",
        "edge-1": "insufficient capacity: cpu: needs 7, 2 free of 2 allocatable (short by 5)",
    }
    assert "Pending: no node can take it now" in browser.find_element(By.CSS_SELECTOR, ".answer").text


def test_a_filtered_page_and_a_running_pods_card(extender: str, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    open_page(browser, extender + "/ui/nodes?label=pool%3Dapp&sort=name", "nodes-filtered")
    assert [c.get_attribute("data-node") for c in browser.find_elements(By.CSS_SELECTOR, "section[data-node]")] == [
        "app-1", "app-2", "app-3"]
    open_page(browser, extender + "/ui/pods/shop/web-1", "placement-running")
    assert "Runs on app-2" in browser.find_element(By.CSS_SELECTOR, ".answer").text
