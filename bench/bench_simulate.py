"""Benchmark of ``berth simulate`` (a script, not a test): the command as a user runs it.

Prints the wall-clock time of ``berth simulate`` (every strategy, its table on standard output)

- on the built-in sample cluster and mix (target: at most 5 s);
- on a generated snapshot of 5,000 nodes and 150,000 running pods (kubectl's JSON, with
  Leases) and a generated mix of 20,000 pods in five workloads, one with a zone spread
  constraint and one with a per-rack placement rule (target: at most 60 s with two cores).

Each case runs the CLI as a child process (``--jobs`` as given, ``--quiet``) and counts its
time from the start of the process to its exit: reading the snapshot, every strategy, the table;
and the CPU time its processes used (user + system, the workers included). The machine may be
shared, so each case also prints, taken before and after it:

- the *machine reference* of ``bench_extender.py`` (a short fixed workload, best of 20), which
  tells a slower machine from a slower change;
- the *core share*: a fixed workload of about 0.3 s of CPU, its CPU time over its wall time (1.0:
  it had a core to itself; 0.25: other processes took three quarters of the core), and the load
  average. On a busy machine the wall time is the CPU time spread over the share of the cores
  the processes got.

Usage (from the repository root)::

    python bench/bench_simulate.py                     # both cases, --jobs 2
    python bench/bench_simulate.py --jobs 1 --only sample
    python bench/bench_simulate.py --nodes 1000 --mix 4000 --keep /tmp/big   # a smaller large case, kept
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any

import yaml

ZONES = 3
RACK_SIZE = 20
PODS_PER_NODE = 30
LEASE_TIME = "2026-11-30T12:00:00.000000Z"
SAMPLE_TARGET_S = 5.0
LARGE_TARGET_S = 60.0
# name, cpu, memory, ephemeral-storage, share of the nodes (per 10)
NODE_SIZES = (("m5.2xlarge", "7910m", "30Gi", "180Gi", 3), ("m5.4xlarge", "15890m", "61Gi", "360Gi", 4),
              ("m5.8xlarge", "31850m", "124Gi", "720Gi", 2), ("r5.4xlarge", "15890m", "124Gi", "360Gi", 1))


# -- the generated cluster ------------------------------------------------------------------


def node_size(i: int) -> tuple[str, str, str, str]:
    k = (i * 7) % 10
    for name, cpu, memory, disk, share in NODE_SIZES:
        if k < share:
            return name, cpu, memory, disk
        k -= share
    raise AssertionError("shares sum to 10")


def make_node(i: int) -> dict[str, Any]:
    name = f"node-{i:05d}"
    kind, cpu, memory, disk = node_size(i)
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
              "topology.kubernetes.io/zone": f"zone-{i % ZONES}", "topology.kubernetes.io/region": "region-1",
              "rack": f"rack-{i // RACK_SIZE:04d}", "node.kubernetes.io/instance-type": kind}
    alloc = {"cpu": cpu, "memory": memory, "ephemeral-storage": disk, "pods": "110"}
    spec: dict[str, Any] = {}
    if i % 500 == 499:  # a few cordoned nodes
        spec = {"unschedulable": True,
                "taints": [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": f"node-{i:05d}", "labels": labels},
            "spec": spec,
            "status": {"capacity": dict(alloc), "allocatable": alloc,
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}


def make_pod(node_index: int, j: int) -> dict[str, Any]:
    k = node_index * PODS_PER_NODE + j
    if j < 2:
        namespace, app = "kube-system", ("kube-proxy", "node-exporter")[j]
        cpu, memory = ("100m", "64Mi")
    else:
        namespace, app = f"tenant-{k % 20}", f"app-{k % 60}"
        # about 4 cores and 13 GiB on every node: the smallest half full, the largest an eighth
        cpu = ("50m", "100m", "200m", "250m")[k % 4] if node_index % 5 else "100m"
        memory = ("128Mi", "256Mi", "512Mi", "1Gi")[(k // 3) % 4] if node_index % 7 else "512Mi"
    name = f"{app}-{k:07d}"
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": f"pod-{k:07d}",
                         "labels": {"app": app, "pod-template-hash": f"{k % 997:x}"}},
            "spec": {"nodeName": f"node-{node_index:05d}",
                     "containers": [{"name": "main", "image": f"registry.example/{app}:1",
                                     "resources": {"requests": {"cpu": cpu, "memory": memory}}}]},
            "status": {"phase": "Running"}}


def make_lease(i: int) -> dict[str, Any]:
    name = f"node-{i:05d}"
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": LEASE_TIME}}


def make_snapshot(nodes: int) -> dict[str, Any]:
    """``nodes`` nodes with ``PODS_PER_NODE`` pods each and a Lease each, as one kubectl List."""
    items: list[dict[str, Any]] = [make_node(i) for i in range(nodes)]
    items += [make_pod(i, j) for i in range(nodes) for j in range(PODS_PER_NODE)]
    items += [make_lease(i) for i in range(nodes)]
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}


def make_mix(pods: int) -> dict[str, Any]:
    """Five workloads sharing ``pods`` replicas: web (zone spread), api, cache, batch (sleepy) and
    db (one per rack at most)."""
    shares = {"web": 0.35, "api": 0.25, "cache": 0.1, "batch": 0.29}
    counts = {name: int(pods * share) for name, share in shares.items()}
    counts["db"] = pods - sum(counts.values())
    zone_spread = {"topologySpreadConstraints": [
        {"maxSkew": 3, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchLabels": {"app": "web"}}}]}
    workloads = [
        {"name": "web", "namespace": "shop", "replicas": counts["web"], "requests": {"cpu": "500m", "memory": "1Gi"},
         "policy": zone_spread},
        {"name": "api", "namespace": "shop", "replicas": counts["api"], "requests": {"cpu": "1", "memory": "2Gi"}},
        {"name": "cache", "namespace": "shop", "replicas": counts["cache"],
         "requests": {"cpu": "500m", "memory": "12Gi"}},
        {"name": "batch", "namespace": "jobs", "replicas": counts["batch"], "sleepy": True,
         "requests": {"cpu": "2", "memory": "2Gi"}},
        {"name": "db", "namespace": "shop", "replicas": counts["db"],
         "requests": {"cpu": "2", "memory": "8Gi", "ephemeral-storage": "50Gi"},
         "policy": {"placementRules": [{"resource": "Pod", "operator": "HasNot", "labels": {"app": "db"},
                                        "within": "rack"}]}},
    ]
    return {"apiVersion": "berth.dev/v1alpha1", "kind": "WorkloadMix", "metadata": {"name": "bench"},
            "referencePod": "web", "workloads": workloads}


def write_case(directory: str, nodes: int, mix: int) -> tuple[str, str]:
    snapshot = os.path.join(directory, f"cluster-{nodes}.json")
    workload = os.path.join(directory, f"mix-{mix}.yaml")
    if not os.path.exists(snapshot):
        with open(snapshot, "w") as f:
            json.dump(make_snapshot(nodes), f)
    with open(workload, "w") as f:
        yaml.safe_dump(make_mix(mix), f, sort_keys=False)
    return snapshot, workload


# -- measuring ------------------------------------------------------------------------------


def machine_reference_ms() -> float:
    """A fixed CPU workload (set and dict operations over 5,000 names, best of 20): on a shared
    machine whose speed drifts, it tells a slow phase from a slow change."""
    best = float("inf")
    for _ in range(20):
        t0 = time.perf_counter()
        names = [f"node-{i:05d}" for i in range(5000)]
        index = dict.fromkeys(names)
        seen = set(names)
        sum(1 for n in names if n in seen and n in index)
        best = min(best, time.perf_counter() - t0)
    return best * 1000


def core_share() -> float:
    """CPU time over wall time of a fixed workload of about 0.3 s of CPU."""
    wall, cpu = time.perf_counter(), time.process_time()
    total = 0
    for i in range(3_000_000):
        total += i & 7
    return (time.process_time() - cpu) / (time.perf_counter() - wall)


def run_simulate(args: list[str]) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the command's processes, standard output)."""
    env = dict(os.environ, PYTHONSAFEPATH="1")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "berth.cli.main", "simulate", "--quiet", *args],
                          capture_output=True, text=True, env=env, check=False)
    elapsed = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"berth simulate {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu, proc.stdout


def case(title: str, args: list[str], target: float) -> None:
    reference, share, load = machine_reference_ms(), core_share(), os.getloadavg()[0]
    elapsed, cpu, out = run_simulate(args)
    reference_after, share_after, load_after = machine_reference_ms(), core_share(), os.getloadavg()[0]
    verdict = "meets" if elapsed <= target else "MISSES"
    print(f"{title}: {elapsed:.1f} s wall ({verdict} the target of {target:.0f} s), {cpu:.1f} s of CPU")
    print(f"  machine reference: {reference:.2f} ms before, {reference_after:.2f} ms after; core share "
          f"{share:.2f} before, {share_after:.2f} after; load average {load:.1f} before, {load_after:.1f} after, "
          f"on {os.cpu_count()} cores")
    print("  " + "\n  ".join(line for line in out.splitlines() if line.strip()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2, help="berth simulate --jobs (default 2)")
    parser.add_argument("--nodes", type=int, default=5000, help="nodes of the large case (default 5000)")
    parser.add_argument("--mix", type=int, default=20000, help="pods in the large case's mix (default 20000)")
    parser.add_argument("--only", choices=("sample", "large"), help="run one case")
    parser.add_argument("--keep", metavar="DIR", help="write the generated snapshot and mix here (reused)")
    args = parser.parse_args()
    jobs = ["--jobs", str(args.jobs)]
    if args.only != "large":
        case(f"sample (built-in, --jobs {args.jobs})", jobs, SAMPLE_TARGET_S)
    if args.only != "sample":
        with tempfile.TemporaryDirectory() as tmp:
            directory = args.keep or tmp
            os.makedirs(directory, exist_ok=True)
            snapshot, workload = write_case(directory, args.nodes, args.mix)
            title = (f"large ({args.nodes} nodes, {args.nodes * PODS_PER_NODE} pods, a {args.mix}-pod mix, "
                     f"--jobs {args.jobs})")
            case(title, [*jobs, "--snapshot", snapshot, "--workload", workload], LARGE_TARGET_S)


if __name__ == "__main__":
    main()
