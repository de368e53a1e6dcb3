"""Bad input gets a clear 400 naming the problem (or the protocol's Error), never a 500."""

from __future__ import annotations

import pytest

from tests.builders import make_node, make_policy
from tests.extender.helpers import harness

CASES = [
    # (verb, body, status, fragment of the message)
    ("filter", b"", 400, "empty request body"),
    ("filter", b"{not json", 400, "not valid JSON"),
    ("filter", b"[1, 2]", 400, "must be a JSON object"),
    ("filter", b'{"NodeNames": ["a"]}', 400, "Pod: Field required"),
    ("filter", b'{"Pod": "web", "NodeNames": ["a"]}', 400, "Pod: Input should be a valid dictionary"),
    ("filter", b'{"Pod": {"metadata": {"name": "p"}}, "NodeNames": "a"}', 400, "NodeNames: Input should be a valid"),
    ("filter", b'{"Pod": {"metadata": {"name": "p"}}, "NodeNames": [1]}', 400, "NodeNames[0]: Input should be"),
    ("filter", b'{"Pod": {"metadata": {"name": "p"}}}', 400, "one of Nodes or NodeNames is required"),
    ("filter", b'{"Pod": {"metadata": {"name": "p"}}, "Nodes": {"items": [3]}}', 400, "Nodes.items[0]"),
    ("filter", b'{"Pod": {}, "NodeNames": ["a"]}', 200, "metadata.name is missing"),
    ("prioritize", b'{"Pod": {}, "NodeNames": ["a"]}', 400, "metadata.name is missing"),
    ("prioritize", b'{"Pod": 1}', 400, "Pod: Input should be a valid dictionary"),
    ("bind", b'{"PodName": "p", "PodNamespace": "shop", "PodUID": "u"}', 400, "Node: Field required"),
    ("bind", b'{"PodName": "", "PodNamespace": "shop", "PodUID": "u", "Node": "a"}', 400, "PodName: String should"),
    ("bind", b'{"PodName": 5, "PodNamespace": "shop", "PodUID": "u", "Node": "a"}', 400, "PodName: Input should be"),
    ("preempt", b'{"Pod": {}, "NodeNameToMetaVictims": {"a": {"Pods": [{"UID": 7}]}}}', 400, "UID"),
    ("api/v1/preview", b'{"requests": {"cpu": []}}', 400, "requests.cpu"),
]


@pytest.mark.parametrize(("verb", "body", "status", "fragment"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
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
