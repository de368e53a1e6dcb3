"""What bind's API calls cost the extender: client CPU and wall time per Binding and per Event of
berth's :class:`~berth.extender.binder.KubeBinder` against a real kube-apiserver (TLS, client
certificate, the local control plane of tests/e2e/harness).

The extender shares two cores with kube-scheduler and the API server in the throughput bench
(bench/bench_scheduler_throughput.py): every millisecond of CPU a bind costs the extender is taken
from them, and from the event loop that answers filter and prioritize. This bench isolates that
cost: ``--pods`` pods are created for a scheduler nobody serves, then bound (``--concurrency`` at
a time, as kube-scheduler's binding goroutines do) and given a BerthPlaced Event each; the
process's CPU (user + system) over each phase is divided by the calls.

Usage (from the repository root)::

    .venv/bin/python bench/bench_bind_client.py
    .venv/bin/python bench/bench_bind_client.py --pods 1000 --concurrency 16
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import sys
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.append(str(REPO_ROOT))

from kubernetes import client as k8s  # noqa: E402

from bench.bench_extender import machine_reference_ms  # noqa: E402
from bench.bench_scheduler_throughput import machine_reference  # noqa: E402
from berth.core import PodInfo  # noqa: E402
from berth.extender.binder import KubeBinder  # noqa: E402
from tests.e2e.harness import ControlPlane, NodeSpec, create_namespace, create_node, simple_pod  # noqa: E402

DECISION = "x" * 700
"""An annotation of the size of an Auto decision at 500 nodes (20 nodes listed)."""


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def timed(calls: list[Callable[[], Awaitable[None]]], concurrency: int) -> tuple[float, float]:
    """(CPU ms, wall ms) per call, ``concurrency`` calls in flight."""
    gate = asyncio.Semaphore(concurrency)

    async def one(call: Callable[[], Awaitable[None]]) -> None:
        async with gate:
            await call()

    cpu, wall = cpu_seconds(), time.perf_counter()
    await asyncio.gather(*(one(call) for call in calls))
    return (cpu_seconds() - cpu) / len(calls) * 1000, (time.perf_counter() - wall) / len(calls) * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=600)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args(argv)
    reference_before = machine_reference_ms()
    with ControlPlane.start() as cp:
        api = cp.api_client()
        core = k8s.CoreV1Api(api)
        nodes = [f"bench-node-{i}" for i in range(4)]
        for name in nodes:
            create_node(api, NodeSpec(name=name, cpu="64", memory="256Gi", pods=1000))
        create_namespace(api, "bench-bind")

        def create(i: int) -> PodInfo:
            made = core.create_namespaced_pod("bench-bind", simple_pod(f"p-{i}", scheduler_name="nobody"))
            return PodInfo(uid=made.metadata.uid, name=made.metadata.name, namespace="bench-bind")

        with ThreadPoolExecutor(8) as pool:
            pods = list(pool.map(create, range(args.pods)))
        binder = KubeBinder(cp.api_client())
        warm, measured = pods[:50], pods[50:]

        async def run() -> dict[str, tuple[float, float]]:
            try:
                await timed([lambda p=p, i=i: binder.bind(p, nodes[i % 4], {"berth.dev/decision": DECISION})
                             for i, p in enumerate(warm)], args.concurrency)  # connections opened here
                return {
                    "Binding": await timed([lambda p=p, i=i: binder.bind(p, nodes[i % 4],
                                                                         {"berth.dev/decision": DECISION})
                                            for i, p in enumerate(measured)], args.concurrency),
                    "Event": await timed([lambda p=p: binder.record_event(p, "bench-node-0", "placed by berth")
                                          for p in measured], args.concurrency),
                }
            finally:
                await binder.close()

        figures = asyncio.run(run())
    print(f"berth's bind client against a local kube-apiserver (TLS), {len(measured)} calls each, "
          f"{args.concurrency} in flight")
    print(machine_reference(reference_before))
    for call, (cpu, wall) in figures.items():
        print(f"{call:8} client CPU {cpu:.3f} ms per call, elapsed {wall:.2f} ms per call (all calls' time / calls)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
