"""berth end to end: a real kube-scheduler places pods through berth's extender.

The stack (:mod:`tests.e2e.stack`): etcd + kube-apiserver (the harness), the PlacementPolicy CRD,
``berth extender`` and ``berth operator`` as processes of their own, and a kube-scheduler whose
profile ``berth-scheduler`` calls berth's filter, prioritize and bind with ``nodeCacheCapable:
true`` and ``percentageOfNodesToScore: 100`` (extender/README.md's configuration). Every test
creates pods with ``schedulerName: berth-scheduler`` on fake nodes of its own (no kubelet: a pod
stays Pending after binding, ``spec.nodeName`` says where it went) and reads where the real
scheduler bound them. Expected placements are the core's: ``berth.core.plan.plan_round`` on a
snapshot taken with ``kubectl get nodes,pods,leases -A -o json``, as ``berth plan`` would read it.

Run (the first run builds the Kubernetes binaries, a few minutes; then cached)::

    bash hack/build-k8s.sh && pytest -m e2e tests/e2e/test_placement_e2e.py

**Against an existing cluster** (kind, or any cluster you may add fake nodes to)::

    KUBECONFIG=~/.kube/config BERTH_E2E_USE_EXISTING=1 pytest -m e2e tests/e2e/test_placement_e2e.py

Then nothing of the cluster itself is started or stopped: the CRD is applied to it, and the
extender, the operator (standalone, watching only the test's namespace, admission webhook off:
the API server could not call one on this machine's 127.0.0.1) and the kube-scheduler with the
``berth-scheduler`` profile (``BERTH_E2E_SCHEDULER_NAME`` renames it if that name is taken) run
on this machine against that kubeconfig. The tests create their own fake nodes (names
``pe2e-*``, labels ``e2e.berth.dev/*``; real kubelets ignore them) and renew their Leases; the
webhook-only check is skipped there. ``hack/build-k8s.sh`` still provides kubectl.

If the control plane cannot start, every test errors with the reason (never skips).
"""

# ruff: noqa: F811  (fixtures are imported, then requested by name)
from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
import yaml
from kubernetes import client as k8s
from prometheus_client.parser import text_string_to_metric_families

from berth.core.decision import DecisionRecord
from berth.core.quantity import to_base_units
from tests.chart.helm import render, require_helm
from tests.decision_schema import valid_record
from tests.e2e.harness import (
    ControlPlane,
    NodeLeaseRenewer,
    NodeSpec,
    force_delete_pods,
    simple_pod,
    wait_for,
)
from tests.e2e.harness.fixtures import (  # noqa: F401  (pytest fixtures)
    control_plane,
    kube_api,
    make_nodes,
    node_leases,
)
from tests.e2e.stack import (  # noqa: F401  (pytest fixtures)
    HOLD_GATE,
    LIVENESS_THRESHOLD_SECONDS,
    ROOT,
    BerthScheduler,
    Extender,
    Operator,
    berth_crd,
    berth_extender,
    berth_operator,
    berth_scheduler,
    berth_scheduler_config,
    bound_nodes,
    condition,
    events,
    expected_plan,
    get_policy,
    node_counts,
    placement_namespace,
    policy_manifest,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

RUN_LABEL = "e2e.berth.dev/run"
ZONE = "e2e.berth.dev/zone"


@pytest.fixture
def env(control_plane: ControlPlane, kube_api: Any, placement_namespace: str, berth_extender: Extender,
        berth_scheduler: BerthScheduler, make_nodes: Callable[..., list[str]],
        node_leases: NodeLeaseRenewer) -> Iterator[Env]:
    e = Env(control_plane, kube_api, placement_namespace, berth_extender, berth_scheduler, make_nodes, node_leases)
    try:
        yield e
    finally:
        e.cleanup()


class Env:
    """One test's slice of the cluster: its nodes (``pe2e-<run>-*``, label ``RUN_LABEL=<run>``),
    its policies and pods (label ``RUN_LABEL=<run>``) in the session's namespace."""

    def __init__(self, cp: ControlPlane, api: Any, namespace: str, extender: Extender, sched: BerthScheduler,
                 make_nodes: Callable[..., list[str]], leases: NodeLeaseRenewer) -> None:
        self.cp, self.api, self.ns, self.extender, self.sched = cp, api, namespace, extender, sched
        self.core: Any = k8s.CoreV1Api(api)
        # A letter first: a hex id such as "1e5432" would be dumped unquoted and read back as a number.
        self.run = "r" + uuid.uuid4().hex[:6]
        self._make_nodes = make_nodes
        self.leases = leases
        self.policies: list[str] = []

    # -- nodes, policies, pods

    def nodes(self, *specs: tuple[str, str, str, dict[str, str]]) -> list[str]:
        """Nodes ``pe2e-<run>-<suffix>`` with (suffix, cpu, memory, extra labels)."""
        return self._make_nodes(*(NodeSpec(f"pe2e-{self.run}-{s}", cpu=cpu, memory=mem,
                                           labels={RUN_LABEL: self.run, **labels})
                                  for s, cpu, mem, labels in specs))

    def node(self, suffix: str) -> str:
        return f"pe2e-{self.run}-{suffix}"

    def policy(self, name: str, app: str, **spec: Any) -> dict[str, Any]:
        """Apply a policy for the pods ``app=<app>`` on this test's nodes (``kubectl apply``)
        and wait until the extender has it and sees every node of the test up."""
        spec.setdefault("nodeFilter", {"labels": {RUN_LABEL: self.run}})
        body = policy_manifest(name, {"app": app}, **spec)
        self.cp.kubectl("apply", "-n", self.ns, "-f", "-", input=yaml.safe_dump(body))
        self.policies.append(name)
        self.wait_known(f"{self.ns}/{name}")
        return body

    def wait_known(self, policy_key: str | None = None) -> None:
        mine = [n.metadata.name for n in self.core.list_node(label_selector=f"{RUN_LABEL}={self.run}").items]

        def known() -> bool:
            got = self.extender.get("/api/v1/nodes/allocations")
            if policy_key and policy_key not in got["policies"]:
                return False
            if not all(n in got["nodes"] for n in mine):
                return False
            preview = self.extender.post("/api/v1/preview", {"namespace": self.ns, "labels": {"app": "probe"},
                                                             "requests": {"cpu": "1m"}, "nodes": mine})
            return "node is down" not in json.dumps(preview)

        wait_for(known, bool, timeout=60, what=f"berth's view to hold {policy_key} and the nodes {mine} up")

    def pod(self, name: str, app: str, *, cpu: str = "500m", memory: str = "512Mi", hold: bool = False,
            node: str | None = None, scheduler: str | None = None) -> dict[str, Any]:
        body = simple_pod(name, cpu=cpu, memory=memory, labels={"app": app, RUN_LABEL: self.run},
                          node_selector={RUN_LABEL: self.run}, scheduler_name=scheduler or self.sched.name)
        if hold:
            body["spec"]["schedulingGates"] = [{"name": HOLD_GATE}]
        if node:
            body["spec"]["nodeName"] = node  # bound at creation, as if scheduled long ago
        return body

    def create(self, *pods: dict[str, Any]) -> None:
        for body in pods:
            self.core.create_namespaced_pod(self.ns, body)

    def create_all_at_once(self, pods: list[dict[str, Any]], workers: int = 16) -> None:
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(lambda b: self.core.create_namespaced_pod(self.ns, b), pods))

    def release(self, names: list[str]) -> None:
        """Remove the scheduling gate: the scheduler takes the pods from now on."""
        for name in names:
            self.core.patch_namespaced_pod(name, self.ns, {"spec": {"schedulingGates": None}},
                                          _content_type="application/merge-patch+json")

    def wait_seen_pending(self, count: int) -> None:
        """Until berth's view counts at least ``count`` pending pods (then a moment for the rest)."""
        wait_for(lambda: self.extender.view_count("pending"), lambda n: n >= count, timeout=30,
                 what=f"berth to see {count} pending pods")
        time.sleep(1.0)

    def placed(self, app: str) -> dict[str, str | None]:
        return bound_nodes(self.core, self.ns, f"app={app},{RUN_LABEL}={self.run}")

    def wait_bound(self, app: str, count: int, timeout: float = 90) -> dict[str, str | None]:
        return wait_for(lambda: self.placed(app), lambda got: sum(1 for n in got.values() if n) >= count,
                        timeout=timeout, what=f"{count} pods app={app} bound",
                        describe=self._describe_unbound)

    def _describe_unbound(self, got: dict[str, str | None]) -> str:
        unbound = sorted(k for k, v in got.items() if not v)
        why = {p: events(self.core, self.ns, p, "FailedScheduling")[-1:] for p in unbound[:3]}
        return f"{got}; FailedScheduling: {why}; scheduler log:\n{self.sched.scheduler.process.log_tail(10)}"

    def place(self, app: str, policy: dict[str, Any], count: int | None, prefix: str | None = None) -> \
            tuple[dict[str, int], dict[str, int]]:
        """Create a workload of pods ``app`` held by a gate (so that berth sees them all pending,
        as a scale-up by N), compute the core's plan for it, release it, and return
        (plan, node -> pods of this batch bound there)."""
        template = self.pod("shape", app)
        plan = expected_plan(self.cp, template, self.ns, policy, count)
        n = sum(plan.values()) if count is None else count
        assert sum(plan.values()) == n, f"the core plans {plan} for {n} pods"
        prefix = prefix or app
        names = [f"{prefix}-{i}" for i in range(n)]
        before = set(self.placed(app))
        self.create_all_at_once([self.pod(name, app, hold=True) for name in names])
        self.wait_seen_pending(n)
        self.release(names)
        got = self.wait_bound(app, len(before) + n)
        batch = {k: v for k, v in got.items() if k in names}
        return plan, node_counts(batch)

    def failed_scheduling(self, pod: str, timeout: float = 90) -> str:
        messages = wait_for(lambda: events(self.core, self.ns, pod, "FailedScheduling"), bool, timeout=timeout,
                            what=f"a FailedScheduling event for {pod}")
        return messages[-1]

    def cleanup(self) -> None:
        force_delete_pods(self.api, self.ns, f"{RUN_LABEL}={self.run}")
        for name in self.policies:
            self.cp.kubectl("delete", "placementpolicy", "-n", self.ns, name, "--ignore-not-found", check=False)


def _requests(pod: Any) -> dict[str, int]:
    total: dict[str, int] = {}
    for c in pod.spec.containers:
        for k, v in ((c.resources and c.resources.requests) or {}).items():
            total[k] = total.get(k, 0) + to_base_units(k, v)
    return total


# -- every strategy -------------------------------------------------------------------------------

# Four unlike nodes, one already loaded by another app and one running a pod of the workload,
# so that the strategies disagree.
NodeRow = tuple[str, str, str, dict[str, str]]
NODES: tuple[NodeRow, ...] = (("a", "2", "4Gi", {}), ("b", "4", "8Gi", {}),
                              ("c", "8", "8Gi", {}), ("d", "4", "16Gi", {}))
STRATEGIES: list[tuple[str | None, dict[str, Any], int | None]] = [
    ("Auto", {}, 6),
    ("Fill", {"count": 3, "nodesLimit": 3}, None),  # a round of its own: top 3 nodes up to 3 pods
    ("Each", {"count": 2}, None),  # a round of its own: 2 more on every node
    ("Global", {}, 6),
    ("Drained", {}, 6),
    ("Balanced", {}, 6),
    ("Spread", {}, 6),
    ("BestFit", {}, 6),
    (None, {}, 6),  # no strategy: the default ranking
]


@pytest.mark.parametrize(("strategy", "extra", "count"), STRATEGIES, ids=[s or "Default" for s, _, _ in STRATEGIES])
def test_strategy_lands_as_its_plan_says(strategy: str | None, extra: dict[str, Any], count: int | None,
                                         env: Env) -> None:
    env.nodes(*NODES)
    env.create(env.pod("other-load", "other", cpu="2", memory="2Gi", node=env.node("b")),
               env.pod("already-there", "web", node=env.node("c")))
    policy = env.policy("strategy-" + (strategy or "default").lower() + "-" + env.run, "web", strategy=strategy,
                        **extra)
    plan, landed = env.place("web", policy, count)
    assert landed == plan, f"{strategy or 'Default'}: bound {landed}, the core's plan {plan}"
    pods = env.core.list_namespaced_pod(env.ns, label_selector=f"app=web,{RUN_LABEL}={env.run}").items
    decisions = [valid_record(json.loads(p.metadata.annotations["berth.dev/decision"])) for p in pods
                 if p.metadata.name != "already-there"]
    assert {d.strategy for d in decisions} == {strategy or "Default"}
    assert all(d.winner is not None and d.winner.node == p
               for d, p in zip(decisions, [x.spec.node_name for x in pods if x.metadata.name != "already-there"],
                               strict=True))


# -- the chart's recommended profile --------------------------------------------------------------

PROFILE_SCHEDULER = "berth-profile-e2e"


def _env_value(deploy: dict[str, Any], name: str) -> str:
    [container] = [c for c in deploy["spec"]["template"]["spec"]["containers"] if c["name"] == "extender"]
    [value] = [e["value"] for e in container["env"] if e["name"] == name]
    return str(value)


@pytest.fixture(scope="module")
def chart_profile(control_plane: ControlPlane, berth_crd: None) -> Iterator[tuple[Extender, BerthScheduler]]:
    """The chart's second scheduler as the chart renders it by default (the recommended profile),
    run by a real kube-scheduler, and an extender with the settings the chart gives berth with it.
    Only what ties the configuration to this machine changes: the extender's address (plain HTTP
    on 127.0.0.1, so no TLS), the schedulerName, and no leader election."""
    rendered = render(require_helm(), {"scheduler.enabled": True})
    config = yaml.safe_load(rendered.get("ConfigMap", "berth-scheduler")["data"]["config.yaml"])
    winner_only = _env_value(rendered.get("Deployment", "berth-extender"), "BERTH_FILTER_WINNER_ONLY")
    extender = Extender(control_plane, env={"BERTH_FILTER_WINNER_ONLY": winner_only}, name="berth-extender-profile")
    extender.start()
    try:
        [ext] = config["extenders"]
        ext.update(urlPrefix=extender.url, enableHTTPS=False)
        del ext["tlsConfig"]
        [profile] = config["profiles"]
        profile["schedulerName"] = PROFILE_SCHEDULER
        del config["leaderElection"]
        sched = control_plane.start_scheduler(config, name="kube-scheduler-chart-profile")
        try:
            yield extender, BerthScheduler(PROFILE_SCHEDULER, config, sched)
        finally:
            sched.stop()
    finally:
        extender.stop()


def _verb_calls(extender: Extender, verb: str) -> float:
    """How many requests of ``verb`` berth has answered (``berth_extender_request_seconds_count``)."""
    text = httpx.get(extender.url + "/metrics", timeout=10).text
    return sum(sample.value for family in text_string_to_metric_families(text)
               if family.name == "berth_extender_request_seconds"
               for sample in family.samples
               if sample.name.endswith("_count") and sample.labels.get("verb") == verb)


PROFILE_STRATEGIES = [s for s in STRATEGIES if s[0] in ("Auto", "Spread", "Fill")]


@pytest.mark.parametrize(("strategy", "extra", "count"), PROFILE_STRATEGIES,
                         ids=[s[0] or "" for s in PROFILE_STRATEGIES])
def test_charts_recommended_profile_lands_every_pod_on_the_strategys_winner(
        strategy: str, extra: dict[str, Any], count: int | None, control_plane: ControlPlane, kube_api: Any,
        placement_namespace: str, chart_profile: tuple[Extender, BerthScheduler],
        make_nodes: Callable[..., list[str]], node_leases: NodeLeaseRenewer) -> None:
    """The chart's default scheduler configuration loads in a real kube-scheduler, and with it every
    pod a policy governs lands on the node berth's strategy chose over the whole cluster (the
    core's plan), without kube-scheduler's scoring: berth's filter answered the winner alone and
    prioritize was never asked."""
    extender, sched = chart_profile
    env = Env(control_plane, kube_api, placement_namespace, extender, sched, make_nodes, node_leases)
    try:
        env.nodes(*NODES)
        env.create(env.pod("other-load", "other", cpu="2", memory="2Gi", node=env.node("b")),
                   env.pod("already-there", "web", node=env.node("c")))
        policy = env.policy(f"profile-{strategy.lower()}-{env.run}", "web", strategy=strategy, **extra)
        filters, prioritizes = _verb_calls(extender, "filter"), _verb_calls(extender, "prioritize")
        plan, landed = env.place("web", policy, count)
        assert landed == plan, f"{strategy}: bound {landed}, the core's plan {plan}"
        assert _verb_calls(extender, "filter") - filters >= sum(plan.values())
        assert _verb_calls(extender, "prioritize") == prioritizes, "kube-scheduler scored nodes"
        pods = env.core.list_namespaced_pod(env.ns, label_selector=f"app=web,{RUN_LABEL}={env.run}").items
        for pod in pods:
            if pod.metadata.name == "already-there":
                continue
            record = valid_record(json.loads(pod.metadata.annotations["berth.dev/decision"]))
            assert record.strategy == strategy
            assert record.winner is not None and record.winner.node == pod.spec.node_name, pod.metadata.name
            assert record.considered_count >= len(NODES), "berth judged fewer nodes than the test has"
    finally:
        env.cleanup()


# -- topology spread and affinity rules -----------------------------------------------------------

def test_topology_spread_do_not_schedule_across_zones(env: Env) -> None:
    env.nodes(("a", "8", "8Gi", {ZONE: "z1"}), ("b", "8", "8Gi", {ZONE: "z1"}),
              ("c", "2", "8Gi", {ZONE: "z2"}), ("d", "8", "8Gi", {ZONE: "z3"}))
    env.create(env.pod("already-there", "spread", node=env.node("a")))
    # BestFit would pack the small node of z2 first; the spread constraint must hold it back.
    policy = env.policy("spread-" + env.run, "spread", strategy="BestFit", topologySpreadConstraints=[
        {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchLabels": {"app": "spread"}}}])
    plan, landed = env.place("spread", policy, 5)
    assert landed == plan
    zones = {env.node("a"): "z1", env.node("b"): "z1", env.node("c"): "z2", env.node("d"): "z3"}
    per_zone = {"z1": 0, "z2": 0, "z3": 0}
    for node in env.placed("spread").values():
        assert node
        per_zone[zones[node]] += 1
    assert sum(per_zone.values()) == 6 and max(per_zone.values()) - min(per_zone.values()) <= 1, per_zone


RULES = [{"resource": "Node", "operator": "Has", "labels": {"disk": "ssd"}},
         {"resource": "Pod", "operator": "HasNot", "labels": {"app": "cargo"}}]


def test_affinity_enforced_refuses_and_preferred_falls_back(env: Env) -> None:
    a, b, c = env.nodes(("a", "4", "8Gi", {"disk": "ssd"}), ("b", "4", "8Gi", {"disk": "hdd"}),
                        ("c", "4", "8Gi", {"disk": "ssd"}))
    enforced = env.policy("cargo-" + env.run, "cargo", strategy="Auto", placementRules=RULES,
                          affinityMatching="Enforced")
    plan, landed = env.place("cargo", enforced, 2)
    assert landed == plan == {a: 1, c: 1}  # ssd nodes only, one cargo pod per node
    env.create(env.pod("cargo-refused", "cargo"))
    # kube-scheduler counts the nodes per reason: berth's reason for each of the 3 nodes.
    message = env.failed_scheduling("cargo-refused")
    assert "0/3 nodes are available" in message, message
    assert "1 placementRules[0] not met: Node Has {disk=ssd}" in message, message
    assert "2 placementRules[1] not met: Pod HasNot {app=cargo}" in message, message
    refused = valid_record(env.extender.get(f"/api/v1/decisions/{env.ns}/cargo-refused")).refusals()
    assert set(refused) == {a, b, c} and "Node Has" in str(refused[b]) and "Pod HasNot" in str(refused[a]), refused
    assert env.core.read_namespaced_pod("cargo-refused", env.ns).spec.node_name is None

    # Preferred: the same rules, on pods that already have every ssd node taken: they still land.
    rules = [{**RULES[0]}, {**RULES[1], "labels": {"app": "cargo-pref"}}]
    preferred = env.policy("cargo-pref-" + env.run, "cargo-pref", strategy="Auto", placementRules=rules,
                           affinityMatching="Preferred")
    plan, landed = env.place("cargo-pref", preferred, 3)
    assert landed == plan and sum(landed.values()) == 3
    first = valid_record(json.loads(
        env.core.read_namespaced_pod("cargo-pref-0", env.ns).metadata.annotations["berth.dev/decision"]))
    # the rules are honoured while a node satisfies them
    assert first.winner is not None and first.winner.node in (a, c)


# -- refusals -------------------------------------------------------------------------------------

def test_pod_that_fits_nowhere_stays_pending_with_berths_reasons(env: Env) -> None:
    a, b = env.nodes(("a", "2", "4Gi", {}), ("b", "2", "4Gi", {}))
    # kube-scheduler's own filters let 1.5 CPU onto a 2-CPU node; the policy allows half of it.
    env.policy("half-" + env.run, "half", strategy="Auto", capacity={"cpuOvercommitPercent": 50})
    env.create(env.pod("too-big", "half", cpu="1500m"))
    message = env.failed_scheduling("too-big")
    # kube-scheduler counts the nodes per reason: berth sends one text per cause, without figures.
    assert "0/2 nodes are available: 2 insufficient capacity: cpu." in message, message
    explained = valid_record(env.extender.get(f"/api/v1/decisions/{env.ns}/too-big"))  # every node by name
    assert set(explained.refusals()) == {a, b}, explained
    # the pod's own Event names every node with its figures (kubectl describe pod)
    refused = wait_for(lambda: events(env.core, env.ns, "too-big", "BerthRefused"), bool, timeout=30,
                       what="berth's BerthRefused Event on too-big")[-1]
    assert (f"{', '.join(sorted((a, b)))}: insufficient capacity: cpu: needs 1500m, 1 free of 2 allocatable "
            "at 50% overcommit (short by 500m)") in refused, refused
    time.sleep(2)
    assert env.core.read_namespaced_pod("too-big", env.ns).spec.node_name is None


# -- preemption -----------------------------------------------------------------------------------

def _priority_class(env: Env, name: str, value: int) -> str:
    try:
        k8s.SchedulingV1Api(env.api).create_priority_class(
            {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
             "value": value, "description": "berth end-to-end tests"})
    except k8s.ApiException as exc:
        if exc.status != 409:  # made by an earlier test of the session
            raise
    return name


def test_preemption_evicts_only_where_berth_would_then_place_the_pod(env: Env) -> None:
    """kube-scheduler's own preemption prefers node a (its victim has the lowest priority), but a
    also runs a db pod the preemptor must not share a node with, and that pod is not a victim:
    berth's preempt drops a, so the scheduler evicts on b instead, and the pod lands there."""
    high, mid = _priority_class(env, "berth-e2e-high", 1000), _priority_class(env, "berth-e2e-mid", 10)
    a, b = env.nodes(("a", "2", "4Gi", {}), ("b", "2", "4Gi", {}))
    env.policy("guarded-" + env.run, "guarded", strategy="Auto",
               placementRules=[{"resource": "Pod", "operator": "HasNot", "labels": {"role": "db"}}])
    low_a = env.pod("low-a", "batch", cpu="1500m", node=a)
    low_b = env.pod("low-b", "batch", cpu="1500m", node=b)
    low_b["spec"]["priorityClassName"] = mid
    db = env.pod("db-a", "db", cpu="100m", node=a)
    db["metadata"]["labels"]["role"] = "db"
    db["spec"]["priorityClassName"] = high  # as important as the preemptor: never a victim
    env.create(low_a, low_b, db)
    wait_for(lambda: env.extender.get("/api/v1/nodes/allocations")["nodes"],
             lambda nodes: nodes.get(a, {}).get("requested", {}).get("cpu") == 1600
             and nodes.get(b, {}).get("requested", {}).get("cpu") == 1500,
             timeout=30, what="berth to see the pods already on a and b")
    preemptor = env.pod("guarded-0", "guarded", cpu="1")
    preemptor["spec"]["priorityClassName"] = high
    env.create(preemptor)

    def nominated_or_bound() -> str | None:
        pod = env.core.read_namespaced_pod("guarded-0", env.ns)
        return pod.spec.node_name or (pod.status.nominated_node_name if pod.status else None)

    assert wait_for(nominated_or_bound, bool, timeout=90, what="guarded-0 nominated or bound") == b
    assert env.wait_bound("guarded", 1) == {"guarded-0": b}
    batch = env.core.list_namespaced_pod(env.ns, label_selector=f"app=batch,{RUN_LABEL}={env.run}").items
    standing = sorted(p.metadata.name for p in batch if p.metadata.deletion_timestamp is None)
    assert standing == ["low-a"]  # low-b was the victim; nothing was evicted on a


# -- the PlacementPolicy through kubectl and the operator -----------------------------------------

def test_invalid_policy_is_refused_with_the_field_path(control_plane: ControlPlane, placement_namespace: str,
                                                       berth_operator: Operator) -> None:
    path = ROOT / "examples" / "invalid" / "max-skew-zero.yaml"
    refused = control_plane.kubectl("apply", "-n", placement_namespace, "-f", str(path), check=False)
    assert refused.returncode != 0
    assert "spec.topologySpreadConstraints[0].maxSkew" in refused.stderr, refused.stderr
    absent = control_plane.kubectl("get", "placementpolicy", "-n", placement_namespace, "max-skew-zero", check=False)
    assert absent.returncode != 0
    if berth_operator.webhook_config:  # the operator's admission webhook: the core's own words
        path = ROOT / "examples" / "invalid" / "labels-duplicate-after-trim.yaml"
        refused = control_plane.kubectl("apply", "-n", placement_namespace, "-f", str(path), check=False)
        assert refused.returncode != 0
        assert "spec.placementRules[0].labels.role: duplicate key after trimming" in refused.stderr, refused.stderr


def test_valid_policy_shows_status_in_kubectl(env: Env, berth_operator: Operator) -> None:
    a, b = env.nodes(("a", "4", "8Gi", {}), ("b", "4", "8Gi", {}))
    name = "status-" + env.run
    policy = env.policy(name, "shown", strategy="Auto")
    plan, landed = env.place("shown", policy, 3)
    assert landed == plan
    waiting = [env.pod(f"shown-wait-{i}", "shown", hold=True) for i in range(2)]
    env.create(*waiting)

    def status() -> dict[str, Any]:
        return get_policy(env.api, env.ns, name)

    body = wait_for(status, lambda b: (b.get("status") or {}).get("placedTotal") == 3
                    and (b.get("status") or {}).get("pending") == 2
                    and bool((b.get("status") or {}).get("latestDecision")), timeout=60,
                    what="3 placed, 2 pending, a decision", describe=lambda b: json.dumps(b.get("status"), indent=1))
    st = body["status"]
    assert st["placed"] == landed
    assert sum(st["plan"].values()) == 2 and set(st["plan"]) <= {a, b}
    latest = DecisionRecord.model_validate(st["latestDecision"])  # the record's fields, as the API server keeps
    assert latest.trigger == "bind" and latest.winner is not None and latest.winner.node in (a, b)
    assert valid_record(latest.to_json()).policy_generation == body["metadata"]["generation"]
    assert (condition(body, "Valid") or {}).get("status") == "True"
    assert (condition(body, "Ready") or {}).get("reason") == "PodsPending"

    header, row = env.cp.kubectl("get", "placementpolicies", "-n", env.ns, name).stdout.splitlines()[:2]
    assert header.split()[:4] == ["NAME", "STRATEGY", "READY", "PLACED"]
    assert row.split()[:4] == [name, "Auto", "False", "3"]
    described = env.cp.kubectl("describe", "placementpolicy", "-n", env.ns, name).stdout
    for words in ("Conditions", "Latest Decision", "Plan", "Placed", a, b, "PodsPending"):
        assert words in described, f"{words!r} not in:\n{described}"


# -- concurrency ----------------------------------------------------------------------------------

def test_two_hundred_pods_at_once_never_overcommit(env: Env) -> None:
    nodes = env.nodes(*((s, "4", "8Gi", {}) for s in "abcd"))
    # berth's limit is half of each node (2 CPU = 4 pods of 500m; 16 in all), while kube-scheduler's
    # own filter would take 8 a node: berth alone stands between the 200 pods and an overcommit.
    env.policy("crowd-" + env.run, "crowd", strategy="Spread", capacity={"cpuOvercommitPercent": 50})
    env.create_all_at_once([env.pod(f"crowd-{i:03d}", "crowd") for i in range(200)])
    stable = {"count": -1, "since": time.monotonic()}

    def settled(got: dict[str, str | None]) -> bool:
        n = sum(1 for v in got.values() if v)
        if n != stable["count"]:
            stable["count"], stable["since"] = n, time.monotonic()
        return n >= 16 and time.monotonic() - stable["since"] > 10

    wait_for(lambda: env.placed("crowd"), settled, timeout=240, interval=1, what="the crowd to settle",
             describe=lambda got: f"{node_counts(got)}")
    pods = env.core.list_namespaced_pod(env.ns, label_selector=f"app=crowd,{RUN_LABEL}={env.run}").items
    used: dict[str, dict[str, int]] = {n: {} for n in nodes}
    for pod in pods:
        if pod.spec.node_name:
            for k, v in _requests(pod).items():
                used[pod.spec.node_name][k] = used[pod.spec.node_name].get(k, 0) + v
    for node in nodes:
        alloc = env.core.read_node(node).status.allocatable
        cpu_alloc = to_base_units("cpu", alloc["cpu"])
        assert used[node]["cpu"] <= cpu_alloc // 2, (node, used[node])  # the policy's 50 percent
        assert used[node]["memory"] <= to_base_units("memory", alloc["memory"]), (node, used[node])
    assert sum(1 for p in pods if p.spec.node_name) == 16
    assert sum(1 for p in pods if not p.spec.node_name) == 184
    allocations = env.extender.get("/api/v1/nodes/allocations")["nodes"]
    for node in nodes:  # berth's own books agree with the API server
        assert allocations[node]["requested"]["cpu"] == used[node]["cpu"]


def _filter_calls(extender: Extender) -> float:
    """How many filter requests berth has answered (``berth_extender_request_seconds_count{verb="filter"}``)."""
    text = httpx.get(extender.url + "/metrics", timeout=10).text
    for family in text_string_to_metric_families(text):
        if family.name == "berth_extender_request_seconds":
            for sample in family.samples:
                if sample.name.endswith("_count") and sample.labels.get("verb") == "filter":
                    return float(sample.value)
    return 0.0


def test_no_pod_of_a_batch_of_identical_pods_skips_berths_filter(env: Env) -> None:
    """kube-scheduler's opportunistic batching (on by default) would place a pod identical to the last
    one on a hinted node without the full filter; a profile with an extender has it off, so every pod
    of a berth-governed batch reaches berth's filter and lands where berth's plan says."""
    env.nodes(*((s, "4", "8Gi", {}) for s in "abcd"))
    policy = env.policy("batch-" + env.run, "batch", strategy="Spread")
    before = _filter_calls(env.extender)
    plan, got = env.place("batch", policy, 12)
    assert got == plan
    assert _filter_calls(env.extender) - before >= 12
    log = env.sched.scheduler.process.log_path.read_text(errors="replace")
    assert "Disabling signatures for profile because it has extenders configured" in log
    assert f'profile="{env.sched.name}"' in log.split("Disabling signatures for profile because it has extenders")[1]


# -- faults ---------------------------------------------------------------------------------------

def test_node_whose_lease_stops_being_renewed_gets_no_pods(env: Env) -> None:
    # BestFit would pack the node that goes down first (the tightest fit, by name).
    a, _, _ = env.nodes(("a", "4", "8Gi", {}), ("b", "8", "8Gi", {}), ("c", "8", "8Gi", {}))
    policy = env.policy("lease-" + env.run, "lease", strategy="BestFit")
    env.leases.pause(a)
    try:
        wait_for(lambda: env.extender.post("/api/v1/preview", {"namespace": env.ns, "labels": {"app": "lease"},
                                                               "requests": {"cpu": "500m"}}),
                 lambda got: "node is down: Lease not renewed" in json.dumps(got.get("refused", got)),
                 timeout=LIVENESS_THRESHOLD_SECONDS + 45, what=f"berth to see {a} down")
        plan, landed = env.place("lease", policy, 4)
        assert landed == plan and a not in landed and sum(landed.values()) == 4
        assert env.core.read_node(a).status.conditions[-1].status == "True"  # still Ready: only berth knows
    finally:
        env.leases.resume(a)


def test_extender_killed_and_restarted(env: Env, control_plane: ControlPlane) -> None:
    a, b, c = env.nodes(("a", "4", "8Gi", {}), ("b", "4", "8Gi", {}), ("c", "4", "8Gi", {}))
    policy = env.policy("auto-" + env.run, "auto", strategy="Auto")
    plan, landed = env.place("auto", policy, 3, prefix="auto-first")
    assert landed == plan

    # The README's configuration with ignorable: true, as a second profile (its own scheduler).
    name = env.sched.name + "-ignorable"
    ignorable = control_plane.start_scheduler(berth_scheduler_config(env.extender.url, name, ignorable=True),
                                              name=f"kube-scheduler-{name}")
    try:
        env.extender.kill()
        env.create(*(env.pod(f"auto-outage-{i}", "auto", scheduler=name) for i in range(3)))
        env.create(env.pod("auto-strict", "auto"))  # ignorable: false: waits for berth
        placed = wait_for(lambda: env.placed("auto"),
                          lambda got: all(got.get(f"auto-outage-{i}") for i in range(3)), timeout=90,
                          what="the ignorable profile to schedule without berth")
        assert placed["auto-strict"] is None
        message = env.failed_scheduling("auto-strict")
        assert env.extender.url in message or "extender" in message, message
    finally:
        ignorable.stop()
        if not env.extender.ready():
            env.extender.start()

    # Restarted: the view is rebuilt from the API server alone, the pods bound meanwhile included.
    assert env.extender.starts >= 2
    env.wait_known(f"{env.ns}/auto-{env.run}")
    env.wait_bound("auto", 7, timeout=120)  # the strict pod, retried with backoff
    pods = env.core.list_namespaced_pod(env.ns, label_selector=f"{RUN_LABEL}={env.run}").items
    allocations = env.extender.get("/api/v1/nodes/allocations")["nodes"]
    for node in (a, b, c):
        cpu = sum(_requests(p)["cpu"] for p in pods if p.spec.node_name == node)
        assert allocations[node]["requested"].get("cpu", 0) == cpu, (node, allocations[node])
    # AUTO keeps balancing, with every pod already bound counted.
    plan, landed = env.place("auto", policy, 5, prefix="auto-after")
    assert landed == plan
    totals = node_counts(env.placed("auto"))
    assert max(totals.values()) - min(totals.values()) <= 1, totals

