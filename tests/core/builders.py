"""The core's tests' own helpers: a cluster view in a line, the clock, and named scenarios run
against the core. Nodes, pods and policies come from the one set of builders, :mod:`tests.builders`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from berth.core.candidates import Candidate
from berth.core.decision import Decision
from berth.core.errors import ErrorCode
from berth.core.evaluate import Evaluation, evaluate_pod
from berth.core.model import NodeInfo, PodInfo
from berth.core.plan import PlanResult, plan_round
from berth.core.policy import PlacementPolicy
from berth.core.settings import Settings
from berth.core.view import ClusterView
from tests.builders import make_pod, make_policy

NOW = 1_000_000.0
"""The clock every test hands the core."""



def cluster(
    nodes: Iterable[NodeInfo], pods: Iterable[PodInfo] = (), *, leases: Mapping[str, float | None] | None = None
) -> ClusterView:
    view = ClusterView(leases_tracked=leases is not None)
    for n in nodes:
        view.upsert_node(n)
    for p in pods:
        view.upsert_pod(p)
    for name, renewed in (leases or {}).items():
        view.set_lease(name, renewed)
    return view


def evaluate(
    view: ClusterView, p: PodInfo, pol: PlacementPolicy | None = None, settings: Settings | None = None, **kw: Any
) -> Evaluation:
    return evaluate_pod(view, p, pol, settings or Settings(), NOW, **kw)


def judged(decision: Decision, *, ranking_limit: int = 10) -> dict[str, Any]:
    """What a decision says, every node listed and ``ranking_limit`` ranked: two decisions say the
    same when these are equal."""
    return {"pod": decision.pod, "policy": decision.policy, "strategy": decision.strategy,
            "trigger": decision.trigger, "time": decision.time, "considered": list(decision.considered),
            "refused": {node: refusal.reason for node, refusal in decision.refused.by_node()},
            "winner": decision.winner, "ranking": decision.ranking[:ranking_limit],
            "warnings": list(decision.warnings), "error": decision.error, "plan": decision.plan}


def plan(
    view: ClusterView,
    p: PodInfo,
    pol: PlacementPolicy | None = None,
    count: int | None = None,
    settings: Settings | None = None,
) -> PlanResult:
    return plan_round(view, p, pol, settings or Settings(), NOW, count)


def round_candidate(name: str, *, count: int, capacity: int) -> Candidate:
    """A candidate as Fill and Each read it: the workload's pods on the node and its room for more."""
    return Candidate(name, capacity, count, usage=0.0, rate=0.0, free_share_after=0.0, pod_count=count,
                     cpu_after=0.0, memory_after=0.0, memory_after_discounted=0.0, disk_after=0.0, sleepy_memory=0,
                     projected_use=0.0)


def spread_pods(
    counts: Mapping[str, int], *, labels: Mapping[str, str] | None = None, prefix: str = "old"
) -> list[PodInfo]:
    """``counts`` pods of the web workload already bound per node."""
    out = []
    for node_name, n in counts.items():
        for i in range(n):
            out.append(make_pod(f"{prefix}-{node_name}-{i}").on(node_name).labels(labels).info())
    return out


def gib(n: float) -> int:
    return int(n * 2**30)


@dataclass(frozen=True)
class Scenario:
    """One named behaviour: a cluster, a pod and a policy in, the expected outcome out.

    With ``count`` set (or a Fill/Each policy and ``round=True``) the scenario runs
    :func:`plan_round`; otherwise it runs :func:`evaluate_pod`. Every expectation left at its
    default is not checked. ``refused`` maps a node to a substring of its refusal reason;
    ``warnings`` are substrings that some warning must contain.
    """

    name: str
    nodes: tuple[NodeInfo, ...]
    pods: tuple[PodInfo, ...] = ()
    pod: PodInfo = field(default_factory=lambda: make_pod("new").info())
    spec: Mapping[str, Any] | None = None
    settings: Settings = field(default_factory=Settings)
    leases: Mapping[str, float | None] | None = None
    count: int | None = None
    round: bool = False
    # expectations
    plan: Mapping[str, int] | None = None
    winner: str | None = None
    ranking: tuple[str, ...] | None = None
    passing: frozenset[str] | None = None
    error: ErrorCode | None = None
    no_error: bool = False
    error_contains: str | None = None
    refused: Mapping[str, str] = field(default_factory=dict)
    not_refused: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    no_warnings: bool = False

    def __str__(self) -> str:
        return self.name


def scenario_policy(spec: Mapping[str, Any]) -> PlacementPolicy:
    """A scenario's policy: ``spec`` fields in their Kubernetes spelling."""
    return make_policy().spec(**spec).build()


def run(s: Scenario) -> Decision:
    """Run a scenario and check every expectation it sets; returns the decision for extra checks."""
    view = cluster(s.nodes, s.pods, leases=s.leases)
    pol = scenario_policy(s.spec) if s.spec is not None else None
    if s.count is not None or s.round or s.plan is not None:
        result = plan_round(view, s.pod, pol, s.settings, NOW, s.count)
        decision = result.decision
        if s.plan is not None:
            assert result.error is None, result.error
            assert dict(result.plan) == dict(s.plan)
        error = result.error
    else:
        decision = evaluate_pod(view, s.pod, pol, s.settings, NOW).decision
        error = decision.error
    if s.winner is not None:
        assert decision.ranking, decision.refusal_lines()
        assert decision.ranking[0] == s.winner, decision.ranking
    if s.ranking is not None:
        assert tuple(decision.ranking) == s.ranking
    if s.passing is not None:
        assert frozenset(decision.ranking) == s.passing, (decision.ranking, decision.refusal_lines())
    if s.error is not None:
        assert error is not None and error.code is s.error, error
    if s.no_error:
        assert error is None, error
    if s.error_contains is not None:
        assert error is not None and s.error_contains in error.message, error
    for node_name, reason in s.refused.items():
        assert node_name in decision.refused, (node_name, decision.refusal_lines())
        assert reason in decision.refused[node_name].reason, decision.refused[node_name].reason
    for node_name in s.not_refused:
        assert node_name not in decision.refused, decision.refused[node_name]
    for text in s.warnings:
        assert any(text in w for w in decision.warnings), decision.warnings
    if s.no_warnings:
        assert not decision.warnings, decision.warnings
    return decision
