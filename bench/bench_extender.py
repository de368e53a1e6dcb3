"""Benchmark of the extender: a real uvicorn (one worker) on 127.0.0.1, driven over HTTP.

Prints, for a synthetic cluster of N nodes with 30 pods each and a PlacementPolicy with a
topology spread constraint and two affinity rules:

- filter + prioritize latency for one pod, p50 / p99, at 500 and 5,000 nodes with
  ``nodeCacheCapable: true`` (node names), and at 500 nodes with ``false`` (full Node objects);
- the resident memory of the view at 5,000 nodes / 150,000 pods, and the time to build it
  from a full list (API-server-like pages of 1,000 objects decoded and applied).

Usage (from the repository root)::

    python bench/bench_extender.py                 # the full set (takes a few minutes)
    python bench/bench_extender.py --quick         # 500 nodes only
    python bench/bench_extender.py --nodes 2000 --requests 300   # node names only (add --full-nodes)

At 5,000 nodes it also measures a request carrying 500 of the names, as kube-scheduler's default
percentageOfNodesToScore sends. Each size ends with a *floor*: the same pair for a pod no policy
governs and no node names, i.e. what the HTTP round trips and bookkeeping cost on this machine,
and a *machine reference*: a fixed CPU workload timed before and after the size, so that figures
taken while a shared machine runs slower can be told apart.

The server runs in a child process (``--serve``), the HTTP client in this one. Only 127.0.0.1 is used.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
from prometheus_client.parser import text_string_to_metric_families

PODS_PER_NODE = 30
ZONES = 3
RACK_SIZE = 20
TENANTS = 20
WEB = {"app": "web"}


# -- the synthetic cluster ----------------------------------------------------------------------

def make_node(i: int, *, full: bool = False) -> dict[str, Any]:
    name = f"node-{i:05d}"
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
              "topology.kubernetes.io/zone": f"zone-{i % ZONES}", "topology.kubernetes.io/region": "region-1",
              "rack": f"rack-{i // RACK_SIZE:04d}", "type": "gpu" if i % 10 == 9 else "general",
              "node.kubernetes.io/instance-type": "m5.8xlarge"}
    alloc = {"cpu": "32", "memory": "128Gi", "ephemeral-storage": "500Gi", "pods": "110"}
    node: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": f"00000000-0000-4000-8000-{i:012d}", "resourceVersion": str(1000 + i),
                     "creationTimestamp": "2026-11-30T12:00:00Z", "labels": labels},
        "spec": {"podCIDR": f"10.{i // 250}.{i % 250}.0/24"},
        "status": {"capacity": dict(alloc), "allocatable": alloc,
                   "conditions": [{"type": t, "status": "False" if t != "Ready" else "True",
                                   "lastHeartbeatTime": "2026-11-30T12:00:00Z",
                                   "lastTransitionTime": "2026-11-30T12:00:00Z", "reason": r, "message": m}
                                  for t, r, m in (("MemoryPressure", "KubeletHasSufficientMemory", "ok"),
                                                  ("DiskPressure", "KubeletHasNoDiskPressure", "ok"),
                                                  ("PIDPressure", "KubeletHasSufficientPID", "ok"),
                                                  ("Ready", "KubeletReady", "kubelet is posting ready status"))],
                   "addresses": [{"type": "InternalIP", "address": f"10.0.{i // 250}.{i % 250}"},
                                 {"type": "Hostname", "address": name}],
                   "nodeInfo": {"kubeletVersion": "v1.36.2", "containerRuntimeVersion": "containerd://2.1.0",
                                "kernelVersion": "6.8.0", "osImage": "Ubuntu 24.04", "operatingSystem": "linux",
                                "architecture": "amd64", "machineID": f"{i:032x}", "systemUUID": f"{i:032x}",
                                "bootID": f"{i:032x}", "kubeProxyVersion": ""},
                   "images": [{"names": [f"registry.example/app-{k}:1.{k}"], "sizeBytes": 50_000_000 + k}
                              for k in range(8)]},
    }
    if full:  # what kube-scheduler sends with nodeCacheCapable: false (managedFields included)
        node["metadata"]["managedFields"] = [{"manager": "kubelet", "operation": "Update", "apiVersion": "v1",
                                              "time": "2026-11-30T12:00:00Z", "fieldsType": "FieldsV1",
                                              "fieldsV1": {"f:status": {"f:conditions": {
                                                  f"k:{{\"type\":\"{t}\"}}": {".": {}, "f:status": {}}
                                                  for t in ("Ready", "MemoryPressure", "DiskPressure")}}}}]
    return node


def make_pod(node_index: int, j: int) -> dict[str, Any]:
    node = f"node-{node_index:05d}"
    k = node_index * PODS_PER_NODE + j
    if j < 2:  # two pods of the benchmarked workload per node
        namespace, labels = "shop", {"app": "web", "pod-template-hash": "5d4f8b9c7"}
    elif j == 2 and node_index // RACK_SIZE in (0, 1):  # db replicas in the first two racks only
        namespace, labels = "shop", {"app": "db", "role": "db-replica"}
    else:
        namespace, labels = f"tenant-{k % TENANTS}", {"app": f"app-{k % 50}", "tier": "backend",
                                                       "pod-template-hash": f"{k % 997:x}"}
    cpu = ("100m", "250m", "500m")[k % 3]
    memory = ("128Mi", "256Mi", "512Mi")[k % 3]
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"{labels['app']}-{k:07d}", "namespace": namespace,
                     "uid": f"10000000-0000-4000-8000-{k:012d}", "resourceVersion": str(100000 + k),
                     "creationTimestamp": "2026-11-30T12:00:00Z", "labels": labels,
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                          "name": f"{labels['app']}-5d4f8b9c7", "uid": "r", "controller": True}]},
        "spec": {"nodeName": node, "schedulerName": "default-scheduler", "restartPolicy": "Always",
                 "serviceAccountName": "default", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
                 "containers": [{"name": "main", "image": f"registry.example/{labels['app']}:1.0",
                                 "resources": {"requests": {"cpu": cpu, "memory": memory},
                                               "limits": {"memory": memory}},
                                 "ports": [{"containerPort": 8080, "protocol": "TCP"}]}],
                 "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                                  "effect": "NoExecute", "tolerationSeconds": 300},
                                 {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                                  "effect": "NoExecute", "tolerationSeconds": 300}]},
        "status": {"phase": "Running", "qosClass": "Burstable", "podIP": f"10.244.{node_index % 250}.{j}",
                   "hostIP": f"10.0.{node_index // 250}.{node_index % 250}",
                   "startTime": "2026-11-30T12:00:00Z"},
    }


def make_policy() -> dict[str, Any]:
    return {"apiVersion": "berth.dev/v1alpha1", "kind": "PlacementPolicy",
            "metadata": {"name": "web", "namespace": "shop", "generation": 1},
            "spec": {"selector": {"matchLabels": WEB}, "strategy": "Spread",
                     "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                                    "whenUnsatisfiable": "DoNotSchedule",
                                                    "labelSelector": {"matchLabels": WEB}}],
                     "placementRules": [
                         {"resource": "Node", "operator": "HasNot", "labels": {"type": "gpu"}},
                         {"resource": "Pod", "operator": "HasNot", "labels": {"role": "db-replica"},
                          "within": "rack"}]}}


def list_pages(kind: str, nodes: int, page: int = 1000) -> Iterator[bytes]:
    """API-server-like list pages (JSON bytes), generated lazily."""
    if kind == "nodes":
        for start in range(0, nodes, page):
            items = [make_node(i) for i in range(start, min(nodes, start + page))]
            yield orjson.dumps({"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": items})
    else:
        total = nodes * PODS_PER_NODE
        for start in range(0, total, page):
            items = [make_pod(k // PODS_PER_NODE, k % PODS_PER_NODE) for k in range(start, min(total, start + page))]
            yield orjson.dumps({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items})


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


# -- the server (child process) -----------------------------------------------------------------

def serve(nodes: int, port: int) -> None:
    import uvicorn

    from berth.extender.app import create_app
    from berth.extender.heap import collector_paused, settle
    from berth.extender.limits import guarded_protocol
    from berth.extender.server import UVICORN_IO
    from berth.extender.settings import ExtenderSettings
    from berth.extender.store import ClusterStore

    gc.collect()
    baseline = rss_mib()
    store = ClusterStore(leases_tracked=False)
    store.replace("policies", [make_policy()])
    build = 0.0
    for kind in ("nodes", "pods"):
        generating = 0.0

        def items(pages: Iterator[bytes]) -> Iterator[dict[str, Any]]:
            nonlocal generating
            while True:
                t = time.perf_counter()
                raw = next(pages, None)  # producing the synthetic page is not part of the build
                generating += time.perf_counter() - t
                if raw is None:
                    return
                yield from orjson.loads(raw)["items"]

        t0 = time.perf_counter()
        with collector_paused():  # as the live view lists (berth.extender.heap)
            store.replace(kind, items(list_pages(kind, nodes)))
        build += time.perf_counter() - t0 - generating
    store.mark_listed("leases")
    settle()  # as the live view does once the first full list is in
    view_rss = rss_mib() - baseline
    print("VIEW " + json.dumps({"nodes": len(store.view.nodes), "pods": store.sizes()["pods"],
                                "rss_mib": round(view_rss, 1), "build_s": round(build, 2)}), flush=True)
    settings = ExtenderSettings(track_leases=False, tentative_ttl_seconds=2.0)
    app = create_app(store, settings)
    # the HTTP parser, protocol and event loop of `berth extender` (berth.extender.server)
    protocol = guarded_protocol(header_timeout=settings.header_timeout_seconds,
                                max_header_bytes=settings.max_header_bytes)
    uvicorn.run(app, host="127.0.0.1", port=port, workers=1, log_level="warning", access_log=False,
                **{**UVICORN_IO, "http": protocol})


# -- the client ---------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start_server(nodes: int) -> tuple[subprocess.Popen[str], str, dict[str, Any]]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, __file__, "--serve", str(nodes), "--port", str(port)],
                            stdout=subprocess.PIPE, text=True, env=os.environ.copy())
    assert proc.stdout is not None
    view: dict[str, Any] = {}
    for line in proc.stdout:
        if line.startswith("VIEW "):
            view = json.loads(line[5:])
            break
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/readyz", timeout=1).status_code == 200:
                return proc, url, view
        except httpx.HTTPError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("the benchmark server did not start")


def pending_pod(i: int) -> dict[str, Any]:
    return {"metadata": {"name": f"web-bench-{i}", "namespace": "shop", "uid": f"bench-{i:08d}",
                         "resourceVersion": "1", "labels": {"app": "web", "pod-template-hash": "5d4f8b9c7"}},
            "spec": {"schedulerName": "default-scheduler",
                     "containers": [{"name": "main", "image": "registry.example/web:1.0",
                                     "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}],
                     "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                                      "effect": "NoExecute", "tolerationSeconds": 300}]},
            "status": {"phase": "Pending"}}


class KeepAliveConnection:
    """A lean HTTP/1.1 client: one keep-alive connection with TCP_NODELAY (as Go's net package sets it for
    kube-scheduler); each request goes out in one write, and each reply is read whole (status line, headers,
    a Content-Length body). The standard library's http.client parses every reply's headers with the email
    package, which costs 0.1 to 0.5 ms a request here (the more, the busier the machine): the client's time,
    not the extender's."""

    def __init__(self, host: str, port: int, timeout: float = 60) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.host = f"{host}:{port}".encode()
        self.buffer = bytearray()

    def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        head = b"POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (
            path.encode(), self.host, len(body))
        sent = self.sock.sendmsg([head, body])  # one write, without copying the body
        if sent < len(head) + len(body):
            self.sock.sendall((head + body)[sent:])
        return self._reply()

    def _reply(self) -> tuple[int, bytes]:
        buffer = self.buffer
        while (end := buffer.find(b"\r\n\r\n")) < 0:
            self._receive()
        status_line, *lines = bytes(buffer[:end]).decode("latin-1").split("\r\n")
        del buffer[:end + 4]
        version, status = status_line.split(" ", 2)[:2]
        headers = {}
        for line in lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if not version.startswith("HTTP/1.") or "content-length" not in headers:
            raise ConnectionError(f"a reply this client cannot read: {status_line!r}, headers {headers}")
        length = int(headers["content-length"])
        while len(buffer) < length:
            self._receive()
        data = bytes(buffer[:length])
        del buffer[:length]
        if headers.get("connection", "").lower() == "close":
            raise ConnectionError("the server closed the keep-alive connection")
        return int(status), data

    def _receive(self) -> None:
        chunk = self.sock.recv(1 << 18)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        self.buffer += chunk

    def close(self) -> None:
        self.sock.close()


def measure(url: str, nodes: int, *, cache_capable: bool, requests: int, warmup: int = 20,
            every: int = 1) -> dict[str, float]:
    """``every``: send every n-th node name only (kube-scheduler's default percentageOfNodesToScore
    sends about a tenth of a 5,000-node cluster)."""
    names = [f"node-{i:05d}" for i in range(0, nodes, every)]
    full = [make_node(i, full=True) for i in range(nodes)] if not cache_capable else None
    rng = random.Random(7)
    both, filt, prio = [], [], []
    # A lean client (KeepAliveConnection), so that the figures are the extender's, not the client's.
    conn = KeepAliveConnection("127.0.0.1", int(url.rsplit(":", 1)[1]))
    client_pauses_off()

    def post(path: str, body: bytes) -> bytes:
        status, data = conn.post(path, body)
        assert status == 200, data[:200]
        return data

    try:
        for i in range(warmup + requests):
            pod = pending_pod(rng.randrange(10**9))
            if cache_capable:
                body = orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": names})
            else:
                body = orjson.dumps({"Pod": pod, "Nodes": {"metadata": {}, "items": full}, "NodeNames": None})
            t0 = time.perf_counter()
            raw = post("/filter", body)
            t1 = time.perf_counter()
            result = orjson.loads(raw)
            assert result["Error"] == "", result["Error"]
            if cache_capable:
                passing = result["NodeNames"]
                body2 = orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": passing})
            else:
                passing_nodes = result["Nodes"]["items"]
                body2 = orjson.dumps({"Pod": pod, "Nodes": {"metadata": {}, "items": passing_nodes},
                                      "NodeNames": None})
            t2 = time.perf_counter()
            post("/prioritize", body2)
            t3 = time.perf_counter()
            if i >= warmup:
                filt.append(t1 - t0)
                prio.append(t3 - t2)
                both.append((t1 - t0) + (t3 - t2))
    finally:
        conn.close()
        gc.enable()
    return {"p50": _pct(both, 50), "p99": _pct(both, 99), "filter_p50": _pct(filt, 50),
            "prioritize_p50": _pct(prio, 50), "passing": len(passing) if cache_capable else len(passing_nodes),
            "request_kib": len(body) / 1024}


def measure_floor(url: str, requests: int, warmup: int = 20) -> dict[str, float]:
    """The same pair for a pod no policy governs, with no node names: the HTTP, decoding and
    bookkeeping every request pays, none of the judging. What this machine adds to any figure."""
    conn = KeepAliveConnection("127.0.0.1", int(url.rsplit(":", 1)[1]))
    client_pauses_off()
    pairs = []
    try:
        for i in range(warmup + requests):
            pod = pending_pod(i)
            pod["metadata"]["labels"] = {"app": "ungoverned"}
            body = orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": []})
            t0 = time.perf_counter()
            for path in ("/filter", "/prioritize"):
                status, data = conn.post(path, body)
                assert status == 200, data[:200]
            if i >= warmup:
                pairs.append(time.perf_counter() - t0)
    finally:
        conn.close()
        gc.enable()
    return {"p50": _pct(pairs, 50), "p99": _pct(pairs, 99)}


def client_pauses_off() -> None:
    """The client's own cyclic collector stays off while it measures (everything it allocates is
    freed by reference counting): a pause of the client is not the extender's latency."""
    gc.collect()
    gc.disable()


def server_histogram(url: str, name: str = "berth_extender_request_seconds", label: str = "verb"
                     ) -> dict[str, dict[str, float]]:
    """The server's own latency histogram per verb (request decoded, judged, reply built), or another
    histogram ``name`` by its ``label``: value -> {"count", "sum", "le=<bound>"}."""
    out: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(httpx.get(url + "/metrics", timeout=10).text):
        if family.name != name:
            continue
        for sample in family.samples:
            entry = out.setdefault(sample.labels[label], {})
            part = sample.name.removeprefix(family.name)
            if part == "_bucket":
                entry["le=" + sample.labels["le"]] = sample.value
            elif part in ("_count", "_sum"):
                entry[part[1:]] = sample.value
    return out


def server_side(before: dict[str, dict[str, float]], after: dict[str, dict[str, float]], verb: str) -> str:
    """Mean and bucketed p99 of the server-side time of ``verb`` between two scrapes."""
    b, a = before.get(verb, {}), after.get(verb, {})
    count = a.get("count", 0) - b.get("count", 0)
    if count <= 0:
        return "n/a"
    mean = (a.get("sum", 0) - b.get("sum", 0)) / count * 1000
    p99 = "inf"
    for key in sorted((k for k in a if k.startswith("le=")), key=lambda k: float(k[3:])):
        if a[key] - b.get(key, 0) >= 0.99 * count:
            p99 = f"<= {float(key[3:]) * 1000:g}"
            break
    return f"mean {mean:.2f} ms, p99 {p99} ms"


def _pct(values: list[float], p: int) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))] * 1000


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc), all its threads."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_reference_ms() -> float:
    """A fixed CPU workload of the filter's kind (a set and dict lookups over 5,000 freshly decoded
    names), best of 20: on a shared machine whose speed drifts, it tells a slow phase from a slow change."""
    raw = orjson.dumps([f"node-{i:05d}" for i in range(5000)])
    best = float("inf")
    for _ in range(20):
        t0 = time.perf_counter()
        names = orjson.loads(raw)
        index = dict.fromkeys(names)
        seen = set(orjson.loads(raw))
        sum(1 for n in names if n in seen and n in index)
        best = min(best, time.perf_counter() - t0)
    return best * 1000


def run_case(nodes: int, requests: int, cache_false_too: bool, sampled: bool = False) -> list[str]:
    proc, url, view = start_server(nodes)
    lines = []
    reference_before = machine_reference_ms()
    runs = [(True, 1)] + ([(False, 1)] if cache_false_too else []) + ([(True, 10)] if sampled else [])
    try:
        for cache_capable, every in runs:
            before, cpu_before = server_histogram(url), process_cpu_seconds(proc.pid)
            m = measure(url, nodes, cache_capable=cache_capable, requests=requests, every=every)
            after, cpu_after = server_histogram(url), process_cpu_seconds(proc.pid)
            pairs = requests + 20  # the warm-up pairs ran on the server too
            sent = "" if every == 1 else f" ({nodes // every} names sent)"
            lines.append(f"{nodes:>6} nodes{sent}  nodeCacheCapable={str(cache_capable).lower():5}  filter+prioritize "
                         f"p50 {m['p50']:7.2f} ms  p99 {m['p99']:7.2f} ms  (filter p50 {m['filter_p50']:.2f}, "
                         f"prioritize p50 {m['prioritize_p50']:.2f}; {m['passing']} nodes pass; request "
                         f"{m['request_kib']:.0f} KiB)")
            lines.append(f"{'':>14}server side: filter {server_side(before, after, 'filter')}; prioritize "
                         f"{server_side(before, after, 'prioritize')}; server CPU per pair "
                         f"{(cpu_after - cpu_before) / pairs * 1000:.2f} ms (steadier than wall time)")
        floor = measure_floor(url, requests)
        lines.append(f"{'':>14}floor: the same pair for an ungoverned pod and no nodes p50 {floor['p50']:.2f} ms  "
                     f"p99 {floor['p99']:.2f} ms (HTTP and bookkeeping on this machine, no judging)")
        lines.append(f"{'':>14}machine reference: {reference_before:.2f} ms before, {machine_reference_ms():.2f} ms "
                     "after (a fixed set-and-dict workload over 5,000 names; it grows as this machine slows down)")
    finally:
        proc.terminate()
        proc.wait(10)
    if nodes >= 5000:
        lines.append(f"{nodes:>6} nodes  view of {view['nodes']} nodes / {view['pods']} pods: RSS "
                     f"{view['rss_mib']:.0f} MiB; built from a full list (pages of 1,000 decoded and applied) in "
                     f"{view['build_s']:.1f} s")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="500 nodes only")
    parser.add_argument("--nodes", type=int, help="one cluster size instead of the standard set")
    parser.add_argument("--requests", type=int, default=300, help="measured pods per case (default 300)")
    parser.add_argument("--full-nodes", action="store_true",
                        help="with --nodes: also nodeCacheCapable false (full Node objects; slow at 5,000)")
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.port)
        return
    cases = [(args.nodes, args.full_nodes)] if args.nodes else [(500, True)] + ([] if args.quick else [(5000, False)])
    print(f"berth extender benchmark: {PODS_PER_NODE} pods per node, policy: Spread + zone spread "
          "(DoNotSchedule) + 2 placement rules (Node HasNot, Pod HasNot within rack); one uvicorn worker "
          "on 127.0.0.1")
    for nodes, cache_false in cases:
        for line in run_case(nodes, args.requests, cache_false, sampled=nodes >= 5000):
            print(line, flush=True)


if __name__ == "__main__":
    main()
