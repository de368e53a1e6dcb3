"""Benchmark of the extender's filter as the ``nominate`` profile asks it, in one process, no HTTP:
kube-scheduler sends each pending pod's nominated node alone, and berth judges the whole cluster.

The synthetic cluster is bench/bench_extender.py's (N nodes, 30 running pods each, a Spread
policy of its own) plus a PlacementPolicy of the benchmarked strategy selecting the new pods.
For each strategy, pods arrive pending, the nominator plans them (:meth:`Nominator.plan`, in its
batches), then each pod's filter is sent its nominated node alone (the request's bytes, answered as the
server answers them: decoded, judged, the reply encoded) and the pod is bound there
(the watch's view of it), pod after pod, as in a scheduler's serial cycle.

Prints per strategy: the nominator's planning CPU time per pod and its longest batch (what the
event loop is busy with while a filter waits), filter CPU time per pod (mean, p50, p99) and the
hit rate; and the machine reference. ``--profile`` writes a cProfile of the filters.
``--new-shapes K`` also times, per strategy, the filter of K pods each of a shape not seen before,
sent every node (the first builds the shape's fit table over the whole view), against the next
filter of the same shape.

Usage (from the repository root)::

    python bench/bench_nominated_filter.py --nodes 5000 --pods 300 --strategies Auto,Spread,Fill
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import statistics
import sys
import time
from typing import Any

import orjson

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.bench_extender import list_pages, machine_reference_ms, make_policy
from berth.extender.app import create_app
from berth.extender.heap import collector_paused, settle
from berth.extender.nominator import BATCH, Nominator
from berth.extender.routes.scheduler import VERB_AT, answer
from berth.extender.settings import ExtenderSettings
from berth.extender.store import ClusterStore

SCHEDULER = "berth-bench"
FILTER = VERB_AT["/filter"]


def build_store(nodes: int) -> ClusterStore:
    store = ClusterStore(leases_tracked=False)
    store.replace("policies", [make_policy()])
    for kind in ("nodes", "pods"):
        with collector_paused():
            store.replace(kind, (item for page in list_pages(kind, nodes) for item in orjson.loads(page)["items"]))
    store.mark_listed("leases")
    settle()
    return store


def bench_policy(strategy: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"selector": {"matchLabels": {"app": "bench"}}, "strategy": strategy}
    return {"apiVersion": "berth.dev/v1alpha1", "kind": "PlacementPolicy",
            "metadata": {"name": f"bench-{strategy.lower()}", "namespace": "bench", "generation": 1}, "spec": spec}


def pending(strategy: str, i: int, node: str | None = None) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"p-{strategy.lower()}-{i:05d}", "namespace": "bench",
                     "uid": f"bench-{strategy.lower()}-{i:08d}", "resourceVersion": str(10_000_000 + i),
                     "creationTimestamp": "2026-11-30T12:00:00Z", "labels": {"app": "bench"}},
        "spec": {"schedulerName": SCHEDULER,
                 "containers": [{"name": "main", "image": "registry.example/bench:1.0",
                                 "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]},
        "status": {"phase": "Pending"}}
    if node is not None:
        pod["status"]["nominatedNodeName"] = node
    return pod


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(store: ClusterStore, strategy: str, pods: int, profile: cProfile.Profile | None) -> dict[str, Any]:
    loop = asyncio.new_event_loop()
    # the pods are planned as they come (the nominator's wait for kube-scheduler is not simulated here)
    app = create_app(store, ExtenderSettings(track_leases=False, nominate=True, nominate_schedulers=SCHEDULER,
                                             nominate_after_seconds=0))
    engine = app.state.engine
    nominator: Nominator = app.state.nominator
    store.on_pending = nominator.offer  # the lifespan never runs here: plan is called by hand
    store.apply_policy(bench_policy(strategy))
    plan_cpu: list[float] = []
    filter_cpu: list[float] = []
    hits = 0
    i = 0
    while i < pods:
        wave = min(BATCH * 4, pods - i)
        for k in range(i, i + wave):
            store.apply_pod(pending(strategy, k))
        planned: dict[str, str] = {}
        while batch := nominator.take(BATCH):
            t = time.process_time()
            for pod, node in nominator.plan(batch):
                planned[pod.uid] = node
            plan_cpu.append(time.process_time() - t)
        for k in range(i, i + wave):
            uid = f"bench-{strategy.lower()}-{k:08d}"
            nominated = planned.get(uid)
            if nominated is None:
                continue
            node = nominated
            raw = pending(strategy, k, node)
            store.apply_pod(raw)  # the watch sees the nomination written
            body = orjson.dumps({"Pod": raw, "Nodes": None, "NodeNames": [node]})
            if profile is not None:
                profile.enable()
            t = time.process_time()
            # the whole verb as the server answers it: decoding, the filter, the reply encoded
            reply = loop.run_until_complete(answer(FILTER, engine, body, time.perf_counter()))
            filter_cpu.append(time.process_time() - t)
            if profile is not None:
                profile.disable()
            if orjson.loads(reply.body)["NodeNames"] == [node]:
                hits += 1
                bound = dict(raw)
                bound["spec"] = {**raw["spec"], "nodeName": node}
                bound["status"] = {"phase": "Pending"}
                with store.lock:
                    store.assume(engine.read_pod(raw), node, bound=True, deadline=float("inf"))
                store.apply_pod(bound)
        i += wave
    loop.close()
    per_pod_plan = sum(plan_cpu) / max(1, pods)
    return {"strategy": strategy, "pods": pods, "filters": len(filter_cpu), "hits": hits,
            "plan_ms_per_pod": round(per_pod_plan * 1000, 3), "plan_batch_max_ms": round(max(plan_cpu) * 1000, 1),
            "filter_ms_mean": round(statistics.fmean(filter_cpu) * 1000, 3) if filter_cpu else None,
            "filter_ms_p50": round(pct(filter_cpu, 0.5) * 1000, 3) if filter_cpu else None,
            "filter_ms_p99": round(pct(filter_cpu, 0.99) * 1000, 3) if filter_cpu else None}


def new_shapes(store: ClusterStore, strategy: str, shapes: int, first_cpu: int) -> dict[str, Any]:
    """The filter of a pod of a new shape (its cpu request, from ``first_cpu`` millicores on, never
    seen before), sent every node, then the filter of the same pod again: CPU milliseconds of
    each, shape after shape."""
    loop = asyncio.new_event_loop()
    app = create_app(store, ExtenderSettings(track_leases=False))
    store.apply_policy(bench_policy(strategy))
    names = sorted(store.view.nodes)
    first: list[float] = []
    again: list[float] = []
    for k in range(shapes):
        raw = pending(strategy, 90_000 + k)
        raw["spec"]["containers"][0]["resources"]["requests"]["cpu"] = f"{first_cpu + k}m"
        body = orjson.dumps({"Pod": raw, "Nodes": None, "NodeNames": names})
        for out in (first, again):
            t = time.process_time()
            loop.run_until_complete(answer(FILTER, app.state.engine, body, time.perf_counter()))
            out.append(time.process_time() - t)
        with store.lock:
            store.release(raw["metadata"]["uid"])
    loop.close()
    return {"strategy": strategy, "new_shape_filter_ms": [round(x * 1000, 1) for x in first],
            "new_shape_ms_p50": round(pct(first, 0.5) * 1000, 1),
            "same_shape_again_ms_p50": round(pct(again, 0.5) * 1000, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=300, help="pods per strategy")
    parser.add_argument("--strategies", default="Auto,Spread,Fill")
    parser.add_argument("--profile", help="write a cProfile of the filters to this file")
    parser.add_argument("--new-shapes", type=int, default=0, metavar="K",
                        help="also time the filters of K pods of new shapes, sent every node")
    args = parser.parse_args()
    reference = machine_reference_ms()
    t = time.perf_counter()
    store = build_store(args.nodes)
    print(f"view: {len(store.view.nodes)} nodes, {store.sizes()['pods']} pods, built in "
          f"{time.perf_counter() - t:.1f} s", flush=True)
    profile = cProfile.Profile() if args.profile else None
    for i, strategy in enumerate(args.strategies.split(",")):
        print(orjson.dumps(run(store, strategy, args.pods, profile)).decode(), flush=True)
        if args.new_shapes:  # shapes no strategy before judged
            shapes = new_shapes(store, strategy, args.new_shapes, 1001 + i * args.new_shapes)
            print(orjson.dumps(shapes).decode(), flush=True)
    if profile is not None:
        profile.dump_stats(args.profile)
    print(f"machine reference: {reference:.2f} ms before, {machine_reference_ms():.2f} ms after; "
          f"BERTH_INDEX={os.environ.get('BERTH_INDEX', 'on')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
