"""``berth simulate``: the built-in sample cluster and mix, user snapshots and mixes, the report."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from berth.cli.simulate import ALL_STRATEGIES, place_workload, simulate
from berth.cli.workloads import Workload, parse_mix
from berth.core.policy import Strategy
from berth.core.settings import Settings
from berth.sample import SOURCE, ZONE_LABEL, sample_objects, workloads_text
from berth.snapshot import snapshot_from_documents
from tests.builders import make_node, make_pod, make_policy
from tests.cli import kube
from tests.cli.conftest import Files, Result, run_in_terminal, run_process

Cli = Callable[..., Result]
STRATEGY_NAMES = ["Auto", "Fill", "Each", "Global", "Drained", "Balanced", "Spread", "BestFit", "Default"]


def test_simulate_with_no_arguments_prints_the_table(cli: Cli) -> None:
    r = cli("simulate")
    assert r.code == 0, r.err
    assert r.err == ""
    lines = r.out.splitlines()
    assert lines[0].startswith("cluster: (built-in sample cluster)")
    assert any(line.startswith("lower bound on nodes used:") for line in lines)
    header = next(i for i, line in enumerate(lines) if line.startswith("strategy"))
    for word in ("used", "lower", "skew", "util", "stranded", "refused"):
        assert word in lines[header]
    rows = lines[header + 3: header + 3 + len(STRATEGY_NAMES)]
    assert [row.split()[0] for row in rows] == STRATEGY_NAMES
    for row in rows:
        assert len(row.split()) == 11  # strategy, 9 figures, "GiB"


def test_simulate_is_deterministic(cli: Cli) -> None:
    assert cli("simulate").out == cli("simulate").out


def test_simulate_as_a_process() -> None:
    r = run_process(["simulate", "--strategies", "Auto,BestFit"])
    assert r.code == 0, r.err
    assert "Auto" in r.out and "BestFit" in r.out and "Drained" not in r.out


def test_simulate_json(cli: Cli) -> None:
    out = json.loads(cli("simulate", "--format", "json").out)
    assert [s["strategy"] for s in out["strategies"]] == STRATEGY_NAMES
    assert out["nodes"] >= 30 and out["zones"] >= 3
    for s in out["strategies"]:
        assert s["placed"] + s["refused"] == out["pods"]
        if s["refused"] == 0:
            assert s["nodesUsed"] >= out["lowerBound"]


@pytest.mark.parametrize("suffix", ["png", "svg", "html"])
def test_report_is_written(cli: Cli, tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"report.{suffix}"
    r = cli("simulate", "--report", path)
    assert r.code == 0, r.err
    data = path.read_bytes()
    assert len(data) > 10_000
    if suffix == "png":
        assert data.startswith(b"\x89PNG\r\n\x1a\n")
    elif suffix == "svg":
        assert b"<svg" in data
    else:
        text = data.decode()
        assert "<table>" in text and "<svg" in text and "Balanced" in text


def test_report_errors(cli: Cli, tmp_path: Path) -> None:
    r = cli("simulate", "--report", tmp_path / "report.gif")
    assert r.code == 2 and "--report" in r.err and len(r.err.strip().splitlines()) == 1
    r = cli("simulate", "--report", tmp_path / "missing-dir" / "report.png")
    assert r.code == 2 and "cannot write" in r.err and len(r.err.strip().splitlines()) == 1


def test_unknown_strategy_flag(cli: Cli) -> None:
    r = cli("simulate", "--strategies", "Auto,Sideways")
    assert r.code == 2
    assert r.err.strip() == ("berth: error: --strategies: unknown strategy 'Sideways'; expected Auto, Fill, Each, "
                             "Global, Drained, Balanced, Spread, BestFit, Default")


MIX = textwrap.dedent("""\
    apiVersion: berth.dev/v1alpha1
    kind: WorkloadMix
    workloads:
    - name: web
      namespace: shop
      replicas: 6
      requests: {cpu: 500m, memory: 1Gi}
    - name: big
      namespace: shop
      replicas: 3
      labels: {app: big, tier: backend}
      template:
        spec:
          containers:
          - name: big
            resources: {requests: {cpu: "1", memory: 2Gi}}
      policy:
        topologySpreadConstraints:
        - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule,
           labelSelector: {matchLabels: {app: big}}}
    """)


def test_simulate_a_user_snapshot_and_mix(cli: Cli, files: Files) -> None:
    mix = files.dir / "mix.yaml"
    mix.write_text(MIX)
    r = cli("simulate", "--snapshot", files.json, "--workload", mix, "--format", "json")
    assert r.code == 0, r.err
    out = json.loads(r.out)
    assert out["nodes"] == 3 and out["pods"] == 9 and out["zones"] == 2
    assert out["referencePod"]["workload"] == "shop/web"
    for s in out["strategies"]:
        assert s["placed"] + s["refused"] == 9
        big = next(w for w in s["workloads"] if w["workload"] == "shop/big")
        zones = {"n1": "a", "n2": "a", "n3": "b"}
        per_zone = {"a": 0, "b": 0}
        for node, n in big["nodes"].items():
            per_zone[zones[node]] += n
        assert abs(per_zone["a"] - per_zone["b"]) <= 1 or big["error"] is not None, s["strategy"]


@pytest.mark.parametrize(("change", "field"), [
    (("replicas: 6", "replicas: -1"), "workloads[0].replicas"),
    (("requests: {cpu: 500m, memory: 1Gi}", "requests: {cpu: lots}"), "workloads[0].requests.cpu"),
    (("- name: big\n", "- name: big\n  weight: 3\n"), "workloads[1].weight: unknown field"),
    (("maxSkew: 1", "maxSkew: 0"), "workloads[1].policy.topologySpreadConstraints[0].maxSkew"),
    (("kind: WorkloadMix", "kind: Deployment"), "kind: expected WorkloadMix"),
    (("- name: big\n", "- name: big\n  sleepy: maybe\n"), "workloads[1].sleepy"),
    (("  policy:\n", "  policy:\n    strategy: Auto\n"), "workloads[1].policy.strategy"),
])
def test_bad_workload_mix(cli: Cli, files: Files, change: tuple[str, str], field: str) -> None:
    mix = files.dir / "mix.yaml"
    text = MIX.replace(*change, 1)
    assert text != MIX
    mix.write_text(text)
    r = cli("simulate", "--snapshot", files.json, "--workload", mix)
    assert r.code == 2, r.out
    assert len(r.err.strip().splitlines()) == 1
    assert f"mix.yaml: {field}" in r.err


def test_sample_cluster_shape() -> None:
    snap = snapshot_from_documents([sample_objects()], SOURCE)
    assert len(snap.nodes) >= 30
    assert len({n.labels[ZONE_LABEL] for n in snap.nodes}) >= 3
    sizes = {n.allocatable["cpu"] for n in snap.nodes}
    assert len(sizes) >= 4
    assert len(snap.pods) > len(snap.nodes)  # DaemonSet pods everywhere and older workloads
    assert snap.pending_pods == 1 and snap.terminal_pods == 1
    assert sample_objects() == sample_objects()


def test_sample_command_round_trips(cli: Cli, tmp_path: Path) -> None:
    r = cli("sample")
    assert r.code == 0
    path = tmp_path / "sample.json"
    path.write_text(r.out)
    assert json.loads(r.out)["kind"] == "List"
    mix = cli("sample", "--workloads").out
    assert mix == workloads_text()
    (tmp_path / "mix.yaml").write_text(mix)
    from_files = cli("simulate", "--snapshot", path, "--workload", tmp_path / "mix.yaml").out
    built_in = cli("simulate").out
    assert from_files.splitlines()[2:] == built_in.splitlines()[2:]  # only the source names differ


def test_placements_never_exceed_allocatable() -> None:
    snap = snapshot_from_documents([sample_objects()], SOURCE)
    mix = parse_mix(workloads_text(), "mix")
    settings = Settings()
    now = snap.now()
    for strategy in ALL_STRATEGIES:
        view = snap.view()
        for w in mix.workloads:
            place_workload(view, w, strategy, settings, now)
        for name, node in view.nodes.items():
            requested = view.requested(name)
            for dim in ("cpu", "memory"):
                assert requested.get(dim, 0) <= node.allocatable[dim] or not any(
                    p.uid.startswith("berth-simulate/") for p in view.pods_on(name)), (strategy, name, dim)


def test_measures_on_a_tiny_cluster() -> None:
    items = [make_node("n1").zone("zone-a").obj(),
             make_node("n2").zone("zone-b").obj(),
             make_node("n3").zone("zone-b").obj()]
    snap = snapshot_from_documents([kube.as_list(items)], "tiny")
    mix = parse_mix(textwrap.dedent("""\
        kind: WorkloadMix
        workloads:
        - {name: web, namespace: shop, replicas: 6, requests: {cpu: "1", memory: 1Gi}}
        """), "tiny-mix")
    sim = simulate(snap, mix, Settings(), 0.0)
    by = {r.strategy: r for r in sim.results}
    assert sim.lower_bound == 2  # 6 cpu over 4-cpu nodes
    assert by["Auto"].nodes_used == 3 and by["Auto"].node_skew == 0 and by["Auto"].zone_skew == 2
    assert by["Drained"].nodes_used == 2 and by["Drained"].node_skew == 4
    # Drained fills n1 to the last core: its 4 GiB of free memory cannot hold another pod
    assert by["Drained"].stranded_cpu == 0 and by["Drained"].stranded_memory == 4 * 2**30
    assert by["Auto"].stranded_memory == 0
    assert all(r.refused == 0 for r in sim.results)


ROUND_SHAPES = [
    # name, replicas, the policy's spec, room per node, expected (count, nodesLimit)
    ("round_shape_one_per_node_when_enough_nodes_have_room", 4, {}, [5, 5, 5, 5, 5], (1, 4)),
    ("round_shape_count_reaches_the_replicas_on_the_nodes_that_can_take_it", 40, {}, [11, 11, 11, 3, 1, 1], (11, 3)),
    ("round_shape_ties_go_to_the_smaller_count", 40, {}, [11, 11, 11] + [1] * 30, (1, 33)),
    ("round_shape_limit_is_never_more_nodes_than_can_take_count", 10, {"count": 3}, [3, 3, 1], (3, 2)),
    ("round_shape_keeps_the_policys_own_count_and_limit", 10, {"count": 2, "nodesLimit": 7}, [1], (2, 7)),
    ("round_shape_with_no_room_anywhere", 3, {}, [0, 0], (1, 1)),
]


@pytest.mark.parametrize(("name", "replicas", "spec", "room", "expected"), ROUND_SHAPES,
                         ids=[c[0] for c in ROUND_SHAPES])
def test_round_shape(name: str, replicas: int, spec: dict[str, int], room: list[int],
                     expected: tuple[int, int]) -> None:
    w = Workload("batch", "jobs", replicas, make_pod("b").info(), spec)
    assert w.round_shape(room) == expected


def test_sample_places_its_batch_workload_under_fill_and_each() -> None:
    """No single round of one count per node holds all 40 batch pods on the sample cluster once
    the other workloads are placed; the round covers the nodes that can take its count."""
    snap = snapshot_from_documents([sample_objects()], SOURCE)
    mix = parse_mix(workloads_text(), "mix")
    for strategy in (Strategy.FILL, Strategy.EACH):
        view = snap.view()
        outcomes = {w.name: place_workload(view, w, strategy, Settings(), snap.now()) for w in mix.workloads}
        batch = outcomes["batch"]
        assert batch.placed >= 30, (strategy, batch.error)
        assert all(n <= 11 for n in batch.nodes.values())


# -- every core, progress ------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_jobs_do_not_change_the_output(fmt: str) -> None:
    """Separate processes (each with its own string hashing): the output is the same byte for byte."""
    one = run_process(["simulate", "--format", fmt, "--jobs", "1"])
    two = run_process(["simulate", "--format", fmt, "--jobs", "2"])
    assert one.code == two.code == 0, (one.err, two.err)
    assert one.out == two.out
    assert "Default" in one.out


@pytest.mark.parametrize("jobs", [1, 3])
def test_progress_reaches_every_pod_of_every_strategy(jobs: int) -> None:
    snap = snapshot_from_documents([sample_objects()], SOURCE)
    mix = parse_mix(workloads_text(), "mix")
    seen: dict[int, list[int]] = {}
    sim = simulate(snap, mix, Settings(), snap.now(), jobs=jobs,
                   progress=lambda i, done: seen.setdefault(i, []).append(done))
    assert sorted(seen) == list(range(len(ALL_STRATEGIES)))
    for reports in seen.values():
        assert reports == sorted(reports) and reports[-1] == mix.pods
    assert [r.strategy for r in sim.results] == STRATEGY_NAMES


def test_progress_in_a_terminal() -> None:
    pods = parse_mix(workloads_text(), "mix").pods
    plain = run_process(["simulate", "--jobs", "2"])
    r = run_in_terminal(["simulate", "--jobs", "2"])
    assert r.code == 0, r.err
    assert r.out == plain.out  # the table is the same; the bars go to standard error only
    for name in ["all", *STRATEGY_NAMES]:
        assert name in r.err
    # each strategy's pods, and all of them
    assert f"{pods}/{pods}" in r.err and f"{pods * len(STRATEGY_NAMES)}/{pods * len(STRATEGY_NAMES)}" in r.err
    assert "left" in r.err  # the time left


def test_quiet_in_a_terminal() -> None:
    r = run_in_terminal(["simulate", "--quiet", "--jobs", "2"])
    assert r.code == 0 and r.err == ""
    assert r.out.startswith("cluster: (built-in sample cluster)")


def test_no_progress_when_stderr_is_not_a_terminal() -> None:
    r = run_process(["simulate", "--jobs", "2"])
    assert r.code == 0 and r.err == ""


@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_bad_jobs(cli: Cli, value: str) -> None:
    r = cli("simulate", "--jobs", value)
    assert r.code == 2 and "--jobs" in r.err and len(r.err.strip().splitlines()) == 1


@pytest.mark.parametrize(("strategy", "spec", "replicas"), [
    (Strategy.EACH, {"count": 1, "nodesLimit": 2}, 5),  # three rounds: 2, 2 and the last pod
    (Strategy.FILL, {"count": 2, "nodesLimit": 2}, 6),  # one round of 4; the next finds its nodes full
])
def test_a_workload_larger_than_a_round_is_placed_round_after_round_as_the_extender_does(
        strategy: Strategy, spec: dict[str, int], replicas: int) -> None:
    from tests.core.builders import cluster as core_cluster
    from tests.extender import helpers as ext

    sizes = {"a": "4", "b": "8", "c": "2"}
    w = Workload("web", "shop", replicas, make_pod("w").cpu("500m").info(), spec)
    outcome = place_workload(core_cluster([make_node(n).cpu(c).info() for n, c in sizes.items()]), w, strategy,
                             Settings(), ext.NOW)
    pods = [make_pod(f"web-{i}").labels({"app": "web"}).cpu("500m").memory("128Mi").obj() for i in range(replicas)]
    h = ext.harness([*(make_node(n).cpu(c).obj() for n, c in sizes.items()),
                     make_policy("web").strategy(strategy.value).spec(**spec).obj(), *pods])
    landed: dict[str, int] = {}
    for p in pods:
        where = h.schedule(p)
        if where is not None:
            landed[where] = landed.get(where, 0) + 1
    assert outcome.nodes == landed and outcome.placed == sum(landed.values())
    assert (outcome.error is None) is (outcome.placed == replicas)
