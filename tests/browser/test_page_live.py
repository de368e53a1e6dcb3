"""The page in Chromium against ``berth extender`` on the real control plane, anonymous access off:
a person signs in with their own bearer token through the form (the cookie must work in a real
browser on plain HTTP to 127.0.0.1), reads their pod's Placement card, and is refused another
namespace's with the permission named."""

# ruff: noqa: F811  (the harness fixtures are imported, then requested by name)
from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from berth.core.decision import DECISION_ANNOTATION
from tests.browser.chromium import SCREENSHOTS, click_away, open_page
from tests.e2e.harness import temporary_namespace
from tests.e2e.harness.fixtures import control_plane, kube_api  # noqa: F401  (pytest fixtures)
from tests.e2e.harness.kube import simple_pod
from tests.e2e.stack import Extender, berth_crd  # noqa: F401  (pytest fixture)


@pytest.fixture(scope="module")
def extender(control_plane: Any, berth_crd: None) -> Iterator[str]:
    """Named ``extender`` so that the ``browser`` fixture starts after it."""
    ext = Extender(control_plane, env={"BERTH_API_ANONYMOUS": "false"}, name="berth-extender-page")
    try:
        yield ext.start().url
    finally:
        ext.stop()


@pytest.mark.e2e
def test_sign_in_with_a_token_and_read_a_pods_card(control_plane: Any, kube_api: Any, extender: str,
                                                   browser: Any) -> None:
    from selenium.webdriver.common.by import By

    cp = control_plane
    core = k8s.CoreV1Api(kube_api)
    with temporary_namespace(kube_api, "e2e-page-a") as mine, temporary_namespace(kube_api, "e2e-page-b") as other:
        cp.kubectl("-n", mine, "create", "serviceaccount", "reader")
        cp.kubectl("-n", mine, "create", "role", "placement-reader", "--verb=get,list",
                   "--resource=pods,placementpolicies.berth.dev")
        cp.kubectl("-n", mine, "create", "rolebinding", "placement-reader", "--role=placement-reader",
                   f"--serviceaccount={mine}:reader")
        lister = f"{mine}-node-lister"
        cp.kubectl("create", "clusterrole", lister, "--verb=list", "--resource=nodes")
        cp.kubectl("create", "clusterrolebinding", lister, f"--clusterrole={lister}", f"--serviceaccount={mine}:reader")
        try:
            token = cp.kubectl("-n", mine, "create", "token", "reader", "--duration=10m").stdout.strip()
            for ns in (mine, other):
                manifest = simple_pod("waiting", scheduler_name="nobody")
                manifest["metadata"]["annotations"] = {DECISION_ANNOTATION: json.dumps(  # written before v1
                    {"pod": f"{ns}/waiting", "strategy": "Auto", "winner": None, "trigger": "filter",
                     "time": "2027-01-15T07:00:00Z", "considered": ["node-x"],
                     "refused": {"node-x": "node is cordoned"}})}
                core.create_namespaced_pod(ns, manifest)

            open_page(browser, f"{extender}/ui/pods/{mine}/waiting", "live-signin")
            assert "/ui/signin" in browser.current_url  # no token yet: the sign-in form
            browser.find_element(By.NAME, "token").send_keys(token)
            click_away(browser, browser.find_element(By.CSS_SELECTOR, "form[action='/ui/signin'] button"), "/ui/signin")
            open_page(browser, browser.current_url, "live-placement")
            assert browser.find_element(By.TAG_NAME, "h1").text == f"Placement of pod {mine}/waiting"
            recorded = browser.find_element(By.CSS_SELECTOR, "section[aria-label='recorded decision']").text
            assert "node is cordoned" in recorded  # the recorded decision's refusals, from the annotation
            assert not browser.execute_script("return document.cookie")  # HttpOnly: no script reads it

            browser.get(f"{extender}/ui/pods/{other}/waiting")
            assert f"may not get pods in namespace {other}" in browser.find_element(By.CSS_SELECTOR, ".answer").text
            browser.save_screenshot(str(SCREENSHOTS / "live-refused.png"))
        finally:
            cp.kubectl("delete", "clusterrolebinding,clusterrole", lister, "--ignore-not-found")

