"""The explain API answers a caller only what the caller could read with kubectl: its bearer token
is authenticated with TokenReview and each answer authorized with SubjectAccessReview, before
anything is computed or read from the API server with berth's rights (no confused deputy).

The first tests run the app in-process with a stand-in for the API server's review endpoints
(what is asked, how often, and what a failure answers); the ``e2e`` test runs a real ``berth
extender`` against the real control plane with real ServiceAccount tokens and RBAC."""

# ruff: noqa: F811  (the harness fixtures are imported, then requested by name)
from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from fastapi.testclient import TestClient
from kubernetes import client as k8s

from berth.core.decision import DECISION_ANNOTATION
from berth.extender.authz import Access
from berth.extender.settings import ExtenderSettings
from tests.e2e.harness import temporary_namespace
from tests.e2e.harness.fixtures import control_plane, kube_api  # noqa: F401  (pytest fixtures)
from tests.e2e.harness.kube import simple_pod
from tests.e2e.stack import Extender, berth_crd  # noqa: F401  (pytest fixture)
from tests.extender.reviews import DRAIN_STATUS, Reviews, reviewed_app, unversioned_record

SHAPE = {"namespace": "bank", "labels": {"app": "secret-plan"}, "requests": {"cpu": "100m"}}
ENDPOINTS = [
    ("GET", "/api/v1/decisions/bank/teller-1", None),
    ("POST", "/api/v1/preview", SHAPE),
    ("GET", "/api/v1/capacity?namespace=bank&labels=app=secret-plan&cpu=100m", None),
    ("POST", "/api/v1/capacity", SHAPE),
    ("GET", "/api/v1/nodes/allocations", None),
    ("GET", "/api/v1/drains/retire-a", None),
    ("GET", "/api/v1/policies/bank/secret-plan/decision", None),
]


def _call(client: TestClient, method: str, path: str, body: Any, token: str | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    content = orjson.dumps(body) if body is not None else None
    return client.request(method, path, content=content, headers=headers)


@pytest.mark.parametrize(("method", "path", "body"), ENDPOINTS, ids=[p for _, p, _ in ENDPOINTS])
def test_no_token_and_a_bad_token_get_401_while_health_and_metrics_stay_open(method: str, path: str,
                                                                               body: Any) -> None:
    client, binder = reviewed_app(Reviews())
    for token in (None, "made-up"):
        reply = _call(client, method, path, body, token)
        assert reply.status_code == 401, reply.text
        assert reply.headers["www-authenticate"].startswith("Bearer")
    assert binder.reads == []
    for probe in ("/healthz", "/readyz", "/metrics"):
        assert client.get(probe).status_code == 200, probe


@pytest.mark.parametrize(("method", "path", "body"), ENDPOINTS, ids=[p for _, p, _ in ENDPOINTS])
def test_another_tenants_answers_are_403_and_nothing_is_read_for_them(method: str, path: str, body: Any) -> None:
    """alice may read namespace shop, not bank: every answer about bank (and the cluster-wide
    allocations, which list every namespace's policies) is refused before any work or API read."""
    client, binder = reviewed_app(Reviews())
    reply = _call(client, method, path, body, "alice-token")
    assert reply.status_code == 403, reply.text
    assert "alice may not" in reply.json()["error"]
    assert binder.reads == []  # the confused deputy: no read of bank's pod with berth's rights


def test_a_caller_reads_what_its_own_rights_allow() -> None:
    client, binder = reviewed_app(Reviews())
    decision = _call(client, "GET", "/api/v1/decisions/shop/web-1", None, "alice-token")
    assert decision.status_code == 200 and decision.json()["winner"]["node"] == "a"
    assert binder.reads == ["shop/web-1"]  # read with berth's rights only once alice may get pods in shop
    capacity = _call(client, "POST", "/api/v1/capacity", {**SHAPE, "namespace": "shop", "labels": {"app": "web"}},
                     "alice-token")
    assert capacity.status_code == 200 and capacity.json()["policy"] == "shop/web"
    assert _call(client, "GET", "/api/v1/decisions/shop/web-1", None, "bob-token").status_code == 403


def test_a_drains_live_plan_is_read_with_get_nodedrains() -> None:
    client, binder = reviewed_app(Reviews())
    plan = _call(client, "GET", "/api/v1/drains/retire-a", None, "carol-token")
    assert plan.status_code == 200
    assert plan.json() == {"name": "retire-a", "spec": {"nodes": ["a"], "mode": "Execute"}, "status": DRAIN_STATUS}
    assert _call(client, "GET", "/api/v1/drains/gone", None, "carol-token").status_code == 404
    assert binder.reads == ["nodedrain/retire-a", "nodedrain/gone"]
    bad = _call(client, "GET", "/api/v1/drains/Not_A_Name", None, "carol-token")
    assert bad.status_code == 400 and bad.json()["error"].startswith("name:")
    assert binder.reads == ["nodedrain/retire-a", "nodedrain/gone"]  # bad input reads nothing


def test_reviews_are_cached_briefly_and_bounded() -> None:
    """A repeated token is reviewed once; a flood of made-up tokens keeps at most the cache's bound."""
    reviews = Reviews()
    client, _ = reviewed_app(reviews, api_auth_cache_entries=16)
    for _ in range(5):
        assert _call(client, "GET", "/api/v1/decisions/shop/web-1", None, "alice-token").status_code == 200
        assert _call(client, "GET", "/api/v1/decisions/shop/web-1", None, "junk").status_code == 401
    assert reviews.tokens.count("alice-token") == 1 and reviews.tokens.count("junk") == 1
    assert reviews.accesses.count(("alice", Access("get", "pods", namespace="shop"))) == 1
    for i in range(100):
        assert _call(client, "GET", "/api/v1/nodes/allocations", None, f"junk-{i}").status_code == 401
    gate = client.app.state.gate  # type: ignore[attr-defined]
    assert len(gate._tokens) <= 16


def test_an_api_server_that_cannot_review_answers_503_never_500() -> None:
    client, binder = reviewed_app(Reviews(failing=True))
    for method, path, body in ENDPOINTS:
        reply = _call(client, method, path, body, "alice-token")
        assert reply.status_code == 503, (path, reply.text)
        assert "cannot ask the API server" in reply.json()["error"]
    assert binder.reads == []


def test_anonymous_access_opens_the_api_to_everyone_when_turned_on() -> None:
    """The single-tenant setting: no token needed, no review asked."""
    reviews = Reviews()
    client, _ = reviewed_app(reviews, api_anonymous=True)
    assert _call(client, "GET", "/api/v1/nodes/allocations", None).status_code == 200
    assert reviews.tokens == [] and reviews.accesses == []
    assert ExtenderSettings().api_anonymous is False  # off unless asked for


# -- against the real control plane ----------------------------------------------------------------


@pytest.fixture(scope="module")
def authz_extender(control_plane: Any, berth_crd: None) -> Iterator[Any]:
    """``berth extender`` against the control plane as the chart runs it: anonymous access off."""
    ext = Extender(control_plane, env={"BERTH_API_ANONYMOUS": "false"}, name="berth-extender-authz")
    try:
        yield ext.start()
    finally:
        ext.stop()


@pytest.mark.e2e
def test_service_account_tokens_read_only_what_their_rbac_allows(control_plane: Any, kube_api: Any,
                                                                  authz_extender: Any) -> None:
    """A ServiceAccount allowed ``get pods`` in its namespace reads the decisions there and nothing
    else: another namespace's decision (which berth would read with its own rights, the pod not
    being in memory), the cluster's node allocations and a capacity table (which needs ``list
    placementpolicies``) are 403; no token or a forged one is 401; probes stay open."""
    cp = control_plane
    core = k8s.CoreV1Api(kube_api)
    with temporary_namespace(kube_api, "e2e-tenant-a") as mine, temporary_namespace(kube_api, "e2e-tenant-b") as other:
        cp.kubectl("-n", mine, "create", "serviceaccount", "reader")
        cp.kubectl("-n", mine, "create", "role", "pod-reader", "--verb=get", "--resource=pods")
        cp.kubectl("-n", mine, "create", "rolebinding", "pod-reader", "--role=pod-reader",
                   f"--serviceaccount={mine}:reader")
        token = cp.kubectl("-n", mine, "create", "token", "reader", "--duration=10m").stdout.strip()
        for ns in (mine, other):
            manifest = simple_pod("placed", scheduler_name="nobody")
            manifest["metadata"]["annotations"] = {DECISION_ANNOTATION: unversioned_record(f"{ns}/placed",
                                                                                             f"node-of-{ns}")}
            core.create_namespaced_pod(ns, manifest)
        base = authz_extender.url

        def status(method: str, path: str, bearer: str | None, body: Any = None) -> httpx.Response:
            headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
            return httpx.request(method, base + path, headers=headers, json=body, timeout=30)

        own = status("GET", f"/api/v1/decisions/{mine}/placed", token)
        assert own.status_code == 200 and own.json()["winner"]["node"] == f"node-of-{mine}", own.text
        for bearer, expected in ((None, 401), ("forged." + token[7:], 401), (token, 403)):
            assert status("GET", f"/api/v1/decisions/{other}/placed", bearer).status_code == expected, bearer
            assert status("GET", "/api/v1/nodes/allocations", bearer).status_code == expected, bearer
            shape = {"namespace": mine, "requests": {"cpu": "100m"}}
            assert status("POST", "/api/v1/capacity", bearer, shape).status_code == expected, bearer
        for probe in ("/healthz", "/readyz", "/metrics"):
            assert status("GET", probe, None).status_code == 200, probe


@pytest.mark.e2e
def test_kubectl_berth_acts_with_the_kubeconfig_users_own_identity(control_plane: Any, kube_api: Any,
                                                                    authz_extender: Any, tmp_path: Any,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """``berth explain pod`` with a kubeconfig holding a ServiceAccount's token: the pod and its
    decision annotation are read from the API server with that token, the fresh evaluation is asked
    of the extender with the same token; another namespace's pod and the cluster-wide node view are
    refused, each on one line."""
    import yaml

    from berth.cli.main import main

    cp = control_plane
    core = k8s.CoreV1Api(kube_api)
    with temporary_namespace(kube_api, "e2e-cli-a") as mine, temporary_namespace(kube_api, "e2e-cli-b") as other:
        lister = f"{mine}-node-lister"
        cp.kubectl("-n", mine, "create", "serviceaccount", "reader")
        cp.kubectl("-n", mine, "create", "role", "placement-reader", "--verb=get,list",
                   "--resource=pods,placementpolicies.berth.dev")
        cp.kubectl("-n", mine, "create", "rolebinding", "placement-reader", "--role=placement-reader",
                   f"--serviceaccount={mine}:reader")
        cp.kubectl("create", "clusterrole", lister, "--verb=list", "--resource=nodes")
        cp.kubectl("create", "clusterrolebinding", lister, f"--clusterrole={lister}", f"--serviceaccount={mine}:reader")
        try:
            token = cp.kubectl("-n", mine, "create", "token", "reader", "--duration=10m").stdout.strip()
            for ns in (mine, other):
                manifest = simple_pod("placed", scheduler_name="nobody")
                manifest["metadata"]["annotations"] = {
                    DECISION_ANNOTATION: unversioned_record(f"{ns}/placed", f"node-of-{ns}")}
                core.create_namespaced_pod(ns, manifest)
            config = yaml.safe_load(cp.kubeconfig.read_text())
            for entry in config["users"]:
                entry["user"] = {"token": token}
            kubeconfig = tmp_path / "tenant-kubeconfig"
            kubeconfig.write_text(yaml.safe_dump(config))
            common = ["--kubeconfig", str(kubeconfig), "--extender", authz_extender.url]

            assert main(["explain", "pod", f"{mine}/placed", *common, "-o", "json"]) == 0
            out = json.loads(capsys.readouterr().out)
            assert out["recorded"]["winner"]["node"] == f"node-of-{mine}" and out["fresh"]["trigger"] == "preview"

            assert main(["explain", "pod", f"{other}/placed", *common]) == 1
            assert f"cannot read pod {other}/placed: you may not read it (HTTP 403)" in capsys.readouterr().err
            assert main(["nodes", *common]) == 1  # no list placementpolicies in every namespace
            assert "the extender refused the node allocations: HTTP 403" in capsys.readouterr().err

            # the page signs the same person in with the same token, and shows the same answers
            with httpx.Client(base_url=authz_extender.url, timeout=30, follow_redirects=True) as browser:
                signed = browser.post("/ui/signin", data={"token": token, "next": f"/ui/pods/{mine}/placed"})
                assert signed.status_code == 200 and f"Placement of pod {mine}/placed" in signed.text
                assert f"node-of-{mine}" in signed.text  # the recorded decision, read from the annotation
                refused = browser.get(f"/ui/pods/{other}/placed")
                assert refused.status_code == 403 and f"may not get pods in namespace {other}" in refused.text
                forged = browser.post("/ui/signin", data={"token": "forged." + token[7:]})
                assert forged.status_code == 401
        finally:
            cp.kubectl("delete", "clusterrolebinding,clusterrole", lister, "--ignore-not-found")
