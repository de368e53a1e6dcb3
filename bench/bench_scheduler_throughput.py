"""Throughput of a real kube-scheduler with berth in its profile, and without.

One run starts a local control plane (etcd + kube-apiserver, tests/e2e/harness), ``--nodes`` fake
Ready nodes (500 by default) and then, one after the other, kube-schedulers with these
configurations, each binding ``--pods`` pods (1,000 by default). ``--rows`` chooses which kinds
of row run (default: all, in this order):

* ``default``: kube-scheduler alone, its default profile and its default sampling of nodes
  (on large clusters it stops filtering once it has found a share of them);
* ``default-100``: the same with ``percentageOfNodesToScore: 100`` (berth's configuration sets
  it: this row separates what filtering and scoring every node costs from what the extender costs);
* ``noop``: the no-op extender (bench/noop_extender.py, a process of its own: filter passes every
  node, prioritize scores 0, kube-scheduler binds) in berth's configuration's shape
  (weight 30, ``nodeCacheCapable: true``, ``percentageOfNodesToScore: 100``): the floor any
  extender on berth's stack (uvicorn, httptools, orjson) costs, two HTTP round trips a pod;
* ``berth-none``: berth's ``full`` profile (filter, prioritize, bind, weight 30,
  ``nodeCacheCapable: true``, ``percentageOfNodesToScore: 100``), pods no PlacementPolicy selects
  (berth passes them through);
* ``berth`` (``berth-<strategy>``): the same, the pods governed by a PlacementPolicy of that
  strategy, one row per ``--strategies`` entry (default Auto);
* ``profile`` (``berth-<strategy>-profile``): berth's ``throughput`` profile (the same
  kube-scheduler configuration, and the extender settings
  extender/scheduler_config.py gives it, in a second extender process): filter answers a governed
  pod with its strategy's winner alone, so kube-scheduler skips scoring and prioritize; one row per
  strategy.
* ``nominate`` (``berth-<strategy>-nominate``): berth's recommended profile, ``nominate`` (the
  chart's default): ``throughput``, and berth
  nominates each governed pending pod's node (``status.nominatedNodeName``, extender/nominator.py)
  before kube-scheduler's cycle, which tries that node alone first; one row per strategy, each
  with its nominations (made, hit, missed, late) and hit rate.

The summary prints each row's ratio to kube-scheduler alone (``default``) and to the no-op
extender, the machine reference (a fixed CPU workload, before and after) with the load average,
and how long the whole run took; and kube-scheduler's own mean time a pod in its Filter extension
point and its scheduling algorithm (the extenders' calls included), from its metrics: a node's
in-tree filters are run with every pod nominated there copied into it, so rows whose pods are
nominated onto few nodes show it there.

Bind latency, per row (p50 / p99 and the share within 25 ms, from each component's own histogram
between a scrape before the row and one after it, interpolated in its buckets): berth's ``bind``
verb (as kube-scheduler waits for it), berth's Binding call within it, the API server's own time
for the row's Bindings (``apiserver_request_duration_seconds`` of ``POST pods/binding``, whoever
creates them: buckets 5, 25, 50, 100 ms ...), and kube-scheduler's Bind plugins
(``scheduler_framework_extension_point_duration_seconds{extension_point="Bind"}``, every pod: its
own Binding, in the rows where it binds; an extender's bind is not timed there). berth's rows also
print the steps of bind that are berth's own (``berth_bind_step_seconds``), and the means, exact
(from the histograms' sums, no bucket rounds them): berth's bind, the API server's time for the
row's Bindings, the difference (what berth adds), and how many binds opened a connection (TLS
handshake included) on the way.

``--noop-each`` runs the noop row again (the same pods, the same kube-scheduler configuration, a
no-op extender started for it) just before each strategy's berth rows, as ``noop-<row>``
(``noop-auto-nominate`` before ``berth-auto-nominate``; with ``--versus``, one before the pair; with
``--pace``, unpaced), and takes each berth row's ratio to the no-op extender against that row: the
control plane slows as a run writes to it (etcd's size, the Events), so a noop row taken at the
start would favour the rows that run first. berth's extender is then started for each strategy
after its noop row, so that none runs during a noop row, as none runs during the first. The table
names each ratio's noop row (``vs noop of``); the first noop row stays in it, and each
``noop-<row>``'s own ratio is to the first (how far the control plane drifted). Without it every
ratio is to the first noop row.

``--versus NAME=VALUE`` runs each profile and nominate row twice in turn, as is and then with those
extender settings (a ``-vs`` row), each with an extender started for it: a change compared within
one run, on a machine whose load shifts between runs.

``--pace noop`` measures them at the no-op extender's rate: the noop row binds as fast as it can
(its pods/s is the floor's rate), then every later row starts its scheduler first and creates its
pods at that rate, so it binds at it, beginning with a ``noop-paced`` row (kube-scheduler binds:
the API server's time for a Binding at that rate, the pods created alongside as in berth's rows);
``--pace RATE`` paces every row at RATE pods a second. The pods are created by this process: on a
small machine it may not reach the rate asked (printed per row), and the API server's time for a
Binding depends on all the row's writes (creations, nominations, Bindings, Events) and on the
machine's load: which is why each row prints the API server's own figure beside berth's.

In every configuration the scheduler's API client is set to ``qps: 1000, burst: 1000``
(``clientConnection``; the default 50 QPS would cap every configuration at about 50 binds a
second and hide the difference). berth's extender binds through its own asyncio client, which has
no client-side rate limit.

How it is measured: a watch on the namespace is opened; the pods are created for a scheduler
name no scheduler serves yet (for berth, until its view has them all); the scheduler is started;
the watch notes when each pod is bound. pods/s = (pods - 1) / (last bind - first bind),
i.e. the scheduling loop's steady rate, without the scheduler's start-up and informer sync (printed
apart, as ``first bind after``). The pods of one configuration are deleted before the next.

Usage (from the repository root; builds the Kubernetes binaries on first use, see hack/build-k8s.sh)::

    .venv/bin/python bench/bench_scheduler_throughput.py
    .venv/bin/python bench/bench_scheduler_throughput.py --nodes 500 --pods 1000 --strategies Auto,Spread,Fill
    .venv/bin/python bench/bench_scheduler_throughput.py --nodes 5000 --pods 5000 --strategies Auto,Spread,Fill \
        --rows default,noop,berth,profile
    .venv/bin/python bench/bench_scheduler_throughput.py --rows noop,nominate --pace noop  # binds at the noop rate
    .venv/bin/python bench/bench_scheduler_throughput.py --rows noop,nominate --strategies Auto,Fill --noop-each

How long: creating 5,000 nodes takes 2-4 minutes; then each row takes its pods' creation plus
pods / (its pods/s). At 5,000 nodes the rows of the full configuration (noop, berth-*) bind 10-30
pods/s, so 5,000 pods take 3-8 minutes a row: ``--rows default,noop,berth,profile`` with three
strategies is 9 rows. Progress and each extender verb's mean time go to stderr.

Only 127.0.0.1 is used. The machine's load matters: run it on a quiet machine and compare ratios.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import ssl
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
# The harness lives in tests/; append (not prepend) the repository root, so that the repository's
# operator/ folder never shadows the standard library's operator module.
if str(REPO_ROOT) not in sys.path:
    sys.path.append(str(REPO_ROOT))

import httpx  # noqa: E402
import orjson  # noqa: E402
import yaml  # noqa: E402
from kubernetes import client as k8s  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from bench.bench_extender import (  # noqa: E402
    machine_reference_ms,
    process_cpu_seconds,
    server_histogram,
    server_side,
)
from bench.noop_extender import noop_scheduler_config  # noqa: E402
from berth.extender.scheduler_config import (  # noqa: E402
    FULL_PROFILE,
    NOMINATE_PROFILE,
    PROFILE_EXTENDER_ENV,
    THROUGHPUT_PROFILE,
)
from tests.e2e.harness import (  # noqa: E402
    ControlPlane,
    NodeSpec,
    create_namespace,
    create_node,
    renew_node_lease,
    simple_pod,
    wait_for,
)
from tests.e2e.harness.process import ManagedProcess, free_port  # noqa: E402
from tests.e2e.nominator import nominations  # noqa: E402
from tests.e2e.stack import CRD, Extender, berth_scheduler_config, policy_manifest  # noqa: E402

CLIENT = {"qps": 1000, "burst": 1000}
API_CALLS = "berth_api_call_seconds"
"""berth's histogram of its bind's API calls (the Binding): the API server's part of bind's latency."""


BIND_TARGET_SECONDS = 0.025
"""The bind latency the issue asks of berth at p99: each row prints the share of binds within it."""


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


class BindWatch:
    """A raw watch on the namespace's pods (orjson, no client models: it must keep up), noting
    the arrival time of each pod's first event with a ``spec.nodeName``."""

    def __init__(self, cp: ControlPlane, namespace: str) -> None:
        assert cp.pki is not None
        self.url = f"{cp.server}/api/v1/namespaces/{namespace}/pods?watch=1&timeoutSeconds=1800"
        tls = ssl.create_default_context(cafile=str(cp.pki.ca_cert))
        tls.load_cert_chain(str(cp.pki.admin_cert), str(cp.pki.admin_key))
        self.client = httpx.Client(verify=tls, timeout=httpx.Timeout(10, read=None))
        self.bound: dict[str, float] = {}
        self.lock = threading.Lock()
        self.stopping = False
        self.error: Exception | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        rv = ""
        try:
            while not self.stopping:  # the API server may end a watch at any time: resume it
                url = self.url + (f"&resourceVersion={rv}" if rv else "")
                with self.client.stream("GET", url) as resp:
                    if resp.status_code != 200:
                        resp.read()
                        raise RuntimeError(f"watch {url}: HTTP {resp.status_code}: {resp.text}")
                    for line in resp.iter_lines():
                        if self.stopping:
                            return
                        if not line:
                            continue
                        event = orjson.loads(line)
                        obj = event.get("object") or {}
                        if event.get("type") == "ERROR":
                            if obj.get("code") == 410:  # too old: start again from the current state
                                rv = ""
                                break
                            raise RuntimeError(f"watch error: {obj}")
                        rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                        node = (obj.get("spec") or {}).get("nodeName")
                        if node:
                            name = obj["metadata"]["name"]
                            with self.lock:
                                self.bound.setdefault(name, time.monotonic())
        except Exception as exc:
            if not self.stopping:
                self.error = exc
                log(f"the watch failed: {exc!r}")

    def count(self) -> int:
        with self.lock:
            return len(self.bound)

    def stop(self) -> None:
        self.stopping = True
        self.client.close()


Buckets = dict[float, float]
"""A histogram's cumulative counts by upper bound (``float("inf")`` included)."""


def scraped_histogram(text: str, name: str, **labels: str) -> Buckets:
    """The histogram ``name`` of a Prometheus text page, its series whose labels include ``labels``
    summed (e.g. every ``status`` of one extension point): cumulative count by upper bound."""
    out: Buckets = {}
    for family in text_string_to_metric_families(text):
        if family.name != name:
            continue
        for sample in family.samples:
            if sample.name == name + "_bucket" and all(sample.labels.get(k) == v for k, v in labels.items()):
                bound = float(sample.labels["le"])
                out[bound] = out.get(bound, 0.0) + sample.value
    return out


def scraped_sum(text: str, name: str, **labels: str) -> float:
    """The ``_sum`` of the histogram ``name`` of a Prometheus text page, over its series whose labels
    include ``labels``: the seconds observed, for a mean that no bucket rounds."""
    total = 0.0
    for family in text_string_to_metric_families(text):
        if family.name == name:
            total += sum(sample.value for sample in family.samples
                         if sample.name == name + "_sum" and all(sample.labels.get(k) == v
                                                                 for k, v in labels.items()))
    return total


def scheduler_means_ms(text: str) -> dict[str, float | None]:
    """kube-scheduler's own mean time a pod, in ms, from one scrape of a scheduler started for the
    row: ``filter`` (its Filter extension point: the in-tree filters of the nodes it tried, with
    the pods nominated there added to each) and ``algorithm`` (the scheduling algorithm: filters,
    the extenders' calls, scoring)."""
    sums: dict[str, list[float]] = {"filter": [0.0, 0.0], "algorithm": [0.0, 0.0]}
    for family in text_string_to_metric_families(text):
        if family.name == "scheduler_framework_extension_point_duration_seconds":
            key = "filter"
        elif family.name == "scheduler_scheduling_algorithm_duration_seconds":
            key = "algorithm"
        else:
            continue
        for sample in family.samples:
            if key == "filter" and sample.labels.get("extension_point") != "Filter":
                continue
            if sample.name.endswith("_sum"):
                sums[key][0] += sample.value
            elif sample.name.endswith("_count"):
                sums[key][1] += sample.value
    return {key: round(total / count * 1000, 3) if count else None for key, (total, count) in sums.items()}


def histogram_between(before: Buckets, after: Buckets) -> Buckets:
    """What a histogram counted between two scrapes."""
    return {bound: count - before.get(bound, 0.0) for bound, count in after.items()}


def quantile_ms(buckets: Buckets, q: float) -> float | None:
    """The ``q`` quantile in ms, interpolated linearly inside its bucket as Prometheus's
    ``histogram_quantile`` does (so no finer than the buckets); None when nothing was counted, and
    ``inf`` when the quantile falls in the ``+Inf`` bucket (above the highest finite bound)."""
    bounds = sorted(buckets)
    total = buckets.get(float("inf"), 0.0)
    if total <= 0:
        return None
    rank, lower, below = q * total, 0.0, 0.0
    for bound in bounds:
        count = buckets[bound]
        if count >= rank:
            if bound == float("inf"):
                return float("inf")
            inside = count - below
            return (lower + (bound - lower) * ((rank - below) / inside if inside else 1.0)) * 1000
        lower, below = bound, count
    return lower * 1000


def within_share(buckets: Buckets, seconds: float) -> float | None:
    """The share of the histogram's observations at most ``seconds`` (a bucket bound)."""
    total = buckets.get(float("inf"), 0.0)
    return buckets[seconds] / total if total > 0 and seconds in buckets else None


def latency_summary(buckets: Buckets, seconds: float | None = None) -> dict[str, Any]:
    """count, p50 and p99 (ms, interpolated in the buckets; a quantile above the highest finite
    bound is given as ``">bound"``), the share within the bind target, and with ``seconds`` (the
    observations' sum) the mean, exact, and the observations above 0.5 ms (``slow``: for berth's
    ``connect`` step, the binds that opened a connection)."""
    top = max((b for b in buckets if b != float("inf")), default=0.0) * 1000

    def shown(ms: float | None) -> float | str | None:
        return None if ms is None else f">{top:g}" if ms == float("inf") else round(ms, 1)

    share = within_share(buckets, BIND_TARGET_SECONDS)
    count = buckets.get(float("inf"), 0.0)
    summary = {"count": int(count), "p50_ms": shown(quantile_ms(buckets, 0.5)),
               "p99_ms": shown(quantile_ms(buckets, 0.99)), "within_25ms": None if share is None else round(share, 4)}
    if seconds is not None and count > 0:
        summary["mean_ms"] = round(seconds / count * 1000, 1)
        if 0.0005 in buckets:
            summary["slow"] = int(count - buckets[0.0005])
    return summary


APISERVER_BINDING = ("apiserver_request_duration_seconds",
                     {"verb": "POST", "resource": "pods", "subresource": "binding"})
"""The API server's own time for a Binding (request read to reply written), whoever creates it:
buckets 5, 25, 50, 100, 200 ms ... (k8s.io/apiserver's endpoints/metrics)."""
SCHEDULER_BIND = ("scheduler_framework_extension_point_duration_seconds", {"extension_point": "Bind"})
"""kube-scheduler's time in its Bind plugins (RunBindPlugins: DefaultBinder's Binding call), every
pod, buckets 0.1 ms x 2^k up to 204.8 ms; not observed when an extender binds (extendersBinding
is not timed), so berth's rows have none."""
BERTH_BIND = ("berth_extender_request_seconds", {"verb": "bind"})
BERTH_BINDING_CALL = (API_CALLS, {"call": "binding"})
BERTH_BIND_STEPS = tuple((f"berth_{step}", ("berth_bind_step_seconds", {"step": step}))
                         for step in ("pod", "lock_wait", "recheck", "connection_wait", "connect", "answer"))
"""The parts of berth's bind that are berth's own (extender/binding.py); the rest of a bind is its
Binding call (BERTH_BINDING_CALL), the event loop's turns between them, and reading the request."""
BERTH_LOOP_LAG = ("berth_event_loop_lag_seconds", {})
"""How late berth's event loop ran a sampled wake-up: what a ready reply waits for the loop."""


class Scrapes:
    """The /metrics pages of the API server, kube-scheduler and berth, read with the admin's client
    certificate (the API server, kube-scheduler) or plainly (berth)."""

    def __init__(self, cp: ControlPlane) -> None:
        assert cp.pki is not None
        self.server = cp.server
        self.apiserver_tls = ssl.create_default_context(cafile=str(cp.pki.ca_cert))
        self.apiserver_tls.load_cert_chain(str(cp.pki.admin_cert), str(cp.pki.admin_key))
        # kube-scheduler's serving certificate is self-signed: not verified (127.0.0.1 only)
        self.scheduler_tls = ssl.create_default_context()
        self.scheduler_tls.check_hostname = False
        self.scheduler_tls.verify_mode = ssl.CERT_NONE
        self.scheduler_tls.load_cert_chain(str(cp.pki.admin_cert), str(cp.pki.admin_key))

    def apiserver(self) -> str:
        return httpx.get(self.server + "/metrics", verify=self.apiserver_tls, timeout=30).text

    def scheduler(self, port: int) -> str:
        return httpx.get(f"https://127.0.0.1:{port}/metrics", verify=self.scheduler_tls, timeout=30).text

    def cpu_profiles(self, scheduler_port: int, seconds: float, into: Path, label: str) -> threading.Thread:
        """Go CPU profiles of the API server and kube-scheduler over the next ``seconds``, written as
        ``<label>.<component>.pprof`` (read with ``go tool pprof``): where their time goes while a
        row binds, one row's profile set against another's (``-diff_base``)."""
        sources = (("apiserver", self.server, self.apiserver_tls),
                   ("scheduler", f"https://127.0.0.1:{scheduler_port}", self.scheduler_tls))

        def one(component: str, base: str, tls: ssl.SSLContext) -> None:
            url = f"{base}/debug/pprof/profile?seconds={max(1, round(seconds))}"
            try:
                got = httpx.get(url, verify=tls, timeout=seconds + 30)
                got.raise_for_status()
                (into / f"{label}.{component}.pprof").write_bytes(got.content)
            except httpx.HTTPError as err:  # a profile is a diagnosis: the row's figures stand without it
                log(f"{label}: no {component} CPU profile: {err}")

        def both() -> None:
            threads = [threading.Thread(target=one, args=source, daemon=True) for source in sources]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()

        into.mkdir(parents=True, exist_ok=True)
        runner = threading.Thread(target=both, daemon=True)
        runner.start()
        return runner


def make_nodes(api: Any, count: int) -> list[str]:
    names = [f"bench-node-{i:04d}" for i in range(count)]

    def one(i: int) -> None:
        name = names[i]
        create_node(api, NodeSpec(name, cpu="32", memory="128Gi", pods=110,
                                  labels={"topology.kubernetes.io/zone": f"zone-{i % 3}", "bench.berth.dev/node": "1"}))
        renew_node_lease(api, name, duration_seconds=3600)

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(one, range(count)))
    return names


def create_pods(api: Any, namespace: str, count: int, scheduler: str) -> None:
    core = k8s.CoreV1Api(api)
    bodies = [simple_pod(f"p-{i:05d}", cpu="100m", memory="128Mi", labels={"app": "bench"},
                         scheduler_name=scheduler) for i in range(count)]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda b: core.create_namespaced_pod(namespace, b), bodies))


CREATORS = 64
"""Pod creations in flight at most while pacing: a loaded API server takes a few hundred ms a
creation, and the pace must not wait for it."""


def create_pods_paced(cp: ControlPlane, namespace: str, count: int, scheduler: str, rate: float) -> float:
    """Create the pods one every ``1 / rate`` seconds (each on time, whatever the previous one's
    reply took); returns the rate they were created at. The bodies are encoded beforehand and
    posted raw on kept-alive connections: the kubernetes client's models would cost this process
    more CPU a pod than the rates measured here leave it on a small machine."""
    assert cp.pki is not None
    tls = ssl.create_default_context(cafile=str(cp.pki.ca_cert))
    tls.load_cert_chain(str(cp.pki.admin_cert), str(cp.pki.admin_key))
    url = f"{cp.server}/api/v1/namespaces/{namespace}/pods"
    bodies = [orjson.dumps(simple_pod(f"p-{i:05d}", cpu="100m", memory="128Mi", labels={"app": "bench"},
                                      scheduler_name=scheduler)) for i in range(count)]
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    limits = httpx.Limits(max_connections=CREATORS, max_keepalive_connections=CREATORS)
    with httpx.Client(verify=tls, timeout=30, limits=limits) as client, ThreadPoolExecutor(CREATORS) as pool:

        def post(body: bytes) -> None:
            resp = client.post(url, content=body, headers=headers)
            if resp.status_code != 201:
                raise RuntimeError(f"creating a pod: HTTP {resp.status_code}: {resp.text[:300]}")

        started = time.monotonic()
        futures = []
        for i, body in enumerate(bodies):
            wait = started + i / rate - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            futures.append(pool.submit(post, body))
        for future in futures:
            future.result()
        spent = time.monotonic() - started
    return (count - 1) / spent if spent > 0 else float("inf")


def run_one(cp: ControlPlane, api: Any, label: str, config: dict[str, Any], pods: int,
            extender: Extender | None, strategy: str | None, timeout: float,
            spec: dict[str, Any] | None = None, pace: float | None = None,
            metrics_dir: Path | None = None, cpu_profile: tuple[Path, float] | None = None) -> dict[str, Any]:
    """One row: ``pods`` pods bound by a kube-scheduler of ``config``. Without ``pace`` the pods
    exist before the scheduler starts (it binds as fast as it can); with it, the scheduler runs
    first and the pods are created ``pace`` a second, so that it binds at that rate."""
    core = k8s.CoreV1Api(api)
    namespace = f"bench-{label}-{uuid.uuid4().hex[:4]}"
    create_namespace(api, namespace)
    sched_name = f"bench-{label}"
    config = {**config, "profiles": [{**p, "schedulerName": sched_name} for p in config.get("profiles") or [{}]]}
    if extender is not None and strategy:
        policy = policy_manifest("bench", {"app": "bench"}, strategy=strategy, **(spec or {}))
        cp.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(policy))
        wait_for(lambda: extender.get("/api/v1/nodes/allocations")["policies"],
                 lambda got: f"{namespace}/bench" in got, timeout=60, what="the policy in berth's view")
    verbs_before = server_histogram(extender.url) if extender is not None else {}
    nominations_before = nominations(extender.url) if extender is not None else {}
    calls_before = server_histogram(extender.url, API_CALLS, "call") if extender is not None else {}
    cpu_before = process_cpu_seconds(extender_pid(extender)) if extender is not None else 0.0
    scrapes = Scrapes(cp)
    watch = BindWatch(cp, namespace)  # opened before the pods exist: it sees every change
    created_rate = None
    if pace is None:
        started = time.monotonic()
        create_pods(api, namespace, pods, sched_name)
        log(f"{label}: {pods} pods created in {time.monotonic() - started:.1f}s")
        if extender is not None:
            wait_for(lambda: extender.view_count("pending"), lambda n: n >= pods, timeout=120,
                     what="berth to see every pod pending")
        time.sleep(0.5)
    cpu_created = process_cpu_seconds(extender_pid(extender)) if extender is not None else 0.0
    apiserver_before = scrapes.apiserver()
    berth_before = httpx.get(extender.url + "/metrics", timeout=10).text if extender is not None else ""
    scheduler_before = ""  # a new kube-scheduler: its histograms start empty
    t_start = time.monotonic()
    sched = cp.start_scheduler(config, name=f"kube-scheduler-{label}", verbosity=1)
    profiling = (scrapes.cpu_profiles(sched.secure_port, cpu_profile[1], cpu_profile[0], label)
                 if cpu_profile else None)
    try:
        if pace is not None:
            created_rate = create_pods_paced(cp, namespace, pods, sched_name, pace)
            log(f"{label}: {pods} pods created at {created_rate:.1f}/s (paced at {pace:.1f}/s)")
        wait_for(watch.count, lambda n: n >= pods or watch.error is not None, timeout=timeout, interval=0.2,
                 what=f"{pods} pods bound by {label}", describe=lambda n: f"{n} bound")
        apiserver_after = scrapes.apiserver()
        scheduler_after = scrapes.scheduler(sched.secure_port)
        berth_after = httpx.get(extender.url + "/metrics", timeout=10).text if extender is not None else ""
        if profiling is not None:
            profiling.join()
    finally:
        sched.stop()
        watch.stop()
    if metrics_dir is not None:  # every figure of the row, for what the summary does not print
        metrics_dir.mkdir(parents=True, exist_ok=True)
        for component, text in (("apiserver-before", apiserver_before), ("apiserver-after", apiserver_after),
                                ("scheduler-after", scheduler_after), ("berth-before", berth_before),
                                ("berth-after", berth_after)):
            if text:
                (metrics_dir / f"{label}.{component}.prom").write_text(text)
    # Each bind's latency, and the API server's own time for the same Bindings, over this row only.
    latency: dict[str, Any] = {}
    for key, (name, labels), before, after in (
            ("apiserver_binding", APISERVER_BINDING, apiserver_before, apiserver_after),
            ("scheduler_bind", SCHEDULER_BIND, scheduler_before, scheduler_after),
            ("berth_bind", BERTH_BIND, berth_before, berth_after),
            ("berth_binding_call", BERTH_BINDING_CALL, berth_before, berth_after),
            *((key, metric, berth_before, berth_after) for key, metric in BERTH_BIND_STEPS),
            ("berth_loop_lag", BERTH_LOOP_LAG, berth_before, berth_after)):
        buckets = histogram_between(scraped_histogram(before, name, **labels), scraped_histogram(after, name, **labels))
        summary = latency_summary(buckets, scraped_sum(after, name, **labels) - scraped_sum(before, name, **labels))
        if summary["count"]:
            latency[key] = summary
            log(f"{label}: {key}: {summary}")
    if watch.error is not None:
        raise RuntimeError(f"{label}: the watch failed") from watch.error
    times = sorted(watch.bound.values())
    first, last = times[0], times[-1]
    rate = (len(times) - 1) / (last - first) if last > first else float("inf")
    if extender is not None:  # where the extender's time went while the scheduler bound the pods
        verbs_after = server_histogram(extender.url)
        for verb, after in sorted(verbs_after.items()):
            before = verbs_before.get(verb, {})
            calls = after.get("count", 0.0) - before.get("count", 0.0)
            spent = after.get("sum", 0.0) - before.get("sum", 0.0)
            if calls:  # p99 as the histogram's buckets bound it (the bind target is read there)
                log(f"{label}: extender {verb}: {calls:.0f} calls, {server_side(verbs_before, verbs_after, verb)}, "
                    f"{spent:.1f} s in all")
        made = {k: v - nominations_before.get(k, 0.0) for k, v in nominations(extender.url).items()}
        if made:
            hits = made.get("hit", 0.0)
            log(f"{label}: nominations " + ", ".join(f"{k} {v:.0f}" for k, v in sorted(made.items()))
                + f"; hit rate {hits / len(times):.1%} of the pods bound")
        calls_after = server_histogram(extender.url, API_CALLS, "call")
        for call in sorted(calls_after):  # the part of bind the API server took
            log(f"{label}: extender bind's API call {call}: {server_side(calls_before, calls_after, call)}")
        # the pods' creation (watch events, the previous row's deletions) apart from the scheduling
        log(f"{label}: extender process CPU {cpu_created - cpu_before:.1f} s while the pods were created, "
            f"{process_cpu_seconds(extender_pid(extender)) - cpu_created:.1f} s while they were bound "
            f"(bind span {last - first:.1f} s)")
    nodes_used = len({p["spec"]["nodeName"] for p in _pods(cp, namespace)})
    delete_pods(core, namespace)
    hit_rate = None
    if extender is not None:
        got = nominations(extender.url)
        if got:
            hit_rate = round((got.get("hit", 0.0) - nominations_before.get("hit", 0.0)) / len(times), 3)
    result = {"config": label, "pods": len(times), "pods_per_second": round(rate, 1), "hit_rate": hit_rate,
              "bind_span_seconds": round(last - first, 2), "first_bind_after_start_seconds": round(first - t_start, 2),
              "nodes_used": nodes_used, "paced": None if pace is None else round(pace, 1),
              "created_per_second": None if created_rate is None else round(created_rate, 1), "latency": latency,
              "scheduler_ms": scheduler_means_ms(scheduler_after)}
    log(json.dumps(result))
    return result


def cpu_profile_option(text: str) -> tuple[Path, float]:
    """``--cpu-profile DIR:SECONDS`` as the folder and the seconds; ValueError names what is wrong."""
    folder, _, seconds = text.rpartition(":")
    try:
        length = float(seconds)
    except ValueError:
        length = 0.0
    if not folder or not 1 <= length <= 600:
        raise ValueError(f"{text!r} is not DIR:SECONDS with SECONDS from 1 to 600")
    return Path(folder), length


def delete_pods(core: Any, namespace: str, attempts: int = 3) -> None:
    """Delete the row's pods, not reading back the deleted objects (megabytes at thousands of pods);
    a connection that breaks on the way is retried, so that one glitch does not end the run."""
    for attempt in range(1, attempts + 1):
        try:
            resp = core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0, _preload_content=False)
            resp.drain_conn()  # read and dropped: the connection goes back to the pool clean
            resp.release_conn()
            return
        except Exception as exc:  # the next attempt deletes what is left
            if attempt == attempts:
                raise
            log(f"deleting the pods of {namespace} failed ({exc!r}); again")
            time.sleep(2)


def extender_pid(extender: Extender) -> int:
    assert extender.process is not None and extender.process.pid is not None
    return extender.process.pid


def _pods(cp: ControlPlane, namespace: str) -> list[dict[str, Any]]:
    out = cp.kubectl("get", "pods", "-n", namespace, "-o", "json", timeout=120)
    items: list[dict[str, Any]] = json.loads(out.stdout)["items"]
    return items


def start_noop(cp: ControlPlane) -> tuple[ManagedProcess, str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = ManagedProcess("noop-extender", [sys.executable, str(REPO_ROOT / "bench" / "noop_extender.py"),
                                            "--port", str(port)],
                          cp.workdir / "logs" / "noop-extender.log", cwd=cp.workdir).start()

    def up() -> bool:
        try:
            return httpx.get(url + "/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    proc.wait_until(up, 60, "ready (/healthz)", interval=0.25)
    return proc, url


def judge_vs_noop(results: list[dict[str, Any]], references: set[str]) -> None:
    """Set each row's ratio to the no-op extender (``vs_noop``) and the noop row it was taken
    against (``vs_noop_row``). A row is judged against the last of ``references`` (the noop rows
    ``--noop-each`` runs again) run before it: the control plane slows as a run writes to it, so a
    row judged against a noop row taken at the start would be judged against a fresher control
    plane than its own. The rows before any of them, and the reference rows themselves (their
    ratio then shows how far the control plane drifted), are judged against the first ``noop``
    row, as every row is without ``--noop-each``."""
    first = next((r for r in results if r["config"] == "noop"), None)
    latest = first
    for r in results:
        reference = first if r["config"] in references else latest
        floor = reference["pods_per_second"] if reference else None
        r["vs_noop"] = round(r["pods_per_second"] / floor, 3) if floor else None
        r["vs_noop_row"] = reference["config"] if floor and reference else None
        if r["config"] in references:
            latest = r


def reference_label(label: str) -> str:
    """The label of the noop row ``--noop-each`` runs before a berth row (``noop-auto-nominate``
    before ``berth-auto-nominate``)."""
    return "noop-" + label.removeprefix("berth-")


ROWS = ("default", "default-100", "noop", "berth-none", "berth", "profile", "nominate")
"""The kinds of row ``--rows`` chooses from (module docstring: what each measures)."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="rows: " + ", ".join(ROWS) + " (see the module docstring)")
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--strategies", default="Auto", help="comma-separated PlacementPolicy strategies: a "
                        "berth-<strategy> and a berth-<strategy>-profile row each (default Auto)")
    parser.add_argument("--rows", default=",".join(ROWS),
                        help="comma-separated kinds of row to run, in this order: " + ", ".join(ROWS)
                        + " (default: all; the ratios need default and noop)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for one configuration")
    parser.add_argument("--no-events", action="store_true",
                        help="berth writes no BerthPlaced Event at bind (BERTH_RECORD_EVENTS=false): what they cost")
    parser.add_argument("--pace", default=None, metavar="RATE|noop",
                        help="create each row's pods at RATE a second with its scheduler already running, so that "
                        "it binds at that rate (its bind latency at that rate); 'noop': at the rate the noop row of "
                        "this run measured (the rows before it, and the noop row itself, unpaced). Default: the pods "
                        "exist before the scheduler starts, and each row binds as fast as it can")
    parser.add_argument("--metrics-dir", type=Path, default=None,
                        help="write each row's /metrics pages (the API server's before and after, kube-scheduler's "
                        "and berth's after) to this folder as <row>.<component>.prom")
    parser.add_argument("--cpu-profile", default=None, metavar="DIR:SECONDS",
                        help="take a Go CPU profile of the API server and of kube-scheduler over the first SECONDS "
                        "of each row's binding, written to DIR as <row>.<apiserver|scheduler>.pprof (compare two "
                        "rows with go tool pprof -top -diff_base); keep SECONDS below the rows' bind span")
    parser.add_argument("--versus", default=None, metavar="NAME=VALUE[,NAME=VALUE]",
                        help="run each profile and nominate row twice in turn, as is and with these extender "
                        "settings (rows <row>-vs), each with an extender started for it: a change compared "
                        "within one run")
    parser.add_argument("--noop-each", action="store_true",
                        help="run the noop row again before each strategy's berth rows (noop-<row>, e.g. "
                        "noop-auto-nominate), each berth row's 'vs noop' taken against the one run just before it "
                        "(printed in 'vs noop of'); default: every row against the first noop row")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    unknown = sorted(set(rows) - set(ROWS))
    if unknown:
        parser.error(f"--rows: unknown {', '.join(unknown)}; choose from {', '.join(ROWS)}")
    pace: float | None = None
    if args.pace is not None and args.pace != "noop":
        try:
            pace = float(args.pace)
        except ValueError:
            pace = -1.0
        if not pace > 0 or pace == float("inf"):
            parser.error(f"--pace: {args.pace!r} is neither a rate of pods a second (a number > 0) nor 'noop'")
    versus: dict[str, str] = {}
    for item in (args.versus or "").split(","):
        name, sep, value = item.strip().partition("=")
        if item.strip() and (not sep or not name.startswith("BERTH_")):
            parser.error(f"--versus: {item.strip()!r} is not NAME=VALUE with a BERTH_ setting's NAME")
        if sep:
            versus[name] = value
    try:
        cpu_profile = None if args.cpu_profile is None else cpu_profile_option(args.cpu_profile)
    except ValueError as err:
        parser.error(f"--cpu-profile: {err}")
    if args.pace == "noop" and "noop" not in rows:
        parser.error("--pace noop: paces at the noop row's rate, and --rows has no noop row")
    reference_before = machine_reference_ms()
    run_started = time.monotonic()
    strategies = [s.strip() for s in args.strategies.split(",") if s.strip() and s.strip().lower() != "none"]
    # Fill and Each place rounds of ``count`` pods a node: enough for every pod of the row.
    per_node = {"count": -(-args.pods // args.nodes)}
    specs = {"Fill": per_node, "Each": per_node}
    results: list[dict[str, Any]] = []

    with ControlPlane.start() as cp:
        api = cp.api_client()
        cp.apply_crds(CRD)
        started = time.monotonic()
        make_nodes(api, args.nodes)
        log(f"{args.nodes} nodes created in {time.monotonic() - started:.1f}s")
        # The nodes' Leases are written once: judge liveness over an hour so that they stay fresh.
        env = {"BERTH_LIVENESS_THRESHOLD_SECONDS": "3600", "BERTH_RECORD_EVENTS": "false" if args.no_events else "true"}
        plain = {"clientConnection": dict(CLIENT)}

        def row(*given: Any) -> dict[str, Any]:  # one row, at the pace in force when it starts
            return run_one(*given, pace=pace, metrics_dir=args.metrics_dir, cpu_profile=cpu_profile)

        references: set[str] = set()

        def noop_again(before: str) -> None:  # --noop-each: the noop row again, unpaced, before ``before``
            if not args.noop_each:
                return
            label = reference_label(before)
            noop, noop_url = start_noop(cp)
            try:
                noop_config = {**noop_scheduler_config(noop_url, "bench-noop"), **plain}
                results.append(run_one(cp, api, label, noop_config, args.pods, None, None, args.timeout,
                                       metrics_dir=args.metrics_dir, cpu_profile=cpu_profile))
                references.add(label)
            finally:
                noop.stop(grace=5)

        # with --noop-each, an extender is started for each strategy's rows, after its noop row (so
        # that no berth extender runs during a noop row, as none runs during the first)
        def grouped(items: list[Any]) -> list[list[Any]]:
            return [[item] for item in items] if args.noop_each else [items] if items else []

        try:
            if "default" in rows:
                results.append(row(cp, api, "default", plain, args.pods, None, None, args.timeout))
            if "default-100" in rows:
                results.append(row(cp, api, "default-100", {**plain, "percentageOfNodesToScore": 100}, args.pods,
                                       None, None, args.timeout))
            if "noop" in rows:
                noop, noop_url = start_noop(cp)
                try:
                    noop_config = {**noop_scheduler_config(noop_url, "bench-noop"), **plain}
                    results.append(row(cp, api, "noop", noop_config, args.pods, None, None, args.timeout))
                    if args.pace == "noop":  # the rows from here bind at the no-op extender's rate
                        pace = results[-1]["pods_per_second"]
                        # kube-scheduler's own Bindings with the pods created as the later rows' are:
                        # the API server's time for a Binding at that rate and that load
                        results.append(row(cp, api, "noop-paced", noop_config, args.pods, None, None, args.timeout))
                finally:
                    noop.stop(grace=5)
            berth_rows = ([None] if "berth-none" in rows else []) + (strategies if "berth" in rows else [])
            for group in grouped(berth_rows):  # berth's full profile
                noop_again(f"berth-{(group[0] or 'none').lower()}")
                with running_extender(cp, {**env, **PROFILE_EXTENDER_ENV[FULL_PROFILE]}, "berth-extender",
                                      args.nodes) as extender:
                    berth = {**berth_scheduler_config(extender.url, "bench-berth"), **plain}
                    for strategy in group:
                        label = f"berth-{(strategy or 'none').lower()}"
                        results.append(row(cp, api, label, berth, args.pods, extender, strategy, args.timeout,
                                           specs.get(strategy or "")))
            profiled = [(kind, strategy) for kind in ("profile", "nominate") if kind in rows for strategy in strategies]
            if versus and profiled:
                # each profile row twice in turn, as is and with the --versus settings, each with an
                # extender of its own started for it (the same start for both)
                for kind, strategy in profiled:
                    noop_again(f"berth-{strategy.lower()}-{kind}")  # one noop row for the pair
                    for suffix, extra in (("", {}), ("-vs", versus)):
                        label = f"berth-{strategy.lower()}-{kind}{suffix}"
                        profile = THROUGHPUT_PROFILE if kind == "profile" else NOMINATE_PROFILE
                        more = {"BERTH_NOMINATE_SCHEDULERS": f"bench-{label}"} if kind == "nominate" else {}
                        with running_extender(cp, {**env, **PROFILE_EXTENDER_ENV[profile], **more, **extra},
                                              f"berth-extender-{kind}{suffix}", args.nodes) as extender:
                            berth = {**berth_scheduler_config(extender.url, f"bench-{kind}{suffix}"), **plain}
                            results.append(row(cp, api, label, berth, args.pods, extender, strategy, args.timeout,
                                               specs.get(strategy)))
            else:
                for group in grouped(strategies) if "profile" in rows else []:
                    # berth's recommended profile: the same kube-scheduler configuration, and the
                    # extender settings the chart gives berth with it (a second extender process)
                    noop_again(f"berth-{group[0].lower()}-profile")
                    with running_extender(cp, {**env, **PROFILE_EXTENDER_ENV[THROUGHPUT_PROFILE]},
                                          "berth-extender-profile", args.nodes) as extender:
                        berth = {**berth_scheduler_config(extender.url, "bench-profile"), **plain}
                        for strategy in group:
                            results.append(row(cp, api, f"berth-{strategy.lower()}-profile", berth, args.pods,
                                               extender, strategy, args.timeout, specs.get(strategy)))
                labels = {s: f"berth-{s.lower()}-nominate" for s in strategies}
                for group in grouped(strategies) if "nominate" in rows else []:
                    # the nominate profile: throughput, and berth nominates pending pods' nodes for the
                    # schedulers of these rows
                    noop_again(labels[group[0]])
                    schedulers = ",".join(f"bench-{labels[s]}" for s in group)
                    with running_extender(cp, {**env, **PROFILE_EXTENDER_ENV[NOMINATE_PROFILE],
                                               "BERTH_NOMINATE_SCHEDULERS": schedulers},
                                          "berth-extender-nominate", args.nodes) as extender:
                        berth = {**berth_scheduler_config(extender.url, "bench-nominate"), **plain}
                        for strategy in group:
                            results.append(row(cp, api, labels[strategy], berth, args.pods, extender, strategy,
                                               args.timeout, specs.get(strategy)))
        finally:
            api.close()

    by = {r["config"]: r for r in results}
    alone = by.get("default", {}).get("pods_per_second")
    for r in results:
        r["vs_default"] = round(r["pods_per_second"] / alone, 3) if alone else None
    judge_vs_noop(results, references)
    elapsed = time.monotonic() - run_started
    if args.json:
        print(json.dumps({"machine": machine_reference(reference_before), "nodes": args.nodes, "pods": args.pods,
                          "strategies": strategies, "rows": rows, "events": not args.no_events, "pace": args.pace,
                          "noop_each": args.noop_each,
                          "versus": versus,
                          "profile": profile_summary(), "elapsed_seconds": round(elapsed, 1),
                          "results": results}, indent=1))
        return 0
    print(f"kube-scheduler throughput, {args.pods} pods on {args.nodes} nodes, client qps/burst 1000/1000 "
          f"({'no BerthPlaced Events' if args.no_events else 'a BerthPlaced Event per berth-governed pod'}); "
          f"whole run {elapsed / 60:.1f} min")
    print(machine_reference(reference_before))
    print(f"profile rows: {profile_summary()}")
    if versus:
        print("-vs rows: the row above it, the extender with " + ", ".join(f"{k}={v}" for k, v in versus.items()))
    if args.noop_each:
        print("--noop-each: a noop-<row> row ran just before each strategy's berth rows; each row's 'vs noop' "
              "is against the noop row named in 'vs noop of' (the noop-<row> rows' own: against the first)")
    of = f" {'vs noop of':<24}" if args.noop_each else ""
    print(f"{'config':<32} {'pods/s':>8} {'vs default':>11} {'vs noop':>8}{of} {'bind span s':>12} "
          f"{'first bind after s':>19} {'nodes used':>11} {'hit rate':>9} {'ks filter ms':>13} {'ks algorithm ms':>16}")
    for r in results:
        vs_default = "-" if r["vs_default"] is None else r["vs_default"]
        vs_noop = "-" if r["vs_noop"] is None else r["vs_noop"]
        hit_rate = "-" if r["hit_rate"] is None else r["hit_rate"]
        ks = {k: "-" if v is None else v for k, v in r["scheduler_ms"].items()}
        of = f" {r['vs_noop_row'] or '-':<24}" if args.noop_each else ""
        print(f"{r['config']:<32} {r['pods_per_second']:>8} {vs_default:>11} {vs_noop:>8}{of} "
              f"{r['bind_span_seconds']:>12} {r['first_bind_after_start_seconds']:>19} {r['nodes_used']:>11} "
              f"{hit_rate:>9} {ks['filter']:>13} {ks['algorithm']:>16}")
    print("ks filter / ks algorithm: kube-scheduler's own mean time a pod in its Filter extension point (the "
          "in-tree filters, each nominated pod of a node copied into it) and in its scheduling algorithm")
    print(latency_table(results))
    return 0


LATENCY_COLUMNS = (("berth_bind", "berth bind"), ("berth_binding_call", "berth's Binding call"),
                   ("apiserver_binding", "API server Binding"), ("scheduler_bind", "kube-scheduler Bind"))


def latency_table(results: list[dict[str, Any]]) -> str:
    """Each row's bind latency, p50 / p99 in ms and the share within 25 ms: berth's bind verb (as
    kube-scheduler waits for it), berth's Binding call within it, the API server's own time for the
    row's Bindings, and kube-scheduler's Bind plugins (its own Binding, rows where it binds)."""
    lines = [f"bind latency, ms: p50 / p99 (share within {BIND_TARGET_SECONDS * 1000:g} ms), interpolated in each "
             "histogram's buckets (the API server's: 5, 25, 50, 100 ms ...)",
             f"{'config':<32} {'paced/created /s':>17} " + " ".join(f"{title:>26}" for _, title in LATENCY_COLUMNS)]
    for r in results:
        cells = []
        for key, _ in LATENCY_COLUMNS:
            got = r["latency"].get(key)
            if got is None:
                cells.append(f"{'-':>26}")
                continue
            share = "" if got["within_25ms"] is None else f" ({got['within_25ms']:.1%})"
            cells.append(f"{got['p50_ms']:>7} / {got['p99_ms']:>6}{share:>10}")
        paced = "-" if r["paced"] is None else f"{r['paced']}/{r['created_per_second']}"
        lines.append(f"{r['config']:<32} {paced:>17} " + " ".join(cells))
        steps = [(key.removeprefix("berth_"), r["latency"][key])
                 for key, _ in (*BERTH_BIND_STEPS, ("berth_loop_lag", None)) if key in r["latency"]]
        if steps:
            lines.append(f"{'':<32} berth's own steps of bind, p50 / p99 ms: "
                         + ", ".join(f"{step} {got['p50_ms']} / {got['p99_ms']}" for step, got in steps))
        bind, server, connect = (r["latency"].get(key) for key in ("berth_bind", "apiserver_binding", "berth_connect"))
        if bind and server and "mean_ms" in bind and "mean_ms" in server:
            lines.append(f"{'':<32} means, ms: berth bind {bind['mean_ms']}, API server Binding {server['mean_ms']}, "
                         f"berth adds {bind['mean_ms'] - server['mean_ms']:.1f}"
                         + (f"; binds that opened a connection: {connect['slow']}"
                            if connect and "slow" in connect else ""))
    return "\n".join(lines)


@contextlib.contextmanager
def running_extender(cp: ControlPlane, env: dict[str, str], name: str, nodes: int) -> Iterator[Extender]:
    """berth's extender with ``env``, once its view holds every node; stopped on the way out."""
    extender = Extender(cp, env=env, name=name)
    extender.start()
    try:
        wait_for(lambda: extender.view_count("nodes"), lambda n: n >= nodes, timeout=300,
                 what="berth to see every node")
        yield extender
    finally:
        extender.stop()


def profile_summary() -> str:
    """How the profile rows differ from the berth rows, in one line."""
    full, throughput = PROFILE_EXTENDER_ENV[FULL_PROFILE], PROFILE_EXTENDER_ENV[THROUGHPUT_PROFILE]
    changed = ", ".join(f"{k}={v}" for k, v in throughput.items() if full.get(k) != v)
    return (f"{THROUGHPUT_PROFILE}: the berth rows' kube-scheduler configuration (percentageOfNodesToScore 100, "
            f"default plugins), extender {changed}")


def machine_reference(before_ms: float) -> str:
    """bench_extender's machine reference (a fixed CPU workload) before and after the run, and the load."""
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"machine reference: {before_ms:.2f} ms before, {machine_reference_ms():.2f} ms after; "
            f"{os.cpu_count()} CPUs, load average {load}")


if __name__ == "__main__":
    sys.exit(main())
