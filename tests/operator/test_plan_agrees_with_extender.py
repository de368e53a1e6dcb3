"""The plan the operator writes in a policy's status is the plan the extender enforces.

Both are driven from the same cluster state, the objects the API server holds: nodes, the
policy, the pods berth bound (with the round and decision annotations the extender wrote) and
the pods still pending. Pod after pod, the operator's status says where the next pod goes, the
extender (the one that placed the earlier pods, and one restarted from those objects alone)
places it, and the two must name the same node.
"""

from __future__ import annotations

from typing import Any

import pytest

from berth.core.settings import Settings
from berth.operator.reconcile import Outcome, compute_status
from tests.builders import make_node, make_pod, make_policy
from tests.extender.helpers import Harness, harness
from tests.operator.objects import store_of

WEB = {"app": "web"}


def nodes() -> list[dict[str, Any]]:
    return [make_node("a").cpu("4").obj(),
            make_node("b").cpu("8").obj(),
            make_node("c").cpu("2").obj(),
            make_node("d").cpu("4").obj()]


def other_load() -> dict[str, Any]:
    return make_pod("cache-0").labels({"app": "cache"}).cpu("2").on("d").uid("uid-cache-0").obj()


def pending(n: int) -> list[dict[str, Any]]:
    return [make_pod(f"web-{i}").labels(WEB).cpu("500m").uid(f"uid-web-{i}").obj() for i in range(n)]


def status_of(objects: list[dict[str, Any]], body: dict[str, Any], now: float) -> Outcome:
    """The operator's status computed from ``objects``, as its handlers compute it."""
    store = store_of([o for o in objects if o["kind"] == "Node"], [o for o in objects if o["kind"] == "Pod"])
    return compute_status(body, store.records("shop"), lambda: store.view, Settings(), now)


def cluster_state(body: dict[str, Any], waiting: list[dict[str, Any]], placed: dict[str, str],
                  h: Harness) -> list[dict[str, Any]]:
    """What the API server holds: the nodes, the policy, every pod, those placed bound to their node
    with the annotations the extender wrote on them."""
    annotations = h.app.state.engine.binder.annotations
    objects = [*nodes(), other_load(), body]
    for p in waiting:
        name, uid = p["metadata"]["name"], p["metadata"]["uid"]
        where = placed.get(name)
        if where is None:
            objects.append(p)
        else:
            objects.append(make_pod(name)
                            .labels(WEB)
                            .cpu("500m")
                            .uid(uid)
                            .on(where)
                            .annotations(annotations[f"shop/{name}"])
                            .obj())
    return objects


ROUNDS: list[tuple[str, dict[str, Any], int, float]] = [
    # name, the policy's spec, the pods pending, seconds between two pods
    ("fill_round_larger_than_the_pending_pods", {"strategy": "Fill", "count": 3, "nodesLimit": 3}, 4, 1),
    ("fill_more_pending_than_one_round_holds", {"strategy": "Fill", "count": 2, "nodesLimit": 2}, 6, 1),
    ("each_round_larger_than_the_pending_pods", {"strategy": "Each", "count": 2, "nodesLimit": 3}, 5, 1),
    ("each_opens_round_after_round", {"strategy": "Each", "count": 1, "nodesLimit": 2}, 5, 1),
    ("each_round_expires_between_pods", {"strategy": "Each", "count": 2, "nodesLimit": 2}, 4, 121),
]


@pytest.mark.parametrize(("name", "spec", "count", "pause"), ROUNDS, ids=[c[0] for c in ROUNDS])
def test_the_status_plan_is_the_node_sequence_the_extender_enforces(name: str, spec: dict[str, Any],
                                                                    count: int, pause: float) -> None:
    body = make_policy("web").spec(**spec).obj()
    waiting = pending(count)
    h = harness([*nodes(), other_load(), body, *waiting])
    placed: dict[str, str] = {}
    steps = []
    for p in waiting:
        state = cluster_state(body, waiting, placed, h)
        outcome = status_of(state, body, h.clock.now)
        sequence = outcome.sequence or []
        plan = outcome.status.get("plan") or {}
        assert sum(plan.values()) == len(sequence) and all(plan[n] == sequence.count(n) for n in plan)
        restarted = harness(state).schedule(p)  # an extender that knows only the cluster state
        where = h.schedule(p)
        steps.append((sequence[:1], where, restarted))
        assert sequence[:1] == ([where] if where else []) and restarted == where, steps
        if where is None:
            break
        placed[p["metadata"]["name"]] = where
        h.clock.advance(pause)
    assert placed, "no pod was placed: the table row tests nothing"


def test_the_status_of_a_fresh_round_lists_each_pending_pods_node_in_turn() -> None:
    """Before any pod is placed, the whole sequence of the status is the extender's, pod by pod."""
    body = make_policy("web").strategy("Fill").count(2).nodes_limit(2).obj()
    waiting = pending(5)
    h = harness([*nodes(), other_load(), body, *waiting])
    outcome = status_of([*nodes(), other_load(), body, *waiting], body, h.clock.now)
    assert outcome.sequence == ["b", "b", "a", "a"]
    assert [h.schedule(p) for p in waiting] == [*outcome.sequence, None]  # the fifth waits for a round
    satisfied = next(c for c in outcome.status["conditions"] if c["type"] == "Satisfied")
    assert satisfied["message"] == ("the round places 4 of 5 pending pod(s): a: 2, b: 2; "
                                    "the rest wait for the next round")


@pytest.mark.parametrize("strategy", ["Auto", "BestFit", "Spread"])
def test_a_greedy_strategys_status_plan_is_where_the_extender_puts_every_pending_pod(strategy: str) -> None:
    body = make_policy("web").strategy(strategy).obj()
    waiting = pending(6)
    h = harness([*nodes(), other_load(), body, *waiting])
    plan = status_of([*nodes(), other_load(), body, *waiting], body, h.clock.now).status["plan"]
    landed: dict[str, int] = {}
    for p in waiting:
        where = h.schedule(p)
        assert where is not None
        landed[where] = landed.get(where, 0) + 1
    assert plan == dict(sorted(landed.items()))
