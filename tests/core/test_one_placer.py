"""Every way berth places pods one after another (a greedy round's plan, ``berth simulate``, a
drain's round) gives the answers recorded in ``placer_answers.json``, with the index on and off.

The answers were recorded from the two placers berth had before it had one: the plan's and the
drain's (pods on an overlay, a pod no node takes left out or ending the round) and simulate's (pods
assumed on the view, within a Fill or Each round's plan). Each case is placed as each caller
places it, over every scenario of the core's tests and over generated clusters (seeded, so the
same clusters every run): the pods' nodes, the judgement of the first pod and of each pod no node
took, and the warnings.

Re-record only for a change of behaviour meant and stated (docs/behaviour.md):
``python -m tests.core.test_one_placer --record``.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import pkgutil
import random
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

import tests.core
from berth.core.candidates import CandidateSet
from berth.core.evaluate import effective_strategy, rank
from berth.core.model import NodeInfo, PodInfo
from berth.core.plan import place_in_turn, plan_round, replicas
from berth.core.policy import ROUND_STRATEGIES, PlacementPolicy
from berth.core.quantity import CPU, DISK, MEMORY, PODS
from berth.core.settings import Settings
from berth.core.view import ClusterView
from tests.builders import ZONE, make_policy

from .builders import NOW, Scenario, cluster

ANSWERS = Path(__file__).with_name("placer_answers.json")
COUNTS = (1, 4, 25)
GENERATED = 400
GI = 2**30
MI = 2**20


@dataclass(frozen=True)
class Case:
    """A cluster, a pod and its policy, placed ``count`` times."""

    id: str
    nodes: tuple[NodeInfo, ...]
    pods: tuple[PodInfo, ...]
    leases: dict[str, float | None] | None
    pod: PodInfo
    spec: dict[str, Any] | None
    settings: Settings
    count: int

    def view(self) -> ClusterView:
        return cluster(self.nodes, self.pods, leases=self.leases)

    def policy(self) -> PlacementPolicy | None:
        return make_policy().spec(**self.spec).build() if self.spec is not None else None


# -- the cases ---------------------------------------------------------------------------------


def _scenarios() -> dict[str, Scenario]:
    found: dict[str, Scenario] = {}
    seen: set[int] = set()  # a scenario another module imports is placed once
    for info in sorted(pkgutil.iter_modules(tests.core.__path__), key=lambda info: info.name):
        if not info.name.startswith("test_") or info.name in ("test_one_placer", "test_compiled_policy"):
            continue
        module = importlib.import_module(f"tests.core.{info.name}")
        for value in vars(module).values():
            for item in value if isinstance(value, (list, tuple)) else [value]:
                if isinstance(item, Scenario) and id(item) not in seen:
                    seen.add(id(item))
                    found[f"{info.name}::{item.name}"] = item
    return found


def _generated(seed: int) -> Case:
    """A small cluster drawn like the property tests' (zones, racks, labels, unknown capacity,
    overcommit, pods already placed) with a policy of any strategy, spread and rules."""
    rng = random.Random(seed)
    nodes = []
    for name in rng.sample("abcdefgh", rng.randint(1, 6)):
        labels = {"kubernetes.io/hostname": name}
        if zone := rng.choice(["z1", "z2", "z3", None]):
            labels[ZONE] = zone
        if rack := rng.choice(["r1", "r2", None]):
            labels["rack"] = rack
        if rng.random() < 0.5:
            labels["disk"] = "ssd"
        alloc = {CPU: rng.choice([1000, 2000, 4000, 8000]), MEMORY: rng.choice([1, 2, 4, 8]) * GI,
                 DISK: rng.choice([10, 100]) * GI, PODS: rng.choice([1, 2, 3, 4, 6, 10, 30])}
        if rng.random() < 0.1:
            del alloc[rng.choice([CPU, MEMORY, DISK])]
        nodes.append(NodeInfo(name=name, labels=labels, allocatable=alloc, ready=rng.random() < 0.9))
    settings = Settings(cpu_overcommit_percent=rng.choice([100, 150, 200]),
                        memory_overcommit_percent=rng.choice([100, 120]),
                        min_free_disk_percent=rng.choice([0, 10, 50]))
    pods = tuple(PodInfo(uid=f"old-{i}", name=f"old-{i}", namespace=rng.choice(["shop", "shop", "other"]),
                         labels=rng.choice([{"app": "web"}, {"app": "web", "role": "db"}, {"app": "db"}, {}]),
                         requests=_requests(rng), node_name=rng.choice(nodes).name,
                         sleepy=rng.random() < 0.2)
                 for i in range(rng.randint(0, 20)))
    spec: dict[str, Any] = {"nodesLimit": rng.randint(0, 3), "count": rng.randint(1, 6)}
    if strategy := rng.choice(["Auto", "Global", "Drained", "Balanced", "Spread", "BestFit", "Fill", "Each", None]):
        spec["strategy"] = strategy
    if rng.random() < 0.5:
        spec["topologySpreadConstraints"] = [{"maxSkew": rng.randint(1, 2), "topologyKey": ZONE,
                                              "whenUnsatisfiable": rng.choice(["DoNotSchedule", "ScheduleAnyway"])}]
    if rng.random() < 0.5:
        spec["placementRules"] = rng.choice([
            [{"resource": "Pod", "operator": "HasNot", "labels": {"role": "db"}}],
            [{"resource": "Pod", "operator": "HasNot", "labels": {"role": "db"}, "within": "rack"}],
            [{"resource": "Node", "operator": "Has", "labels": {"disk": "ssd"}}],
            [{"anyOf": [{"resource": "Pod", "operator": "Has", "labels": {"app": "db"}},
                        {"resource": "Node", "operator": "HasNot", "labels": {"disk": "ssd"}}]}],
        ])
        spec["affinityMatching"] = rng.choice(["Enforced", "Preferred"])
    pod = PodInfo(uid="new", name="new", namespace="shop", labels={"app": "web", "role": "db"},
                  requests=_requests(rng), sleepy=rng.random() < 0.2)
    return Case(f"generated-{seed}", tuple(nodes), pods, None, pod, spec, settings, rng.choice(COUNTS))


def _requests(rng: random.Random) -> dict[str, int]:
    out = {CPU: rng.choice([0, 100, 250, 500, 1000]), MEMORY: rng.choice([0, 64, 256, 512, 1024]) * MI,
           DISK: rng.choice([0, 0, 0, 1, 5]) * GI}
    return {k: v for k, v in out.items() if v}


def cases() -> list[Case]:
    out = []
    for name, s in sorted(_scenarios().items()):
        spec = dict(s.spec) if s.spec is not None else None
        leases = dict(s.leases) if s.leases is not None else None
        for count in sorted({s.count or 1, *COUNTS}):
            out.append(Case(f"{name}@{count}", s.nodes, s.pods, leases, s.pod, spec, s.settings, count))
    out.extend(_generated(seed) for seed in range(GENERATED))
    return out


# -- each caller's way of placing --------------------------------------------------------------


def _nth(pod: PodInfo, i: int) -> PodInfo:
    return pod if i == 0 else replace(pod, uid=f"{pod.uid}~{i}", name=f"{pod.name}~{i}")


def _judged(judged: CandidateSet | None, pod: PodInfo | None = None, strategy: Any = None) -> dict[str, Any] | None:
    if judged is None:
        return None
    out: dict[str, Any] = {
        "considered": list(judged.considered),
        "refused": {node: r.reason for node, r in judged.refused.by_node()},
        "warnings": list(judged.warnings),
        "error": judged.error.to_dict() if judged.error else None,
    }
    if pod is not None:
        out["ranking"] = rank(judged, pod, strategy)
    return out


def _stop(error: Any, refused: Any) -> dict[str, Any]:
    return {"error": error.to_dict() if error else None,
            "refused": {node: r.reason for node, r in sorted(refused.items())}}


def as_planned(case: Case) -> dict[str, Any] | None:
    """A greedy round's plan (``berth plan``, the operator's status): pods on an overlay of the
    view, the round ending at the first pod no node takes."""
    policy, view = case.policy(), case.view()
    settings = case.settings.for_policy(policy)
    strategy = effective_strategy(policy, settings)
    if strategy in ROUND_STRATEGIES and policy is not None:
        return None
    overlay = view.overlay()
    placed = place_in_turn(overlay, replicas(case.pod, case.count), policy, case.settings, NOW, put=overlay.place,
                           stop_at_failure=True)
    failure = placed.failure
    return {"nodes": placed.nodes, "first": _judged(placed.first, case.pod, strategy),
            "stop": _stop(failure.error, failure.refused) if failure is not None else None,
            "warnings": placed.warnings,
            "plan": plan_round(case.view(), case.pod, policy, case.settings, NOW, case.count).to_dict("T")}


def as_simulated(case: Case) -> dict[str, Any] | None:
    """``berth simulate``: pods assumed on the view one after another (a Fill or Each round within
    its plan), until one finds no node."""
    policy, view = case.policy(), case.view()
    settings = case.settings.for_policy(policy)
    strategy = effective_strategy(policy, settings)
    quota = None
    if strategy in ROUND_STRATEGIES and policy is not None:
        fixed = plan_round(case.view(), case.pod, policy, case.settings, NOW, None)
        if fixed.error is not None:
            return None
        quota = dict(fixed.plan)
    ticks: list[None] = []
    done = place_in_turn(view, replicas(case.pod, case.count), policy, case.settings, NOW, put=view.assume,
                         quota=quota, stop_at_failure=True, placed=lambda: ticks.append(None))
    nodes: dict[str, int] = {}
    for node in done.nodes:
        if node is not None:
            nodes[node] = nodes.get(node, 0) + 1
    assumed = sorted((p.uid, p.node_name) for p in view.all_pods() if view.is_assumed(p.uid))
    failure = done.failure
    return {"nodes": list(nodes.items()), "placed": sum(nodes.values()), "ticks": len(ticks),
            "warnings": done.first.warnings, "assumed": assumed,
            "stop": _stop(failure.error, failure.refused) if failure is not None else None}


def as_drained(case: Case, *, mixed: bool) -> dict[str, Any] | None:
    """A drain's round of a greedy strategy: pods (alike, or of two shapes) on an overlay, limited to
    the destinations (every node but the first), a pod no node takes left out."""
    policy, view = case.policy(), case.view()
    settings = case.settings.for_policy(policy)
    strategy = effective_strategy(policy, settings)
    if strategy in ROUND_STRATEGIES and policy is not None:
        return None
    names = sorted(view.nodes)
    destinations = names[1:] if len(names) > 1 else names
    pods = [_nth(case.pod, i) for i in range(case.count)]
    if mixed:
        pods = [replace(p, requests={**p.requests, CPU: p.requests.get(CPU, 0) + 300}) if i % 3 == 1 else p
                for i, p in enumerate(pods)]
    overlay = view.overlay()
    placed = place_in_turn(overlay, pods, policy, case.settings, NOW, put=overlay.place, nodes=destinations)
    return {"nodes": placed.nodes, "warnings": placed.warnings,
            "refusals": {str(i): _judged(judged) for i, judged in sorted(placed.refusals.items())}}


WAYS: dict[str, Callable[[Case], dict[str, Any] | None]] = {
    "planned": as_planned,
    "simulated": as_simulated,
    "drained": lambda case: as_drained(case, mixed=False),
    "drained-mixed": lambda case: as_drained(case, mixed=True),
}


def answers(case: Case) -> dict[str, Any]:
    """Each way's answer, kept short: where the pods went in clear, the whole answer (every
    judgement, warning and error) as a digest of its JSON."""
    out: dict[str, Any] = {}
    for way, place in WAYS.items():
        answer = place(case)
        text = json.dumps(answer, sort_keys=True)
        out[way] = None if answer is None else {"nodes": json.loads(json.dumps(answer["nodes"])),
                                                "digest": hashlib.sha256(text.encode()).hexdigest()[:20]}
    return out


# -- the tests ---------------------------------------------------------------------------------


CASES = cases()


def _recorded() -> dict[str, Any]:
    return json.loads(ANSWERS.read_text()) if ANSWERS.exists() else {}


RECORDED = _recorded()


def test_every_case_has_a_recorded_answer() -> None:
    assert len(CASES) > 500
    assert sorted(RECORDED) == sorted(c.id for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_placing_gives_the_recorded_answer(case: Case) -> None:
    got, want = answers(case), RECORDED[case.id]
    assert {way: a and a["nodes"] for way, a in got.items()} == {way: a and a["nodes"] for way, a in want.items()}
    assert got == want


def _record() -> Iterator[tuple[str, dict[str, Any]]]:
    for case in CASES:
        yield case.id, answers(case)


if __name__ == "__main__":
    if sys.argv[1:] != ["--record"]:
        sys.exit("usage: python -m tests.core.test_one_placer --record")
    got = dict(_record())
    ANSWERS.write_text("{\n" + ",\n".join(f"{json.dumps(k)}: {json.dumps(v, sort_keys=True, separators=(',', ':'))}"
                                           for k, v in got.items()) + "\n}\n")
    print(f"recorded {len(got)} cases in {ANSWERS}")
