"""The offline extender reads a snapshot file as the CLI does: the same kinds accepted, the same
refusals word for word, the same node Leases and the same moment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from berth.extender.snapshot_view import load_snapshot as load_store
from berth.snapshot import SnapshotError
from berth.snapshot import load_snapshot as load_cli
from tests.builders import make_node
from tests.cli import kube


def write(tmp_path: Path, items: list[dict[str, Any]]) -> str:
    path = tmp_path / "snap.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return str(path)


def test_both_judge_the_snapshot_at_its_newest_node_lease(tmp_path: Path) -> None:
    path = write(tmp_path, kube.cluster())  # a kube-system Lease from 2020 is not a node's
    store, clock = load_store(path)
    assert clock() == load_cli(path).now() == kube.RENEWED_EPOCH
    assert store.view.leases_tracked and set(store.view.leases) == {"n1", "n2", "n3"}


def test_both_keep_the_nodes_and_the_store_the_pending_pods(tmp_path: Path) -> None:
    path = write(tmp_path, kube.cluster())
    store, _ = load_store(path)
    snap = load_cli(path)
    assert set(store.view.nodes) == {n.name for n in snap.nodes} == {"n1", "n2", "n3"}
    assert snap.pending_pods == 1 and "uid-shop-web-pending" in store.pending


def test_without_node_leases_both_judge_at_the_current_time(tmp_path: Path) -> None:
    path = write(tmp_path, [(make_node("n1")
                             .zone("zone-a")
                             .obj()), kube.lease("kube-scheduler", namespace="kube-system")])
    store, clock = load_store(path)
    assert not store.view.leases_tracked
    assert load_cli(path).now(clock=lambda: 5.0) == 5.0 and clock() > kube.RENEWED_EPOCH


@pytest.mark.parametrize(("case", "item", "problem"), [
    ("another_kind", {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}},
     "kind: expected Node, Pod, Lease or PlacementPolicy"),
    ("a_node_lease_with_a_bad_time", kube.lease("n1", renew="yesterday"), "spec.renewTime: not an RFC 3339 time"),
])
def test_both_refuse_the_same_file_with_the_same_message(tmp_path: Path, case: str, item: dict[str, Any],
                                                         problem: str) -> None:
    path = write(tmp_path, [make_node("n1").zone("zone-a").obj(), item])
    with pytest.raises(SnapshotError) as cli:
        load_cli(path)
    with pytest.raises(SnapshotError) as offline:
        load_store(path)
    assert str(offline.value) == str(cli.value), case
    assert problem in str(cli.value), case
