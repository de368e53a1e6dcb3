"""End to end: a real kube-scheduler (etcd + kube-apiserver + kube-scheduler as local processes,
see tests/e2e/harness) configured as berth's README says schedules pods through the extender,
which watches the API server and creates the Bindings itself.

Run: ``bash hack/build-k8s.sh && pytest -m e2e tests/extender/test_e2e.py``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import orjson
import pytest
from kubernetes import client as k8s

from berth.core.decision import DECISION_ANNOTATION
from berth.extender.scheduler_config import scheduler_config
from berth.extender.settings import ExtenderSettings
from tests.decision_schema import valid_record
from tests.e2e.harness import ControlPlane, NodeSpec, Scheduler, simple_pod, wait_for
from tests.e2e.harness.fixtures import (  # noqa: F401  (pytest fixtures)
    control_plane,
    e2e_namespace,
    kube_api,
    make_nodes,
    node_leases,
    start_scheduler,
)
from tests.e2e.stack import berth_crd, events, served_extender  # noqa: F401  (berth_crd: a pytest fixture)

pytestmark = pytest.mark.e2e


@pytest.fixture
def extender(control_plane: ControlPlane, berth_crd: None) -> Iterator[str]:  # noqa: F811
    """berth's extender against the control plane, served by uvicorn on 127.0.0.1."""
    with served_extender(control_plane, ExtenderSettings(api_anonymous=True)) as url:  # explain API without tokens
        yield url


def _scheduler(start: Callable[..., Scheduler], url: str, name: str, cache_capable: bool) -> Scheduler:
    config = scheduler_config(url, node_cache_capable=cache_capable)
    config["profiles"] = [{"schedulerName": name}]
    return start(config, name=name)


def _bound(core: Any, namespace: str, names: list[str], timeout: float = 60) -> dict[str, str]:
    def placed() -> dict[str, str]:
        pods = {p.metadata.name: p for p in core.list_namespaced_pod(namespace).items}
        return {n: pods[n].spec.node_name for n in names if n in pods and pods[n].spec.node_name}

    return wait_for(placed, lambda got: len(got) == len(names), timeout=timeout,  # type: ignore[no-any-return]
                    what=f"{len(names)} pods bound", describe=lambda got: f"bound so far: {got}")


@pytest.mark.parametrize("cache_capable", [True, False], ids=["nodeCacheCapable", "fullNodes"])
def test_kube_scheduler_places_pods_through_berth(
    cache_capable: bool,
    control_plane: ControlPlane,  # noqa: F811
    kube_api: Any,  # noqa: F811
    make_nodes: Callable[..., list[str]],  # noqa: F811
    e2e_namespace: str,  # noqa: F811
    start_scheduler: Callable[..., Scheduler],  # noqa: F811
    extender: str,
) -> None:
    run = "r" + uuid.uuid4().hex[:6]  # a letter first: never read back as a number
    selector = {"berth.e2e/extender": run}
    small, medium, large = make_nodes(
        NodeSpec(f"ext-{run}-small", cpu="2", memory="8Gi", labels=selector),
        NodeSpec(f"ext-{run}-medium", cpu="4", memory="8Gi", labels=selector),
        NodeSpec(f"ext-{run}-large", cpu="8", memory="8Gi", labels=selector),
    )
    name = f"berth-e2e-{run}"
    _scheduler(start_scheduler, extender, name, cache_capable)
    custom = k8s.CustomObjectsApi(kube_api)
    custom.create_namespaced_custom_object("berth.dev", "v1alpha1", e2e_namespace, "placementpolicies", {
        "apiVersion": "berth.dev/v1alpha1", "kind": "PlacementPolicy",
        "metadata": {"name": "web", "namespace": e2e_namespace},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "strategy": "BestFit",
                 "nodeFilter": {"labels": selector}}})
    wait_for(lambda: httpx.get(extender + "/api/v1/nodes/allocations").json()["policies"],
             lambda policies: f"{e2e_namespace}/web" in policies, timeout=30, what="the policy in berth's view")

    core: Any = k8s.CoreV1Api(kube_api)
    web = [f"web-{i}" for i in range(5)]
    for pod_name in web:  # all at once: kube-scheduler asks about each before the earlier binds land
        core.create_namespaced_pod(e2e_namespace, k8s.V1Pod.model_validate(
            simple_pod(pod_name, cpu="1", memory="256Mi", labels={"app": "web"}, scheduler_name=name)))
    other = simple_pod("other", cpu="100m", labels={"app": "other"}, node_selector=selector, scheduler_name=name)
    core.create_namespaced_pod(e2e_namespace, k8s.V1Pod.model_validate(other))
    placed = _bound(core, e2e_namespace, [*web, "other"])

    # BestFit packs: the small node first (2 cores), then the medium one; never over capacity.
    counts = {n: list(placed[p] for p in web).count(n) for n in (small, medium, large)}
    assert counts == {small: 2, medium: 3, large: 0}, placed
    assert placed["other"] in (small, medium, large)  # no policy: passed through, bound by berth

    pod = core.read_namespaced_pod("web-0", e2e_namespace)
    decision = valid_record(orjson.loads(pod.metadata.annotations[DECISION_ANNOTATION]))
    assert decision.trigger == "bind" and decision.winner is not None and decision.winner.node == placed["web-0"]
    assert decision.policy == f"{e2e_namespace}/web" and decision.strategy == "BestFit"
    # The Event follows the Binding (written once the node's lock is released): it may land just after.
    wait_for(lambda: core.list_namespaced_event(e2e_namespace, field_selector="involvedObject.name=web-0").items,
             lambda events: any(e.reason == "BerthPlaced" for e in events), timeout=30,
             what="berth's BerthPlaced Event on web-0")
    explained = valid_record(httpx.get(f"{extender}/api/v1/decisions/{e2e_namespace}/web-0").json())
    assert explained == decision  # the explain API answers what the annotation holds

    # A pod berth refuses everywhere (while kube-scheduler's own filters let it through) stays Pending,
    # and kube-scheduler's FailedScheduling event counts berth's reasons, one text per cause; berth's
    # BerthRefused Event on the pod names each node with its figures: 95Gi of a node's 100Gi of
    # ephemeral storage would leave less than the 10% free floor.
    huge = simple_pod("huge", cpu="100m", memory="64Mi", labels={"app": "web"}, scheduler_name=name)
    for key in ("requests", "limits"):
        huge["spec"]["containers"][0]["resources"][key]["ephemeral-storage"] = "95Gi"
    core.create_namespaced_pod(e2e_namespace, k8s.V1Pod.model_validate(huge))

    message = wait_for(lambda: events(core, e2e_namespace, "huge", "FailedScheduling"), bool, timeout=60,
                       what="a FailedScheduling event for huge")[0]
    assert "insufficient capacity: ephemeral-storage" in message, message  # counted, not one group per node
    assert "MISSING" not in message

    refused = wait_for(lambda: events(core, e2e_namespace, "huge", "BerthRefused"), bool, timeout=30,
                       what="berth's BerthRefused Event on huge")[0]
    # the small node has too little cpu left for kube-scheduler itself; the others share one text
    shared = f"{', '.join(sorted((medium, large)))}: insufficient capacity: ephemeral-storage: placing leaves"
    assert shared in refused, refused
    assert "below the 10% free floor" in refused, refused
    assert core.read_namespaced_pod("huge", e2e_namespace).spec.node_name is None
    time.sleep(0.5)
    metrics = httpx.get(extender + "/metrics").text
    assert 'berth_extender_decisions_total{result="bound",verb="bind"}' in metrics
