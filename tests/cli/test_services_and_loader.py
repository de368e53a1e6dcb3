"""The extender and operator launchers, and the snapshot loader's choices."""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Callable
from typing import Any

import pytest

from berth.snapshot import SnapshotError, load_snapshot, parse_documents, snapshot_from_documents
from tests.builders import make_node, make_policy
from tests.cli import kube
from tests.cli.conftest import Files, Result

Cli = Callable[..., Result]


def _fake_module(monkeypatch: pytest.MonkeyPatch, name: str, **functions: Callable[..., Any]) -> None:
    module = types.ModuleType(name)
    for fname, fn in functions.items():
        setattr(module, fname, fn)
    monkeypatch.setitem(sys.modules, name, module)


def test_extender_calls_serve_with_host_port_and_snapshot(cli: Cli, files: Files,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict[str, Any]] = []

    def serve(host: str = "x", port: int = 0, snapshot: str | None = None) -> None:
        calls.append({"host": host, "port": port, "snapshot": snapshot,
                      "cpu": os.environ.get("BERTH_CPU_OVERCOMMIT_PERCENT")})

    monkeypatch.delenv("BERTH_CPU_OVERCOMMIT_PERCENT", raising=False)
    _fake_module(monkeypatch, "berth.extender.server", serve=serve)
    try:
        r = cli("--cpu-overcommit", "150", "extender", "--host", "127.0.0.1", "--port", "9999",
                "--snapshot", files.json)
    finally:
        # The launcher sets the variable for the service; a later test must not inherit it.
        os.environ.pop("BERTH_CPU_OVERCOMMIT_PERCENT", None)
    assert r.code == 0, r.err
    assert calls == [{"host": "127.0.0.1", "port": 9999, "snapshot": str(files.json), "cpu": "150"}]


def test_extender_checks_the_snapshot_before_starting(cli: Cli, files: Files,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_module(monkeypatch, "berth.extender.server", serve=lambda **kw: pytest.fail("started"))
    r = cli("extender", "--snapshot", files.dir / "missing.json")
    assert r.code == 2 and "missing.json" in r.err


def test_extender_unavailable_is_one_line(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "berth.extender.server", None)  # import fails
    r = cli("extender")
    assert r.code == 1
    assert r.err.startswith("berth: error: extender: unavailable: cannot import berth.extender.server")
    assert len(r.err.strip().splitlines()) == 1


def test_extender_failing_to_start_is_one_line(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    def serve(host: str, port: int, snapshot: str | None) -> None:
        raise RuntimeError("no kubeconfig\nsecond line")

    _fake_module(monkeypatch, "berth.extender.server", serve=serve)
    r = cli("extender")
    assert r.code == 1
    assert r.err == "berth: error: extender: RuntimeError: no kubeconfig second line\n"


def test_operator_passes_its_arguments_through(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []

    def main(argv: list[str]) -> int:
        seen.append(list(argv))
        return 0

    _fake_module(monkeypatch, "berth.operator.main", main=main, run=lambda: pytest.fail("run called"))
    assert cli("operator", "--namespace", "shop", "--liveness", "http://0.0.0.0:8080/healthz", "-v").code == 0
    assert seen == [["--namespace", "shop", "--liveness", "http://0.0.0.0:8080/healthz", "-v"]]
    assert cli("operator", "--help").code == 0
    assert seen[-1] == ["--help"]


def test_operator_run_without_main(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[bool] = []
    _fake_module(monkeypatch, "berth.operator.main", run=lambda: ran.append(True))
    assert cli("operator").code == 0 and ran == [True]
    r = cli("operator", "--namespace", "x")
    assert r.code == 1 and "takes no" in r.err


def test_operator_unavailable(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "berth.operator.main", None)
    r = cli("operator")
    assert r.code == 1 and "operator: unavailable" in r.err


def test_other_commands_work_without_the_services(cli: Cli, files: Files, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "berth.extender.server", None)
    monkeypatch.setitem(sys.modules, "berth.operator.main", None)
    assert cli("capacity", "--snapshot", files.json, "--pod", files.pod).code == 0


# -- the loader -------------------------------------------------------------------------------


def test_loader_counts_what_it_ignores(files: Files) -> None:
    snap = load_snapshot(str(files.json))
    assert [n.name for n in snap.nodes] == ["n1", "n2", "n3"]
    assert sorted(p.name for p in snap.pods) == ["batch-0", "web-0"]
    assert snap.pending_pods == 1 and snap.terminal_pods == 1
    assert set(snap.leases) == {"n1", "n2", "n3"}  # the kube-system Lease is not a node lease
    assert snap.view().leases_tracked


def test_now_is_the_newest_lease_else_the_clock(files: Files) -> None:
    snap = load_snapshot(str(files.json))
    assert snap.now() == kube.RENEWED_EPOCH
    assert snap.now(override=5.0) == 5.0
    no_leases = snapshot_from_documents([kube.as_list([make_node("n1").zone("zone-a").obj()])], "x")
    assert no_leases.now(clock=lambda: 42.0) == 42.0
    assert not no_leases.view().leases_tracked


def test_unquoted_yaml_timestamps_are_read() -> None:
    docs = parse_documents("kind: Node\nmetadata: {name: n1}\n---\nkind: Lease\n"
                           "metadata: {name: n1, namespace: kube-node-lease}\n"
                           "spec: {renewTime: 2026-03-01T10:00:00Z}\n", "t.yaml")
    assert snapshot_from_documents(docs, "t.yaml").now() == kube.RENEWED_EPOCH


def test_views_are_independent_copies(files: Files) -> None:
    snap = load_snapshot(str(files.json))
    first = snap.view()
    first.remove_node("n1")
    assert "n1" in snap.view().nodes


def test_several_lists_in_one_yaml_file() -> None:
    items = kube.cluster()
    docs = [kube.as_list(items[:3]), kube.as_list(items[3:])]
    snap = snapshot_from_documents(docs, "two.yaml")
    assert len(snap.nodes) == 3 and len(snap.pods) == 2


def test_error_in_a_later_document_names_it() -> None:
    docs = [kube.as_list([make_node("n1").zone("zone-a").obj()]), {"kind": "ConfigMap", "metadata": {"name": "c"}}]
    with pytest.raises(SnapshotError, match=r"^two.yaml: document 2: kind: expected Node, Pod, Lease or "
                                            r"PlacementPolicy"):
        snapshot_from_documents(docs, "two.yaml")


def test_invalid_policy_in_a_snapshot_names_its_path() -> None:
    bad = make_policy().strategy("Sideways").obj()
    with pytest.raises(SnapshotError, match=r"^s.json: items\[1\] \(PlacementPolicy shop/web\): spec.strategy: "):
        snapshot_from_documents([kube.as_list([make_node("n1").zone("zone-a").obj(), bad])], "s.json")
