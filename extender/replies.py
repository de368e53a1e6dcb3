"""berth's judgements in kube-scheduler's words (``k8s.io/kube-scheduler/extender/v1``): the
filter's passing and refused nodes, and prioritize's HostPriorityList. Refusal texts are reworded
for the scheduler once per distinct reason (:func:`berth.extender.wire.scheduler_text`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from berth.core import Refused, refusal_cause, score_runs, scores
from berth.extender.request_nodes import NodeEcho
from berth.extender.wire import host_priority_list, scheduler_text


def failed_nodes(refused: Refused) -> tuple[dict[str, str], dict[str, str]]:
    """(FailedNodes, FailedAndUnresolvableNodes) in the scheduler's spelling, one text per cause
    (kube-scheduler counts identical texts in its FailedScheduling event; each node's figures stay in
    the pod's own record): the nodes refused together added group by group, without a Python step per
    node, and each distinct reason reworded once."""
    failed: dict[str, str] = {}
    unresolvable: dict[str, str] = {}
    texts: dict[str, str] = {}

    def text(reason: str) -> str:
        found = texts.get(reason)
        if found is None:
            found = texts[reason] = scheduler_text(refusal_cause(reason))
        return found

    each, groups = refused.parts()
    for name, refusal in each.items():
        (failed if refusal.resolvable else unresolvable)[name] = text(refusal.reason)
    for names, refusal in groups:
        (failed if refusal.resolvable else unresolvable).update(dict.fromkeys(names, text(refusal.reason)))
    return failed, unresolvable


def filter_reply(cache_capable: bool, passing: list[str], failed: dict[str, str],
                 unresolvable: dict[str, str], raw_nodes: Mapping[str, dict[str, Any]],
                 echo: NodeEcho, error: str = "") -> dict[str, Any]:
    """The ExtenderFilterResult: the passing nodes by name, or (``nodeCacheCapable: false``) as the
    Node objects sent, echoed by ``echo``; ``failed`` and ``unresolvable`` carry reasons already in the
    scheduler's spelling."""
    out: dict[str, Any] = {}
    if cache_capable:
        out["NodeNames"] = passing
    else:
        out["Nodes"] = {"metadata": {}, "items": [echo.encoded(raw_nodes[n]) for n in passing
                                                  if n in raw_nodes]}
    out["FailedNodes"] = failed
    out["FailedAndUnresolvableNodes"] = unresolvable
    out["Error"] = scheduler_text(error)
    return out


def priorities(names: Sequence[str], ranking: Sequence[str]) -> orjson.Fragment:
    """The HostPriorityList of ``names`` (the core's scores are 0..MaxExtenderPriority; nodes not
    ranked score 0). When the ranking holds every name (the usual prioritize, of the nodes filter
    passed) it is encoded from the ranking's runs of equal scores, in ranking order; when it holds
    none (a pod no policy selects) as one run of 0, in the order sent."""
    if len(ranking) == len(names):  # ranking is drawn from names: the same nodes
        return orjson.Fragment(host_priority_list(score_runs(ranking)))
    if not ranking:  # a pod berth passes through: every node 0, in the order sent, with no dict per node
        return orjson.Fragment(host_priority_list([(0, names)]))
    get = scores(ranking).get
    return orjson.Fragment(orjson.dumps([{"Host": name, "Score": get(name, 0)} for name in names]))
