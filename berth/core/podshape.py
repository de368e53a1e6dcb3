"""The effective request of a pod, as kube-scheduler computes it.

max(sum of app containers + all sidecars, the peak of the init sequence) + pod overhead,
per resource. Sidecars are init containers with ``restartPolicy: Always``: they keep running,
so every later init container and the app containers stack on top of them.

Pod-level resources (``spec.resources``) replace the containers' figure for cpu, memory and
hugepages wherever the pod requests them; every other resource still comes from the containers,
and the overhead is added on top of either. The API server defaults a pod-level request from a
pod-level limit; a pod read from a file gets the same default here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from berth.core.quantity import CPU, MEMORY, QuantityError, to_base_units

HUGEPAGES_PREFIX = "hugepages-"
_POD_LEVEL = frozenset({CPU, MEMORY})


def container_requests(container: Mapping[str, Any], where: str = "container") -> dict[str, int]:
    """A container's requests; a resource with only a limit requests its limit (API defaulting).
    A quantity the API server would refuse raises :class:`QuantityError` naming the field."""
    resources = container.get("resources") or {}
    requests = dict(resources.get("requests") or {})
    for name, limit in (resources.get("limits") or {}).items():
        requests.setdefault(name, limit)
    out = {}
    for name, value in requests.items():
        try:
            out[name] = to_base_units(name, value)
        except QuantityError as exc:
            field = "limits" if name not in (resources.get("requests") or {}) else "requests"
            raise QuantityError(f"{where}.resources.{field}.{name}: {exc}") from None
    return out


def _add(into: dict[str, int], other: Mapping[str, int]) -> None:
    for name, amount in other.items():
        into[name] = into.get(name, 0) + amount


def _max(into: dict[str, int], other: Mapping[str, int]) -> None:
    for name, amount in other.items():
        if amount > into.get(name, 0):
            into[name] = amount


def effective_requests(spec: Mapping[str, Any]) -> dict[str, int]:
    """The pod's effective request from its spec, in base units, zero entries dropped."""
    total: dict[str, int] = {}
    for i, container in enumerate(_list(spec.get("containers"))):
        _add(total, container_requests(container, f"spec.containers[{i}]"))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for i, container in enumerate(_list(spec.get("initContainers"))):
        own = container_requests(container, f"spec.initContainers[{i}]")
        if container.get("restartPolicy") == "Always":
            _add(sidecars, own)
            _max(init_peak, sidecars)
        else:
            step = dict(own)
            _add(step, sidecars)
            _max(init_peak, step)
    _add(total, sidecars)
    _max(total, init_peak)
    total.update(pod_level_requests(spec, total))
    overhead = spec.get("overhead") or {}
    for name, value in overhead.items():
        try:
            _add(total, {name: to_base_units(name, value)})
        except QuantityError as exc:
            raise QuantityError(f"spec.overhead.{name}: {exc}") from None
    return {name: amount for name, amount in total.items() if amount}


def is_pod_level_resource(name: str) -> bool:
    """The resources a pod may state for itself as a whole: cpu, memory and hugepages."""
    return name in _POD_LEVEL or name.startswith(HUGEPAGES_PREFIX)


def pod_level_requests(spec: Mapping[str, Any], containers: Mapping[str, int]) -> dict[str, int]:
    """The pod-level requests that replace the containers' figure, in base units.

    ``containers`` is the containers' aggregate (before overhead), which the API server's
    defaulting gives to a pod-level cpu or memory limit that has no pod-level request; any other
    limited resource without a request requests its limit.
    """
    resources = spec.get("resources")
    if not resources:
        return {}
    if not isinstance(resources, Mapping):
        raise ValueError("spec.resources must be an object")
    requests = {name: _amount(name, value, "spec.resources.requests")
                for name, value in (resources.get("requests") or {}).items() if is_pod_level_resource(name)}
    for name, value in (resources.get("limits") or {}).items():
        if name in requests or not is_pod_level_resource(name):
            continue
        if name in _POD_LEVEL and name in containers:
            requests[name] = containers[name]
        else:
            requests[name] = _amount(name, value, "spec.resources.limits")
    return requests


def _amount(name: str, value: Any, where: str) -> int:
    try:
        return to_base_units(name, value)
    except QuantityError as exc:
        raise QuantityError(f"{where}.{name}: {exc}") from None


def _list(value: object) -> Iterable[Mapping[str, Any]]:
    if not value:
        return ()
    if not isinstance(value, list):
        raise ValueError("containers must be a list")
    return [c for c in value if isinstance(c, Mapping)]
