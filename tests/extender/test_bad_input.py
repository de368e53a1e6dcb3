"""Bad input gets a clear 400 naming the problem (or the protocol's Error), never a 500."""

from __future__ import annotations

import pytest

from tests.builders import make_node, make_policy
from tests.extender.helpers import BAD_INPUT, harness


@pytest.mark.parametrize(("verb", "body", "status", "fragment"), BAD_INPUT,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(BAD_INPUT)])
def test_bad_input(verb: str, body: bytes, status: int, fragment: str) -> None:
    h = harness([make_node("a").obj(), make_policy("web").obj()])
    r = h.client.post(f"/{verb}", content=body)
    assert r.status_code == status, r.text
    data = r.json()
    message = data.get("Error") or data.get("error") or ""
    assert fragment in message, message


def test_unknown_nodes_are_refused_by_name_not_an_error() -> None:
    h = harness([make_node("a").obj(), make_policy("web").obj()])
    result = h.filter({"metadata": {"name": "web-1", "namespace": "shop", "labels": {"app": "web"}}, "spec": {}},
                      ["a", "ghost"])
    assert result["NodeNames"] == ["a"]
    assert "unknown node" in result["FailedAndUnresolvableNodes"]["ghost"]
    assert result["Error"] == ""
