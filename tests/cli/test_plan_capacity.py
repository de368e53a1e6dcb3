"""``berth plan`` and ``berth capacity`` on snapshot files, kubectl List JSON and YAML alike."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from berth.core.decision import DecisionRecord, RoundPlan
from tests.builders import make_node, make_pod, make_policy
from tests.cli import kube
from tests.cli.conftest import Files, Result, run_process
from tests.decision_schema import valid_record

Cli = Callable[..., Result]

# n1 4 cpu / 8Gi with web-0 (500m, 1Gi); n2 4 / 8Gi with batch-0 (1, 2Gi); n3 2 / 4Gi (its pod finished)
CAPACITY = {"n1": 7, "n2": 6, "n3": 4}
PENDING_WARNING = "the snapshot holds 1 pending pod(s) with no node yet: they take no room in this plan"


def test_renewed_constant_is_the_lease_time() -> None:
    assert datetime(2026, 3, 1, 10, 0, tzinfo=UTC).timestamp() == kube.RENEWED_EPOCH


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_plan_output_shape_is_exact(cli: Cli, files: Files, fmt: str) -> None:
    snapshot = files.json if fmt == "json" else files.yaml
    r = cli("plan", "--snapshot", snapshot, "--policy", files.policy, "--pod", files.pod, "--count", "3")
    assert r.code == 0, r.err
    out = json.loads(r.out)
    assert list(out) == ["plan", "decision", "error"]
    assert out["error"] is None
    # Auto: the flattest distribution from where the cluster is (web-0 already on n1)
    assert out["plan"] == {"n1": 1, "n2": 1, "n3": 1}
    decision = valid_record(out["decision"])  # the decision record, for the plan's first pod
    assert decision == DecisionRecord(
        pod="shop/web-new", trigger="plan", time="2026-03-01T10:00:00.000Z", policy="shop/web", policy_generation=1,
        strategy="Auto", round=RoundPlan(plan={"n1": 1, "n2": 1, "n3": 1}, places=3, on_node=1), considered_count=3,
        considered=["n1", "n2", "n3"], refused_count=0, refused=[], winner=decision.winner, ranking_count=3,
        ranking=decision.ranking, warnings=[PENDING_WARNING])
    assert decision.winner is not None and (decision.winner.rank, decision.winner.score) == (1, 10)
    assert sorted(decision.ranking) == ["n1", "n2", "n3"] and decision.winner.node == decision.ranking[0]


def test_json_and_yaml_snapshots_give_the_same_answer(cli: Cli, files: Files) -> None:
    args = ("--policy", files.policy, "--pod", files.pod, "--count", "5")
    assert cli("plan", "--snapshot", files.json, *args).out == cli("plan", "--snapshot", files.yaml, *args).out
    one_doc = kube.write_yaml(files.dir / "list.yaml", kube.as_list(kube.cluster()))
    assert cli("plan", "--snapshot", files.json, *args).out == cli("plan", "--snapshot", one_doc, *args).out


def test_plan_without_count_places_one_pod_for_greedy_strategies(cli: Cli, files: Files) -> None:
    out = json.loads(cli("plan", "--snapshot", files.json, "--policy", files.policy, "--pod", files.pod).out)
    assert sum(out["plan"].values()) == 1


def test_plan_refusal_is_exit_1_with_an_error(cli: Cli, files: Files) -> None:
    r = cli("plan", "--snapshot", files.json, "--policy", files.policy, "--pod", files.pod, "--count", "100")
    assert r.code == 1
    out = json.loads(r.out)
    assert list(out) == ["plan", "decision", "error"]
    assert out["plan"] == {}
    assert set(out["error"]) == {"code", "message"}
    assert out["error"]["code"] == "insufficient_resource"


def test_plan_refusal_exit_status_as_a_process(files: Files) -> None:
    r = run_process(["plan", "--snapshot", files.json, "--policy", files.policy, "--pod", files.pod,
                     "--count", "100"])
    assert r.code == 1
    assert json.loads(r.out)["error"]["code"] == "insufficient_resource"
    assert r.err == ""


def test_fill_plans_its_own_round(cli: Cli, files: Files) -> None:
    policy = files.write_policy("fill.yaml", make_policy().strategy("Fill").count(2).obj())
    out = json.loads(cli("plan", "--snapshot", files.json, "--policy", policy, "--pod", files.pod).out)
    assert out["plan"] == {"n1": 1, "n2": 2, "n3": 2}  # each node topped up to 2; n1 holds one already
    assert out["decision"]["strategy"] == "Fill"
    r = cli("plan", "--snapshot", files.json, "--policy", policy, "--pod", files.pod, "--count", "2")
    assert sum(json.loads(r.out)["plan"].values()) == 2


def test_fill_already_filled_is_a_refusal(cli: Cli, files: Files) -> None:
    policy = files.write_policy("fill.yaml", make_policy().strategy("Fill").count(1).nodes_limit(1).obj())
    r = cli("plan", "--snapshot", files.json, "--policy", policy, "--pod", files.pod)
    assert r.code == 1
    assert json.loads(r.out)["error"]["code"] == "already_filled"


def test_each_adds_count_per_node(cli: Cli, files: Files) -> None:
    policy = files.write_policy("each.yaml", make_policy().strategy("Each").count(2).nodes_limit(2).obj())
    out = json.loads(cli("plan", "--snapshot", files.json, "--policy", policy, "--pod", files.pod).out)
    assert out["plan"] == {"n1": 2, "n2": 2}  # the two roomiest nodes


def test_policy_from_the_snapshot_when_none_is_given(cli: Cli, files: Files) -> None:
    snapshot = kube.write_json(files.dir / "with-policy.json", [*kube.cluster(), (make_policy()
                                                                                  .strategy("Fill")
                                                                                  .count(2)
                                                                                  .obj())])
    out = json.loads(cli("plan", "--snapshot", snapshot, "--pod", files.pod).out)
    assert out["decision"]["strategy"] == "Fill"
    out = json.loads(cli("plan", "--snapshot", files.json, "--pod", files.pod).out)
    assert out["decision"]["strategy"] == "Default"


def test_pod_namespace_defaults_to_the_policys(cli: Cli, files: Files) -> None:
    pod = make_pod("web-x").cpu("500m").memory("1Gi").phase("Running").obj()
    del pod["metadata"]["namespace"]
    path = kube.write_yaml(files.dir / "pod-nons.yaml", pod)
    r = cli("plan", "--snapshot", files.json, "--policy", files.policy, "--pod", path, "--count", "3")
    assert json.loads(r.out)["plan"] == {"n1": 1, "n2": 1, "n3": 1}  # web-0 in shop counted


def test_pod_in_another_namespace_than_the_policy_is_bad_input(cli: Cli, files: Files) -> None:
    path = kube.write_yaml(files.dir / "pod-other.yaml", (make_pod("web-x")
                                                          .namespace("other")
                                                          .cpu("500m")
                                                          .memory("1Gi")
                                                          .phase("Running")
                                                          .obj()))
    r = cli("plan", "--snapshot", files.json, "--policy", files.policy, "--pod", path)
    assert r.code == 2
    assert "pod-other.yaml: metadata.namespace" in r.err


def test_selector_not_matching_the_pod_is_a_warning(cli: Cli, files: Files) -> None:
    path = kube.write_yaml(files.dir / "pod-api.yaml", (make_pod("api-0")
                                                        .labels({"app": "api"})
                                                        .cpu("500m")
                                                        .memory("1Gi")
                                                        .phase("Running")
                                                        .obj()))
    out = json.loads(cli("plan", "--snapshot", files.json, "--policy", files.policy, "--pod", path).out)
    assert any("selector does not match" in w for w in out["decision"]["warnings"])


def test_pending_pods_in_the_snapshot_are_a_warning(cli: Cli, files: Files) -> None:
    """Pods with no node yet hold no room: the plan says it left them out rather than hiding it."""
    args = ("--policy", files.policy, "--pod", files.pod)
    out = json.loads(cli("plan", "--snapshot", files.json, *args).out)  # web-pending has no node
    assert out["decision"]["warnings"] == [PENDING_WARNING]
    bound_only = [o for o in kube.cluster() if o["metadata"]["name"] != "web-pending"]
    plain = json.loads(cli("plan", "--snapshot", kube.write_json(files.dir / "bound.json", bound_only), *args).out)
    assert plain["decision"]["warnings"] == []
    assert out["plan"] == plain["plan"]


def test_capacity_output_shape_is_exact(cli: Cli, files: Files) -> None:
    for snapshot in (files.json, files.yaml):
        r = cli("capacity", "--snapshot", snapshot, "--pod", files.pod)
        assert r.code == 0, r.err
        out = json.loads(r.out)
        assert list(out) == ["nodes", "total", "placeable"]
        assert out["nodes"] == CAPACITY and out["total"] == sum(CAPACITY.values())
        # No policy: the default ranking places pod after pod until every node is full.
        assert out["placeable"]["pods"] == 17 and out["placeable"]["code"] == "insufficient_resource"
        assert out["placeable"]["reason"].startswith("0/3 nodes can take the pod: n1: insufficient capacity")


def test_capacity_applies_the_policy_node_filter(cli: Cli, files: Files) -> None:
    policy = files.write_policy("filter.yaml", make_policy().strategy("Auto").node_filter({"excludes": ["n3"]}).obj())
    out = json.loads(cli("capacity", "--snapshot", files.json, "--pod", files.pod, "--policy", policy).out)
    assert out["nodes"] == {"n1": 7, "n2": 6} and out["total"] == 13
    assert out["placeable"]["pods"] == 13


ZONE_SPREAD = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule"}]
ZONE_B_RULE = [{"resource": "Node", "operator": "Has", "labels": {"topology.kubernetes.io/zone": "zone-b"}}]
PLACEABLE_CASES: list[tuple[str, dict[str, Any], int, str]] = [
    # zone a holds web-0: a round takes zone b to 4 (n3 full) and zone a to 5, then skew would be 2.
    ("capacity_with_spread_lists_every_node_and_places_what_spread_allows", {"topologySpreadConstraints": ZONE_SPREAD},
     8, "spread_unsatisfied"),
    ("capacity_with_rules_lists_every_node_and_places_what_the_rules_allow", {"placementRules": ZONE_B_RULE},
     4, "affinity_unsatisfied"),
    ("capacity_with_a_ceiling_places_what_nodes_limit_allows", {"nodesLimit": 2}, 5, "insufficient_resource"),
]


@pytest.mark.parametrize(("name", "spec", "placeable", "code"), PLACEABLE_CASES, ids=[c[0] for c in PLACEABLE_CASES])
def test_capacity_is_room_per_node_and_placeable_is_the_whole_policy(
        cli: Cli, files: Files, name: str, spec: dict[str, Any], placeable: int, code: str) -> None:
    """Spread and rules say where, not how much room: every node the filter admits is listed with
    its raw room; what one round could place under the whole policy is ``placeable``, with why
    one more would not be."""
    policy = files.write_policy("p.yaml", make_policy().strategy("Auto").spec(**spec).obj())
    r = cli("capacity", "--snapshot", files.json, "--pod", files.pod, "--policy", policy)
    assert r.code == 0, r.err
    out = json.loads(r.out)
    assert out["nodes"] == CAPACITY and out["total"] == 17
    assert (out["placeable"]["pods"], out["placeable"]["code"]) == (placeable, code), out["placeable"]


def test_capacity_placeable_of_a_fixed_round(cli: Cli, files: Files) -> None:
    policy = files.write_policy("fill.yaml", make_policy().strategy("Fill").count(5).nodes_limit(2).obj())
    out = json.loads(cli("capacity", "--snapshot", files.json, "--pod", files.pod, "--policy", policy).out)
    # Fill tops n1 (web-0 there) up by 4 and n2 by 5: the round's own plan.
    assert out["placeable"] == {"pods": 9, "code": None, "reason": "Fill: the round's own plan, 2 node(s)"}


def test_settings_flags_before_or_after_the_subcommand(cli: Cli, files: Files) -> None:
    before = cli("--cpu-overcommit", "200", "--memory-overcommit", "200",
                 "capacity", "--snapshot", files.json, "--pod", files.pod)
    after = cli("capacity", "--snapshot", files.json, "--pod", files.pod,
                "--cpu-overcommit", "200", "--memory-overcommit", "200")
    assert before.out == after.out
    out = json.loads(before.out)
    assert (out["nodes"], out["total"]) == ({"n1": 15, "n2": 14, "n3": 8}, 37)
    only_cpu = json.loads(cli("capacity", "--snapshot", files.json, "--pod", files.pod,
                              "--cpu-overcommit", "200").out)
    assert only_cpu["nodes"] == CAPACITY  # memory still binds


def test_unknown_capacity_and_the_reject_flag(cli: Cli, files: Files) -> None:
    items = kube.cluster()
    del items[2]["status"]["allocatable"]["memory"]  # n3 does not report its memory: unknown, not zero
    snapshot = kube.write_json(files.dir / "unknown.json", items)
    out = json.loads(cli("capacity", "--snapshot", snapshot, "--pod", files.pod).out)
    assert out["nodes"] == {"n1": 7, "n2": 6, "n3": 1}  # unknown is never unlimited: one pod, unverified
    assert out["unverified"] == {"n3": ["memory"]}
    plan = json.loads(cli("plan", "--snapshot", snapshot, "--policy", files.policy, "--pod", files.pod).out)
    assert any("n3" in w and "unverified" in w for w in plan["decision"]["warnings"])
    rejected = cli("capacity", "--snapshot", snapshot, "--pod", files.pod, "--reject-unknown-capacity")
    out = json.loads(rejected.out)
    assert (out["nodes"], out["total"], "unverified" in out) == ({"n1": 7, "n2": 6}, 13, False)


def test_snapshot_is_judged_at_its_newest_lease(cli: Cli, files: Files) -> None:
    # The Leases are from 2026-03-01 10:00; judged at that moment every node is up.
    assert json.loads(cli("capacity", "--snapshot", files.json, "--pod", files.pod).out)["total"] == 17
    # A minute later, every Lease is older than the 40 s threshold.
    late = cli("plan", "--snapshot", files.json, "--policy", files.policy, "--pod", files.pod,
               "--now", "2026-03-01T10:01:00Z")
    assert late.code == 1
    refused = valid_record(json.loads(late.out)["decision"]).refusals()
    assert set(refused) == {"n1", "n2", "n3"}
    assert all(reason.startswith("node is down: Lease not renewed") for reason in refused.values())
    lenient = cli("capacity", "--snapshot", files.json, "--pod", files.pod, "--now", "2026-03-01T10:01:00Z",
                  "--liveness-threshold", "120")
    assert json.loads(lenient.out)["total"] == 17


def test_a_stale_lease_marks_its_node_down(cli: Cli, files: Files) -> None:
    items = [o for o in kube.cluster() if not (o["kind"] == "Lease" and o["metadata"]["name"] == "n3")]
    items.append(kube.lease("n3", "2026-03-01T09:55:00Z"))
    snapshot = kube.write_json(files.dir / "stale.json", items)
    out = json.loads(cli("plan", "--snapshot", snapshot, "--policy", files.policy, "--pod", files.pod).out)
    assert (valid_record(out["decision"]).refusal_of("n3") or "").startswith("node is down: Lease not renewed for 300s")


def test_without_leases_liveness_is_the_ready_condition(cli: Cli, files: Files) -> None:
    items = [o for o in kube.cluster() if o["kind"] != "Lease"]
    items[2] = make_node("n3").zone("zone-b").cpu("2").memory("4Gi").ready(False).obj()
    snapshot = kube.write_json(files.dir / "noleases.json", items)
    out = json.loads(cli("capacity", "--snapshot", snapshot, "--pod", files.pod).out)
    assert out["nodes"] == {"n1": 7, "n2": 6}


def test_snapshot_from_stdin(files: Files) -> None:
    r = run_process(["capacity", "--snapshot", "-", "--pod", files.pod], stdin=files.json.read_text())
    assert r.code == 0, r.err
    assert json.loads(r.out)["nodes"] == CAPACITY


def _workload(kind: str, template: dict[str, Any]) -> dict[str, Any]:
    """``kind`` named web-new in shop, carrying ``template`` where that kind keeps its pod template."""
    spec: dict[str, Any] = {"template": template}
    if kind == "CronJob":
        spec = {"schedule": "0 * * * *", "jobTemplate": {"spec": {"template": template}}}
    elif kind != "Job":
        spec = {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, **spec}
    return {"apiVersion": "batch/v1" if kind in ("Job", "CronJob") else "apps/v1", "kind": kind,
            "metadata": {"name": "web-new", "namespace": "shop"}, "spec": spec}


WORKLOADS = ["Deployment", "StatefulSet", "ReplicaSet", "DaemonSet", "Job", "CronJob"]


@pytest.mark.parametrize("kind", WORKLOADS)
def test_a_workload_manifest_is_read_as_its_pod_template(cli: Cli, files: Files, kind: str) -> None:
    """``--pod deployment.yaml`` plans and measures the pods the workload would make, as the Pod would."""
    pod = make_pod("web-new").cpu("500m").memory("1Gi").phase("Running").obj()
    template = {"metadata": {"labels": pod["metadata"]["labels"]}, "spec": pod["spec"]}
    path = kube.write_yaml(files.dir / f"{kind}.yaml", _workload(kind, template))
    plan = ("plan", "--snapshot", files.json, "--policy", files.policy, "--count", "3")
    as_workload = cli(*plan, "--pod", path)
    assert as_workload.code == 0, as_workload.err
    assert as_workload.out == cli(*plan, "--pod", files.pod).out
    capacity = ("capacity", "--snapshot", files.json)
    assert cli(*capacity, "--pod", path).out == cli(*capacity, "--pod", files.pod).out


def test_a_workload_without_a_pod_template_is_one_clear_error(cli: Cli, files: Files) -> None:
    path = kube.write_yaml(files.dir / "deploy.yaml", {"apiVersion": "apps/v1", "kind": "Deployment",
                                                      "metadata": {"name": "web"}, "spec": {"replicas": 2}})
    r = cli("capacity", "--snapshot", files.json, "--pod", path)
    assert r.code == 2 and r.out == ""
    assert r.err.strip().splitlines() == [
        f"berth: error: {path}: spec.template: must be an object (the pod template)"], r.err


def test_a_workload_template_error_names_the_field_as_the_file_spells_it(cli: Cli, files: Files) -> None:
    pod = make_pod("web-new").cpu("500m").memory("1Gi").phase("Running").obj()
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    path = kube.write_yaml(files.dir / "deploy.yaml", _workload("Deployment", {"spec": pod["spec"]}))
    r = cli("capacity", "--snapshot", files.json, "--pod", path)
    assert r.code == 2
    assert "deploy.yaml: spec.template: spec.containers[0].resources.requests.cpu" in r.err, r.err


def test_a_kind_that_makes_no_pods_is_refused_by_name(cli: Cli, files: Files) -> None:
    path = kube.write_yaml(files.dir / "svc.yaml", {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}})
    r = cli("capacity", "--snapshot", files.json, "--pod", path)
    assert r.code == 2
    assert "svc.yaml: kind: expected Pod or a workload (Deployment, " in r.err and "found 'Service'" in r.err, r.err


def test_plan_stopped_by_topology_spread_says_spread_unsatisfied(cli: Cli, files: Files) -> None:
    policy = files.write_policy("spread.yaml", (make_policy()
                                                .strategy("Auto")
                                                .spec(topologySpreadConstraints=ZONE_SPREAD)
                                                .obj()))
    r = cli("plan", "--snapshot", files.json, "--policy", policy, "--pod", files.pod, "--count", "9")
    assert r.code == 1, r.err
    error = json.loads(r.out)["error"]
    assert error["code"] == "spread_unsatisfied"
    assert error["message"].startswith("placed 8 of 9: 0/3 nodes can take the pod; topology spread refuses")
    assert "makes skew 2 in topology.kubernetes.io/zone=zone-a (maxSkew 1)" in error["message"]


def test_plan_fill_names_the_nodes_it_passed_over(cli: Cli, files: Files) -> None:
    policy = files.write_policy("fill.yaml", make_policy().strategy("Fill").count(7).nodes_limit(2).obj())
    r = cli("plan", "--snapshot", files.json, "--policy", policy, "--pod", files.pod)
    assert r.code == 1, r.err
    assert json.loads(r.out)["error"] == {
        "code": "insufficient_resource",
        "message": "Fill: 1 of 2 nodes can reach 7 pods: n2 needs 7 more but has room for 6; "
                   "n3 needs 7 more but has room for 4"}


def test_plan_warns_when_includes_names_a_node_that_does_not_exist(cli: Cli, files: Files) -> None:
    policy = files.write_policy("inc.yaml", (make_policy()
                                             .strategy("Auto")
                                             .node_filter({"includes": ["n1", "n9"]})
                                             .obj()))
    out = json.loads(cli("plan", "--snapshot", files.json, "--policy", policy, "--pod", files.pod).out)
    assert out["plan"] == {"n1": 1}
    assert "nodeFilter.includes names 1 node berth has not seen: n9" in out["decision"]["warnings"]


def _pod_manifest(files: Files, name: str, change: Callable[[dict[str, Any]], None]) -> Any:
    pod = {k: v for k, v in (make_pod("web-new")
                             .cpu("500m")
                             .memory("1Gi")
                             .phase("Running")
                             .obj()).items() if k != "status"}
    change(pod["spec"])
    return kube.write_yaml(files.dir / name, pod)


def test_plan_counts_pod_level_requests(cli: Cli, files: Files) -> None:
    def pod_level(spec: dict[str, Any]) -> None:  # containers ask 500m; the pod as a whole 3 cores
        spec["resources"] = {"requests": {"cpu": "3", "memory": "1Gi"}}

    path = _pod_manifest(files, "podlevel.yaml", pod_level)
    out = json.loads(cli("plan", "--snapshot", files.json, "--policy", files.policy, "--pod", path).out)
    assert "insufficient capacity: cpu" in (valid_record(out["decision"]).refusal_of("n3") or "")  # 2 cores allocatable
    assert set(out["plan"]) <= {"n1", "n2"}


def test_plan_follows_a_match_fields_node_pin(cli: Cli, files: Files) -> None:
    def pinned(spec: dict[str, Any]) -> None:  # how the DaemonSet controller pins a pod to its node
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]}}}

    path = _pod_manifest(files, "pinned.yaml", pinned)
    out = json.loads(cli("plan", "--snapshot", files.json, "--policy", files.policy, "--pod", path,
                         "--count", "2").out)
    assert out["plan"] == {"n2": 2}
    assert set(valid_record(out["decision"]).refusals()) == {"n1", "n3"}
