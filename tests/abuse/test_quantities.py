"""Class 1: quantities. Whatever amount a client writes, the answer is immediate and names the
field: a 400 on the API, the protocol's Error on filter; the extender keeps answering, and a
refused shape leaves nothing behind that fails the next request of that shape."""

from __future__ import annotations

import time

import httpx
import orjson
import pytest

from tests.abuse.conftest import WEB, Extender
from tests.builders import make_node, make_pod
from tests.extender.helpers import args

REFUSED = [
    ("huge_exponent", "1e999999999", "too large"),
    ("exponent_beyond_a_float", "1e400", "too large"),
    ("beyond_int64", "9223372036854775808", "too large"),
    ("negative", "-1Gi", "negative"),
    ("underscore_separator", "1_000", "not a quantity"),
    ("non_ascii_digits", "\u0661\u0662Mi", "not a quantity"),
]


@pytest.mark.parametrize(("name", "memory", "why"), REFUSED, ids=[c[0] for c in REFUSED])
def test_capacity_refuses_the_quantity_at_once(extender: Extender, name: str, memory: str, why: str) -> None:
    started = time.monotonic()
    r = httpx.get(f"{extender.api}/api/v1/capacity", params={"namespace": "shop", "labels": "app=web",
                                                                  "memory": memory}, timeout=5)
    assert r.status_code == 400, r.text
    assert "memory" in r.json()["error"] and why in r.json()["error"]
    assert time.monotonic() - started < 2
    assert extender.alive()


@pytest.mark.parametrize(("name", "memory", "why"), REFUSED, ids=[c[0] for c in REFUSED])
def test_preview_refuses_the_quantity_of_a_pod(extender: Extender, name: str, memory: str, why: str) -> None:
    body = {"pod": make_pod(f"preview-{name}").labels(WEB).memory(memory).obj()}
    r = httpx.post(f"{extender.api}/api/v1/preview", content=orjson.dumps(body), timeout=5)
    assert r.status_code == 400, r.text
    assert "spec.containers[0].resources.requests.memory" in r.json()["error"] and why in r.json()["error"]


@pytest.mark.parametrize(("name", "memory", "why"), REFUSED, ids=[c[0] for c in REFUSED])
def test_filter_names_the_field_and_the_next_pod_of_the_shape_is_judged(extender: Extender, name: str,
                                                                         memory: str, why: str) -> None:
    """kube-scheduler gets the protocol's Error naming the field (never 'internal error'), and a
    pod of a valid shape afterwards is judged as usual: no verdict table was left half-built."""
    names = [f"n{i}" for i in range(12)]
    bad = make_pod(f"bad-{name}").labels(WEB).cpu("1").memory(memory).obj()
    r = httpx.post(f"{extender.verbs}/filter", content=orjson.dumps(args(bad, names)), timeout=5)
    assert r.status_code == 200, r.text
    error = r.json()["Error"]
    assert "spec.containers[0].resources.requests.memory" in error and why in error, error
    assert "internal error" not in error
    for i in range(2):
        good = make_pod(f"good-{name}-{i}").labels(WEB).cpu("1").memory("1Gi").obj()
        r = httpx.post(f"{extender.verbs}/filter", content=orjson.dumps(args(good, names)), timeout=5)
        assert r.status_code == 200 and r.json()["Error"] == "", r.text
        assert r.json()["NodeNames"], r.text


def test_a_node_with_a_huge_allocatable_is_refused_not_judged(extender: Extender) -> None:
    """nodeCacheCapable: false: a Node object whose allocatable kube-scheduler could not count is
    reported unresolvable with the field named; the others are judged."""
    huge = make_node("huge").memory("1e400").obj()
    good = make_node("n0").cpu("8").memory("32Gi").labels({"topology.kubernetes.io/zone": "z0"}).obj()
    body = {"Pod": make_pod("with-nodes").labels(WEB).cpu("1").obj(), "Nodes": {"metadata": {}, "items": [huge, good]}}
    r = httpx.post(f"{extender.verbs}/filter", content=orjson.dumps(body), timeout=5)
    assert r.status_code == 200, r.text
    reply = r.json()
    assert "status.allocatable.memory" in reply["FailedAndUnresolvableNodes"]["huge"]
    assert [n["metadata"]["name"] for n in reply["Nodes"]["items"]] == ["n0"]
