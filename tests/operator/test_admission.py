"""The admission webhook's check, and the Kopf handler that serves it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

from berth.operator.admission import REFUSAL_CODE, admission_problem
from tests.builders import make_policy

ROOT = Path(__file__).resolve().parents[2]
INVALID = sorted((ROOT / "examples" / "invalid").glob("*.yaml"))
VALID = sorted((ROOT / "examples" / "valid").glob("*.yaml"))


def _expected(path: Path) -> str:
    return next(line.removeprefix("# berth: ") for line in path.read_text().splitlines()
                if line.startswith("# berth: "))


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_create_of_an_invalid_policy_is_refused_with_the_field_path(path: Path) -> None:
    body = yaml.safe_load(path.read_text())
    assert admission_problem(body, None, "CREATE") == _expected(path)


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.stem)
def test_valid_policies_are_allowed(path: Path) -> None:
    body = yaml.safe_load(path.read_text())
    assert admission_problem(body, None, "CREATE") is None
    assert admission_problem(body, make_policy().obj(), "UPDATE") is None


def test_the_message_of_the_issue() -> None:
    body = make_policy().whole_spec({"placementRules": [{"resource": "Pod", "operator": "HasNot",
                                         "labels": {"role": "a", " role ": "b"}}]}).obj()
    assert admission_problem(body, None, "CREATE") == "spec.placementRules[0].labels.role: duplicate key after trimming"


def test_an_update_that_breaks_the_spec_is_refused() -> None:
    bad = make_policy().whole_spec({"placementRules": [{"anyOf": []}]}).obj()
    assert admission_problem(bad, make_policy().obj(), "UPDATE") == \
        "spec.placementRules[0].anyOf: must be a non-empty list of rules or groups"


def test_an_update_that_leaves_an_invalid_spec_alone_is_allowed() -> None:
    """Metadata, label or finalizer changes of a policy that got in while the webhook was down."""
    bad = make_policy().whole_spec({"placementRules": [{"anyOf": []}]}).obj()
    relabelled = make_policy().whole_spec({"placementRules": [{"anyOf": []}]}).obj()
    relabelled["metadata"]["labels"] = {"team": "a"}
    assert admission_problem(relabelled, bad, "UPDATE") is None


def test_other_operations_and_kinds_pass() -> None:
    bad = make_policy().whole_spec({"placementRules": [{"anyOf": []}]}).obj()
    assert admission_problem(bad, None, "DELETE") is None
    assert admission_problem(None, bad, "UPDATE") is None
    other = dict(bad, apiVersion="berth.dev/v1beta9")
    assert admission_problem(other, None, "CREATE") is None


def test_kopf_handler_refuses_with_422() -> None:
    import kopf
    from kopf._core.engines import admission as kopf_admission

    from berth.operator.handlers import OperatorConfig, build_registry
    from berth.operator.webhook import WEBHOOK_ID, WebhookOptions

    registry, _ = build_registry(OperatorConfig(webhook=WebhookOptions(mode="dev")))
    (handler,) = [h for h in registry._webhooks.get_all_handlers() if h.id == WEBHOOK_ID]
    assert handler.ignore_failures is True and handler.operations == ["CREATE", "UPDATE"]

    bad = yaml.safe_load((ROOT / "examples" / "invalid" / "too-many-rules.yaml").read_text())
    bad["metadata"]["namespace"] = "shop"
    with pytest.raises(kopf.AdmissionError) as refused:
        asyncio.run(handler.fn(body=kopf.Body(bad), old=None, operation="CREATE"))
    assert refused.value.code == REFUSAL_CODE
    assert str(refused.value).startswith("spec.placementRules: has 17 rules in total")
    assert asyncio.run(handler.fn(body=kopf.Body(make_policy().obj()), old=None, operation="CREATE")) is None

    # The review Kopf sends back to the API server.
    outcome: Any = kopf_admission.build_response(
        request={"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u1"}},
        outcomes={WEBHOOK_ID: type("O", (), {"exception": refused.value})()},  # type: ignore[dict-item]
        warnings=[], jsonpatch=[])
    assert outcome["response"]["allowed"] is False
    assert outcome["response"]["status"] == {"message": str(refused.value), "code": 422}


# (case, the operator's namespace (None: cluster-wide), the policy's namespace, refused?)
SCOPES: list[tuple[str, str | None, str, bool]] = [
    ("a cluster-wide operator judges every namespace", None, "shop", True),
    ("a namespaced operator judges its own namespace", "shop", "shop", True),
    ("a namespaced operator lets another namespace's policy through", "shop", "other", False),
]


@pytest.mark.parametrize(("case", "scope", "namespace", "refused"), SCOPES, ids=[c[0] for c in SCOPES])
def test_the_webhook_judges_the_policies_of_the_operators_scope(case: str, scope: str | None, namespace: str,
                                                                refused: bool) -> None:
    """The API server calls Kopf's webhook for every namespace: a namespaced operator (tests) must
    not refuse the policies of namespaces another operator answers for."""
    import kopf

    from berth.operator import drain
    from berth.operator.handlers import OperatorConfig, build_registry
    from berth.operator.webhook import WEBHOOK_ID, WebhookOptions

    registry, _ = build_registry(OperatorConfig(webhook=WebhookOptions(mode="dev"), namespace=scope))
    handlers = {h.id: h for h in registry._webhooks.get_all_handlers()}
    bad = yaml.safe_load((ROOT / "examples" / "invalid" / "too-many-rules.yaml").read_text())
    bad["metadata"]["namespace"] = namespace
    call = handlers[WEBHOOK_ID].fn(body=kopf.Body(bad), old=None, operation="CREATE", namespace=namespace)
    if refused:
        with pytest.raises(kopf.AdmissionError):
            asyncio.run(call)
    else:
        assert asyncio.run(call) is None
    # NodeDrains are cluster-wide: a namespaced operator leaves them (and their admission) alone
    serves_drains = drain.WEBHOOK_ID in handlers
    assert serves_drains is (scope is None)
    assert any(h.id == drain.TIMER_ID for h in registry._spawning.get_all_handlers()) is (scope is None)
