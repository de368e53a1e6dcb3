"""The full profile's scheduling cycle (kube-scheduler filters every node, in an order of its own that
moves from pod to pod, prioritizes the nodes filter passed, binds the best, and the watch shows the
pod bound) answers every verb the same with the index on and off (``BERTH_INDEX=off``): what the
index adds for speed (the whole view judged when a request names every node, prioritize reusing
filter's judgement) changes no answer."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tests.builders import make_node, make_pod, make_policy
from tests.extender.helpers import harness

NODES = 24
PODS = 40


def cycle(strategy: str, index: str, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    monkeypatch.setenv("BERTH_INDEX", index)
    spec = {"count": 3} if strategy in ("Fill", "Each") else {}
    h = harness([*(make_node(f"n{i:02d}").cpu("4").memory("8Gi").labels({"zone": f"z{i % 3}"}).obj()
                   for i in range(NODES)),
                 make_policy("web").strategy(strategy).spec(**spec).obj()])
    assert h.app.state.engine.core_settings.indexed == (index == "on")
    names = sorted(h.store.view.nodes)
    answers: list[Any] = []
    for i in range(PODS):
        pod = make_pod(f"web-{i}").labels({"app": "web"}).cpu("300m").memory("256Mi").obj()
        start = i * 7 % NODES
        filtered = h.filter(pod, names[start:] + names[:start])
        scores = h.prioritize(pod, filtered["NodeNames"])
        best = max(scores, key=lambda n: (scores[n], n)) if scores else None
        error = h.bind(pod, best) if best is not None else None
        if best is not None and not error:
            bound = orjson.loads(orjson.dumps(pod))
            bound["spec"]["nodeName"] = best
            bound["metadata"]["resourceVersion"] = str(1000 + i)
            h.store.apply_pod(bound)
        answers.append((filtered, scores, best, error))
    return answers


@pytest.mark.parametrize("strategy", ["Auto", "BestFit", "Spread", "Fill"])
def test_the_full_profiles_cycle_answers_the_same_with_the_index_off(
        strategy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    indexed = cycle(strategy, "on", monkeypatch)
    assert sum(1 for _, _, best, error in indexed if best is not None and not error) > PODS // 2, indexed
    assert indexed == cycle(strategy, "off", monkeypatch)
