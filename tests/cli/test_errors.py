"""Bad input exits 2 with one line on stderr naming the file and the field; never a traceback."""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.builders import make_node, make_pod, make_policy
from tests.cli import kube
from tests.cli.conftest import Files, Result, run_process

Cli = Callable[..., Result]


def assert_one_line(r: Result, *needles: str) -> None:
    assert r.code == 2, (r.code, r.out, r.err)
    assert "Traceback" not in r.err
    lines = r.err.strip().splitlines()
    assert len(lines) == 1, r.err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert r.out == ""


def _plan(files: Files, snapshot: Path | None = None, policy: Path | None = None,
          pod: Path | None = None) -> list[str | Path]:
    return ["plan", "--snapshot", snapshot or files.json, "--policy", policy or files.policy, "--pod", pod or files.pod]


def test_unreadable_snapshot(files: Files) -> None:
    assert_one_line(run_process(_plan(files, snapshot=files.dir / "missing.json")), "missing.json", "cannot read")


def test_unreadable_policy_and_pod(files: Files) -> None:
    assert_one_line(run_process(_plan(files, policy=files.dir / "nope.yaml")), "nope.yaml", "cannot read")
    assert_one_line(run_process(_plan(files, pod=files.dir / "nada.yaml")), "nada.yaml", "cannot read")


def test_a_directory_is_unreadable(files: Files) -> None:
    assert_one_line(run_process(_plan(files, snapshot=files.dir)), str(files.dir), "cannot read")


def test_not_json_or_yaml(files: Files) -> None:
    bad = files.dir / "bad.json"
    bad.write_text('{"kind": "List", "items": [')
    assert_one_line(run_process(_plan(files, snapshot=bad)), "bad.json", "not valid JSON", "line 1")
    bad_yaml = files.dir / "bad.yaml"
    bad_yaml.write_text("items: [1, 2\n")
    assert_one_line(run_process(_plan(files, snapshot=bad_yaml)), "bad.yaml", "not valid YAML")


def test_wrong_kind_in_the_snapshot(files: Files) -> None:
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "shop"}}
    snapshot = kube.write_json(files.dir / "svc.json", [*kube.cluster(), service])
    assert_one_line(run_process(_plan(files, snapshot=snapshot)), "svc.json", "items[11]", "kind", "'Service'")


def test_wrong_kind_for_the_pod_and_the_policy(files: Files) -> None:
    config = kube.write_yaml(files.dir / "config.yaml", {"apiVersion": "v1", "kind": "ConfigMap",
                                                        "metadata": {"name": "web"}})
    assert_one_line(run_process(_plan(files, pod=config)), "config.yaml", "kind", "expected Pod or a workload")
    assert_one_line(run_process(_plan(files, policy=files.pod)), "pod.yaml", "kind", "expected PlacementPolicy")


def test_snapshot_without_nodes(files: Files) -> None:
    assert_one_line(run_process(_plan(files, snapshot=files.pod)), "pod.yaml", "no Node objects")


def _policy_with(**spec: Any) -> dict[str, Any]:
    return make_policy().strategy("Auto").spec(**spec).obj()


def _spread(**extra: Any) -> dict[str, Any]:
    return {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}}, **extra}


@pytest.mark.parametrize(("name", "policy", "field"), [
    ("unknown-strategy", make_policy().strategy("Sideways").obj(), "spec.strategy"),
    ("bad-operator", _policy_with(placementRules=[{"anyOf": [{"resource": "Pod", "operator": "Maybe",
                                                             "labels": {"a": "b"}}]}]),
     "spec.placementRules[0].anyOf[0].operator"),
    ("node-rule-within", _policy_with(placementRules=[{"resource": "Node", "operator": "Has",
                                                       "labels": {"a": "b"}, "within": "rack"}]),
     "spec.placementRules[0]"),
    ("unknown-field", _policy_with(weight=3), "spec.weight"),
    ("negative-count", _policy_with(count=-1), "spec.count"),
    ("no-name", {**make_policy().strategy("Auto").obj(), "metadata": {"namespace": "shop"}}, "metadata.name"),
    ("spread-key-in-selector", _policy_with(topologySpreadConstraints=[_spread(matchLabelKeys=["app"])]),
     "spec.topologySpreadConstraints[0].matchLabelKeys[0]: 'app' exists in both matchLabelKeys and labelSelector"),
    ("spread-keys-without-selector", _policy_with(topologySpreadConstraints=[
        {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "matchLabelKeys": ["pod-template-hash"]}]),
     "spec.topologySpreadConstraints[0].matchLabelKeys: must not be specified when labelSelector is not set"),
    ("spread-duplicate", _policy_with(topologySpreadConstraints=[_spread(), _spread(maxSkew=2)]),
     "spec.topologySpreadConstraints[0].{topologyKey, whenUnsatisfiable}: duplicate value"),
])
def test_invalid_policy_names_the_path(cli: Cli, files: Files, name: str, policy: dict[str, Any],
                                      field: str) -> None:
    path = files.write_policy(f"{name}.yaml", policy)
    assert_one_line(cli(*_plan(files, policy=path)), f"{name}.yaml: {field}")


def test_invalid_policy_as_a_process(files: Files) -> None:
    path = files.write_policy("bad.yaml", _policy_with(placementRules=[{"resource": "Pod", "operator": "Maybe",
                                                                        "labels": {"a": "b"}}]))
    assert_one_line(run_process(_plan(files, policy=path)), "bad.yaml: spec.placementRules[0].operator")


def test_unknown_strategy_in_process(cli: Cli, files: Files) -> None:
    path = files.write_policy("sideways.yaml", make_policy().strategy("Sideways").obj())
    r = cli(*_plan(files, policy=path))
    assert_one_line(r, "sideways.yaml: spec.strategy: unknown value 'Sideways'")


def _cluster_with(index: int, change: Callable[[dict[str, Any]], None]) -> list[dict[str, Any]]:
    items = copy.deepcopy(kube.cluster())
    change(items[index])
    return items


def test_malformed_quantity_on_a_node(files: Files) -> None:
    def bad_cpu(node: dict[str, Any]) -> None:
        node["status"]["allocatable"]["cpu"] = "lots"

    snapshot = kube.write_json(files.dir / "q.json", _cluster_with(1, bad_cpu))
    assert_one_line(run_process(_plan(files, snapshot=snapshot)), "q.json", "items[1] (Node n2)",
                    "status.allocatable.cpu", "'lots'")


def test_malformed_quantity_in_a_snapshot_pod(files: Files) -> None:
    def bad_memory(pod: dict[str, Any]) -> None:
        pod["spec"]["containers"][0]["resources"]["requests"]["memory"] = "1 GB"

    snapshot = kube.write_yaml_docs(files.dir / "q.yaml", _cluster_with(3, bad_memory))
    assert_one_line(run_process(_plan(files, snapshot=snapshot)), "q.yaml", "document 4 (Pod shop/web-0)",
                    "spec.containers[0].resources.requests.memory")


def test_malformed_quantity_in_the_pod_manifest(cli: Cli, files: Files) -> None:
    pod = make_pod("web-x").cpu("500m").memory("1Gi").phase("Running").obj()
    pod["spec"]["containers"][0]["resources"]["limits"] = {"cpu": "2 cores"}
    path = kube.write_yaml(files.dir / "badpod.yaml", pod)
    assert_one_line(cli(*_plan(files, pod=path)), "badpod.yaml: spec.containers[0].resources.limits.cpu")
    assert_one_line(cli("capacity", "--snapshot", files.json, "--pod", path), "badpod.yaml")


def test_malformed_pod_level_quantity_in_the_pod_manifest(cli: Cli, files: Files) -> None:
    pod = make_pod("web-x").cpu("500m").memory("1Gi").phase("Running").obj()
    pod["spec"]["resources"] = {"requests": {"memory": "1 GB"}}
    path = kube.write_yaml(files.dir / "badpod.yaml", pod)
    assert_one_line(cli(*_plan(files, pod=path)), "badpod.yaml: spec.resources.requests.memory")


@pytest.mark.parametrize(("index", "path", "value", "field"), [
    (0, ["metadata"], "n0", "metadata: must be an object"),
    (0, ["metadata", "name"], None, "metadata.name: is required"),
    (0, ["metadata", "labels", "tier"], 3, "metadata.labels.tier: must be a string"),
    (0, ["status"], ["Ready"], "status: must be an object"),
    (0, ["status", "conditions"], "Ready", "status.conditions: must be a list"),
    (0, ["spec", "taints"], "NoSchedule", "spec.taints: must be a list, found a string"),
    (3, ["spec", "nodeName"], 7, "spec.nodeName: must be a string"),
    (3, ["spec", "tolerations"], {"key": "x"}, "spec.tolerations: must be a list"),
    (3, ["spec", "containers"], {"name": "main"}, "spec.containers: must be a list"),
    (3, ["spec", "containers", 0, "resources"], "big", "spec.containers[0].resources: must be an object"),
    (3, ["status"], "Running", "status: must be an object"),
    (3, ["metadata", "ownerReferences"], {"kind": "ReplicaSet"}, "metadata.ownerReferences: must be a list"),
    (3, ["metadata", "ownerReferences"], ["web-rs"], "metadata.ownerReferences[0]: must be an object"),
    (3, ["metadata", "ownerReferences"], [{"kind": "ReplicaSet", "controller": True}],
     "metadata.ownerReferences[0].name: is required"),
    (7, ["spec", "renewTime"], "yesterday", "spec.renewTime"),
])
def test_malformed_objects_name_the_field(cli: Cli, files: Files, index: int, path: list[Any], value: object,
                                          field: str) -> None:
    def change(obj: dict[str, Any]) -> None:
        target: Any = obj
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    snapshot = kube.write_json(files.dir / "m.json", _cluster_with(index, change))
    assert_one_line(cli("capacity", "--snapshot", snapshot, "--pod", files.pod), f"m.json: items[{index}]", field)


def test_items_must_be_objects(files: Files) -> None:
    path = files.dir / "items.json"
    path.write_text(json.dumps({"kind": "List", "items": [make_node("n1").zone("zone-a").obj(), "n2"]}))
    assert_one_line(run_process(["capacity", "--snapshot", path, "--pod", files.pod]), "items.json: items[1]")


@pytest.mark.parametrize(("argv", "needle"), [
    (["--cpu-overcommit", "0"], "--cpu-overcommit"),
    (["--memory-overcommit", "lots"], "--memory-overcommit"),
    (["--min-free-disk", "101"], "--min-free-disk"),
    (["--liveness-threshold", "-5"], "--liveness-threshold"),
    (["--now", "yesterday"], "--now"),
])
def test_bad_setting_flags(cli: Cli, files: Files, argv: list[str], needle: str) -> None:
    assert_one_line(cli("capacity", "--snapshot", files.json, "--pod", files.pod, *argv), needle)


def test_bad_count_and_unknown_flags(cli: Cli, files: Files) -> None:
    assert_one_line(cli(*_plan(files), "--count", "-1"), "--count")
    assert_one_line(cli(*_plan(files), "--count", "many"), "--count")
    assert_one_line(cli(*_plan(files), "--frobnicate"), "--frobnicate")
    assert_one_line(cli("plan", "--pod", files.pod), "--snapshot")


def test_the_console_script_exits_2_too(files: Files) -> None:
    import shutil
    import subprocess

    # The script installed beside the running interpreter (the venv's bin), else on PATH.
    beside = Path(sys.executable).parent / "berth"
    berth = str(beside) if beside.exists() else shutil.which("berth")
    assert berth is not None, "the berth console script is not installed"
    proc = subprocess.run([berth, *map(str, _plan(files, snapshot=files.dir / "missing.json"))],
                          capture_output=True, text=True, timeout=60)
    assert_one_line(Result(proc.returncode, proc.stdout, proc.stderr), "missing.json")
