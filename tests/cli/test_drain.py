"""``berth drain`` on snapshot files: every pod's destination or shortfall, as a table or JSON."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from berth.core.kube import parse_label_selector
from berth.core.model import LabelSelector, Requirement
from tests.builders import make_node, make_pod, make_policy
from tests.cli import kube
from tests.cli.conftest import Result, run_process

Cli = Callable[..., Result]
RS = ("ReplicaSet", "web-7d9f")

SHORTFALL_N3 = "insufficient capacity: cpu: needs 3, 2 free of 2 allocatable (short by 1)"


def drain_cluster() -> list[dict[str, Any]]:
    """n1 (drained) holds two web pods, a big one, a DaemonSet pod, a mirror pod and a bare pod;
    n2 and n3 are the other nodes."""
    return [
        make_node("n1").zone("zone-a").cpu("16").memory("32Gi").obj(),
        make_node("n2").zone("zone-a").obj(),
        make_node("n3").zone("zone-b").cpu("2").memory("4Gi").obj(),
        make_pod("web-1").on("n1").owner(RS).cpu("500m").memory("1Gi").obj(),
        make_pod("web-2").on("n1").owner(RS).cpu("500m").memory("1Gi").obj(),
        (make_pod("big-1")
         .on("n1")
         .cpu("3")
         .labels({"app": "big"})
         .owner(("ReplicaSet", "big-1a2b"))
         .memory("1Gi")
         .obj()),
        (make_pod("agent-n1")
         .on("n1")
         .labels({"app": "agent"})
         .owner(("DaemonSet", "agent"))
         .cpu("500m")
         .memory("1Gi")
         .obj()),
        (make_pod("etcd-n1")
         .on("n1")
         .labels({"app": "etcd"})
         .owner(("Node", "n1"))
         .annotations({"kubernetes.io/config.mirror": "0f1e"})
         .cpu("500m")
         .memory("1Gi")
         .obj()),
        make_pod("debug").on("n1").labels({"app": "debug"}).cpu("500m").memory("1Gi").obj(),
        make_pod("batch-0").on("n2").cpu("1").memory("2Gi").labels({"app": "batch"}).owner(("Job", "batch")).obj(),
        kube.lease("n1"), kube.lease("n2"), kube.lease("n3"),
    ]


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    return kube.write_json(tmp_path / "snapshot.json", drain_cluster())


def test_drain_table_shows_each_pods_destination_and_each_blocked_pods_shortfalls(cli: Cli, snapshot: Path) -> None:
    r = cli("drain", "n1", "--snapshot", snapshot, "--to", "n3")
    assert r.code == 1, r.err  # big-1 has no room on n3
    lines = r.out.splitlines()
    assert lines[0].split() == ["POD", "SOURCE", "STATE", "DESTINATION", "WHY"]
    rows = {line.split()[0]: line.split() for line in lines[1:] if line and not line.startswith(" ")
            and "/" in line.split()[0]}
    assert rows["shop/web-1"][:4] == ["shop/web-1", "n1", "Planned", "n3"]
    assert rows["shop/big-1"][:5] == ["shop/big-1", "n1", "Blocked", "-", "insufficient_resource"]
    blocked_at = next(i for i, line in enumerate(lines) if line.startswith("shop/big-1"))
    assert lines[blocked_at + 1].strip() == f"n3: {SHORTFALL_N3}"
    assert rows["shop/agent-n1"][2] == "Left" and "DaemonSet" in lines[next(
        i for i, line in enumerate(lines) if line.startswith("shop/agent-n1"))]
    assert "2 planned, 1 blocked, 3 left where they are; drained: n1; destinations: n3" in r.out


def test_drain_table_shows_the_first_refusals_of_many_destinations(tmp_path: Path, cli: Cli) -> None:
    small = [make_node(f"d{i:02d}").zone("zone-a").cpu("2").memory("4Gi").obj() for i in range(12)]
    snap = kube.write_json(tmp_path / "many.json", [(make_node("n1")
                                                     .zone("zone-a")
                                                     .cpu("16")
                                                     .memory("32Gi")
                                                     .obj()), *small,
                                                    make_pod("big-1").on("n1").cpu("3").owner(RS).memory("1Gi").obj()])
    r = cli("drain", "n1", "--snapshot", snap, "--any")
    assert r.code == 1
    shown = [line.strip() for line in r.out.splitlines() if line.startswith(" ")]
    assert shown == [f"d{i:02d}: {SHORTFALL_N3}" for i in range(10)] + [
        "... and 2 more destinations (--output json lists them)"]
    assert "12 nodes (d00, d01, d02, d03, d04, d05, ...)" in r.out
    out = json.loads(cli("drain", "n1", "--snapshot", snap, "--any", "-o", "json").out)
    assert len(out["pods"][0]["refused"]) == 12


def test_drain_json_output_is_exact(cli: Cli, snapshot: Path) -> None:
    r = cli("drain", "n1", "--snapshot", snapshot, "--to", "n3", "--output", "json")
    assert r.code == 1
    out = json.loads(r.out)
    assert list(out) == ["nodes", "destinations", "planned", "blocked", "left", "pods", "warnings"]
    assert (out["nodes"], out["destinations"], out["planned"], out["blocked"], out["left"]) == (["n1"], ["n3"], 2, 1, 3)
    big = next(p for p in out["pods"] if p["pod"] == "shop/big-1")
    assert big == {"pod": "shop/big-1", "source": "n1", "workload": "ReplicaSet/big-1a2b", "policy": None,
                   "state": "Blocked", "destination": None, "reason": big["reason"], "code": "insufficient_resource",
                   "refused": {"n3": SHORTFALL_N3}, "warnings": []}
    assert [p["pod"] for p in out["pods"]] == ["shop/agent-n1", "shop/big-1", "shop/debug", "shop/etcd-n1",
                                               "shop/web-1", "shop/web-2"]


def test_drain_exit_0_when_every_pod_has_a_destination(cli: Cli, snapshot: Path) -> None:
    r = cli("drain", "n1", "--snapshot", snapshot, "--any", "-o", "json")
    assert r.code == 0, r.out
    out = json.loads(r.out)
    assert out["blocked"] == 0 and out["planned"] == 3
    assert {p["destination"] for p in out["pods"] if p["state"] == "Planned"} <= {"n2", "n3"}


def test_drain_follows_the_snapshots_placement_policy(tmp_path: Path, cli: Cli) -> None:
    """The snapshot's PlacementPolicy for the web pods excludes n2: they go to n3 although n2 is roomier."""
    items = [*drain_cluster(), make_policy().strategy(None).node_filter({"excludes": ["n2"]}).obj()]
    snap = kube.write_json(tmp_path / "with-policy.json", items)
    out = json.loads(cli("drain", "n1", "--snapshot", snap, "--any", "-o", "json").out)
    web = [p for p in out["pods"] if p["pod"].startswith("shop/web-")]
    assert [(p["destination"], p["policy"]) for p in web] == [("n3", "shop/web"), ("n3", "shop/web")]


def test_drain_include_unmanaged_moves_the_bare_pod(cli: Cli, snapshot: Path) -> None:
    out = json.loads(cli("drain", "n1", "--snapshot", snapshot, "--any", "--include-unmanaged", "-o", "json").out)
    debug = next(p for p in out["pods"] if p["pod"] == "shop/debug")
    assert debug["state"] == "Planned"


def test_move_with_pods_selector_and_one_target(cli: Cli, snapshot: Path) -> None:
    r = cli("drain", "n1", "--snapshot", snapshot, "--pods", "app=web", "--to", "n2", "-o", "json")
    assert r.code == 0, r.out
    out = json.loads(r.out)
    assert [(p["pod"], p["destination"]) for p in out["pods"]] == [("shop/web-1", "n2"), ("shop/web-2", "n2")]


def test_drain_blocked_exit_status_as_a_process(snapshot: Path) -> None:
    r = run_process(["drain", "n1", "--snapshot", snapshot, "--to", "n3"])
    assert r.code == 1 and r.err == ""
    assert "Blocked" in r.out


@pytest.mark.parametrize(("name", "args", "message"), [
    ("unknown_node", ["zz", "--any"], "berth: error: NODE: unknown node 'zz'"),
    ("unknown_destination", ["n1", "--to", "n2,zz"], "berth: error: --to: unknown node 'zz'"),
    ("drained_destination", ["n1", "--to", "n1"], "berth: error: --to: n1 is drained: a drained node is never a "
                                                   "destination"),
    ("empty_destination_name", ["n1", "--to", "n2,"], "berth: error: --to: an empty node name in 'n2,'"),
    ("no_destination", ["n1"], "berth: error: --to: no destination: name the destinations or allow any "
                               "destination (--any)"),
    ("bad_pod_selector", ["n1", "--any", "--pods", "app in (a"], "berth: error: --pods: unbalanced parentheses"),
    ("to_and_any", ["n1", "--any", "--to", "n2"], "argument --to: not allowed with argument --any"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_drain_bad_input_is_exit_2_naming_the_field(cli: Cli, snapshot: Path, name: str, args: list[str],
                                                    message: str) -> None:
    r = cli("drain", *args, "--snapshot", snapshot)
    assert r.code == 2
    assert r.out == ""
    assert message in r.err, r.err
    assert len(r.err.strip().splitlines()) == 1


@pytest.mark.parametrize(("name", "text", "selector"), [
    ("equals", "app=web", LabelSelector({"app": "web"})),
    ("double_equals", "app==web", LabelSelector({"app": "web"})),
    ("not_equals_is_notin", "tier!=db", LabelSelector({}, (Requirement("tier", "NotIn", ("db",)),))),
    ("set_in", "env in (a, b)", LabelSelector({}, (Requirement("env", "In", ("a", "b")),))),
    ("set_notin", "env notin (a)", LabelSelector({}, (Requirement("env", "NotIn", ("a",)),))),
    ("exists", "gpu", LabelSelector({}, (Requirement("gpu", "Exists"),))),
    ("does_not_exist", "!legacy", LabelSelector({}, (Requirement("legacy", "DoesNotExist"),))),
    ("several", "app=web,env in (a,b),!legacy", LabelSelector({"app": "web"}, (
        Requirement("env", "In", ("a", "b")), Requirement("legacy", "DoesNotExist")))),
], ids=lambda v: v if isinstance(v, str) else "")
def test_label_selector_grammar(name: str, text: str, selector: LabelSelector) -> None:
    assert parse_label_selector(text) == selector


@pytest.mark.parametrize("text", ["", "app=web,", "env in a,b", "a b=c", "env in (a,)", "x in ((a))"])
def test_label_selector_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_label_selector(text)
