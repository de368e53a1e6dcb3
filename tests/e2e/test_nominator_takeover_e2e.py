"""End to end: two ``berth extender`` processes nominate under one Lease, and when the holder is
killed (SIGKILL: it cannot give the Lease up, as a crash or a lost node would leave it), the other
takes the Lease once it has expired (15 s, kube-scheduler's lease duration) and nominates the pods
that came meanwhile.

Run: ``bash hack/build-k8s.sh && pytest -m e2e tests/e2e/test_nominator_takeover_e2e.py``.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from tests.e2e.harness import NodeSpec
from tests.e2e.harness.fixtures import (  # noqa: F401  (pytest fixtures)
    control_plane,
    e2e_namespace,
    kube_api,
    make_nodes,
    node_leases,
)
from tests.e2e.nominator import (
    SCHEDULER,
    create_pods,
    create_policy,
    elected,
    leading,
    lease_holder,
    nominations,
    policy_seen,
    wait_nominated,
)
from tests.e2e.stack import Extender, berth_crd  # noqa: F401  (berth_crd: a pytest fixture)

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]

LEASE_DURATION = 15.0
"""The nominator's Lease duration (the default, kube-scheduler's)."""

RETRY_PERIOD = 2.0
"""How often a candidate reads the Lease (the default): it takes an expired Lease within about
1.2 of these after the expiry as it measures it."""


def test_a_killed_holders_lease_expires_and_the_other_replica_nominates(
    control_plane: Any,  # noqa: F811
    kube_api: Any,  # noqa: F811
    make_nodes: Callable[..., list[str]],  # noqa: F811
    e2e_namespace: str,  # noqa: F811
    berth_crd: None,  # noqa: F811
) -> None:
    run = "r" + uuid.uuid4().hex[:6]
    lease = f"nominator-{run}"
    selector = {"berth.e2e/takeover": run}
    make_nodes(*(NodeSpec(f"tko-{run}-{i}", cpu="8", memory="16Gi", labels=selector) for i in range(3)))
    coord: Any = k8s.CoordinationV1Api(kube_api)
    core: Any = k8s.CoreV1Api(kube_api)

    def replica(name: str) -> Extender:
        # the worktree's code, not an installed copy's
        return Extender(control_plane, name=f"{name}-{run}", env={
            "PYTHONPATH": str(ROOT), "BERTH_NOMINATE": "true", "BERTH_NOMINATE_SCHEDULERS": SCHEDULER,
            "BERTH_FILTER_WINNER_ONLY": "true", "BERTH_LEADER_LEASE_NAME": lease,
            "BERTH_LEADER_LEASE_NAMESPACE": e2e_namespace, "BERTH_LEADER_IDENTITY": name})

    replicas = {name: replica(name) for name in ("extender-a", "extender-b")}
    try:
        for extender in replicas.values():
            extender.start()
        urls = {name: extender.url for name, extender in replicas.items()}
        holder, standby = elected(coord, lease, e2e_namespace, urls)
        create_policy(kube_api, e2e_namespace, "Spread", selector, urls[holder])
        policy_seen(urls[standby], e2e_namespace)

        first = [f"web-{i}" for i in range(3)]
        create_pods(core, e2e_namespace, first)
        wait_nominated(core, e2e_namespace, first)
        assert not nominations(urls[standby]).get("made"), "the replica without the Lease nominated"

        replicas[holder].kill()  # SIGKILL: the Lease is not given up
        killed = time.monotonic()
        second = [f"web-{i}" for i in range(3, 6)]
        create_pods(core, e2e_namespace, second)
        lease_holder(coord, lease, e2e_namespace, until=lambda h: h == standby,
                     timeout=LEASE_DURATION + 4 * RETRY_PERIOD + 10,
                     what="the standby holding the Lease once it expired")
        took = time.monotonic() - killed
        # not before the Lease expired as the standby measures it (from the last renewal it read,
        # up to a retry period before the kill), so a killed holder was not released
        assert took >= LEASE_DURATION - 1.2 * RETRY_PERIOD - 1, f"taken over {took:.1f}s after the kill"
        assert leading(urls[standby]) == 1
        nominated = wait_nominated(core, e2e_namespace, second)
        assert set(nominated) == set(second)
        assert nominations(urls[standby]).get("made") == len(second)
        assert coord.read_namespaced_lease(lease, e2e_namespace).spec.lease_transitions == 1
    finally:
        for extender in replicas.values():
            with contextlib.suppress(Exception):
                extender.stop()
