"""The index's per-shape fit judge (berth/core/index/shape.py) answers exactly as the plain
``berth.core.plugins.fit.judge``: the same fit, capacity, refusal message and candidate figures,
to the last bit of every float, for any node, use, shape and settings."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from berth.core.fit import demand
from berth.core.index.shape import shape_judge
from berth.core.model import NodeInfo, PodInfo
from berth.core.plugins import fit as fit_check
from berth.core.plugins.fit import NodeUse
from berth.core.quantity import CPU, DISK, MEMORY, PODS
from berth.core.settings import Settings

GPU = "nvidia.com/gpu"
DIMENSIONS = (CPU, MEMORY, DISK, PODS, GPU)

AMOUNTS = st.integers(0, 64_000)


def _resources(draw: Any, amounts: st.SearchStrategy[int]) -> dict[str, int]:
    """Some of the dimensions (a node may not report one: unknown capacity), in a drawn order."""
    dims = draw(st.lists(st.sampled_from(DIMENSIONS), unique=True))
    return {dim: draw(amounts) for dim in dims}


@st.composite
def cases(draw: Any) -> tuple[NodeInfo, NodeUse, PodInfo, Settings, int]:
    node = NodeInfo(name="n", labels={}, allocatable=_resources(draw, st.integers(0, 128_000)))
    use = NodeUse(_resources(draw, AMOUNTS), draw(st.integers(0, 110)), draw(st.integers(0, 32_000)))
    requests = {dim: amount for dim, amount in _resources(draw, st.integers(0, 8_000)).items() if dim != PODS}
    pod = PodInfo(uid="p", name="p", namespace="ns", requests=requests, sleepy=draw(st.booleans()))
    chosen = Settings(cpu_overcommit_percent=draw(st.sampled_from([100, 150, 400])),
                      memory_overcommit_percent=draw(st.sampled_from([100, 120])),
                      min_free_disk_percent=draw(st.integers(0, 50)),
                      reject_unknown_capacity=draw(st.booleans()),
                      sleepy_memory_factor=draw(st.sampled_from([1.0, 2.0, 3.5])))
    return node, use, pod, chosen, draw(st.integers(0, 20))


def _both(node: NodeInfo, use: NodeUse, pod: PodInfo, chosen: Settings, count: int
          ) -> tuple[fit_check.Fitted, fit_check.Fitted]:
    need = demand(pod)
    return (shape_judge(need, pod, chosen)(node, use, count),
            fit_check.judge(node, use, need, pod, chosen, count))


FULL_NODE = NodeInfo(name="n", labels={}, allocatable={CPU: 4000, MEMORY: 8 * 2**30, DISK: 100 * 2**30, PODS: 110})


@settings(max_examples=400)
@given(cases())
@example((FULL_NODE, NodeUse({CPU: 3900, PODS: 3}, 3, 0), PodInfo("p", "p", "ns", requests={CPU: 500}),
          Settings(), 1))  # refused: the message is the plain path's
@example((NodeInfo("n", {}, {CPU: 4000, PODS: 110}), NodeUse({}, 0, 0), PodInfo("p", "p", "ns", requests={CPU: 1}),
          Settings(reject_unknown_capacity=True), 0))  # no memory nor disk reported
def test_the_shape_judge_answers_as_the_plain_fit(case: tuple[NodeInfo, NodeUse, PodInfo, Settings, int]) -> None:
    fast, plain = _both(*case)
    assert fast == plain
    # the candidate's figures to the bit (equality of floats is exact) and its fit alike
    assert fast.candidate.unverified == plain.candidate.unverified == fast.fit.unverified
