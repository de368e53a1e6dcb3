"""Class 3: bounded memory. What a caller asks (labels and shapes of capacity and preview
questions, Jobs whose labels become workload selectors under a default strategy, node names
given to bind) never grows past a bound the state that filter and bind walk."""

from __future__ import annotations

import httpx
import orjson
from prometheus_client.parser import text_string_to_metric_families

from tests.abuse.conftest import WEB, Extender
from tests.builders import make_pod
from tests.extender.helpers import args, bind_args

NAMES = [f"n{i}" for i in range(12)]


def caches(extender: Extender) -> dict[str, float]:
    text = httpx.get(f"{extender.api}/metrics", timeout=5).text
    return {s.labels["cache"]: s.value for family in text_string_to_metric_families(text)
            if family.name == "berth_cache_entries" for s in family.samples}


def test_questions_about_new_labels_and_shapes_add_nothing(extender: Extender) -> None:
    """The first question builds the view's index (it counts the policies' own selectors once);
    what the questions after it name adds nothing."""
    with httpx.Client(base_url=extender.api, timeout=10) as client:
        ask(client, -1)
        before = caches(extender)
        assert "counted_selectors" in before and "tables" in before
        for i in range(300):
            ask(client, i)
    after = caches(extender)
    assert after["counted_selectors"] == before["counted_selectors"]
    assert after["tables"] == before["tables"]


def ask(client: httpx.Client, i: int) -> None:
    """One capacity question and one preview, each about labels and a shape no other asked."""
    r = client.get("/api/v1/capacity", params={"namespace": "shop", "labels": f"app=web,asked={i}",
                                               "cpu": f"{100 + i}m"})
    assert r.status_code in (200, 503), r.text
    body = {"namespace": f"ns-{i % 7}", "labels": {"asked": str(i)}, "requests": {"memory": f"{i + 1}Mi"}}
    r = client.post("/api/v1/preview", content=orjson.dumps(body))
    assert r.status_code in (200, 503), r.text


def test_job_churn_under_a_default_strategy_keeps_the_counted_selectors_bounded(extender: Extender) -> None:
    """Each Job's pods carry labels of their own (job-name, controller-uid): with a default strategy
    each becomes a workload selector counted on every pod change; the least recently asked go."""
    from berth.core.index.cluster import COUNTED_SELECTORS

    with httpx.Client(base_url=extender.verbs, timeout=10) as client:
        for i in range(COUNTED_SELECTORS + 200):
            labels = {"job-name": f"batch-{i}", "controller-uid": f"uid-{i}"}
            r = client.post("/filter", content=orjson.dumps(args((make_pod(f"job-{i}")
                                                                  .namespace("batch")
                                                                  .labels(labels)
                                                                  .cpu("10m")
                                                                  .obj()), NAMES)))
            assert r.status_code == 200 and r.json()["Error"] == "", r.text
    assert caches(extender)["counted_selectors"] <= COUNTED_SELECTORS


def test_binds_in_flight_are_forgotten_once_answered(extender: Extender) -> None:
    with httpx.Client(base_url=extender.verbs, timeout=10) as client:
        for i in range(50):
            p = make_pod(f"locked-{i}").labels(WEB).cpu("10m").obj()
            client.post("/filter", content=orjson.dumps(args(p, NAMES)))
            r = client.post("/bind", content=orjson.dumps(bind_args(p, f"no-such-node-{i}")))
            assert r.status_code == 200 and r.json()["Error"], r.text  # refused by the recheck
    assert caches(extender)["binds_in_flight"] == 0
