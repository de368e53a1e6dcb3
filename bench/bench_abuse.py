"""Benchmark of the extender under abuse of its read-only API port: a real process serving the
extender port and the API port as ``berth extender`` does (one event loop), on the synthetic
cluster of bench_extender.py (30 pods per node, the Spread policy with a zone spread and two
rules), driven over 127.0.0.1 only.

- ``--flood``: filter latency (node names of every node), p50 / p99, quiet and then while other
  processes flood the API port with capacity questions of distinct labels and shapes, and how the
  flood was answered (200, 503, errors);
- ``--soak``: hundreds of thousands of distinct capacity and preview questions and a day of Job
  churn under a default strategy (each Job's pods labelled with its own name and uid, filtered
  once), with filter latency and the server's RSS printed at checkpoints: both stay flat.

Usage (from the repository root)::

    python bench/bench_abuse.py --flood --nodes 2000
    python bench/bench_abuse.py --soak --nodes 200 --questions 200000 --jobs 50000

Each run prints bench_extender's machine reference (a fixed CPU workload, before and after):
on a shared machine it tells a slow phase from a slow change. Against code without the API
port's limits (the server detects it), the same figures show what they protect from.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_extender import (  # a sibling script, not a package
    KeepAliveConnection,
    _pct,
    free_port,
    list_pages,
    machine_reference_ms,
    make_policy,
    pending_pod,
)

# -- the server (child process) -----------------------------------------------------------------


def serve(nodes: int, port: int, api_port: int, default_strategy: str | None) -> None:
    import uvicorn

    from berth.extender import server
    from berth.extender.app import create_app
    from berth.extender.heap import collector_paused, settle
    from berth.extender.settings import ExtenderSettings
    from berth.extender.store import ClusterStore

    store = ClusterStore(leases_tracked=False)
    store.replace("policies", [make_policy()])
    with collector_paused():
        for kind in ("nodes", "pods"):
            store.replace(kind, (item for page in list_pages(kind, nodes) for item in orjson.loads(page)["items"]))
    store.mark_listed("leases")
    settle()
    settings = ExtenderSettings(track_leases=False, tentative_ttl_seconds=2.0, default_strategy=default_strategy)
    app = create_app(store, settings)
    guarded = hasattr(server, "api_port_app")
    if guarded:
        main_app, api_app = server.extender_port_app(app, settings), server.api_port_app(app, settings)
        main_http: Any = server.guarded_protocol(header_timeout=settings.header_timeout_seconds,
                                                 max_header_bytes=settings.max_header_bytes)
        api_http: Any = server.guarded_protocol(header_timeout=settings.header_timeout_seconds,
                                                max_header_bytes=settings.max_header_bytes,
                                                max_connections=settings.api_max_connections)
    else:  # code from before the limits: both ports as serve() made them then
        main_app, api_app, main_http, api_http = app, server.read_only(app), "httptools", "httptools"
    print("READY " + json.dumps({"guarded": guarded}), flush=True)
    loop_name = server.UVICORN_IO["loop"]
    servers = [uvicorn.Server(uvicorn.Config(main_app, host="127.0.0.1", port=port, log_level="warning",
                                             access_log=False, http=main_http, loop=loop_name)),
               uvicorn.Server(uvicorn.Config(api_app, host="127.0.0.1", port=api_port, log_level="warning",
                                             access_log=False, http=api_http, loop=loop_name, lifespan="off"))]

    async def run_all() -> None:
        await asyncio.gather(*(s.serve() for s in servers))

    with asyncio.Runner(loop_factory=servers[0].config.get_loop_factory()) as runner:
        runner.run(run_all())


# -- flood (child processes) --------------------------------------------------------------------


def flood(api_port: int, seconds: float, connections: int, seed: int) -> None:
    """Capacity questions of distinct labels and shapes on ``connections`` keep-alive connections for
    ``seconds``; prints the answers by status."""
    counts: dict[str, int] = {}
    rng = random.Random(seed)

    async def one() -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", api_port)
            except OSError:
                counts["refused"] = counts.get("refused", 0) + 1
                await asyncio.sleep(0.01)
                continue
            try:
                while time.monotonic() < deadline:
                    n = rng.randrange(10**9)
                    writer.write(b"GET /api/v1/capacity?namespace=shop&labels=app%%3Dweb,q%%3D%d&cpu=%dm "
                                 b"HTTP/1.1\r\nHost: x\r\n\r\n" % (n, 100 + n % 900))
                    head = await reader.readuntil(b"\r\n\r\n")
                    status = head.split(b" ", 2)[1].decode()
                    length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                    await reader.readexactly(length)
                    counts[status] = counts.get(status, 0) + 1
                    if b"connection: close" in head.lower():
                        break
            except (OSError, asyncio.IncompleteReadError):
                counts["cut"] = counts.get("cut", 0) + 1
            finally:
                writer.close()

    async def run() -> None:
        await asyncio.gather(*(one() for _ in range(connections)))

    asyncio.run(run())
    print(json.dumps(counts), flush=True)


# -- the client ---------------------------------------------------------------------------------


def start(nodes: int, default_strategy: str | None = None,
          env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], int, int, bool]:
    port, api_port = free_port(), free_port()
    command = [sys.executable, __file__, "--serve", str(nodes), "--port", str(port), "--api-port", str(api_port)]
    if default_strategy:
        command += ["--default-strategy", default_strategy]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})
    assert proc.stdout is not None
    guarded = False
    for line in proc.stdout:
        if line.startswith("READY "):
            guarded = json.loads(line[6:])["guarded"]
            break
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            KeepAliveConnection("127.0.0.1", port, timeout=1).close()
            time.sleep(0.5)
            return proc, port, api_port, guarded
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the benchmark server did not start")


def filters(port: int, nodes: int, count: int, seed: int) -> list[float]:
    """Latencies (seconds) of ``count`` filters of a web pod with every node's name, on one connection."""
    names = [f"node-{i:05d}" for i in range(nodes)]
    rng = random.Random(seed)
    conn = KeepAliveConnection("127.0.0.1", port)
    out = []
    try:
        for _ in range(count):
            body = orjson.dumps({"Pod": pending_pod(rng.randrange(10**9)), "NodeNames": names})
            t0 = time.perf_counter()
            status, data = conn.post("/filter", body)
            out.append(time.perf_counter() - t0)
            assert status == 200 and orjson.loads(data)["Error"] == "", data[:200]
    finally:
        conn.close()
    return out


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def run_flood(nodes: int, requests: int, seconds: float, floods: int, connections: int) -> None:
    proc, port, api_port, guarded = start(nodes)
    try:
        print(f"{nodes} nodes; API port limits {'ON' if guarded else 'OFF (code before them)'}; machine reference "
              f"{machine_reference_ms():.2f} ms")
        filters(port, nodes, 50, 1)  # warm-up
        quiet = filters(port, nodes, requests, 2)
        print(f"  quiet:  filter p50 {_pct(quiet, 50):7.2f} ms  p99 {_pct(quiet, 99):7.2f} ms  ({requests} filters)")
        flooders = [subprocess.Popen([sys.executable, __file__, "--flood-child", str(api_port), "--seconds",
                                      str(seconds), "--connections", str(connections), "--seed", str(k)],
                                     stdout=subprocess.PIPE, text=True) for k in range(floods)]
        time.sleep(1.0)  # the flood under way
        loud = filters(port, nodes, requests, 3)
        answers: dict[str, int] = {}
        for f in flooders:
            out, _ = f.communicate(timeout=seconds + 60)
            for status, n in json.loads(out.strip().splitlines()[-1]).items():
                answers[status] = answers.get(status, 0) + n
        print(f"  flood:  filter p50 {_pct(loud, 50):7.2f} ms  p99 {_pct(loud, 99):7.2f} ms  "
              f"max {max(loud) * 1000:7.2f} ms  ({floods} processes x {connections} connections of capacity "
              f"questions for {seconds:g} s; "
              f"answers {dict(sorted(answers.items()))})")
        print(f"  machine reference after: {machine_reference_ms():.2f} ms")
    finally:
        proc.terminate()
        proc.wait(20)


def run_soak(nodes: int, questions: int, jobs: int, every: int) -> None:
    # The questions come one at a time from one client: the API's share of the loop (which would
    # only stretch the run fourfold) is lifted, so that everything asked is judged.
    proc, port, api_port, guarded = start(nodes, default_strategy="Spread", env={"BERTH_API_LOOP_SHARE": "1"})
    rng = random.Random(11)
    try:
        print(f"{nodes} nodes, default strategy Spread; API port limits {'ON' if guarded else 'OFF'}; machine "
              f"reference {machine_reference_ms():.2f} ms")
        conns = {"api": KeepAliveConnection("127.0.0.1", api_port), "verbs": KeepAliveConnection("127.0.0.1", port)}

        def post(which: str, path: str, body: bytes) -> tuple[int, bytes]:
            """On a kept-alive connection, opened again when the server closed it while idle."""
            try:
                return conns[which].post(path, body)
            except ConnectionError:
                conns[which].close()
                conns[which] = KeepAliveConnection("127.0.0.1", api_port if which == "api" else port)
                return conns[which].post(path, body)

        names = [f"node-{i:05d}" for i in range(nodes)]
        started = time.monotonic()

        def checkpoint(done_q: int, done_j: int) -> None:
            filters(port, nodes, 10, done_q + done_j)  # the web policy's tables, pushed out by the Jobs' own
            lat = filters(port, nodes, 100, done_q + done_j + 1)
            print(f"  {done_q:>7} questions {done_j:>6} jobs  filter p50 {_pct(lat, 50):6.2f} ms  p99 "
                  f"{_pct(lat, 99):6.2f} ms  server RSS {rss_mib(proc.pid):7.1f} MiB  "
                  f"({time.monotonic() - started:.0f} s)", flush=True)

        checkpoint(0, 0)
        done_q = done_j = 0
        while done_q < questions or done_j < jobs:
            for _ in range(every):
                if done_q >= questions:
                    break
                n = rng.randrange(10**12)
                if done_q % 2:
                    body = orjson.dumps({"namespace": f"ns-{n % 50}", "labels": {"app": f"a-{n}"},
                                         "requests": {"cpu": f"{1 + n % 999}m", "memory": f"{1 + n % 4096}Mi"}})
                    status, data = post("api", "/api/v1/preview", body)
                else:
                    body = orjson.dumps({"namespace": "shop", "labels": {"app": "web", "q": str(n)},
                                         "requests": {"cpu": f"{n % 997}m"}})
                    status, data = post("api", "/api/v1/capacity", body)
                assert status in (200, 503), data[:200]
                done_q += 1
            for _ in range(max(1, every * jobs // max(questions, 1))):
                if done_j >= jobs:
                    break
                labels = {"job-name": f"nightly-{done_j}", "controller-uid": f"{done_j:032x}",
                          "batch.kubernetes.io/job-name": f"nightly-{done_j}"}
                pod = {"metadata": {"name": f"nightly-{done_j}-x", "namespace": "batch", "uid": f"job-{done_j}",
                                    "labels": labels},
                       "spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": "100m"}}}]}}
                status, data = post("verbs", "/filter", orjson.dumps({"Pod": pod, "NodeNames": names}))
                assert status == 200, data[:200]
                done_j += 1
            checkpoint(done_q, done_j)
        print(f"  machine reference after: {machine_reference_ms():.2f} ms")
    finally:
        proc.terminate()
        proc.wait(20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--api-port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--default-strategy", help=argparse.SUPPRESS)
    parser.add_argument("--flood-child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--flood", action="store_true", help="filter latency quiet and under an API flood")
    parser.add_argument("--soak", action="store_true", help="distinct questions and Job churn; latency and RSS")
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--requests", type=int, default=200, help="filters measured per phase (--flood)")
    parser.add_argument("--seconds", type=float, default=20.0, help="flood duration (--flood)")
    parser.add_argument("--floods", type=int, default=2, help="flooding processes (--flood)")
    parser.add_argument("--connections", type=int, default=50, help="connections per flooding process")
    parser.add_argument("--questions", type=int, default=200_000, help="capacity and preview questions (--soak)")
    parser.add_argument("--jobs", type=int, default=50_000, help="Jobs filtered (--soak)")
    parser.add_argument("--every", type=int, default=10_000, help="questions between checkpoints (--soak)")
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.port, args.api_port, args.default_strategy)
    elif args.flood_child:
        flood(args.flood_child, args.seconds, args.connections, args.seed)
    elif args.flood:
        run_flood(args.nodes, args.requests, args.seconds, args.floods, args.connections)
    elif args.soak:
        run_soak(args.nodes, args.questions, args.jobs, args.every)
    else:
        parser.print_help()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONSAFEPATH", "1")
    main()
