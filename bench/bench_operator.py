"""The operator at cluster scale, on the e2e harness's control plane (etcd + kube-apiserver on
127.0.0.1, tests/e2e/harness).

One run builds a cluster (tests/e2e/scale.py: ``--nodes`` Ready nodes with Leases, ``--policies``
PlacementPolicies five to a namespace, ``--pending`` pending pods per policy and the rest of
``--pods`` bound to the nodes at creation), then starts ``berth operator --webhook off``
cluster-wide and prints:

* **first status**: seconds from the operator's start until every policy has a status;
* **RSS** of the operator process then, and at the end;
* **CPU at rest**: the operator's CPU over ``--rest-seconds`` with nothing changing, in % of a core;
* **under churn**: ``--churn-rate`` pod changes a second for ``--churn-seconds`` (bound pods
  created and deleted in the policies' namespaces, half and half): the operator's CPU in % of a
  core, the status writes (MODIFIED events of the policies, counted by a watch), the most in any
  one second against ``--status-writes-per-second``;
* **freshness**: during the churn, every 3 s a probe pod of one policy is created; the seconds
  until that policy's status counts it (the median and the worst).

Usage (from the repository root; the control-plane binaries from hack/build-k8s.sh)::

    .venv/bin/python bench/bench_operator.py                       # 5,000 nodes, 150,000 pods, 1,000 policies
    .venv/bin/python bench/bench_operator.py --nodes 500 --pods 10000 --policies 100

Creating the pods is the API server's and etcd's work, not the operator's: it is timed apart.
Only 127.0.0.1 is used. The machine's load matters: the machine reference line tells a slow
machine from a slow operator.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
# The harness lives in tests/; append (not prepend) the repository root, so that the repository's
# operator/ folder never shadows the standard library's operator module.
if str(REPO_ROOT) not in sys.path:
    sys.path.append(str(REPO_ROOT))

from bench.bench_extender import machine_reference_ms  # noqa: E402
from tests.e2e.harness import ControlPlane  # noqa: E402
from tests.e2e.scale import (  # noqa: E402
    Api,
    OperatorProcess,
    PolicyWrites,
    Shape,
    build,
    pod_body,
    wait_every_status,
)
from tests.e2e.stack import CRD  # noqa: E402


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def placed_total(api: Api, namespace: str, name: str) -> int:
    body = api.send("GET", f"/apis/berth.dev/v1alpha1/namespaces/{namespace}/placementpolicies/{name}")
    return int((body.get("status") or {}).get("placedTotal", -1))


def churn(api: Api, shape: Shape, rate: float, seconds: float, probe: int) -> tuple[list[float], int]:
    """``rate`` pod changes a second for ``seconds``, sent by a pool of threads: bound pods created,
    and deleted about a second later (half the changes each). Every 3 s a probe pod of policy
    ``probe`` is created and the seconds until its policy's status counts it are noted. Returns
    (freshness, changes made)."""
    stop = threading.Event()
    run = uuid.uuid4().hex[:6]  # names of their own: a cluster may be measured again
    made = 0
    lock = threading.Lock()

    def send(method: str, path: str, body: Any) -> None:
        nonlocal made
        api.send(method, path, body, ok=(200, 201, 202, 404))
        with lock:
            made += 1

    def pace() -> None:
        created: list[tuple[float, str, str]] = []
        i = 0
        period = 2.0 / rate  # one create and one delete per period
        next_at = time.monotonic()
        with ThreadPoolExecutor(16) as pool:
            while not stop.is_set():
                j = (i * 7919) % shape.policies
                if j == probe:
                    j = (j + 1) % shape.policies
                ns, _ = shape.policy(j)
                name = f"churn-{run}-{i}"
                pool.submit(send, "POST", f"/api/v1/namespaces/{ns}/pods",
                            pod_body(name, shape.app(j), shape.node(i % shape.nodes)))
                created.append((time.monotonic(), ns, name))
                if created[0][0] < time.monotonic() - 1.0:
                    _, old_ns, old = created.pop(0)
                    pool.submit(send, "DELETE", f"/api/v1/namespaces/{old_ns}/pods/{old}", {"gracePeriodSeconds": 0})
                i += 1
                next_at += period
                time.sleep(max(0.0, next_at - time.monotonic()))
            for _, ns, name in created:
                pool.submit(send, "DELETE", f"/api/v1/namespaces/{ns}/pods/{name}", {"gracePeriodSeconds": 0})

    pacer = threading.Thread(target=pace, daemon=True)
    pacer.start()
    fresh: list[float] = []
    ns, name = shape.policy(probe)
    ends = time.monotonic() + seconds
    k = 0
    while time.monotonic() < ends - 3:
        before = placed_total(api, ns, name)
        created_at = time.monotonic()
        api.send("POST", f"/api/v1/namespaces/{ns}/pods", pod_body(f"probe-{run}-{k}", shape.app(probe), shape.node(k)))
        k += 1
        while placed_total(api, ns, name) < before + 1:
            if time.monotonic() - created_at > 60:
                raise RuntimeError("a probe pod was not counted within 60 s")
            time.sleep(0.1)
        fresh.append(time.monotonic() - created_at)
        time.sleep(max(0.0, created_at + 3 - time.monotonic()))
    time.sleep(max(0.0, ends - time.monotonic()))
    stop.set()
    pacer.join(timeout=120)
    return fresh, made


def measure(cp: Any, api: Api, shape: Shape, args: argparse.Namespace) -> dict[str, Any]:
    """Start the operator on the built cluster and take every figure."""
    result: dict[str, Any] = {}
    op = OperatorProcess(cp, ("--status-writes-per-second", str(args.status_writes_per_second),
                              "--resync-seconds", str(args.resync_seconds))).start()
    try:
        first = wait_every_status(api, op, shape.policies, args.timeout, interval=1.0)
        if first is None:
            raise RuntimeError(f"not every policy had a status after {args.timeout:.0f} s:\n{op.log_tail()}")
        result["first_status_seconds"] = round(first, 1)
        result["cpu_seconds_to_first_status"] = round(op.cpu_seconds(), 1)  # what a busy machine does not change
        result["rss_mib_after_first_status"] = round(op.rss_mib(), 1)
        log(f"every policy has a status {first:.1f} s after the start; RSS {op.rss_mib():.0f} MiB")

        time.sleep(min(10.0, args.rest_seconds))  # the last writes of the start settle
        cpu, at = op.cpu_seconds(), time.monotonic()
        time.sleep(args.rest_seconds)
        result["cpu_at_rest_percent"] = round(100 * (op.cpu_seconds() - cpu) / (time.monotonic() - at), 1)
        log(f"CPU at rest: {result['cpu_at_rest_percent']} %")

        listed = api.send("GET", "/apis/berth.dev/v1alpha1/placementpolicies?limit=1")
        writes = PolicyWrites(api, listed["metadata"]["resourceVersion"])
        time.sleep(1.0)
        cpu, at = op.cpu_seconds(), time.monotonic()
        fresh, made = churn(api, shape, args.churn_rate, args.churn_seconds, probe=0)
        end = time.monotonic()
        spent = op.cpu_seconds() - cpu
        seen = writes.between(at, end)
        per_second: dict[int, int] = {}
        for t in seen:
            per_second[int(t - at)] = per_second.get(int(t - at), 0) + 1
        writes.stop()
        result["churn"] = {
            "seconds": round(end - at, 1), "pod_changes": made,
            "pod_changes_per_second": round(made / (end - at), 1),
            "cpu_percent": round(100 * spent / (end - at), 1),
            "status_writes": len(seen), "status_writes_max_per_second": max(per_second.values(), default=0),
            "freshness_seconds_median": round(statistics.median(fresh), 2) if fresh else None,
            "freshness_seconds_max": round(max(fresh), 2) if fresh else None, "probes": len(fresh),
        }
        result["rss_mib_at_end"] = round(op.rss_mib(), 1)
    finally:
        op.stop()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=150_000)
    parser.add_argument("--policies", type=int, default=1000)
    parser.add_argument("--pending", type=int, default=10, help="pending pods per policy")
    parser.add_argument("--connections", type=int, default=32, help="concurrent requests while building")
    parser.add_argument("--status-writes-per-second", type=float, default=100.0)
    parser.add_argument("--resync-seconds", type=float, default=5.0)
    parser.add_argument("--rest-seconds", type=float, default=30.0)
    parser.add_argument("--churn-rate", type=float, default=100.0, help="pod changes a second")
    parser.add_argument("--churn-seconds", type=float, default=30.0)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for every status")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    shape = Shape(nodes=args.nodes, pods=args.pods, policies=args.policies, pending=args.pending)

    result: dict[str, Any] = {"nodes": shape.nodes, "pods": shape.pods, "policies": shape.policies,
                              "pending_per_policy": shape.pending,
                              "status_writes_per_second": args.status_writes_per_second,
                              "machine_reference_ms": round(machine_reference_ms(), 2)}
    with ControlPlane.start(apiserver_args=["--max-requests-inflight=800"]) as cp:
        cp.apply_crds(CRD)
        api = Api(cp, connections=args.connections)
        try:
            result["build_seconds"] = {k: round(v, 1) for k, v in build(cp, api, shape).items()}
            result.update(measure(cp, api, shape, args))
        finally:
            api.close()

    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    c = result["churn"]
    print(f"berth operator on {shape.nodes} nodes, {shape.pods} pods ({shape.pending} pending per policy), "
          f"{shape.policies} policies; machine reference {result['machine_reference_ms']} ms "
          f"(shared machine: compare with the same line elsewhere)")
    print(f"cluster built in {result.get('build_seconds', '(an earlier run)')} s")
    print(f"first status on every policy: {result['first_status_seconds']} s after start, "
          f"{result['cpu_seconds_to_first_status']} s of the operator's CPU   "
          f"RSS {result['rss_mib_after_first_status']} MiB (at the end {result['rss_mib_at_end']} MiB)")
    print(f"CPU at rest: {result['cpu_at_rest_percent']} % of a core over {args.rest_seconds:.0f} s")
    print(f"churn: {c['pod_changes_per_second']} pod changes/s for {c['seconds']} s: CPU {c['cpu_percent']} % of "
          f"a core, {c['status_writes']} status writes (at most {c['status_writes_max_per_second']} in a second; "
          f"bound {args.status_writes_per_second:g}/s)")
    print(f"freshness of an affected policy's status: median {c['freshness_seconds_median']} s, "
          f"worst {c['freshness_seconds_max']} s over {c['probes']} probes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
