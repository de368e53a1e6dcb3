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
  created and deleted in the policies' namespaces, half and half, from one asyncio client with up
  to ``--churn-in-flight`` requests out): the operator's CPU in % of a core and in ms per pod change
  and per status write, the status writes (MODIFIED events of the policies, counted by a watch), the most the API
  server wrote in any one second (by the writes' managedFields time) against
  ``--status-writes-per-second``;
* **freshness**: during the churn, every ``--probe-interval`` seconds a bound probe pod in one of
  ``--probe-policies`` policies (round robin; the churn leaves them alone), not waiting for the
  last probe to be counted; the seconds until its policy's status counts it (the median, the 90th
  percentile and the worst), and the operator's own log lines timing its writes for pod changes
  (from the change reaching it to the write, and the parts: its turn, computing, the write
  budget, writing).

Usage (from the repository root; the control-plane binaries from hack/build-k8s.sh)::

    .venv/bin/python bench/bench_operator.py                       # 5,000 nodes, 150,000 pods, 1,000 policies
    .venv/bin/python bench/bench_operator.py --nodes 500 --pods 10000 --policies 100

Creating the pods is the API server's and etcd's work, not the operator's: it is timed apart.
Only 127.0.0.1 is used. The machine's load matters: the machine reference line tells a slow
machine from a slow operator.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import dataclasses
import json
import math
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson

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


CHURN_IN_FLIGHT = 32
"""The churn's requests awaiting the API server's answer, at most (``--churn-in-flight``). On a
2-core machine 32 carried 98.5 changes a second (answers in 0.08 s); 128 overloaded the API
server (answers in 1.6 s, 59 changes a second) and 16 held the churn to 80."""
CHURN_GRACE_SECONDS = 60.0
"""After the churn, the time its last requests (the deletions of the pods it made) may take."""


def probe_policies(shape: Shape, count: int) -> list[int]:
    """``count`` policies spread over all of them: the probes' own (the churn leaves them alone,
    so that their placed count moves only with the probes)."""
    step = max(1, shape.policies // max(1, count))
    return list(range(0, shape.policies, step))[:count]


def quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values``, the nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


class Prober:
    """Every ``interval`` seconds a bound probe pod in the next probe policy (round robin), without
    waiting for the last one to be counted; a poller reads the placed count of each policy with a
    probe outstanding every 0.2 s, and probe ``m`` of a policy is counted once its placed count
    reaches the count before the first probe plus ``m + 1`` (only probes change it). The freshness
    of a probe: seconds from its create request until its policy's status counts it."""

    def __init__(self, api: Api, shape: Shape, policies: list[int], run: str) -> None:
        self.api, self.shape, self.policies, self.run = api, shape, policies, run
        self.base = {j: placed_total(api, *shape.policy(j)) for j in policies}
        self.made: dict[int, list[float]] = {j: [] for j in policies}  # creation times, per policy
        self.counted: dict[int, int] = {j: 0 for j in policies}
        self.fresh: list[float] = []
        self.lock = threading.Lock()

    def send(self, k: int) -> None:
        j = self.policies[k % len(self.policies)]
        ns, _ = self.shape.policy(j)
        at = time.monotonic()
        with self.lock:
            self.made[j].append(at)
        self.api.send("POST", f"/api/v1/namespaces/{ns}/pods",
                      pod_body(f"probe-{self.run}-{k}", self.shape.app(j), self.shape.node(k % self.shape.nodes)))

    def poll(self) -> int:
        """Read the policies with probes outstanding; the probes still outstanding."""
        with self.lock:
            waiting = [j for j in self.policies if self.counted[j] < len(self.made[j])]
        for j in waiting:
            seen = placed_total(self.api, *self.shape.policy(j)) - self.base[j]
            now = time.monotonic()
            with self.lock:
                while self.counted[j] < min(seen, len(self.made[j])):
                    self.fresh.append(now - self.made[j][self.counted[j]])
                    self.counted[j] += 1
        with self.lock:
            return sum(len(self.made[j]) - self.counted[j] for j in self.policies)

    def account(self) -> str:
        """Per probe policy: its placed count before the probes, the probes made and counted."""
        with self.lock:
            return ", ".join(f"{'/'.join(self.shape.policy(j))}: base {self.base[j]}, made {len(self.made[j])}, "
                             f"counted {self.counted[j]}" for j in self.policies)

    def oldest_outstanding(self) -> float | None:
        with self.lock:
            times = [self.made[j][self.counted[j]] for j in self.policies if self.counted[j] < len(self.made[j])]
        return min(times, default=None)


@dataclass
class ChurnCount:
    """The churn's requests: answered as expected (a pod created, or deleted or already gone), and
    refused (any other answer, or none: the API server is slower than the rate)."""

    made: int = 0
    refused: int = 0
    seconds: float = 0.0  # the answers' latencies, summed

    @property
    def latency(self) -> float | None:
        """The mean seconds from a request to its answer."""
        answered = self.made + self.refused
        return self.seconds / answered if answered else None


async def churn_pods(api: Api, shape: Shape, rate: float, targets: list[int], run: str,
                     stop: threading.Event, in_flight: int, count: ChurnCount) -> None:
    """``rate`` pod changes a second until ``stop`` is set, from one asyncio client with at most
    ``in_flight`` requests awaiting an answer: a bound pod created in one of the ``targets``
    policies, and each deleted about a second later (half the changes each); then the pods left are
    deleted, within :data:`CHURN_GRACE_SECONDS`. An API server slower than the rate gets fewer
    changes, never a backlog of them (no request is sent while ``in_flight`` are out, and a pace
    fallen behind does not catch up in a burst)."""
    room = asyncio.Semaphore(in_flight)
    sent: set[asyncio.Task[None]] = set()

    async def send(client: httpx.AsyncClient, method: str, path: str, body: Any) -> None:
        asked = time.monotonic()
        try:
            resp = await client.request(method, path, content=orjson.dumps(body),
                                        headers={"Content-Type": "application/json"})
            if resp.status_code in (200, 201, 202, 404):
                count.made += 1
            else:
                count.refused += 1
        except httpx.HTTPError:
            count.refused += 1
        finally:
            count.seconds += time.monotonic() - asked
            room.release()

    async def submit(client: httpx.AsyncClient, method: str, path: str, body: Any) -> None:
        await room.acquire()
        task = asyncio.create_task(send(client, method, path, body))
        sent.add(task)
        task.add_done_callback(sent.discard)

    created: collections.deque[tuple[float, str, str]] = collections.deque()
    period = 2.0 / rate  # one create and one delete per period
    async with api.async_client(in_flight) as client:
        i = 0
        next_at = time.monotonic()
        while not stop.is_set():
            j = targets[(i * 7919) % len(targets)]
            ns, _ = shape.policy(j)
            name = f"churn-{run}-{i}"
            await submit(client, "POST", f"/api/v1/namespaces/{ns}/pods",
                         pod_body(name, shape.app(j), shape.node(i % shape.nodes)))
            created.append((time.monotonic(), ns, name))
            if created[0][0] < time.monotonic() - 1.0:
                _, old_ns, old = created.popleft()
                await submit(client, "DELETE", f"/api/v1/namespaces/{old_ns}/pods/{old}", {"gracePeriodSeconds": 0})
            i += 1
            next_at = max(next_at + period, time.monotonic() - 1.0)  # behind: no burst to catch up
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        for _, ns, name in created:
            await submit(client, "DELETE", f"/api/v1/namespaces/{ns}/pods/{name}", {"gracePeriodSeconds": 0})
        if sent:
            await asyncio.wait(set(sent), timeout=CHURN_GRACE_SECONDS)


def churn(api: Api, shape: Shape, rate: float, seconds: float, probes: list[int],
          probe_interval: float, cpu: Callable[[], float],
          in_flight: int = CHURN_IN_FLIGHT) -> tuple[list[float], ChurnCount, float, float]:
    """``rate`` pod changes a second for ``seconds`` (:func:`churn_pods`, on a thread of its own),
    in every policy but the probes'. Every ``probe_interval`` seconds a probe pod (:class:`Prober`).
    Returns (freshness of every probe, the churn's requests answered when it stopped (not the
    deletions of its last pods after), when it stopped, ``cpu()`` then)."""
    stop = threading.Event()
    run = uuid.uuid4().hex[:6]  # names of their own: a cluster may be measured again
    left_out = set(probes)
    targets = [j for j in range(shape.policies) if j not in left_out]
    count = ChurnCount()
    prober = Prober(api, shape, probes, run)
    pacer = threading.Thread(target=asyncio.run, daemon=True,
                             args=(churn_pods(api, shape, rate, targets, run, stop, in_flight, count),))
    pacer.start()
    ends = time.monotonic() + seconds
    next_probe = time.monotonic()
    k = 0
    sent = []
    with ThreadPoolExecutor(2) as senders:
        while time.monotonic() < ends:
            if time.monotonic() >= next_probe:
                sent.append(senders.submit(prober.send, k))
                k += 1
                next_probe += probe_interval
            prober.poll()
            time.sleep(0.2)
    stop.set()
    stopped, spent, answered = time.monotonic(), cpu(), dataclasses.replace(count)
    pacer.join(timeout=CHURN_GRACE_SECONDS + 10)
    for probe in sent:
        probe.result()  # a probe the API server refused is said, not waited for
    while prober.poll():  # the last probes, the churn stopping meanwhile
        oldest = prober.oldest_outstanding()
        if oldest is not None and time.monotonic() - oldest > 60:
            raise RuntimeError(f"a probe pod was not counted within 60 s: {prober.account()}")
        time.sleep(0.2)
    return prober.fresh, answered, stopped, spent


def status_lines(op: OperatorProcess, marker: str = "status write(s) for pod changes") -> list[str]:
    """The operator's own account of its writes for pod changes (logged every half minute)."""
    if op.process is None or not op.process.log_path.exists():
        return []
    return [line.strip() for line in op.process.log_path.read_text(errors="replace").splitlines() if marker in line]


def measure(cp: Any, api: Api, shape: Shape, args: argparse.Namespace) -> dict[str, Any]:
    """Start the operator on the built cluster and take every figure (its log's end on a failure)."""
    op = OperatorProcess(cp, ("--status-writes-per-second", str(args.status_writes_per_second),
                              "--resync-seconds", str(args.resync_seconds))).start()
    try:
        return _measure(op, api, shape, args)
    except Exception:
        log(f"the operator's log ends:\n{op.log_tail(20000)}")
        raise
    finally:
        op.stop()


def _measure(op: OperatorProcess, api: Api, shape: Shape, args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {}
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
    logged = len(status_lines(op))
    fresh, count, end, cpu_at_end = churn(api, shape, args.churn_rate, args.churn_seconds,
                                          probe_policies(shape, args.probe_policies), args.probe_interval,
                                          op.cpu_seconds, in_flight=args.churn_in_flight)
    spent = cpu_at_end - cpu
    seen = writes.between(at, end)
    most = writes.most_in_a_second(at, end)
    writes.stop()
    result["churn"] = {
        "seconds": round(end - at, 1), "pod_changes": count.made, "pod_changes_refused": count.refused,
        "pod_changes_per_second": round(count.made / (end - at), 1),
        "cpu_percent": round(100 * spent / (end - at), 1),
        "pod_change_latency_seconds": round(count.latency, 3) if count.latency is not None else None,
        "cpu_ms_per_pod_change": round(1000 * spent / count.made, 2) if count.made else None,
        "cpu_ms_per_status_write": round(1000 * spent / len(seen), 2) if seen else None,
        "status_writes": len(seen), "status_writes_max_per_second": most,
        "freshness_seconds_median": round(statistics.median(fresh), 2) if fresh else None,
        "freshness_seconds_p90": round(quantile(fresh, 0.9), 2) if fresh else None,
        "freshness_seconds_max": round(max(fresh), 2) if fresh else None, "probes": len(fresh),
        "operator_says": status_lines(op)[logged:],
    }
    result["rss_mib_at_end"] = round(op.rss_mib(), 1)
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
    parser.add_argument("--churn-seconds", type=float, default=60.0)
    parser.add_argument("--churn-in-flight", type=int, default=CHURN_IN_FLIGHT,
                        help="the churn's requests awaiting an answer, at most")
    parser.add_argument("--probe-interval", type=float, default=2.0,
                        help="seconds between probe pods (each of the next probe policy)")
    parser.add_argument("--probe-policies", type=int, default=10, help="policies the probes go to, round robin")
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
    print(f"churn: {c['pod_changes_per_second']} pod changes/s for {c['seconds']} s "
          f"(asked {args.churn_rate:g}/s; {c['pod_changes_refused']} refused or unanswered; "
          f"the API server answered in {c['pod_change_latency_seconds']} s on average): "
          f"CPU {c['cpu_percent']} % of a core, {c['status_writes']} status writes "
          f"(at most {c['status_writes_max_per_second']} in a second; "
          f"bound {args.status_writes_per_second:g}/s)")
    print(f"churn CPU: {c['cpu_ms_per_pod_change']} ms of the operator's CPU per pod change, "
          f"{c['cpu_ms_per_status_write']} ms per status write")
    print(f"freshness of an affected policy's status: median {c['freshness_seconds_median']} s, "
          f"p90 {c['freshness_seconds_p90']} s, worst {c['freshness_seconds_max']} s over {c['probes']} probes")
    for line in c["operator_says"]:
        print(f"  operator: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
