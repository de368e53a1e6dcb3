"""The operator's admission webhook under abuse: malformed, deep, oversized and slow reviews get a
4xx or a bounded 503 (never a 500, which ``failurePolicy: Ignore`` would turn into an admission),
and selector labels are validated as Kubernetes validates label keys and values, in the policy
model and at admission."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import orjson
import pytest

from berth.core.errors import InvalidPolicy
from berth.core.policy import spec_from_dict
from berth.operator.admission import admission_problem
from berth.operator.webhook import MAX_REVIEW_BYTES, BoundedWebhookServer
from tests.builders import make_policy

# -- the server ---------------------------------------------------------------------------------


def review(**request: Any) -> dict[str, Any]:
    body = {"uid": "7f0c", "operation": "CREATE", "userInfo": {"username": "alice"},
            "kind": {"group": "berth.dev", "version": "v1alpha1", "kind": "PlacementPolicy"},
            "resource": {"group": "berth.dev", "version": "v1alpha1", "resource": "placementpolicies"},
            "object": make_policy().obj(), **request}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": body}


class Served:
    def __init__(self, url: str, judged: list[Any]) -> None:
        self.url = url
        self.judged = judged
        self.running = 0
        self.peak = 0

    async def post(self, content: bytes, client: httpx.AsyncClient | None = None) -> httpx.Response:
        async with httpx.AsyncClient(timeout=30) as own:
            return await (client or own).post(self.url, content=content)


@asynccontextmanager
async def _serve(slow: float = 0.0, review_seconds: float = 5.0) -> AsyncIterator[Served]:
    judged: list[Any] = []
    served: Served | None = None

    async def judge(data: Any, **_: Any) -> dict[str, Any]:
        """Stands in for Kopf's admission handler: it must only ever see well-formed reviews."""
        assert served is not None
        judged.append(data)
        served.running += 1
        served.peak = max(served.peak, served.running)
        try:
            if slow:
                await asyncio.sleep(slow)
        finally:
            served.running -= 1
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "response": {"uid": data["request"]["uid"], "allowed": True}}

    server = BoundedWebhookServer(addr="127.0.0.1", host="127.0.0.1", insecure=True, review_seconds=review_seconds)
    running = server(judge)
    config = await running.__anext__()
    served = Served(config["url"].rstrip("/") + "/validate-placementpolicy", judged)
    try:
        yield served
    finally:
        await running.aclose()


def _deep(depth: int) -> bytes:
    head = b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":'
    return head + b"[" * depth + b"]" * depth + b"}"


MALFORMED = {
    "not_json": b"{nope",
    "deep_json_beyond_the_parsers_limit": _deep(5000),
    "deep_json_within_the_parsers_limit": _deep(900),
    "a_list": b"[]",
    "no_request": orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}),
    "request_a_string": orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                      "request": "x"}),
    "object_a_string": orjson.dumps(review(object="x")),
    "user_info_missing": orjson.dumps(review(userInfo=None)),
    "no_object": orjson.dumps(review(object=None)),
}


@pytest.mark.parametrize("body", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_review_is_400_and_never_judged(body: bytes) -> None:
    asyncio.run(_malformed(body))


async def _malformed(body: bytes) -> None:
    async with _serve() as served:
        reply = await served.post(body)
        assert reply.status_code == 400, reply.text
        assert reply.json()["error"]
        assert served.judged == []
        ok = await served.post(orjson.dumps(review()))
        assert ok.status_code == 200 and ok.json()["response"]["allowed"] is True


def test_an_oversized_review_is_413_unread() -> None:
    asyncio.run(_oversized())


async def _oversized() -> None:
    async with _serve() as served:
        huge = review(object=(make_policy()
                              .whole_spec({"selector": {"matchLabels": {"app": "x" * (MAX_REVIEW_BYTES + 1)}}})
                              .obj()))
        reply = await served.post(orjson.dumps(huge))
        assert reply.status_code == 413, reply.text
        assert served.judged == []


def test_a_flood_of_slow_reviews_answers_503_in_bounded_time() -> None:
    """Reviews that cannot be judged in time answer 503 after the bound, not whenever."""
    asyncio.run(_flood())


async def _flood() -> None:
    async with _serve(slow=30.0, review_seconds=0.5) as served:
        loop = asyncio.get_running_loop()
        started = loop.time()
        async with httpx.AsyncClient(timeout=30) as client:
            replies = await asyncio.gather(*(served.post(orjson.dumps(review()), client) for _ in range(8)))
        assert [r.status_code for r in replies] == [503] * 8
        assert loop.time() - started < 5
        assert 1 <= served.peak <= 4  # at most this many judged at once


# -- label keys and values --------------------------------------------------------------------------

# apimachinery's own tables (k8s.io/apimachinery/pkg/util/validation, TestIsQualifiedName and
# TestIsValidLabelValue).
GOOD_KEYS = ["simple", "now-with-dashes", "1-starts-with-num", "1234", "simple/simple", "now-with-dashes/simple",
             "now-with-dashes/now-with-dashes", "now.with.dots/simple", "now-with.dashes-and.dots/simple",
             "1-num.2-num/3-num", "1234/5678", "1.2.3.4/5678", "Uppercase_Is_OK_123",
             "example.com/Uppercase_Is_OK_123", "requests.storage-foo", "a" * 63, "a" * 253 + "/" + "b" * 63]
BAD_KEYS = ["nospecialchars%^=@", "cantendwithadash-", "-cantstartwithadash-", "only/one/slash",
            "Example.com/abc", "example_com/abc", "example.com/", "/simple", "a" * 64, "a" * 254 + "/abc"]
GOOD_VALUES = ["simple", "now-with-dashes", "1-starts-with-num", "end-with-num-1", "1234", "a" * 63, ""]
BAD_VALUES = ["a" * 64, "-starts-with-dash", "ends-with-dash-", ".starts.with.dot", "ends.with.dot.", "no spaces",
              "nospecialchars%^=@", "v" * 1_000_000]

PLACES = {
    "matchLabels_key": lambda k, v: {"selector": {"matchLabels": {k: "web"}}},
    "matchLabels_value": lambda k, v: {"selector": {"matchLabels": {"app": v}}},
    "matchExpressions_key": lambda k, v: {"selector": {"matchExpressions": [{"key": k, "operator": "Exists"}]}},
    "matchExpressions_value": lambda k, v: {"selector": {"matchExpressions": [
        {"key": "app", "operator": "In", "values": [v]}]}},
    "nodeFilter_labels_key": lambda k, v: {"nodeFilter": {"labels": {k: "a"}}},
    "nodeFilter_labels_value": lambda k, v: {"nodeFilter": {"labels": {"pool": v}}},
    "topologyKey": lambda k, v: {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": k}]},
    "spread_matchLabelKeys": lambda k, v: {"topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "matchLabelKeys": [k],
         "labelSelector": {"matchExpressions": [{"key": "tier", "operator": "Exists"}]}}]},
    "spread_labelSelector_value": lambda k, v: {"topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "labelSelector": {"matchLabels": {"app": v}}}]},
}
KEY_PLACES = [p for p in PLACES if "value" not in p]
VALUE_PLACES = [p for p in PLACES if "value" in p]


@pytest.mark.parametrize("place", KEY_PLACES)
@pytest.mark.parametrize("key", BAD_KEYS, ids=lambda k: k[:24])
def test_an_invalid_label_key_is_refused_by_the_model_and_at_admission(place: str, key: str) -> None:
    spec = PLACES[place](key, "web")
    with pytest.raises(InvalidPolicy, match="label key"):
        spec_from_dict(spec)
    problem = admission_problem(make_policy().whole_spec(spec).obj(), None, "CREATE")
    assert problem is not None and "label key" in problem and problem.startswith("spec.")


@pytest.mark.parametrize("place", VALUE_PLACES)
@pytest.mark.parametrize("value", BAD_VALUES, ids=lambda v: v[:24])
def test_an_invalid_label_value_is_refused_by_the_model_and_at_admission(place: str, value: str) -> None:
    spec = PLACES[place]("app", value)
    with pytest.raises(InvalidPolicy, match="label value"):
        spec_from_dict(spec)
    problem = admission_problem(make_policy().whole_spec(spec).obj(), None, "CREATE")
    assert problem is not None and "label value" in problem and len(problem) < 400


@pytest.mark.parametrize("key", GOOD_KEYS, ids=lambda k: k[:24])
def test_kubernetes_label_keys_are_accepted_everywhere(key: str) -> None:
    for place in KEY_PLACES:
        spec_from_dict(PLACES[place](key, "web"))
    assert all(spec_from_dict(PLACES[p]("app", v)) for p in VALUE_PLACES for v in GOOD_VALUES)
    with pytest.raises(InvalidPolicy):  # and the limits hold: fails on a model without them
        spec_from_dict(PLACES["matchLabels_value"]("app", "a" * 64))
