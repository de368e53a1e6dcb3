"""A pod's copies (a round's replica, a pod placed on a node) are what ``dataclasses.replace``
makes: every other field kept, whatever the pod carries."""

from __future__ import annotations

from dataclasses import fields, replace

import pytest

from berth.core.model import NodeAffinity, Owner, PodInfo, Toleration

FULL = PodInfo(uid="u", name="n", namespace="ns", labels={"app": "web"}, requests={"cpu": 100}, node_name="a",
               terminating=True, sleepy=True, tolerations=(Toleration("k", "Exists"),),
               node_affinity=NodeAffinity({"disk": "ssd"}), controller=Owner("ReplicaSet", "web"), mirror=True)


def test_the_full_pod_sets_every_field_away_from_its_default() -> None:
    bare = PodInfo(uid="u", name="n", namespace="ns")
    assert all(getattr(FULL, f.name) != getattr(bare, f.name) for f in fields(PodInfo) if f.name not in
               ("uid", "name", "namespace"))


@pytest.mark.parametrize(("name", "copy", "want"), [
    ("placed_on_a_node", FULL.placed_on("b"), replace(FULL, node_name="b")),
    ("taken_off_its_node", FULL.placed_on(None), replace(FULL, node_name=None)),
    ("a_replica_under_its_own_identity", FULL.with_identity("u~1", "n~1"), replace(FULL, uid="u~1", name="n~1")),
], ids=lambda v: v if isinstance(v, str) else "")
def test_a_pod_copy_is_what_replace_makes(name: str, copy: PodInfo, want: PodInfo) -> None:
    assert copy == want
    assert [getattr(copy, f.name) for f in fields(PodInfo)] == [getattr(want, f.name) for f in fields(PodInfo)]
