"""The cluster view (assumed pods, terminating pods), rounds and their plans, decisions,
deterministic tie-breaks, and the PlacementPolicy's own validation."""

from __future__ import annotations

from typing import Any

import pytest

from berth.core.decision import DECISION_API_VERSION, Decision, DecisionRecord, Refusal, Refused
from berth.core.errors import ErrorCode, InvalidPolicy, PlacementError
from berth.core.index import cluster as index_module
from berth.core.index.cluster import ViewIndex, index_of, read_only_caches
from berth.core.model import LabelSelector, Requirement, Toleration
from berth.core.plan import shared_plan_key
from berth.core.policy import Strategy, policy_from_manifest
from berth.core.settings import Settings
from berth.core.view import ClusterView
from tests.builders import ZONE, make_node, make_pod, make_policy
from tests.decision_schema import schema_problems

from .builders import cluster, evaluate, judged, plan, spread_pods

TIME = "2026-01-01T00:00:00Z"

# --- the view ---------------------------------------------------------------------------------


def test_assumed_pods_count_for_capacity() -> None:
    view = cluster([make_node("a").cpu("1").info()])
    view.assume(make_pod("inflight").cpu("800m").info(), "a")
    assert view.is_assumed("uid-shop-inflight")
    decision = evaluate(view, make_pod("new").cpu("300m").info()).decision
    assert decision.refused["a"].reason.startswith("insufficient capacity: cpu: needs 300m, 200m free")


def test_assumed_pods_count_for_the_workload_count() -> None:
    view = cluster([make_node("a").info(), make_node("b").info()])
    view.assume(make_pod("inflight").info(), "a")
    assert plan(view, make_pod("new").info(), make_policy().strategy("Auto").build(), count=1).plan == {"b": 1}


def test_watched_pod_replaces_its_assumption() -> None:
    view = cluster([make_node("a").cpu("1").info()])
    view.assume(make_pod("p").cpu("600m").info(), "a")
    view.upsert_pod(make_pod("p").on("a").cpu("600m").info())
    assert not view.is_assumed("uid-shop-p")
    assert view.requested("a")["cpu"] == 600
    assert view.pod_count("a") == 1


def test_removing_an_assumed_pod_frees_its_room() -> None:
    view = cluster([make_node("a").cpu("1").info()])
    view.assume(make_pod("p").cpu("600m").info(), "a")
    view.remove_pod("uid-shop-p")
    assert view.requested("a").get("cpu", 0) == 0
    assert evaluate(view, make_pod("new").cpu("1").info()).decision.ranking == ["a"]


def test_terminating_pods_still_hold_capacity() -> None:
    """Like kube-scheduler: a terminating pod's resources are in use until it is gone."""
    view = cluster([make_node("a").cpu("1").info()], [make_pod("old").on("a").cpu("800m").terminating().info()])
    assert "insufficient capacity" in evaluate(view, make_pod("new").cpu("300m").info()).decision.refused["a"].reason


def test_terminating_pods_do_not_count_for_the_workload_count() -> None:
    view = cluster([make_node("a").info(),
                    make_node("b").info()], [make_pod("old").on("a").terminating().info(),
                    make_pod("old2").on("b").info()])
    assert plan(view, make_pod("new").info(), make_policy().strategy("Auto").build(), count=1).plan == {"a": 1}


def test_pod_rebinding_to_another_node_moves_its_requests() -> None:
    view = cluster([make_node("a").info(), make_node("b").info()], [make_pod("p").on("a").cpu("1").info()])
    view.upsert_pod(make_pod("p").on("b").cpu("1").info())
    assert view.requested("a").get("cpu", 0) == 0 and view.requested("b")["cpu"] == 1000


def test_plan_never_changes_the_view() -> None:
    view = cluster([make_node("a").info(), make_node("b").info()])
    before = {n: dict(view.requested(n)) for n in view.nodes}
    plan(view, make_pod("new").info(), make_policy().strategy("Auto").build(), count=5)
    assert {n: dict(view.requested(n)) for n in view.nodes} == before


# --- rounds and plans ---------------------------------------------------------------------------


def test_plan_sums_exactly_to_the_count() -> None:
    view = cluster([make_node("a").info(), make_node("b").info(), make_node("c").info()])
    result = plan(view, make_pod("new").info(), make_policy().strategy("Auto").build(), count=7)
    assert result.error is None and sum(result.plan.values()) == 7


def test_failed_plan_returns_an_error_and_no_plan() -> None:
    view = cluster([make_node("a").cpu("300m").info()])
    result = plan(view, make_pod("new").info(), make_policy().strategy("Auto").build(), count=4)
    assert result.plan == {}
    assert result.error is not None and result.error.code is ErrorCode.INSUFFICIENT_RESOURCE
    assert "placed 3 of 4" in result.error.message
    assert result.decision.plan is None and result.decision.error == result.error


def test_zero_count_plans_nothing_without_error() -> None:
    result = plan(cluster([make_node("a").info()]),
                           make_pod("new").info(),
                           make_policy().strategy("Auto").build(), count=0)
    assert result.plan == {} and result.error is None


def test_negative_count_is_refused() -> None:
    with pytest.raises(ValueError):
        plan(cluster([make_node("a").info()]), make_pod("new").info(), make_policy().build(), count=-1)


def test_greedy_plan_without_count_places_one_pod() -> None:
    assert plan(cluster([make_node("a").info()]),
                         make_pod("new").info(),
                         make_policy().strategy("Auto").build()).plan == {"a": 1}


def test_a_plans_warnings_name_each_unverified_node_a_later_pod_of_the_round_could_take() -> None:
    """The plan's warnings are every pod's: topology spread refuses c (zone z1) to the first pod
    only, so c's unknown capacity is warned of by the second pod's judgement."""
    nodes = [make_node(n).zone("z1").cpu("1").pods("1").info() for n in ("a", "b", "d")]
    nodes += [make_node(n).zone(z).cpu(None).pods("1").info() for n, z in (("c", "z1"), ("e", "z2"))]
    view = cluster(nodes, [make_pod("old").on("a").info()])
    policy = make_policy().strategy("Auto").spread({"maxSkew": 1, "topologyKey": ZONE,
                                                     "whenUnsatisfiable": "DoNotSchedule"}).build()
    result = plan(view, make_pod("new").cpu("100m").info(), policy, count=3)
    assert result.placed == {"e": 1, "b": 1}
    assert result.error is not None and result.error.code is ErrorCode.SPREAD_UNSATISFIED
    assert result.decision.warnings == ["e: capacity unverified for cpu; ranked after verified nodes",
                                        "c: capacity unverified for cpu; ranked after verified nodes"]


def test_plan_result_to_dict_is_the_cli_contract() -> None:
    view = cluster([make_node("a").info(), make_node("b").memory("1Gi").info()])
    result = plan(view, make_pod("new").memory("2Gi").info(), make_policy().strategy("Auto").build(), count=1)
    out = result.to_dict(TIME)
    assert out == {"plan": {"a": 1},
                   "decision": {
                       "apiVersion": DECISION_API_VERSION, "pod": "shop/new", "trigger": "plan", "time": TIME,
                       "policy": "shop/web", "policyGeneration": 1, "strategy": "Auto",
                       "round": {"id": None, "plan": {"a": 1}, "places": 1, "onNode": 1},
                       "consideredCount": 2, "considered": ["a", "b"],
                       "refusedCount": 1,
                       "refused": [{"reason": "insufficient capacity: memory", "count": 1, "nodes": ["b"],
                                    "details": {"b": "insufficient capacity: memory: needs 2.0 GiB, 1.0 GiB free of "
                                                     "1.0 GiB allocatable (short by 1.0 GiB)"}}],
                       "winner": {"node": "a", "rank": 1, "score": 10}, "rankingCount": 1, "ranking": ["a"],
                       "warnings": [], "error": None},
                   "error": None}
    assert not schema_problems(out["decision"])


def test_plan_error_to_dict_carries_code_and_message() -> None:
    out = plan(cluster([make_node("a").info()], spread_pods({"a": 3})),
                        make_pod("new").info(),
                        make_policy().strategy("Fill").count(2).build()).to_dict(TIME)
    assert out["plan"] == {}
    error = out["error"]
    assert isinstance(error, dict) and error["code"] == "already_filled" and error["message"]


def test_round_strategies_judge_a_lone_pod_as_the_first_of_a_fresh_round() -> None:
    """evaluate_pod for Fill/Each ranks only the nodes the fresh round's plan gives pods, in plan order."""
    view = cluster([make_node("a").info(), make_node("b").info(), make_node("c").info()], spread_pods({"a": 1}))
    decision = evaluate(view, make_pod("new").info(), make_policy().strategy("Fill").count(1).build()).decision
    assert decision.ranking == ["b", "c"]
    assert "the round's plan places no more pods here" in decision.refused["a"].reason


def test_round_quota_limits_nodes_to_the_plan() -> None:
    view = cluster([make_node("a").info(), make_node("b").info(), make_node("c").info()])
    decision = evaluate(view, make_pod("new").info(),
                              make_policy().strategy("Each").count(1).build(), quota={"c": 1, "a": 0}).decision
    assert decision.ranking == ["c"]


def test_round_strategy_error_reaches_the_lone_pod_decision() -> None:
    view = cluster([make_node("a").info()], spread_pods({"a": 3}))
    decision = evaluate(view, make_pod("new").info(), make_policy().strategy("Fill").count(2).build()).decision
    assert decision.error is not None and decision.error.code is ErrorCode.ALREADY_FILLED


# --- decisions ----------------------------------------------------------------------------------


def test_scores_give_the_winner_ten_and_the_rest_at_most_four() -> None:
    view = cluster([make_node("a").info(), make_node("b").info(), make_node("c").info(), make_node("d").info()])
    evaluation = evaluate(view, make_pod("new").info())
    winner, *rest = evaluation.decision.ranking
    assert evaluation.scores[winner] == 10
    assert all(evaluation.scores[n] <= 4 for n in rest)
    assert [evaluation.scores[n] for n in rest] == sorted((evaluation.scores[n] for n in rest), reverse=True)


def test_decision_json_form_reads_back_as_its_record() -> None:
    d = Decision(pod="shop/p", policy="shop/web", strategy="Auto", considered=["a", "b"],
                 refused=Refused({"b": Refusal("not Ready", False)}), ranking=["a"], warnings=["w"],
                 error=None, trigger="bind", time="2026-01-01T00:00:00Z", plan={"a": 1})
    again = DecisionRecord.read_json(d.record().model_dump_json(by_alias=True))
    assert again == d.record()
    assert again.winner is not None and again.winner.node == "a"


def test_decision_with_error_has_no_winner() -> None:
    d = Decision(pod="p", policy=None, strategy="Default", ranking=["a"],
                 error=PlacementError(ErrorCode.AFFINITY_UNSATISFIED, "x"))
    assert d.winner is None
    d.time = TIME
    assert d.record().to_json()["error"] == {"code": "affinity_unsatisfied", "message": "x"}


def test_decision_names_every_considered_node() -> None:
    view = cluster([make_node("b").info(), make_node("a").ready(False).info(), make_node("c").memory("1Gi").info()])
    d = evaluate(view, make_pod("new").memory("2Gi").info(), make_policy().build()).decision
    assert d.considered == ["a", "b", "c"]
    assert set(d.ranking) | set(d.refused) == {"a", "b", "c"}
    assert [node for node, _ in d.refused.by_node()] == ["a", "c"]


UNKNOWN_NAME_CASES = [
    # (case, policy spec, extra kwargs for evaluate, nodes asked about)
    ("unknown_name_among_passing_nodes", {}, {}, ["a", "ghost", "b"]),
    ("unknown_name_among_refused_nodes", {"strategy": "BestFit"}, {}, ["a", "ghost", "tight"]),
    ("unknown_name_in_a_round_quota", {"strategy": "Each", "count": 1}, {"quota": {"a": 1}},
     ["ghost", "a", "b"]),
]


@pytest.mark.parametrize(("case", "spec", "kw", "asked"), UNKNOWN_NAME_CASES, ids=[c[0] for c in UNKNOWN_NAME_CASES])
def test_a_node_berth_has_not_seen_is_refused_as_unknown(case: str, spec: dict[str, Any], kw: dict[str, Any],
                                                        asked: list[str]) -> None:
    """Whatever other check applies, a name the view does not know is refused as unknown, never
    ranked, and the other nodes are judged as without it."""
    view = cluster([make_node("a").info(), make_node("b").info(), make_node("tight").cpu("100m").info()])
    d = evaluate(view, make_pod("new").cpu("1").info(), make_policy().spec(**spec).build(), nodes=asked, **kw).decision
    assert d.refused["ghost"].reason == "unknown node: berth has not seen it"
    assert not d.refused["ghost"].resolvable
    assert "ghost" not in d.ranking
    without = evaluate(view, make_pod("new").cpu("1").info(),
                             make_policy().spec(**spec).build(), nodes=[n for n in asked if n != "ghost"],
                       **kw).decision
    assert d.ranking == without.ranking
    assert {n: r for n, r in d.refused.items() if n != "ghost"} == without.refused


# --- determinism --------------------------------------------------------------------------------

GREEDY = ["Auto", "Global", "Drained", "Balanced", "Spread", "BestFit", None]


@pytest.mark.parametrize("strategy", GREEDY, ids=lambda s: f"ties_by_name_{s or 'Default'}")
def test_deterministic_tie_breaks_by_name(strategy: str | None) -> None:
    nodes = [make_node(n).info() for n in ("d", "b", "a", "c")]
    spec: dict[str, Any] = {"strategy": strategy} if strategy else {}
    assert evaluate(cluster(nodes), make_pod("new").info(),
                                    make_policy().spec(**spec).build()).decision.ranking == ["a", "b", "c", "d"]
    assert evaluate(cluster(reversed(nodes)), make_pod("new").info(),
                                              (make_policy()
                                               .spec(**spec)
                                               .build())).decision.ranking == ["a", "b", "c", "d"]


@pytest.mark.parametrize("strategy", GREEDY, ids=lambda s: f"same_inputs_same_plan_{s or 'Default'}")
def test_same_inputs_give_the_same_plan(strategy: str | None) -> None:
    nodes = [make_node("a").cpu("2").info(),
             make_node("b").cpu("4").memory("4Gi").info(),
             make_node("c").cpu("3").memory("16Gi").info()]
    pods = spread_pods({"a": 2, "c": 1})
    spec: dict[str, Any] = {"strategy": strategy} if strategy else {}
    first = plan(cluster(nodes, pods), make_pod("new").info(), make_policy().spec(**spec).build(), count=20)
    again = plan(cluster(list(reversed(nodes)), list(reversed(pods))), make_pod("new").info(),
                                                                       make_policy().spec(**spec).build(), count=20)
    assert list(first.plan.items()) == list(again.plan.items())
    assert judged(first.decision) == judged(again.decision)


# --- the policy -------------------------------------------------------------------------------------

INVALID_POLICIES = [
    ("wrong_api_version", {"apiVersion": "v1"}, "apiVersion"),
    ("wrong_kind", {"kind": "Pod"}, "kind"),
    ("missing_name", {"metadata": {"namespace": "shop"}}, "metadata.name"),
    ("spec_not_an_object", {"spec": ["x"]}, "spec"),
    ("unknown_spec_field", {"spec": {"weight": 1}}, "spec.weight"),
    ("unknown_strategy", {"spec": {"strategy": "Random"}}, "spec.strategy"),
    ("seed_spelling_of_a_strategy_is_refused", {"spec": {"strategy": "best-fit"}}, "spec.strategy"),
    ("negative_count", {"spec": {"count": -1}}, "spec.count"),
    ("negative_nodes_limit", {"spec": {"nodesLimit": -1}}, "spec.nodesLimit"),
    ("unknown_node_filter_field", {"spec": {"nodeFilter": {"include": ["a"]}}}, "spec.nodeFilter.include"),
    ("max_skew_zero", {"spec": {"topologySpreadConstraints": [{"maxSkew": 0, "topologyKey": "z"}]}},
     "spec.topologySpreadConstraints[0].maxSkew"),
    ("topology_key_missing", {"spec": {"topologySpreadConstraints": [{"maxSkew": 1}]}},
     "spec.topologySpreadConstraints[0].topologyKey"),
    ("unknown_when_unsatisfiable", {"spec": {"topologySpreadConstraints": [
        {"topologyKey": "z", "whenUnsatisfiable": "Never"}]}},
     "spec.topologySpreadConstraints[0].whenUnsatisfiable"),
    ("min_domains_with_schedule_anyway", {"spec": {"topologySpreadConstraints": [
        {"topologyKey": "z", "whenUnsatisfiable": "ScheduleAnyway", "minDomains": 2}]}},
     "spec.topologySpreadConstraints[0]"),
    ("min_domains_zero", {"spec": {"topologySpreadConstraints": [{"topologyKey": "z", "minDomains": 0}]}},
     "spec.topologySpreadConstraints[0].minDomains"),
    ("unknown_affinity_matching", {"spec": {"affinityMatching": "Sometimes"}}, "spec.affinityMatching"),
    ("overcommit_zero", {"spec": {"capacity": {"cpuOvercommitPercent": 0}}}, "spec.capacity.cpuOvercommitPercent"),
    ("disk_floor_above_100", {"spec": {"capacity": {"minFreeDiskPercent": 101}}},
     "spec.capacity.minFreeDiskPercent"),
    ("selector_in_without_values", {"spec": {"selector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}},
     "spec.selector.matchExpressions[0]"),
]


@pytest.mark.parametrize(("name", "patch", "path"), INVALID_POLICIES, ids=[c[0] for c in INVALID_POLICIES])
def test_invalid_policies_name_the_field(name: str, patch: dict[str, Any], path: str) -> None:
    obj = {**make_policy().obj(), **patch}
    with pytest.raises(InvalidPolicy) as caught:
        policy_from_manifest(obj)
    assert caught.value.path == path, caught.value
    assert str(caught.value).startswith(path + ": ")


def test_policy_defaults() -> None:
    p = policy_from_manifest({"apiVersion": "berth.dev/v1alpha1", "kind": "PlacementPolicy",
                              "metadata": {"name": "p"}})
    assert p.namespace == "default" and p.strategy_name == "Default" and p.rules == ()
    assert p.spec.affinity_matching.value == "Enforced" and p.spec.count == 1 and p.spec.nodes_limit == 0


def test_policy_governs_only_its_namespace_and_selector() -> None:
    p = make_policy().build()
    assert p.governs("shop", {"app": "web", "x": "y"})
    assert not p.governs("other", {"app": "web"})
    assert not p.governs("shop", {"app": "db"})


def test_policy_overrides_resolve_against_cluster_settings() -> None:
    p = make_policy().spec(capacity={"cpuOvercommitPercent": 200}).build()
    resolved = Settings(memory_overcommit_percent=120).for_policy(p)
    assert (resolved.cpu_overcommit_percent, resolved.memory_overcommit_percent) == (200, 120)
    assert resolved.min_free_disk_percent == 10


def test_pods_without_a_policy_count_as_a_workload_by_their_labels() -> None:
    """Without a policy a pod's workload is the pods labelled like it, controller hashes aside: the
    old revision on the roomy node a counts, so AUTO (fewest instances first) picks b."""
    view = cluster([make_node("a").cpu("64").info(), make_node("b").info()],
                   [make_pod("old").on("a").labels({"app": "web", "pod-template-hash": "v1"}).info()])
    new = make_pod("new").labels({"app": "web", "pod-template-hash": "v2"}).info()
    settings = Settings(default_strategy=Strategy.AUTO)
    assert evaluate(view, new, None, settings).decision.ranking == ["b", "a"]
    assert plan(view, new, None, count=2, settings=settings).plan == {"b": 1, "a": 1}


# -- bounded caches -------------------------------------------------------------------------------


def _fresh_counts(view: ClusterView, namespace: str, selector: LabelSelector) -> dict[str, int]:
    counts: dict[str, int] = {}
    for p in view.pods_in_namespace(namespace):
        if p.node_name and not p.terminating and selector.matches(p.labels):
            counts[p.node_name] = counts.get(p.node_name, 0) + 1
    return counts


def test_counted_selectors_are_bounded_and_stay_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    """One workload per Job (a default strategy counts pods labelled like the pod): the index keeps
    at most COUNTED_SELECTORS of them, the least recently asked dropped, and every count it
    answers, kept or counted afresh, equals a fresh count through pod changes."""
    monkeypatch.setattr(index_module, "COUNTED_SELECTORS", 8)
    view = cluster([make_node("a").info(), make_node("b").info()])
    kept = _view_index(view)
    selectors = [LabelSelector({"job-name": f"job-{i}"}) for i in range(30)]
    selectors.append(LabelSelector({}, (Requirement("job-name", "Exists"),)))  # no matchLabels pair
    for i, selector in enumerate(selectors):
        view.upsert_pod(make_pod(f"p-{i}").labels({"job-name": f"job-{i % 30}"}).on("ab"[i % 2]).info())
        kept.matching_counts("shop", selector)
        view.upsert_pod(make_pod(f"q-{i}").labels({"job-name": f"job-{(i * 7) % 30}"}).on("b").info())
        view.remove_pod(f"shop/p-{i // 2}")
        assert len(kept._counts) <= 8
        for earlier in selectors[: i + 1]:
            assert dict(kept.matching_counts("shop", earlier)) == _fresh_counts(view, "shop", earlier)


def _view_index(view: ClusterView) -> ViewIndex:
    kept = index_of(view)
    assert isinstance(kept, ViewIndex)
    return kept


def test_read_only_caches_add_nothing_the_scheduling_path_keeps() -> None:
    """A preview or a capacity query reads the index's caches but adds no counted selector and no
    table, whatever labels and shapes it asks about."""
    view = cluster([make_node("a").info()], [make_pod("w-0").on("a").info()])
    kept_index = _view_index(view)
    kept_index.matching_counts("shop", LabelSelector({"app": "web"}))
    kept = kept_index.table(("kept",), dict)
    counted, tables = dict(kept_index._counts), list(kept_index._memos)
    with read_only_caches(view):
        for i in range(50):
            assert kept_index.matching_counts("shop", LabelSelector({"app": f"asked-{i}"})) == {}
            assert kept_index.table(("asked", i), dict) is not kept_index.table(("asked", i), dict)
        assert kept_index.matching_counts("shop", LabelSelector({"app": "web"})) == {"a": 1}
        assert kept_index.table(("kept",), dict) is kept
    assert dict(kept_index._counts) == counted and list(kept_index._memos) == tables
    kept_index.matching_counts("shop", LabelSelector({"app": "new"}))
    assert len(kept_index._counts) == len(counted) + 1  # added again once the block ends


# --- plans shared by policies alike -----------------------------------------------------------------

def _two_workloads() -> ClusterView:
    """Three nodes; the ``web`` workload of shop on ``a``, the ``api`` workload of other on ``c``:
    a plan that counted either workload per node would tell them apart."""
    nodes = [make_node("a").cpu("4").info(), make_node("b").cpu("3").info(), make_node("c").cpu("4").info()]
    pods = [*spread_pods({"a": 3}),
            *(make_pod(f"api-{i}").namespace("other").labels({"app": "api"}).on("c").info() for i in range(3))]
    return cluster(nodes, pods)


SHARED_SPECS = [
    ("default", {}),
    ("global", {"strategy": "Global"}),
    ("drained", {"strategy": "Drained"}),
    ("balanced", {"strategy": "Balanced"}),
    ("spread_strategy", {"strategy": "Spread"}),
    ("best_fit", {"strategy": "BestFit"}),
    ("node_filter", {"nodeFilter": {"excludes": ["b"]}}),
    ("capacity_override", {"capacity": {"cpuOvercommitPercent": 50}}),
]


@pytest.mark.parametrize(("name", "spec"), SHARED_SPECS, ids=[f"shared_{n}" for n, _ in SHARED_SPECS])
def test_policies_alike_but_for_their_selector_share_one_plan(name: str, spec: dict[str, Any]) -> None:
    view = _two_workloads()
    web_policy = make_policy("web").namespace("shop").spec(**spec).build()
    api_policy = (make_policy("api")
                  .namespace("other")
                  .spec(**{**spec, "selector": {"matchLabels": {"app": "api"}}})
                  .build())
    web_pod = make_pod("new-web").info()
    api_pod = make_pod("new-api").namespace("other").labels({"app": "api"}).info()
    key = shared_plan_key(web_pod, web_policy, 6)
    assert key is not None and key == shared_plan_key(api_pod, api_policy, 6)
    web_plan, api_plan = plan(view, web_pod, web_policy, count=6), plan(view, api_pod, api_policy, count=6)
    assert (web_plan.plan, web_plan.error) == (api_plan.plan, api_plan.error)


NOT_SHARED_SPECS = [
    ("auto_counts_the_workload", {"strategy": "Auto"}),
    ("fill_plans_its_own_round", {"strategy": "Fill", "count": 2}),
    ("each_plans_its_own_round", {"strategy": "Each", "count": 1}),
    ("spread_reads_the_pods", {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname"}]}),
    ("rules_read_the_pods", {"placementRules": [{"resource": "Pod", "operator": "HasNot",
                                                 "labels": {"app": "api"}}]}),
]


@pytest.mark.parametrize(("name", "spec"), NOT_SHARED_SPECS, ids=[n for n, _ in NOT_SHARED_SPECS])
def test_a_plan_that_reads_the_workload_is_not_shared(name: str, spec: dict[str, Any]) -> None:
    assert shared_plan_key(make_pod("new").info(), make_policy().spec(**spec).build(), 6) is None


DIFFERENT_PLANS = [
    ("count", lambda: (make_pod("new").info(), make_policy().build(), 7)),
    ("shape", lambda: (make_pod("new").cpu("200m").info(), make_policy().build(), 6)),
    ("sleepy", lambda: (make_pod("new").sleepy().info(), make_policy().build(), 6)),
    ("tolerations", lambda: (make_pod("new").tolerations([Toleration(key="gpu", operator="Exists")]).info(),
                             make_policy().build(), 6)),
    ("strategy", lambda: (make_pod("new").info(), make_policy().strategy("BestFit").build(), 6)),
    ("node_filter", lambda: (make_pod("new").info(),
                             make_policy().node_filter({"labels": {"disk": "ssd"}}).build(), 6)),
]


@pytest.mark.parametrize(("name", "case"), DIFFERENT_PLANS, ids=[f"differs_by_{n}" for n, _ in DIFFERENT_PLANS])
def test_what_the_plan_depends_on_tells_shared_plans_apart(name: str, case: Any) -> None:
    assert shared_plan_key(make_pod("new").info(), make_policy().build(), 6) != shared_plan_key(*case())


def test_the_two_workloads_give_a_strategy_that_counts_them_two_plans() -> None:
    """What makes the sharing test above able to fail: on this cluster, a plan that counted the
    workload per node (Auto does) differs between the two policies."""
    view = _two_workloads()
    web_plan = plan(view, make_pod("new-web").info(),
                          make_policy("web").namespace("shop").strategy("Auto").build(), count=6)
    api_plan = plan(view, make_pod("new-api").namespace("other").labels({"app": "api"}).info(),
                    (make_policy("api")
                     .namespace("other")
                     .strategy("Auto")
                     .spec(selector={"matchLabels": {"app": "api"}})
                     .build()), count=6)
    assert web_plan.plan != api_plan.plan
