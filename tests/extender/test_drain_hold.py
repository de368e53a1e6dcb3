"""An executing NodeDrain's plan kept by the extender: the planned destination holds the room of
each evicted pod for its replacement (same workload, same shape), which is sent there; a drained
workload never goes back to a drained node; a move's explicit target is honoured over berth's
own checks with a warning."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from berth.core import HOLD_ANNOTATION, format_time
from berth.extender.settings import ExtenderSettings
from tests.builders import make_node, make_pod, make_policy
from tests.extender.helpers import Harness, harness, nodedrain

WEB = ("ReplicaSet", "web-1")


def cluster(*, c_cpu: str = "4", filler_cpu: str = "1", **policy_spec: Any) -> tuple[Harness, dict[str, Any]]:
    """Nodes a (drained), b and c; c holds a filler pod, so that berth alone prefers b; web-1 on a."""
    evicted = make_pod("web-1").on("a").owner(WEB).labels({"app": "web"}).obj()
    objects = [make_node("a").obj(),
               make_node("b").obj(),
               make_node("c").cpu(c_cpu).obj(),
               make_policy("web").spec(**policy_spec).obj(),
               (make_pod("filler")
                .labels({})
                .namespace("infra")
                .on("c")
                .cpu(filler_cpu)
                .owner(("ReplicaSet", "filler"))
                .obj()),
               evicted]
    return harness(objects), evicted


def evicting(evicted: dict[str, Any], destination: str = "c", state: str = "Evicting",
             accepted: bool = True) -> dict[str, Any]:
    """A status entry; ``accepted``: the eviction was accepted (else refused and retried)."""
    meta = evicted["metadata"]
    entry = {"pod": f"{meta['namespace']}/{meta['name']}", "uid": meta["uid"], "source": "a",
             "workload": "ReplicaSet/web-1", "state": state, "destination": destination}
    if accepted:
        entry["evictedAt"] = "2027-01-15T08:00:00Z"
    return entry


def replacement(name: str = "web-2", *, owner: tuple[str, str] = WEB, cpu: str = "100m") -> dict[str, Any]:
    return make_pod(name).owner(owner).cpu(cpu).labels({"app": "web"}).obj()


def test_without_a_drain_berth_prefers_b() -> None:
    """The control for the cases below: the plan's destination c is not berth's own first choice."""
    h, _ = cluster()
    assert h.schedule(replacement()) == "b"


def test_the_replacement_is_sent_to_the_planned_destination() -> None:
    h, evicted = cluster()
    h.store.apply_nodedrain(nodedrain("retire-a", status_pods=[evicting(evicted)]))
    result = h.filter(replacement())
    assert result["NodeNames"] == ["c"]
    assert "NodeDrain retire-a" in result["FailedAndUnresolvableNodes"]["b"]


def test_the_destination_s_room_is_held_from_other_workloads() -> None:
    h, evicted = cluster(c_cpu="1", filler_cpu="900m")  # c has room for exactly one 100m pod
    h.store.apply_nodedrain(nodedrain("retire-a", status_pods=[evicting(evicted)]))
    other = replacement("web-new", owner=("ReplicaSet", "web-2"))  # same shape, another controller
    assert "c" not in h.filter(other, ["b", "c"])["NodeNames"]
    assert h.schedule(replacement()) == "c"


def test_a_moved_pod_s_room_is_held_too() -> None:
    h, evicted = cluster(c_cpu="1", filler_cpu="900m")
    h.store.apply_nodedrain(nodedrain("retire-a", status_pods=[evicting(evicted)]))
    h.store.apply_nodedrain(nodedrain("retire-a", status_pods=[evicting(evicted, state="Moved")]))
    h.store.delete_pod(evicted)  # evicted and gone: the hold keeps its shape
    other = replacement("web-new", owner=("ReplicaSet", "web-2"))
    assert "c" not in h.filter(other, ["b", "c"])["NodeNames"]
    assert h.schedule(replacement()) == "c"


def test_the_hold_lapses_after_the_bounded_wait() -> None:
    h, evicted = cluster(c_cpu="1", filler_cpu="900m")
    h.store.apply_nodedrain(nodedrain("retire-a", status_pods=[evicting(evicted)]))
    h.clock.advance(h.store.drain_hold_seconds + 1)
    other = replacement("web-new", owner=("ReplicaSet", "web-2"))
    assert "c" in h.filter(other, ["b", "c"])["NodeNames"]
    assert h.filter(replacement(), ["b", "c"])["NodeNames"] == ["b", "c"]  # no hold: placed like any pod


def test_the_hold_ends_when_the_replacement_binds() -> None:
    h, evicted = cluster()
    h.store.apply_nodedrain(nodedrain("retire-a", status_pods=[evicting(evicted)]))
    first = replacement()
    assert h.schedule(first) == "c"
    h.store.apply_pod({**first, "spec": {**first["spec"], "nodeName": "c"}, "status": {"phase": "Running"}})
    drain = nodedrain("retire-a", status_pods=[evicting(evicted, state="Moved")])
    h.store.apply_nodedrain(drain)  # the status still lists it: the hold does not come back
    assert h.store.holds == {}
    assert h.store.view.requested("c")["cpu"] == 1100  # the filler and the replacement, once
    assert "b" in h.filter(replacement("web-3"))["NodeNames"]


def test_a_second_replacement_takes_another_hold_or_none() -> None:
    h, evicted = cluster()
    second = make_pod("web-9").on("a").owner(WEB).labels({"app": "web"}).obj()
    h.store.apply_pod(second)
    h.store.apply_nodedrain(nodedrain("retire-a", status_pods=[evicting(evicted, "c"), evicting(second, "b")]))
    assert h.filter(replacement("web-2"))["NodeNames"] == ["b"]  # holds by destination: b first
    assert h.filter(replacement("web-3"))["NodeNames"] == ["c"]  # b's hold is taken
    assert "a" not in h.filter(replacement("web-4"))["NodeNames"]  # none left: still never the drained node


def test_a_drained_workload_never_goes_back_to_a_drained_node() -> None:
    h, evicted = cluster()
    h.store.apply_nodedrain(nodedrain("retire-a", status_pods=[evicting(evicted)]))
    other_shape = replacement(cpu="200m")  # of the workload, but not the evicted pod's shape: no hold
    result = h.filter(other_shape)
    assert "a" not in result["NodeNames"] and {"b", "c"} <= set(result["NodeNames"])
    assert "drained" in result["FailedAndUnresolvableNodes"]["a"]


def test_a_plan_mode_drain_holds_nothing() -> None:
    h, evicted = cluster()
    h.store.apply_nodedrain(nodedrain("retire-a", status_pods=[evicting(evicted)], mode="Plan"))
    assert h.store.holds == {} and h.schedule(replacement()) == "b"


def test_deleting_the_drain_releases_the_room() -> None:
    h, evicted = cluster(c_cpu="1", filler_cpu="900m")
    drain = nodedrain("retire-a", status_pods=[evicting(evicted)])
    h.store.apply_nodedrain(drain)
    h.store.delete_nodedrain(drain)
    other = replacement("web-new", owner=("ReplicaSet", "web-2"))
    assert "c" in h.filter(other, ["b", "c"])["NodeNames"]


def test_an_explicit_move_target_is_honoured_with_a_warning() -> None:
    h, evicted = cluster(nodeFilter={"excludes": ["c"]})
    move = nodedrain("move-web", status_pods=[evicting(evicted)], destinations=["c"],
                     podSelector={"matchLabels": {"app": "web"}})
    h.store.apply_nodedrain(move)
    first = replacement()
    assert h.schedule(first) == "c"  # filter, then the bind's recheck, honour it
    record = orjson.loads(h.store.decisions["shop/web-2"])
    assert any("excluded by nodeFilter.excludes" in w and "explicit target of NodeDrain move-web" in w
               for w in record["warnings"]), record["warnings"]


def test_a_whole_node_drain_s_destination_obeys_berth_s_checks() -> None:
    h, evicted = cluster(nodeFilter={"excludes": ["c"]})
    h.store.apply_nodedrain(nodedrain("retire-a", status_pods=[evicting(evicted)], destinations=["c"]))
    assert h.filter(replacement())["NodeNames"] == []


def test_the_room_stays_held_across_a_relist_of_the_pods() -> None:
    h, evicted = cluster(c_cpu="1", filler_cpu="900m")
    h.store.apply_nodedrain(nodedrain("retire-a", status_pods=[evicting(evicted)]))
    filler = make_pod("filler").labels({}).namespace("infra").on("c").cpu("900m").owner(("ReplicaSet", "filler")).obj()
    h.clock.advance(1)
    h.store.replace("pods", [filler, evicted])  # the placeholder is no pod of the API server
    other = replacement("web-new", owner=("ReplicaSet", "web-2"))
    assert "c" not in h.filter(other, ["b", "c"])["NodeNames"]


def test_the_room_is_held_again_when_the_replacement_does_not_bind_in_time() -> None:
    h, evicted = cluster(c_cpu="1", filler_cpu="900m")
    h.store.apply_nodedrain(nodedrain("retire-a", status_pods=[evicting(evicted)]))
    assert h.filter(replacement())["NodeNames"] == ["c"]  # claimed: its own reservation replaces the placeholder
    h.clock.advance(ExtenderSettings().tentative_ttl_seconds + 1)  # no bind came
    other = replacement("web-new", owner=("ReplicaSet", "web-2"))
    assert "c" not in h.filter(other, ["b", "c"])["NodeNames"]


def test_the_wait_starts_only_once_the_eviction_is_accepted() -> None:
    h, evicted = cluster(c_cpu="1", filler_cpu="900m")
    other = replacement("web-new", owner=("ReplicaSet", "web-2"))
    h.store.apply_nodedrain(nodedrain("retire-a", status_pods=[evicting(evicted, accepted=False)]))
    h.clock.advance(h.store.drain_hold_seconds + 1)  # a PodDisruptionBudget keeps refusing it
    assert "c" not in h.filter(other, ["b", "c"])["NodeNames"]
    h.store.apply_nodedrain(nodedrain("retire-a", status_pods=[evicting(evicted)]))  # accepted now
    h.clock.advance(h.store.drain_hold_seconds - 1)
    assert "c" not in h.filter(other, ["b", "c"])["NodeNames"]
    h.clock.advance(2)
    assert "c" in h.filter(other, ["b", "c"])["NodeNames"]


def test_a_planned_pod_s_room_is_held_before_its_eviction() -> None:
    """The operator evicts, then writes Evicting: the replacement may come before the extender
    reads it, so the room is held from the plan on."""
    h, evicted = cluster(c_cpu="1", filler_cpu="900m")
    h.store.apply_nodedrain(nodedrain("retire-a", status_pods=[evicting(evicted, state="Planned", accepted=False)]))
    other = replacement("web-new", owner=("ReplicaSet", "web-2"))
    assert "c" not in h.filter(other, ["b", "c"])["NodeNames"]
    assert h.schedule(replacement()) == "c"


def test_a_pod_the_watch_showed_gone_before_the_drain_s_status_still_holds_its_room() -> None:
    h, evicted = cluster(c_cpu="1", filler_cpu="900m")
    h.store.delete_pod(evicted)  # the watch of pods ran ahead of the watch of NodeDrains
    h.store.apply_nodedrain(nodedrain("retire-a", status_pods=[evicting(evicted, state="Moved")]))
    other = replacement("web-new", owner=("ReplicaSet", "web-2"))
    assert "c" not in h.filter(other, ["b", "c"])["NodeNames"]
    assert h.schedule(replacement()) == "c"


def _kept(evicted: dict[str, Any], *, evicted_at: float, state: str = "Moved") -> dict[str, Any]:
    """The entry of a pod gone before this extender started: the status keeps its shape."""
    entry = evicting(evicted, state=state)
    entry.update(evictedAt=format_time(evicted_at), requests={"cpu": "100m", "memory": str(128 * 2**20)},
                 labels={"app": "web"})
    return entry


def restarted(*, c_cpu: str = "4", filler_cpu: str = "1") -> Harness:
    """The cluster of :func:`cluster` as a new extender lists it after web-1 is gone."""
    return harness([make_node("a").obj(), make_node("b").obj(), make_node("c").cpu(c_cpu).obj(),
                    make_policy("web").obj(),
                    (make_pod("filler").labels({}).namespace("infra").on("c").cpu(filler_cpu)
                     .owner(("ReplicaSet", "filler")).obj())])


def test_a_restarted_extender_holds_the_room_of_a_pod_gone_before_it_started() -> None:
    """The evicted pod was gone before this extender listed the pods: the hold is rebuilt from the
    shape the drain's status keeps, and its wait counts from the eviction the entry records."""
    _, evicted = cluster()
    h = restarted(c_cpu="1", filler_cpu="900m")
    h.store.apply_nodedrain(nodedrain("retire-a", status_pods=[_kept(evicted, evicted_at=h.clock.now - 60)]))
    other = replacement("web-new", owner=("ReplicaSet", "web-2"))  # same shape, another controller
    assert "c" not in h.filter(other, ["b", "c"])["NodeNames"]
    h.clock.advance(h.store.drain_hold_seconds - 61)
    assert "c" not in h.filter(other, ["b", "c"])["NodeNames"]
    assert h.filter(replacement(), ["b", "c"])["NodeNames"] == ["c"]
    h.clock.advance(h.store.drain_hold_seconds)  # the replacement did not bind, the wait is over
    assert "c" in h.filter(other, ["b", "c"])["NodeNames"]


def test_a_restarted_extender_holds_nothing_for_a_wait_already_over() -> None:
    _, evicted = cluster()
    h = restarted()
    stale = _kept(evicted, evicted_at=h.clock.now - h.store.drain_hold_seconds - 1)
    h.store.apply_nodedrain(nodedrain("retire-a", status_pods=[stale]))
    assert h.store.holds == {}
    assert "a" not in h.filter(replacement())["NodeNames"]  # the workload still never goes back


@pytest.mark.parametrize("drain_first", [True, False], ids=["drain read first", "pod read first"])
def test_the_bind_names_the_hold_it_took_and_a_restart_reads_it(drain_first: bool) -> None:
    """The replacement bound through a hold carries the evicted pod's uid: an extender restarted
    later rebuilds no hold for it, whichever of the drain and the pod it reads first."""
    h, evicted = cluster()
    h.store.apply_nodedrain(nodedrain("retire-a", status_pods=[evicting(evicted)]))
    first = replacement()
    assert h.schedule(first) == "c"
    annotations = h.app.state.engine.binder.annotations["shop/web-2"]
    assert annotations[HOLD_ANNOTATION] == evicted["metadata"]["uid"]

    bound = {**first, "metadata": {**first["metadata"], "annotations": dict(annotations)},
             "spec": {**first["spec"], "nodeName": "c"}, "status": {"phase": "Running"}}
    moved = nodedrain("retire-a", status_pods=[_kept(evicted, evicted_at=h.clock.now)])
    h2 = restarted()
    if drain_first:
        h2.store.apply_nodedrain(moved)
        assert set(h2.store.holds) == {evicted["metadata"]["uid"]}  # the replacement not seen yet
    h2.store.apply_pod(bound)
    h2.store.apply_nodedrain(moved)
    assert h2.store.holds == {}
    assert h2.store.view.requested("c")["cpu"] == 1100  # the filler and the replacement, once
