"""End to end: berth nominates a governed pending pod's node (``status.nominatedNodeName``) and a
real kube-scheduler (v1.37) tries that node alone first, through berth's filter, and binds it;
a nomination berth no longer stands by is refused and the pod lands where berth decides.

Run: ``bash hack/build-k8s.sh && pytest -m e2e tests/extender/test_nominate_e2e.py``.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from kubernetes import client as k8s

from berth.core.round import ROUND_ANNOTATION
from berth.extender.binder import KubeBinder
from berth.extender.scheduler_config import scheduler_config
from berth.extender.settings import ExtenderSettings
from tests.e2e.harness import ControlPlane, NodeSpec, Scheduler, simple_pod, wait_for
from tests.e2e.harness.fixtures import (  # noqa: F401  (pytest fixtures)
    control_plane,
    e2e_namespace,
    kube_api,
    make_nodes,
    node_leases,
    start_scheduler,
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
from tests.e2e.stack import berth_crd, served_extender  # noqa: F401  (berth_crd: a pytest fixture)

pytestmark = pytest.mark.e2e


@pytest.fixture
def extender(control_plane: ControlPlane, berth_crd: None) -> Iterator[str]:  # noqa: F811
    """berth's extender with the nominate profile's settings, nominating the pods of :data:`SCHEDULER`."""
    with served_extender(control_plane, ExtenderSettings(api_anonymous=True, filter_winner_only=True,
                                                         nominate=True, nominate_schedulers=SCHEDULER)) as url:
        yield url


def _bound(core: Any, namespace: str, names: list[str]) -> dict[str, Any]:
    def placed() -> dict[str, Any]:
        pods = {p.metadata.name: p for p in core.list_namespaced_pod(namespace).items}
        return {n: pods[n] for n in names if n in pods and pods[n].spec.node_name}

    return wait_for(placed, lambda got: len(got) == len(names), timeout=60,
                    what=f"{len(names)} pods bound", describe=lambda got: f"bound so far: {sorted(got)}")


def _start(start: Callable[..., Scheduler], url: str) -> Scheduler:
    config = scheduler_config(url)
    config["profiles"] = [{"schedulerName": SCHEDULER}]
    return start(config, name=SCHEDULER)


def test_governed_pods_are_nominated_and_land_on_their_nominated_nodes(
    kube_api: Any,  # noqa: F811
    make_nodes: Callable[..., list[str]],  # noqa: F811
    e2e_namespace: str,  # noqa: F811
    start_scheduler: Callable[..., Scheduler],  # noqa: F811
    extender: str,
) -> None:
    run = "r" + uuid.uuid4().hex[:6]
    selector = {"berth.e2e/nominate": run}
    nodes = make_nodes(*(NodeSpec(f"nom-{run}-{i}", cpu="4", memory="8Gi", labels=selector) for i in range(3)))
    create_policy(kube_api, e2e_namespace, "Spread", selector, extender)
    core: Any = k8s.CoreV1Api(kube_api)
    web = [f"web-{i}" for i in range(3)]
    create_pods(core, e2e_namespace, web)  # pending before kube-scheduler runs: berth nominates them first
    nominated = wait_nominated(core, e2e_namespace, web)
    assert sorted(nominated.values()) == sorted(nodes)  # Spread: one a node, planned in turn

    _start(start_scheduler, extender)
    placed = _bound(core, e2e_namespace, web)
    assert {n: p.spec.node_name for n, p in placed.items()} == nominated
    counts = nominations(extender)
    assert counts.get("made") == 3
    assert counts.get("hit") == 3, counts  # berth's filter was sent each nominated node alone and passed it
    # the API server clears the nomination when it binds the pod (ClearingNominatedNodeNameAfterBinding)
    assert all(p.status.nominated_node_name is None for p in placed.values())


@pytest.mark.parametrize("strategy", ["Fill", "Each"])
def test_pods_of_a_round_policy_coming_in_waves_are_all_nominated_round_after_round(
    kube_api: Any,  # noqa: F811
    make_nodes: Callable[..., list[str]],  # noqa: F811
    e2e_namespace: str,  # noqa: F811
    start_scheduler: Callable[..., Scheduler],  # noqa: F811
    extender: str,
    strategy: str,
) -> None:
    """A round is cut to the pods waiting when it opens; the next wave opens the next round at
    once, though no pod of the first is bound yet, and every pod lands on its nominated node."""
    run = "r" + uuid.uuid4().hex[:6]
    selector = {"berth.e2e/nominate": run}
    make_nodes(*(NodeSpec(f"nom-{run}-{i}", cpu="4", memory="8Gi", labels=selector) for i in range(3)))
    create_policy(kube_api, e2e_namespace, strategy, selector, extender, count=2)
    core: Any = k8s.CoreV1Api(kube_api)
    waves = [["web-0", "web-1"], ["web-2", "web-3"]]
    nominated: dict[str, str] = {}
    for wave in waves:  # pending before kube-scheduler runs: berth nominates them first
        create_pods(core, e2e_namespace, wave)
        nominated |= wait_nominated(core, e2e_namespace, wave)

    _start(start_scheduler, extender)
    names = [name for wave in waves for name in wave]
    placed = _bound(core, e2e_namespace, names)
    assert {n: p.spec.node_name for n, p in placed.items()} == nominated
    counts = nominations(extender)
    assert (counts.get("made"), counts.get("hit")) == (4, 4), counts
    # the second wave's rounds opened after the first's were used up (by nominations alone)
    rounds = [{placed[n].metadata.annotations[ROUND_ANNOTATION] for n in wave} for wave in waves]
    assert not rounds[0] & rounds[1], rounds


def test_a_stale_nomination_still_lands_where_berth_decides(
    kube_api: Any,  # noqa: F811
    make_nodes: Callable[..., list[str]],  # noqa: F811
    e2e_namespace: str,  # noqa: F811
    start_scheduler: Callable[..., Scheduler],  # noqa: F811
    extender: str,
) -> None:
    run = "r" + uuid.uuid4().hex[:6]
    selector = {"berth.e2e/nominate": run}
    first, second = make_nodes(NodeSpec(f"nom-{run}-a", cpu="4", memory="8Gi", labels=selector),
                               NodeSpec(f"nom-{run}-b", cpu="4", memory="8Gi", labels=selector))
    create_policy(kube_api, e2e_namespace, "Spread", selector, extender)
    core: Any = k8s.CoreV1Api(kube_api)
    create_pods(core, e2e_namespace, ["web-0"])
    nominated = wait_nominated(core, e2e_namespace, ["web-0"])["web-0"]
    assert nominated == first
    # The nominated node fills up before kube-scheduler comes: it still fits the pod (kube-scheduler's
    # own filters pass it), but Spread now ranks the other node first.
    def requested_cpu() -> int:
        return int(httpx.get(extender + "/api/v1/nodes/allocations").json()["nodes"][first]["requested"]["cpu"])

    before = requested_cpu()  # the nominated pod counts there already
    filler = simple_pod("filler", cpu="2", memory="256Mi", labels={"app": "filler"})
    filler["spec"]["nodeName"] = first  # bound directly, as a pod of another scheduler would be
    core.create_namespaced_pod(e2e_namespace, k8s.V1Pod.model_validate(filler))
    wait_for(requested_cpu, lambda cpu: cpu > before, timeout=30, what="the filler in berth's view")

    _start(start_scheduler, extender)
    placed = _bound(core, e2e_namespace, ["web-0"])
    assert placed["web-0"].spec.node_name == second  # berth's decision, not the stale nomination
    counts = nominations(extender)
    assert counts.get("missed") == 1, counts
    assert not counts.get("hit"), counts


def test_a_nomination_is_written_only_where_none_is(
    control_plane: ControlPlane,  # noqa: F811
    kube_api: Any,  # noqa: F811
    e2e_namespace: str,  # noqa: F811
) -> None:
    """The write tests that no node is nominated yet (a second extender replica, or kube-scheduler's
    preemption, is never overwritten) and that the pod is the one planned (its uid); a withdrawal
    removes only berth's own nomination."""
    import asyncio

    from berth.core import pod_from_object
    from berth.extender.binder import NominationRefused

    core: Any = k8s.CoreV1Api(kube_api)
    made = core.create_namespaced_pod(e2e_namespace, k8s.V1Pod.model_validate(
        simple_pod("nominated-once", labels={"app": "web"}, scheduler_name="nobody")))
    pod = pod_from_object(kube_api.sanitize_for_serialization(made))
    api = control_plane.api_client()
    binder = KubeBinder(api)

    async def twice() -> list[str]:
        outcomes = []
        for node in ("first-node", "second-node"):
            try:
                await binder.nominate(pod, node)
                outcomes.append("written")
            except NominationRefused as exc:
                outcomes.append(str(exc))
        await binder.close()
        return outcomes

    async def withdraw(node: str) -> str:
        try:
            await binder.withdraw_nomination(pod, node)
        except NominationRefused as exc:
            return str(exc)
        finally:
            await binder.close()
        return "withdrawn"

    def nominated() -> str | None:
        return core.read_namespaced_pod("nominated-once", e2e_namespace).status.nominated_node_name  # type: ignore[no-any-return]

    try:
        outcomes = asyncio.run(twice())
        assert outcomes[0] == "written"
        assert outcomes[1].startswith("cannot nominate second-node"), outcomes
        assert nominated() == "first-node"
        # withdrawn only while it is still the node berth nominated
        assert asyncio.run(withdraw("second-node")).startswith("cannot withdraw")
        assert nominated() == "first-node"
        assert asyncio.run(withdraw("first-node")) == "withdrawn"
        assert nominated() is None
    finally:
        api.close()


def test_of_two_extenders_one_holds_the_lease_and_nominates(
    control_plane: ControlPlane,  # noqa: F811
    kube_api: Any,  # noqa: F811
    make_nodes: Callable[..., list[str]],  # noqa: F811
    e2e_namespace: str,  # noqa: F811
    start_scheduler: Callable[..., Scheduler],  # noqa: F811
    berth_crd: None,  # noqa: F811
) -> None:
    """Two extender replicas against one API server: the holder of the nominator's Lease nominates,
    the other plans nothing; when the holder stops (releasing the Lease), the other takes over, and
    its filter counts what became of every nomination, the old holder's too (the pods'
    managedFields name berth's field manager)."""
    run = "r" + uuid.uuid4().hex[:6]
    lease = f"nominator-{run}"
    selector = {"berth.e2e/nominate": run}
    make_nodes(*(NodeSpec(f"nom-{run}-{i}", cpu="8", memory="16Gi", labels=selector) for i in range(3)))
    coord: Any = k8s.CoordinationV1Api(kube_api)
    core: Any = k8s.CoreV1Api(kube_api)

    def settings(identity: str) -> ExtenderSettings:
        return ExtenderSettings(api_anonymous=True, filter_winner_only=True, nominate=True,
                                nominate_schedulers=SCHEDULER, leader_lease_name=lease,
                                leader_lease_namespace=e2e_namespace, leader_identity=identity,
                                leader_lease_duration_seconds=4, leader_renew_deadline_seconds=3,
                                leader_retry_period_seconds=0.5)

    stacks = {name: contextlib.ExitStack() for name in ("extender-a", "extender-b")}
    try:
        urls = {name: stack.enter_context(served_extender(control_plane, settings(name)))
                for name, stack in stacks.items()}
        holder, standby = elected(coord, lease, e2e_namespace, urls)
        create_policy(kube_api, e2e_namespace, "Spread", selector, urls[holder])
        policy_seen(urls[standby], e2e_namespace)

        first = [f"web-{i}" for i in range(4)]
        create_pods(core, e2e_namespace, first)
        wait_nominated(core, e2e_namespace, first)
        wait_for(lambda: nominations(urls[holder]).get("made"), lambda made: made == len(first), timeout=30,
                 what="the holder's nominations counted")
        assert not nominations(urls[standby]), "the replica without the Lease planned nominations"

        stacks[holder].close()  # the holder stops: it releases the Lease, the standby takes it at its next try
        lease_holder(coord, lease, e2e_namespace, until=lambda h: h == standby, timeout=30,
                     what="the standby holding the Lease")
        assert leading(urls[standby]) == 1
        second = [f"web-{i}" for i in range(4, 6)]
        create_pods(core, e2e_namespace, second)
        wait_nominated(core, e2e_namespace, second)
        wait_for(lambda: nominations(urls[standby]).get("made"), lambda made: made == len(second), timeout=30,
                 what="the new holder's nominations counted")
        assert coord.read_namespaced_lease(lease, e2e_namespace).spec.lease_transitions == 1

        _start(start_scheduler, urls[standby])
        _bound(core, e2e_namespace, first + second)
        counts = nominations(urls[standby])
        judged = {r: counts.get(r, 0) for r in ("hit", "missed", "late")}
        assert sum(judged.values()) == len(first + second), counts  # each nomination counted once
        assert judged["hit"] >= len(first), counts  # the old holder's too
    finally:
        for stack in stacks.values():
            stack.close()
