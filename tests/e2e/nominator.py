"""What the e2e tests of the nominator share, whether their extenders are served in the test
process (``tests/extender/test_nominate_e2e.py``) or run as ``berth extender`` processes
(``tests/e2e/test_nominator_takeover_e2e.py``): the governed pods and their policy, reading the
nominations off the pods and an extender's ``/metrics``, and the election of the replica that
nominates.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import httpx
from kubernetes import client as k8s
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from tests.e2e.harness import simple_pod, wait_for
from tests.e2e.stack import GROUP, PLURAL, VERSION, policy_manifest

SCHEDULER = "berth-nominate-e2e"
"""The kube-scheduler profile whose pods berth nominates (``nominate_schedulers``)."""


def create_pods(core: Any, namespace: str, names: list[str]) -> None:
    """Pods ``app=web`` of :data:`SCHEDULER`, one CPU each: pending until a scheduler of that
    name runs, so berth nominates them first."""
    for name in names:
        core.create_namespaced_pod(namespace, k8s.V1Pod.model_validate(
            simple_pod(name, cpu="1", memory="256Mi", labels={"app": "web"}, scheduler_name=SCHEDULER)))


def create_policy(api: Any, namespace: str, strategy: str, selector: Mapping[str, str], url: str,
                  **spec: Any) -> None:
    """The PlacementPolicy ``web`` for the pods ``app=web``, on the nodes labelled ``selector``;
    back once the extender at ``url`` has it."""
    body = policy_manifest("web", {"app": "web"}, strategy=strategy, nodeFilter={"labels": dict(selector)}, **spec)
    k8s.CustomObjectsApi(api).create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
    policy_seen(url, namespace)


def policy_seen(url: str, namespace: str) -> None:
    """Wait until the extender at ``url`` has the policy ``web`` in its view."""
    wait_for(lambda: httpx.get(url + "/api/v1/nodes/allocations").json()["policies"],
             lambda policies: f"{namespace}/web" in policies, timeout=30,
             what=f"the policy in the view of the extender at {url}")


def wait_nominated(core: Any, namespace: str, names: list[str]) -> dict[str, str]:
    """pod name -> its nominated node, once each of ``names`` has one."""
    def seen() -> dict[str, str]:
        pods = {p.metadata.name: p for p in core.list_namespaced_pod(namespace).items}
        return {n: pods[n].status.nominated_node_name for n in names
                if n in pods and pods[n].status.nominated_node_name}

    return wait_for(seen, lambda got: len(got) == len(names), timeout=30,
                    what=f"{len(names)} pods nominated", describe=lambda got: f"nominated so far: {got}")


def _samples(url: str, family_name: str) -> list[Sample]:
    for family in text_string_to_metric_families(httpx.get(url + "/metrics", timeout=10).text):
        if family.name == family_name:
            return list(family.samples)
    return []


def nominations(url: str) -> dict[str, float]:
    """``berth_nominations_total`` of the extender at ``url`` by result (made, hit, missed, ...)."""
    return {s.labels["result"]: s.value for s in _samples(url, "berth_nominations") if s.name.endswith("_total")}


def leading(url: str) -> float | None:
    """``berth_nominator_leading`` of the extender at ``url`` (1: it holds the Lease); None when
    it exports none."""
    samples = _samples(url, "berth_nominator_leading")
    return float(samples[0].value) if samples else None


def lease_holder(coord: Any, lease: str, namespace: str, *, until: Callable[[str | None], bool],
                 timeout: float, what: str) -> str:
    """The holder of the Lease ``lease`` once ``until(holder)`` is true."""
    return wait_for(lambda: coord.read_namespaced_lease(lease, namespace).spec.holder_identity,  # type: ignore[no-any-return]
                    until, timeout=timeout, what=what)


def elected(coord: Any, lease: str, namespace: str, urls: Mapping[str, str]) -> tuple[str, str]:
    """(holder, standby) of two replicas named by their Lease identities, once one of them holds
    the nominator's Lease and it alone says it leads."""
    holder = lease_holder(coord, lease, namespace, until=lambda h: h in urls, timeout=30,
                          what="a holder of the nominator's Lease")
    standby = next(name for name in urls if name != holder)
    wait_for(lambda: {n: leading(u) for n, u in urls.items()}, lambda got: got == {holder: 1, standby: 0},
             timeout=30, what="the holder alone leading")
    return holder, standby
