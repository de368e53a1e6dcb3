"""Quantities, the pod's effective request (init containers, sidecars, overhead) and reading
Kubernetes objects into the core's data."""

from __future__ import annotations

import contextlib
import math
import time
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from berth.core.kube import (
    ObjectError,
    format_time,
    lease_renew_seconds,
    node_from_object,
    parse_time,
    pod_from_object,
)
from berth.core.model import NodeAffinity, NodeSelectorTerm, Requirement, Taint, Toleration
from berth.core.podshape import effective_requests
from berth.core.quantity import MAX_AMOUNT, QuantityError, format_amount, to_base_units

GI = 2**30
MI = 2**20

QUANTITIES = [
    ("millicores", "cpu", "250m", 250),
    ("whole_cores", "cpu", "2", 2000),
    ("fractional_cores", "cpu", "0.5", 500),
    ("integer_cores", "cpu", 3, 3000),
    ("micro_cpu_rounds_up_to_a_millicore", "cpu", "1u", 1),
    ("nano_cpu_rounds_up_to_a_millicore", "cpu", "12n", 1),
    ("binary_gibibytes", "memory", "1.5Gi", 3 * GI // 2),
    ("binary_mebibytes", "memory", "128Mi", 128 * MI),
    ("binary_kibibytes", "memory", "1Ki", 1024),
    ("binary_tebibytes", "ephemeral-storage", "2Ti", 2 * 2**40),
    ("decimal_gigabytes", "memory", "1G", 10**9),
    ("decimal_kilobytes", "memory", "100k", 100_000),
    ("decimal_exa", "memory", "2E", 2 * 10**18),
    ("scientific_notation", "memory", "1e3", 1000),
    ("plain_bytes", "memory", "1024", 1024),
    ("fractional_bytes_round_up", "memory", "1.5", 2),
    ("milli_bytes_round_up", "memory", "500m", 1),
    ("surrounding_spaces_ignored", "memory", " 1Gi ", GI),
    ("extended_resource_count", "nvidia.com/gpu", "2", 2),
    ("pods_count", "pods", "110", 110),
    ("plus_sign", "memory", "+1Ki", 1024),
    ("negative_zero_is_zero", "memory", "-0", 0),
    ("capital_e_exponent", "memory", "2E3", 2000),
    ("signed_exponent", "memory", "5e+2", 500),
    ("negative_exponent_cpu", "cpu", "15e-2", 150),
    ("point_before_the_suffix", "memory", "1.G", 10**9),
    ("fraction_without_integer_part", "cpu", ".5", 500),
    ("json_number_with_a_fraction", "cpu", 1.5, 1500),
    ("largest_countable_bytes", "memory", str(MAX_AMOUNT), MAX_AMOUNT),
    ("largest_countable_millicores", "cpu", f"{MAX_AMOUNT}m", MAX_AMOUNT),
    ("binary_beyond_int64_capped_as_the_api_server_caps_it", "memory", "9Ei", MAX_AMOUNT),
    ("huge_negative_exponent_rounds_up_to_one_unit", "memory", "1e-999999999", 1),
    ("long_fraction_rounds_up", "memory", "1." + "0" * 5000 + "1", 2),
    ("long_fraction_of_zeros_is_exact", "memory", "1." + "0" * 5000, 1),
    ("long_fraction_times_a_binary_suffix", "memory", "0." + "0" * 100 + "1Ei", 1),
    ("leading_zeros", "memory", "0" * 5000 + "7", 7),
]


@pytest.mark.parametrize(("name", "resource", "text", "expected"), QUANTITIES, ids=[c[0] for c in QUANTITIES])
def test_quantity_parsing(name: str, resource: str, text: str | int, expected: int) -> None:
    assert to_base_units(resource, text) == expected


BAD_QUANTITIES = [
    ("empty", "memory", "", "empty"), ("blank", "memory", "  ", "empty"), ("words", "memory", "abc", "not a"),
    ("two_points", "memory", "1.2.3", "not a"), ("suffix_alone", "memory", "Gi", "no digits"),
    ("unknown_suffix", "memory", "1Zi", "not a"),
    ("unknown_suffix_letters", "memory", "1Ti2", "unknown suffix"), ("not_a_number", "memory", "nan", "not a"),
    ("infinity", "memory", "inf", "not a"), ("boolean", "memory", True, "not a"),
    ("lone_milli", "memory", "m", "no digits"), ("lone_point", "memory", ".", "no digits"),
    ("lone_sign", "memory", "-", "no digits"), ("lower_case_binary", "memory", "1ki", "unknown suffix"),
    ("exponent_without_digits", "memory", "1e", "unknown suffix"),
    ("space_inside", "memory", "1 Gi", "not a"), ("underscore_digit_separator", "memory", "1_000", "not a"),
    ("arabic_indic_digits", "memory", "\u0661\u0662", "not a"), ("fullwidth_digits", "cpu", "\uff11", "not a"),
    ("negative_memory", "memory", "-1Gi", "negative"), ("negative_cpu", "cpu", "-500m", "negative"),
    ("negative_extended_resource", "nvidia.com/gpu", "-1", "negative"),
    ("huge_exponent", "memory", "1e999999999", "too large"), ("exponent_beyond_int64", "memory", "1e" + "9" * 19,
                                                              "exponent out of range"),
    ("beyond_int64_bytes", "memory", str(MAX_AMOUNT + 1), "too large"),
    ("beyond_int64_millicores", "cpu", "9223372036854776", "too large"),
    ("binary_cap_still_too_many_millicores", "cpu", "8Ei", "too large"),
    ("float_too_large", "memory", 1e300, "too large"), ("not_a_string", "memory", ["1"], "not a"),
]


@pytest.mark.parametrize(("name", "resource", "text", "message"), BAD_QUANTITIES, ids=[c[0] for c in BAD_QUANTITIES])
def test_bad_quantities_are_refused(name: str, resource: str, text: Any, message: str) -> None:
    with pytest.raises(QuantityError, match=message):
        to_base_units(resource, text)


def test_huge_exponents_and_long_numbers_are_judged_at_once() -> None:
    """The bounds are checked on the text's lengths before any integer is built: neither a huge
    exponent nor a hundred thousand digits costs more than the scan of the text."""
    started = time.perf_counter()
    for text in ("1e999999999", "9" * 100_000, "0." + "0" * 100_000 + "1Ei", "1" * 50_000 + "." + "1" * 50_000):
        with contextlib.suppress(QuantityError):
            to_base_units("memory", text)
    assert time.perf_counter() - started < 0.5


FORMATS = [
    ("whole_cpu", "cpu", 2000, "2"),
    ("milli_cpu", "cpu", 1500, "1500m"),
    ("one_gib", "memory", GI, "1.0 GiB"),
    ("two_gib", "memory", 2 * GI, "2.0 GiB"),
    ("one_and_a_half_gib", "memory", 3 * GI // 2, "1.5 GiB"),
    ("two_decimals_when_one_would_hide_a_difference", "memory", 5 * GI // 4, "1.25 GiB"),
    ("mebibytes", "memory", 512 * MI, "512.0 MiB"),
    ("bytes", "memory", 100, "100 B"),
    ("disk_tebibytes", "ephemeral-storage", 2**40, "1.0 TiB"),
    ("counts", "pods", 3, "3"),
]


@pytest.mark.parametrize(("name", "resource", "amount", "text"), FORMATS, ids=[c[0] for c in FORMATS])
def test_amount_formatting(name: str, resource: str, amount: int, text: str) -> None:
    assert format_amount(resource, amount) == text


def c(name: str, cpu: str | None = None, memory: str | None = None, **extra: Any) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    return {"name": name, "resources": {"requests": requests}, **extra}


def sidecar(name: str, cpu: str | None = None, memory: str | None = None) -> dict[str, Any]:
    return c(name, cpu, memory, restartPolicy="Always")


SHAPES = [
    ("sum_of_app_containers", {"containers": [c("a", "100m", "128Mi"), c("b", "200m", "256Mi")]},
     {"cpu": 300, "memory": 384 * MI}),
    ("init_container_peak_wins_over_smaller_apps", {"initContainers": [c("i", "2")], "containers": [c("a", "500m")]},
     {"cpu": 2000}),
    ("init_container_below_app_sum_changes_nothing",
     {"initContainers": [c("i", "100m")], "containers": [c("a", "500m")]}, {"cpu": 500}),
    ("init_containers_run_one_at_a_time",
     {"initContainers": [c("i1", "1"), c("i2", "1")], "containers": [c("a", "100m")]}, {"cpu": 1000}),
    ("each_resource_takes_its_own_maximum",
     {"initContainers": [c("i", "2", "64Mi")], "containers": [c("a", "100m", "1Gi")]}, {"cpu": 2000, "memory": GI}),
    ("sidecars_add_to_app_containers",
     {"initContainers": [sidecar("s", "100m", "64Mi")], "containers": [c("a", "200m", "128Mi")]},
     {"cpu": 300, "memory": 192 * MI}),
    ("init_after_a_sidecar_stacks_on_it",
     {"initContainers": [sidecar("s", "100m"), c("i", "1")], "containers": [c("a", "200m")]}, {"cpu": 1100}),
    ("init_before_a_sidecar_does_not_stack",
     {"initContainers": [c("i", "1"), sidecar("s", "100m")], "containers": [c("a", "200m")]}, {"cpu": 1000}),
    ("overhead_is_added_on_top",
     {"containers": [c("a", "200m", "128Mi")], "overhead": {"cpu": "250m", "memory": "120Mi"}},
     {"cpu": 450, "memory": 248 * MI}),
    ("overhead_adds_to_the_init_peak",
     {"initContainers": [c("i", "1")], "containers": [c("a", "200m")], "overhead": {"cpu": "100m"}}, {"cpu": 1100}),
    ("limit_only_requests_its_limit", {"containers": [{"name": "a", "resources": {"limits": {"cpu": "1"}}}]},
     {"cpu": 1000}),
    ("request_below_limit_is_the_request",
     {"containers": [{"name": "a", "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "1"}}}]},
     {"cpu": 100}),
    ("extended_resources_sum", {"containers": [{"name": "a", "resources": {"requests": {"nvidia.com/gpu": "1"}}},
                                               {"name": "b", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
     {"nvidia.com/gpu": 2}),
    ("no_requests_is_empty", {"containers": [{"name": "a"}]}, {}),
    ("zero_requests_are_dropped", {"containers": [c("a", "0", "0")]}, {}),
]


@pytest.mark.parametrize(("name", "spec", "expected"), SHAPES, ids=[c[0] for c in SHAPES])
def test_effective_requests(name: str, spec: dict[str, Any], expected: dict[str, int]) -> None:
    assert effective_requests(spec) == expected


def pod_level(requests: dict[str, str] | None = None, limits: dict[str, str] | None = None) -> dict[str, Any]:
    """``spec.resources``: what the pod states for itself as a whole."""
    out: dict[str, Any] = {}
    if requests is not None:
        out["requests"] = requests
    if limits is not None:
        out["limits"] = limits
    return out


def hp(name: str, requests: dict[str, str], limits: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    """A container with requests (and limits) of any resource, hugepages included."""
    resources: dict[str, Any] = {"requests": requests}
    if limits is not None:
        resources["limits"] = limits
    return {"name": name, "resources": resources, **extra}


H2 = "hugepages-2Mi"
H1G = "hugepages-1Gi"

# Translated case by case from the upstream helper's own table (TestPodLevelResourceRequests in
# k8s.io/component-helpers/resource), plus the defaulting of a pod-level request from a pod-level
# limit that the API server applies (pkg/apis/core/v1 defaults) and the overhead rule of PodRequests.
POD_LEVEL_SHAPES = [
    ("pod_level_nothing_set_is_empty", {"resources": pod_level()}, {}),
    ("pod_level_memory_alone", {"resources": pod_level({"memory": "2Mi"})}, {"memory": 2 * MI}),
    ("pod_level_memory_and_container_cpu",
     {"resources": pod_level({"memory": "2Mi"}), "containers": [c("a", "2m")]}, {"memory": 2 * MI, "cpu": 2}),
    ("pod_level_unsupported_resource_is_ignored_container_figure_kept",
     {"resources": pod_level({"storage": "2Mi"}), "containers": [hp("a", {"storage": "3Mi"})]}, {"storage": 3 * MI}),
    ("pod_level_unsupported_resource_alone_changes_nothing",
     {"resources": pod_level({"storage": "2Mi"}), "containers": [c("a", memory="3Mi")]}, {"memory": 3 * MI}),
    ("pod_level_ephemeral_storage_is_not_pod_level",
     {"resources": pod_level({"cpu": "1", "ephemeral-storage": "1Gi"}),
      "containers": [hp("a", {"ephemeral-storage": "2Gi"})]}, {"cpu": 1000, "ephemeral-storage": 2 * GI}),
    ("pod_level_replaces_container_cpu_and_memory",
     {"resources": pod_level({"memory": "6Mi", "cpu": "8m"}), "containers": [c("a", "2m", "3Mi")]},
     {"memory": 6 * MI, "cpu": 8}),
    ("pod_level_replaces_init_and_sidecar_figures",
     {"resources": pod_level({"memory": "15Mi", "cpu": "18m"}), "containers": [c("a", "2m", "3Mi")],
      "initContainers": [sidecar("s", "4m", "5Mi"), c("i", "8m", "6Mi")]}, {"memory": 15 * MI, "cpu": 18}),
    ("pod_level_hugepages_single_page_size",
     {"resources": pod_level({"memory": "10Mi", H2: "2Mi"}, {H2: "2Mi"})}, {"memory": 10 * MI, H2: 2 * MI}),
    ("pod_level_hugepages_multiple_page_sizes",
     {"resources": pod_level({"cpu": "1", H2: "2Mi", H1G: "1Gi"}, {H2: "2Mi", H1G: "1Gi"})},
     {"cpu": 1000, H2: 2 * MI, H1G: GI}),
    ("pod_level_hugepages_replace_container_hugepages",
     {"resources": pod_level({"cpu": "1", H2: "10Mi"}, {H2: "10Mi"}),
      "containers": [hp("a", {H2: "6Mi"}, {H2: "6Mi"})]}, {"cpu": 1000, H2: 10 * MI}),
    ("pod_level_hugepages_multiple_sizes_replace_container_figures",
     {"resources": pod_level({"cpu": "1", H2: "10Mi", H1G: "2Gi"}, {H2: "10Mi", H1G: "2Gi"}),
      "containers": [hp("a", {"cpu": "1", H1G: "2Gi"}, {H1G: "2Gi"})]}, {"cpu": 1000, H2: 10 * MI, H1G: 2 * GI}),
    ("pod_level_page_size_not_stated_comes_from_containers",
     {"resources": pod_level({"cpu": "1", H2: "10Mi"}, {H2: "10Mi"}),
      "containers": [hp("a", {"memory": "4Mi", H1G: "1Gi"}, {H1G: "1Gi"})]},
     {"cpu": 1000, "memory": 4 * MI, H2: 10 * MI, H1G: GI}),
    ("pod_level_overhead_is_added_on_top",
     {"resources": pod_level({"cpu": "1", "memory": "1Gi"}), "containers": [c("a", "100m", "128Mi")],
      "overhead": {"cpu": "250m", "memory": "120Mi"}}, {"cpu": 1250, "memory": GI + 120 * MI}),
    ("pod_level_limit_alone_requests_its_limit",
     {"resources": pod_level(limits={"cpu": "2", "memory": "1Gi"}), "containers": [{"name": "a"}]},
     {"cpu": 2000, "memory": GI}),
    ("pod_level_limit_with_container_requests_keeps_the_containers_figure",
     {"resources": pod_level(limits={"cpu": "2", "memory": "1Gi"}), "containers": [c("a", "500m")]},
     {"cpu": 500, "memory": GI}),
    ("pod_level_hugepage_limit_alone_requests_its_limit",
     {"resources": pod_level(limits={H2: "4Mi"})}, {H2: 4 * MI}),
    ("pod_level_request_wins_over_its_limit",
     {"resources": pod_level({"cpu": "1"}, {"cpu": "2"})}, {"cpu": 1000}),
    ("pod_level_zero_request_is_dropped",
     {"resources": pod_level({"cpu": "0"}), "containers": [c("a", "500m", "64Mi")]}, {"memory": 64 * MI}),
]


@pytest.mark.parametrize(("name", "spec", "expected"), POD_LEVEL_SHAPES, ids=[c[0] for c in POD_LEVEL_SHAPES])
def test_pod_level_requests(name: str, spec: dict[str, Any], expected: dict[str, int]) -> None:
    assert effective_requests(spec) == expected


NODE_OBJECT: dict[str, Any] = {
    "kind": "Node",
    "metadata": {"name": "node-a", "labels": {"topology.kubernetes.io/zone": "z1"},
                 "annotations": {"berth.dev/bypass": "true"}},
    "spec": {"unschedulable": True, "taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"},
                                               {"key": "flaky", "effect": "NoExecute"}]},
    "status": {"allocatable": {"cpu": "3920m", "memory": "7Gi", "ephemeral-storage": "100Gi", "pods": "110"},
               "conditions": [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "True"}]},
}


def test_node_from_object_reads_every_field() -> None:
    n = node_from_object(NODE_OBJECT)
    assert n.name == "node-a"
    assert n.labels == {"topology.kubernetes.io/zone": "z1"}
    assert n.allocatable == {"cpu": 3920, "memory": 7 * GI, "ephemeral-storage": 100 * GI, "pods": 110}
    assert n.taints == (Taint("gpu", "true", "NoSchedule"), Taint("flaky", "", "NoExecute"))
    assert n.unschedulable and n.bypassed and n.ready is True


NODE_READINESS = [
    ("ready_true", [{"type": "Ready", "status": "True"}], True),
    ("ready_false", [{"type": "Ready", "status": "False"}], False),
    ("ready_unknown_is_not_ready", [{"type": "Ready", "status": "Unknown"}], False),
    ("no_ready_condition", [], None),
]


@pytest.mark.parametrize(("name", "conditions", "ready"), NODE_READINESS, ids=[c[0] for c in NODE_READINESS])
def test_node_readiness(name: str, conditions: list[dict[str, str]], ready: bool | None) -> None:
    assert node_from_object({"metadata": {"name": "n"}, "status": {"conditions": conditions}}).ready is ready


def test_node_missing_allocatable_dimension_stays_unknown() -> None:
    n = node_from_object({"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "2"}}})
    assert n.allocatable == {"cpu": 2000}
    assert "memory" not in n.allocatable


def test_test_node_label() -> None:
    n = node_from_object({"metadata": {"name": "n", "labels": {"berth.dev/test-node": "true"}}})
    assert n.is_test_node


BAD_OBJECTS = [
    ("node_without_name", node_from_object, {"kind": "Node", "metadata": {}}, "metadata.name"),
    ("node_with_bad_quantity", node_from_object,
     {"metadata": {"name": "n"}, "status": {"allocatable": {"memory": "lots"}}}, "status.allocatable.memory"),
    ("pod_with_bad_quantity", pod_from_object,
     {"metadata": {"name": "p"}, "spec": {"containers": [{"resources": {"requests": {"cpu": "x"}}}]}},
     "pod default/p: spec.containers[0].resources.requests.cpu"),
    ("pod_with_non_list_containers", pod_from_object,
     {"metadata": {"name": "p"}, "spec": {"containers": {"a": 1}}}, "pod default/p"),
    ("labels_not_a_map", node_from_object, {"metadata": {"name": "n", "labels": ["x"]}}, "metadata.labels"),
]


@pytest.mark.parametrize(("name", "reader", "obj", "where"), BAD_OBJECTS, ids=[c[0] for c in BAD_OBJECTS])
def test_malformed_objects_name_the_field(name: str, reader: Any, obj: dict[str, Any], where: str) -> None:
    with pytest.raises(ObjectError) as caught:
        reader(obj)
    assert where in str(caught.value)


POD_OBJECT: dict[str, Any] = {
    "metadata": {"name": "web-1", "namespace": "shop", "uid": "u-1", "labels": {"app": "web"},
                 "annotations": {"berth.dev/sleepy": "true"}, "deletionTimestamp": "2026-01-01T00:00:00Z"},
    "spec": {
        "nodeName": "node-a",
        "containers": [{"name": "a", "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}}}],
        "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "nodeSelector": {"disk": "ssd"},
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1", "z2"]}]}]}}},
    },
}


def test_pod_from_object_reads_every_field() -> None:
    p = pod_from_object(POD_OBJECT)
    assert (p.uid, p.name, p.namespace, p.key) == ("u-1", "web-1", "shop", "shop/web-1")
    assert p.labels == {"app": "web"}
    assert p.requests == {"cpu": 250, "memory": GI}
    assert p.node_name == "node-a"
    assert p.terminating and p.sleepy
    assert p.tolerations == (Toleration("gpu", "Exists", "", "NoSchedule"),)
    assert p.node_affinity == NodeAffinity(
        {"disk": "ssd"}, (NodeSelectorTerm((Requirement("zone", "In", ("z1", "z2")),)),))


def test_pod_defaults() -> None:
    p = pod_from_object({"metadata": {"name": "p"}, "spec": {"containers": []}})
    assert (p.namespace, p.uid, p.node_name, p.terminating, p.sleepy) == ("default", "default/p", None, False, False)


def _pod_like(name: str, **changes: Any) -> dict[str, Any]:
    """POD_OBJECT under another name and uid, with ``changes`` to its metadata and spec."""
    import copy

    obj = copy.deepcopy(POD_OBJECT)
    obj["metadata"].update(name=name, uid=f"u-{name}")
    for key, value in changes.items():
        (obj["metadata"] if key in ("labels", "ownerReferences") else obj["spec"])[key] = value
    return obj


SHARED_PARTS = ["labels", "requests", "tolerations", "node_affinity", "controller", "namespace", "node_name"]


def test_pods_alike_share_what_they_have_alike() -> None:
    owner = [{"kind": "ReplicaSet", "name": "web-1a", "uid": "rs", "controller": True}]
    first, second = (pod_from_object(_pod_like(n, ownerReferences=owner)) for n in ("web-2", "web-3"))
    assert (first.uid, second.uid) == ("u-web-2", "u-web-3")
    for part in SHARED_PARTS:
        assert getattr(first, part) is getattr(second, part), part


DIFFERENT_PARTS = [
    ("labels", {"labels": {"app": "db"}}, {"app": "db"}),
    ("requests", {"containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}]}, {"cpu": 1000}),
    ("tolerations", {"tolerations": []}, ()),
    ("node_affinity", {"affinity": None, "nodeSelector": None}, NodeAffinity()),
    ("node_name", {"nodeName": "node-b"}, "node-b"),
]


@pytest.mark.parametrize(("part", "changes", "expected"), DIFFERENT_PARTS,
                         ids=[f"own_{p}" for p, *_ in DIFFERENT_PARTS])
def test_a_pod_unlike_the_others_keeps_its_own_values(part: str, changes: dict[str, Any], expected: Any) -> None:
    alike = pod_from_object(_pod_like("web-2"))
    unlike = pod_from_object(_pod_like("web-3", **changes))
    assert getattr(unlike, part) == expected != getattr(alike, part)
    assert getattr(pod_from_object(_pod_like("web-4")), part) == getattr(alike, part)


def test_values_shared_among_pods_are_bounded_and_stay_right(monkeypatch: pytest.MonkeyPatch) -> None:
    from berth.core import kube

    monkeypatch.setattr(kube._Shared, "LIMIT", 8)
    pods = [pod_from_object(_pod_like(f"web-{i}", labels={"app": "web", "index": str(i)})) for i in range(50)]
    assert [p.labels for p in pods] == [{"app": "web", "index": str(i)} for i in range(50)]
    assert len(kube._SHARED._kept) <= 8


def test_lease_and_time_parsing() -> None:
    lease = {"metadata": {"name": "node-a", "namespace": "kube-node-lease"},
             "spec": {"renewTime": "2026-01-01T00:00:10.500000Z"}}
    name, renewed = lease_renew_seconds(lease)
    assert name == "node-a"
    assert renewed == parse_time("2026-01-01T00:00:00Z") + 10.5
    assert lease_renew_seconds({"metadata": {"name": "n"}, "spec": {}}) == ("n", None)
    with pytest.raises(ObjectError):
        parse_time("yesterday")


JAN_1 = 1767225600.0  # 2026-01-01T00:00:00Z


@pytest.mark.parametrize(("case", "text", "seconds"), [
    ("utc_designator", "2026-01-01T00:00:00Z", JAN_1),
    ("fraction_of_a_second", "2026-01-01T00:00:10.500000Z", JAN_1 + 10.5),
    ("offset", "2026-01-01T01:00:00+01:00", JAN_1),
    ("no_offset_is_utc_whatever_the_machine_zone", "2026-01-01T00:00:00", JAN_1),
    ("surrounding_space", " 2026-01-01T00:00:00Z ", JAN_1),
])
def test_parse_time_reads_rfc_3339(case: str, text: str, seconds: float) -> None:
    assert parse_time(text) == seconds, case


@pytest.mark.parametrize(("case", "seconds", "digits", "text"), [
    ("whole_seconds_like_metav1_time", JAN_1 + 10.5, 0, "2026-01-01T00:00:10Z"),
    ("milliseconds", JAN_1 + 10.5, 3, "2026-01-01T00:00:10.500Z"),
    ("microseconds_like_micro_time", JAN_1 + 10.25, 6, "2026-01-01T00:00:10.250000Z"),
])
def test_format_time_writes_what_parse_time_reads(case: str, seconds: float, digits: int, text: str) -> None:
    assert format_time(seconds, digits=digits) == text, case
    assert parse_time(text) == (seconds if digits else int(seconds)), case


def test_format_time_refuses_more_digits_than_a_microsecond() -> None:
    with pytest.raises(ValueError, match="digits must be 0 to 6"):
        format_time(JAN_1, digits=7)


@settings(max_examples=400, deadline=None)
@given(digits=st.text("0123456789", max_size=25), fraction=st.text("0123456789", max_size=100),
       suffix=st.sampled_from(["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei",
                               "e-30", "e-5", "e0", "e7", "E12", "e+19"]),
       resource=st.sampled_from(["cpu", "memory"]))
def test_quantities_are_the_exact_amount_rounded_up(digits: str, fraction: str, suffix: str, resource: str) -> None:
    """Against exact rational arithmetic: ceil(number x suffix x (1000 for CPU)), binary suffixes
    capped at 2^63-1 units as the API server caps them, refused beyond 2^63-1 base units."""
    assume(digits or fraction)
    text = f"{digits}.{fraction}{suffix}" if fraction else f"{digits}{suffix}"
    number = Fraction(int(digits or "0") * 10 ** len(fraction) + int(fraction or "0"), 10 ** len(fraction))
    binary = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
    decimal = {"": 0, "n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
    if suffix in binary:
        value = min(number * 2 ** binary[suffix], Fraction(MAX_AMOUNT))
    else:
        value = number * Fraction(10) ** (decimal[suffix] if suffix in decimal else int(suffix[1:]))
    expected = math.ceil(value * (1000 if resource == "cpu" else 1))
    if expected > MAX_AMOUNT:
        with pytest.raises(QuantityError, match="too large"):
            to_base_units(resource, text)
    else:
        assert to_base_units(resource, text) == expected
