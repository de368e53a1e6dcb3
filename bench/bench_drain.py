"""Benchmark of drain planning (a script, not a test).

Builds a deterministic cluster of ``--nodes`` nodes (3 zones, racks of 20, mixed sizes, 30 pods
per node, every pod owned by a ReplicaSet) and puts ``--pods`` pods of 10 workloads on one node,
then times :func:`berth.core.drain.plan_drain` draining that node to any destination: the median,
the slowest and the first (cold) of ``--runs`` plans, wall clock and CPU time. Three of the
workloads have PlacementPolicies: Auto with a zone spread constraint (DoNotSchedule), Spread with a
one-per-rack Pod rule, and BestFit; the rest use the default ranking.

It prints a machine reference (a fixed workload, timed before and after, from bench_extender.py)
so that figures taken while a shared machine runs slower can be told from a slower change.

    python bench/bench_drain.py [--nodes 500] [--pods 100] [--runs 10]
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import random
import statistics
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from berth.core.drain import DrainRequest, PodState, plan_drain
from berth.core.model import NodeInfo, Owner, PodInfo
from berth.core.policy import PlacementPolicy, policy_from_manifest
from berth.core.quantity import CPU, DISK, MEMORY, PODS
from berth.core.settings import Settings
from berth.core.view import ClusterView

GI = 2**30
MI = 2**20
NOW = 1_000_000.0
ZONE = "topology.kubernetes.io/zone"
PODS_PER_NODE = 30
WORKLOADS = 10
DRAINED = "node-00000"


def _sibling(name: str) -> ModuleType:
    """A sibling benchmark script as a module (the scripts are not a package)."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def build_view(nodes: int, drained_pods: int, seed: int) -> ClusterView:
    rng = random.Random(seed)
    view = ClusterView()
    sizes = [(16, 64), (32, 128), (48, 192), (64, 256)]
    for i in range(nodes):
        name = f"node-{i:05d}"
        cpu, mem = rng.choice(sizes)
        labels = {"kubernetes.io/hostname": name, ZONE: f"zone-{i % 3}", "rack": f"rack-{i // 20:04d}"}
        view.upsert_node(NodeInfo(name=name, labels=labels, ready=True, allocatable={
            CPU: cpu * 1000, MEMORY: mem * GI, DISK: 500 * GI, PODS: 110 if i else max(110, drained_pods)}))
    uid = 0

    def add(node: str, namespace: str, app: str) -> None:
        nonlocal uid
        view.upsert_pod(PodInfo(
            uid=f"uid-{uid}", name=f"{app}-{uid}", namespace=namespace, labels={"app": app}, node_name=node,
            requests={CPU: rng.choice([100, 250, 500]), MEMORY: rng.choice([128, 256, 512, 1024]) * MI},
            controller=Owner("ReplicaSet", f"{app}-rs")))
        uid += 1

    for i in range(1, nodes):
        for _ in range(PODS_PER_NODE):
            app = rng.randrange(40)
            add(f"node-{i:05d}", f"ns-{app % 8}", f"app-{app}")
    for j in range(drained_pods):
        add(DRAINED, "shop", f"web-{j % WORKLOADS}")
    # a few pods of the spread and rule workloads elsewhere, so their constraints bite
    for i in range(1, nodes, 7):
        add(f"node-{i:05d}", "shop", f"web-{i % 3}")
    return view


def policies() -> list[PlacementPolicy]:
    def one(app: str, spec: dict[str, Any]) -> PlacementPolicy:
        return policy_from_manifest({"apiVersion": "berth.dev/v1alpha1", "kind": "PlacementPolicy",
                                     "metadata": {"name": app, "namespace": "shop"},
                                     "spec": {"selector": {"matchLabels": {"app": app}}, **spec}})
    return [
        one("web-0", {"strategy": "Auto", "topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}]}),
        one("web-1", {"strategy": "Spread", "placementRules": [
            {"resource": "Pod", "operator": "HasNot", "labels": {"app": "web-1"}, "within": "rack"}],
            "affinityMatching": "Preferred"}),
        one("web-2", {"strategy": "BestFit"}),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=100, help="pods on the drained node")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    core = _sibling("bench_core")
    reference = _sibling("bench_extender").machine_reference_ms

    view = build_view(args.nodes, args.pods, args.seed)
    pols = policies()

    def policy_for(pod: PodInfo) -> PlacementPolicy | None:
        return next((p for p in pols if p.governs(pod.namespace, pod.labels)), None)

    request = DrainRequest(nodes=(DRAINED,), any_destination=True)
    gc.freeze()
    before = reference()
    results = []

    def go() -> None:
        results.append(plan_drain(view, request, policy_for, Settings(), NOW))

    cold = core.timed(go, 1)
    samples = core.timed(go, args.runs)
    after = reference()
    plan = results[-1]
    print(f"berth drain planning benchmark: python {sys.version.split()[0]}, seed {args.seed}")
    print(f"cluster: {args.nodes} nodes, {PODS_PER_NODE} pods per node; drained: {DRAINED} with {args.pods} pods "
          f"of {WORKLOADS} workloads (3 with policies: Auto + zone spread, Spread + one per rack, BestFit)")
    print(f"plan: {plan.count(PodState.PLANNED)} planned, {plan.count(PodState.BLOCKED)} blocked, "
          f"{plan.count(PodState.LEFT)} left, {len(plan.destinations)} destinations")
    print(f"time to plan the drain: median {statistics.median(samples.wall):.1f} ms, max {max(samples.wall):.1f} ms, "
          f"cold {cold.wall[0]:.1f} ms; cpu time: median {statistics.median(samples.cpu):.1f} ms, cold "
          f"{cold.cpu[0]:.1f} ms; {args.runs} runs")
    print(f"machine reference: {before:.2f} ms before, {after:.2f} ms after; load average {core._load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
