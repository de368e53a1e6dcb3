"""Fuzzing: whatever a client sends, the extender answers with a documented status, never a
500 (schemathesis from the OpenAPI schema, and hypothesis on raw bodies of every verb)."""

from __future__ import annotations

import json
from typing import Any

import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.builders import make_node, make_pod, make_policy
from tests.extender.helpers import harness

WEB = {"app": "web"}


def _app() -> Any:
    h = harness([make_node("a").cpu("2").obj(),
                 make_node("b").cpu("4").labels({"topology.kubernetes.io/zone": "z1"}).obj(),
                 (make_policy("web").strategy("Spread")
                  .spread({"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                           "whenUnsatisfiable": "ScheduleAnyway"})
                  .obj()),
                 make_pod("web-0").labels(WEB).on("a").obj()])
    return h.app


APP = _app()
schema = schemathesis.openapi.from_asgi("/openapi.json", APP)


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_schema_fuzz(case: Any) -> None:
    response = case.call()
    assert response.status_code < 500, (case.method, case.path, case.body, response.text)
    case.validate_response(response, checks=[schemathesis.checks.not_a_server_error])


def _dumps(value: object) -> bytes:
    return json.dumps(value).encode()  # unlike orjson, json writes integers beyond 64 bits too


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20,
)

pod_like = st.fixed_dictionaries({
    "metadata": st.fixed_dictionaries({"name": st.text(min_size=0, max_size=10)},
                                      optional={"namespace": st.text(max_size=5), "labels": json_values,
                                                "uid": json_values}),
    "spec": st.one_of(json_values, st.fixed_dictionaries({"containers": st.lists(st.fixed_dictionaries(
        {"name": st.just("c")}, optional={"resources": st.fixed_dictionaries({"requests": st.dictionaries(
            st.sampled_from(["cpu", "memory", "pods", "nvidia.com/gpu"]),
            st.one_of(st.text(max_size=6), st.integers(), st.floats(allow_nan=False)), max_size=3)})}),
        max_size=3)})),
})

args_like = st.fixed_dictionaries({"Pod": st.one_of(pod_like, json_values)},
                                  optional={"NodeNames": st.one_of(st.lists(st.sampled_from(["a", "b", "x", ""]),
                                                                            max_size=4), json_values),
                                            "Nodes": st.one_of(json_values, st.fixed_dictionaries(
                                                {"items": st.lists(json_values, max_size=3)}))})

bodies = st.one_of(st.binary(max_size=64), json_values.map(_dumps), args_like.map(_dumps),
                   st.fixed_dictionaries({}, optional={"PodName": json_values, "PodNamespace": json_values,
                                                       "PodUID": json_values, "Node": json_values}).map(_dumps))


@given(verb=st.sampled_from(["filter", "prioritize", "bind", "preempt", "api/v1/preview", "api/v1/capacity"]),
       body=bodies)
@settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck))
def test_raw_bodies_never_make_a_server_error(verb: str, body: bytes) -> None:
    client = _client()
    r = client.post(f"/{verb}", content=body)
    assert r.status_code in (200, 400, 404), (verb, body, r.status_code, r.text)
    data = r.json()
    if r.status_code == 400:
        assert data.get("Error") or data.get("error")


_CLIENT: Any = None


def _client() -> Any:
    global _CLIENT
    if _CLIENT is None:
        from fastapi.testclient import TestClient

        _CLIENT = TestClient(APP)
    return _CLIENT
