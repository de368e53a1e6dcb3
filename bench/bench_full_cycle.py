"""berth's own work per pod in the ``full`` profile, in process: what the extender's verbs cost
without HTTP, so that a change to them shows through a shared machine's noise.

For each pod, as kube-scheduler drives berth in that profile (filter answers every passing node,
kube-scheduler scores, prioritize, berth binds): filter of every node of the cluster, sent in an
order that moves from pod to pod as kube-scheduler's does; prioritize of the nodes filter passed;
bind of the node prioritize ranks first (the recheck and reservation; the Binding is the offline
binder's, in memory); then the watch event showing the pod bound. The cluster is the throughput
benchmark's (bench/bench_scheduler_throughput.py): nodes of 32 cpu / 128Gi / 100Gi of
ephemeral storage in three zones, pods
of 100m / 128Mi governed by one PlacementPolicy of each ``--strategies`` entry.

Prints, per strategy, the mean milliseconds a pod of each step (wall time, this process alone,
the cyclic collector paused around filter and prioritize as the extender pauses it) and of
the whole cycle in CPU time, with the machine reference of bench/bench_extender.py before and after.

Usage (from the repository root)::

    python bench/bench_full_cycle.py                              # 500 nodes, Auto and BestFit
    python bench/bench_full_cycle.py --nodes 5000 --pods 500 --strategies Auto,Spread,Fill
    python bench/bench_full_cycle.py --nodes 5000 --pods 300 --strategies Fill,Each --arriving
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_extender import machine_reference_ms
from berth.extender.app import create_app
from berth.extender.heap import collector_paused, settle
from berth.extender.settings import ExtenderSettings
from berth.extender.store import ClusterStore
from berth.extender.wire import ExtenderArgs, ExtenderBindingArgs

NAMESPACE = "bench"
STEPS = ("filter", "prioritize", "bind", "watch")
WARM_UP = 20
"""Pods judged before the figures start (the index's tables are made by the first)."""


def node(i: int) -> dict[str, Any]:
    name = f"bench-node-{i:04d}"
    alloc = {"cpu": "32", "memory": "128Gi", "ephemeral-storage": "100Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": f"node-{i}", "resourceVersion": str(10 + i),
                         "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": f"zone-{i % 3}"}},
            "status": {"capacity": alloc, "allocatable": alloc,
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"p-{i:05d}", "namespace": NAMESPACE, "uid": f"pod-{i}",
                         "resourceVersion": str(100000 + i), "labels": {"app": "bench"}},
            "spec": {"schedulerName": "bench-berth",
                     "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                                                   "limits": {"cpu": "100m", "memory": "128Mi"}}}]},
            "status": {"phase": "Pending"}}


def policy(strategy: str, per_node: int) -> dict[str, Any]:
    spec: dict[str, Any] = {"selector": {"matchLabels": {"app": "bench"}}, "strategy": strategy}
    if strategy in ("Fill", "Each"):
        spec["count"] = per_node
    return {"apiVersion": "berth.dev/v1alpha1", "kind": "PlacementPolicy",
            "metadata": {"name": "bench", "namespace": NAMESPACE, "generation": 1}, "spec": spec}


def run(strategy: str, nodes: int, pods: int, *, arriving: bool = False) -> dict[str, float]:
    store = ClusterStore(leases_tracked=False)
    store.replace("policies", [policy(strategy, max(1, pods // nodes + 1))])
    store.replace("nodes", [node(i) for i in range(nodes)])
    store.replace("pods", [] if arriving else [pod(i) for i in range(pods)])
    store.mark_listed("leases")
    engine = create_app(store, ExtenderSettings(track_leases=False)).state.engine
    settle()  # as the live view does once the first full list is in
    names = sorted(store.view.nodes)
    spent = dict.fromkeys(STEPS, 0.0)
    cpu = 0.0

    async def cycle() -> None:
        nonlocal cpu
        for i in range(pods):
            raw = pod(i)
            if arriving:  # a steady stream: each pod pending alone when its cycle comes
                store.apply_pod(raw)
            start = i * 7 % nodes  # kube-scheduler starts each pod's search where the last one left off
            asked = ExtenderArgs.model_validate({"Pod": raw, "NodeNames": names[start:] + names[:start]})
            c0, t0 = time.process_time(), time.perf_counter()
            with collector_paused():
                passing = engine.filter(asked)["NodeNames"]
            c1, t1 = time.process_time(), time.perf_counter()
            scored = ExtenderArgs.model_validate({"Pod": raw, "NodeNames": passing})
            c2, t2 = time.process_time(), time.perf_counter()
            with collector_paused():
                encoded = orjson.dumps(engine.prioritize(scored))  # the reply, as the verb sends it
            c3, t3 = time.process_time(), time.perf_counter()
            best = max(orjson.loads(encoded), key=lambda h: h["Score"])["Host"]
            meta = raw["metadata"]
            c4, t4 = time.process_time(), time.perf_counter()
            reply = await engine.bind(ExtenderBindingArgs(PodName=meta["name"], PodNamespace=NAMESPACE,
                                                          PodUID=meta["uid"], Node=best))
            t5 = time.perf_counter()
            if reply["Error"]:
                raise RuntimeError(f"bind of {meta['name']} to {best} refused: {reply['Error']}")
            store.apply_pod({**raw, "metadata": {**meta, "resourceVersion": str(500000 + i)},
                             "spec": {**raw["spec"], "nodeName": best}})
            c6, t6 = time.process_time(), time.perf_counter()
            if i >= WARM_UP:
                for step, took in zip(STEPS, (t1 - t0, t3 - t2, t5 - t4, t6 - t5), strict=True):
                    spent[step] += took
                cpu += (c1 - c0) + (c3 - c2) + (c6 - c4)  # this test's own decoding left out

    asyncio.run(cycle())
    measured = pods - WARM_UP
    return {**{step: spent[step] / measured * 1000 for step in STEPS}, "cpu": cpu / measured * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--strategies", default="Auto,BestFit", help="comma-separated PlacementPolicy strategies")
    parser.add_argument("--arriving", action="store_true",
                        help="each pod created just before its cycle, as in a steady stream (default: every pod "
                        "pending from the start, as in a burst); a Fill or Each round then opens for each pod")
    args = parser.parse_args()
    if args.pods <= WARM_UP:
        parser.error(f"--pods must be more than the {WARM_UP} pods of the warm-up")
    before = machine_reference_ms()
    print(f"berth's full profile in process: {args.nodes} nodes, {args.pods} pods ({WARM_UP} of warm-up)"
          + (", each arriving alone" if args.arriving else "") + ", ms a pod")
    for strategy in args.strategies.split(","):
        got = run(strategy.strip(), args.nodes, args.pods, arriving=args.arriving)
        print(f"  {strategy:>9}  " + "  ".join(f"{step} {got[step]:.3f}" for step in STEPS)
              + f"  (cycle CPU {got['cpu']:.3f})", flush=True)
    print(f"machine reference: {before:.2f} ms before, {machine_reference_ms():.2f} ms after")


if __name__ == "__main__":
    main()
