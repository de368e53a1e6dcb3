"""filter sent a pod's nominated node alone (kube-scheduler's first try, ``evaluateNominatedNode``)
still judges the whole cluster from berth's view, and passes that node only if berth's strategy
ranks it first."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import make_node, make_pod, make_policy
from tests.extender.helpers import NODES, harness

FILTER_NOMINATED = [
    # (name, objects, pod's nominated node and the one name sent, passes?, refusal fragment)
    ("berth's winner passes alone",
     [*NODES, make_policy("web").strategy("Spread").obj()], "a", True, ""),
    ("a node berth no longer ranks first is refused, naming berth's winner",
     [*NODES, make_pod("x").on("b").obj(), make_policy("web").strategy("Spread").obj()], "b", False,
     "its strategy now ranks a first"),
    ("a node refused for its own reason is refused for it",
     [*NODES, make_node("d").cpu("4").cordoned().obj(), make_policy("web").strategy("Spread").obj()], "d", False,
     "cordon"),
]


@pytest.mark.parametrize(("objects", "node", "passes", "fragment"), [r[1:] for r in FILTER_NOMINATED],
                         ids=[r[0] for r in FILTER_NOMINATED])
def test_filter_judges_the_whole_cluster_when_sent_the_nominated_node_alone(
        objects: list[dict[str, Any]], node: str, passes: bool, fragment: str) -> None:
    h = harness(objects)
    result = h.filter(make_pod("web-1").nominated(node).obj(), [node])
    assert result["NodeNames"] == ([node] if passes else [])
    if not passes:
        refused = {**(result["FailedNodes"] or {}), **(result["FailedAndUnresolvableNodes"] or {})}
        assert fragment in refused[node], result
    # the decision recorded is the whole cluster's
    assert h.client.get("/api/v1/decisions/shop/web-1").json()["consideredCount"] == len(h.store.view.nodes)


def test_filter_sent_one_node_that_is_not_the_nominated_one_judges_that_node_only() -> None:
    h = harness([*NODES, make_pod("x").on("a").obj(), make_policy("web").strategy("Spread").obj()])
    result = h.filter(make_pod("web-1").obj(), ["a"])
    assert result["NodeNames"] == ["a"]  # the only node sent: kube-scheduler's own filters left it alone
