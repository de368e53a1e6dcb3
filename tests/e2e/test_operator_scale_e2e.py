"""The operator's scale must not regress silently: on a control plane of its own (so that its
thousand fake nodes never meet another test's pods), 1,000 Ready nodes with Leases, 20,000 pods
(10 pending per policy, the rest bound at creation) and 200 PlacementPolicies; ``berth operator``
is started on it and every policy must have a correct status within
:data:`FIRST_STATUS_BOUND_SECONDS` of the start.

The bound: the operator that read the cluster through Kopf's per-object handlers never gave a
first status on 10,000 pods; the watch-fed one needs a few seconds for 20,000 pods on a quiet
machine (bench/bench_operator.py). 90 s leaves room for a shared CI machine. Building the
cluster takes one to three minutes and is not part of the bound.
"""

from __future__ import annotations

import pytest

from tests.e2e.harness import ControlPlane
from tests.e2e.scale import Api, OperatorProcess, Shape, build, has_status, wait_every_status
from tests.e2e.stack import CRD

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1200)]

SHAPE = Shape(nodes=1000, pods=20_000, policies=200, pending=10)
FIRST_STATUS_BOUND_SECONDS = 90.0


def test_every_policy_has_its_status_within_the_bound_on_a_large_cluster() -> None:
    with ControlPlane.start(apiserver_args=["--max-requests-inflight=800"]) as cp:
        cp.apply_crds(CRD)
        api = Api(cp)
        try:
            build(cp, api, SHAPE)
            op = OperatorProcess(cp).start()
            try:
                first = wait_every_status(api, op, SHAPE.policies, FIRST_STATUS_BOUND_SECONDS)
                assert first is not None, (
                    f"not every policy had a status {FIRST_STATUS_BOUND_SECONDS:.0f} s after the operator's "
                    f"start:\n{op.log_tail()}")
                print(f"\n[scale] every policy has a status {first:.1f} s after the operator's start "
                      f"({SHAPE.nodes} nodes, {SHAPE.pods} pods, {SHAPE.policies} policies)")
                policies = api.policies()
            finally:
                op.stop()
        finally:
            api.close()
    selected = SHAPE.pods // SHAPE.policies
    wrong = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p.get("status") for p in policies
             if not has_status(p) or (p["status"]["selected"], p["status"]["pending"], p["status"]["placedTotal"])
             != (selected, SHAPE.pending, selected - SHAPE.pending)}
    assert not wrong, f"{len(wrong)} policies with a wrong status, e.g. {next(iter(wrong.items()))}"
