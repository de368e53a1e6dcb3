"""The status the operator writes on a NodeDrain, as pydantic models: the CRD's status schema is
generated from them (:mod:`berth.operator.crdgen`), and the operator validates what it writes
against them, so the two cannot drift."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from berth.core import ERROR_CODES, PodState
from berth.operator.status_model import Condition, _Model

CONDITION_VALID = "Valid"
CONDITION_PLANNED = "Planned"
CONDITION_DRAINED = "Drained"

REFUSED_LIMIT = 16
"""At most this many destinations' refusals per blocked pod in the status (a drain to any node of
a large cluster would otherwise write every node's refusal for every blocked pod)."""
PODS_LIMIT = 1000
"""At most this many pods listed in the status; the counts cover them all."""

Phase = Literal["Planned", "Blocked", "Invalid", "Draining", "Drained"]


class DrainPodStatus(_Model):
    pod: str = Field(description="namespace/name of the pod.")
    uid: str | None = Field(default=None, description="Execute: the pod's uid (a recreated pod of the same "
                                                      "name is another pod).")
    source: str = Field(description="The drained node it is on.")
    workload: str | None = Field(default=None, description="Its controller, Kind/name.")
    policy: str | None = Field(default=None, description="The PlacementPolicy that governs it, namespace/name.")
    state: PodState = Field(description="Planned: a destination has room for it; Blocked: no destination "
                                        "can take it, it stays; Left: a drain does not move it (DaemonSet, "
                                        "mirror, terminating, no controller); Execute only: Evicting (its "
                                        "eviction was asked for: accepted, or refused by a "
                                        "PodDisruptionBudget and retried) and Moved (evicted and gone).")
    destination: str | None = Field(default=None, description="The planned destination.")
    reason: str | None = Field(default=None, description="Blocked or Left: why.")
    code: str | None = Field(default=None, description=f"Blocked: the placement error's code ({ERROR_CODES}).")
    refused: dict[str, str] = Field(default_factory=dict, description=(
        f"Blocked: each destination's refusal, the per-resource shortfall among them (at most "
        f"{REFUSED_LIMIT})."))
    refused_count: int | None = Field(default=None, ge=0, description="Blocked: how many destinations refused it.")
    warnings: list[str] = Field(default_factory=list)
    requests: dict[str, str] = Field(default_factory=dict, description=(
        "Execute: a pod with a destination, its requests (exact quantities: millicores for cpu, base units "
        "otherwise), kept once it is gone: the room its destination holds for its replacement."))
    labels: dict[str, str] = Field(default_factory=dict, description="Execute: a pod with a destination, its "
                                                                     "labels (as requests).")
    evicted_at: str | None = Field(default=None, description="Execute: when the eviction was accepted.")
    attempts: int | None = Field(default=None, ge=0, description="Execute: eviction requests refused so far.")
    retry_at: str | None = Field(default=None, description="Execute: a refused eviction is asked for again "
                                                           "after this time.")
    refusal: str | None = Field(default=None, description="Execute: why the last eviction request was refused.")


class NodeDrainStatus(_Model):
    observed_generation: int | None = Field(
        default=None, ge=0, description="The .metadata.generation this status describes.")
    conditions: list[Condition] = Field(default_factory=list)
    phase: Phase | None = Field(default=None, description="Planned: every pod has a destination; Blocked: "
                                                          "some pod has none (in Execute, once every other "
                                                          "pod moved); Invalid: the drain cannot be "
                                                          "planned (see the Valid condition); Execute only: "
                                                          "Draining (pods being evicted) and Drained (every "
                                                          "pod moved).")
    nodes: list[str] = Field(default_factory=list, description="The drained nodes.")
    destinations: int | None = Field(default=None, ge=0, description="How many nodes may take the pods.")
    planned: int | None = Field(default=None, ge=0, description="Pods with a destination.")
    blocked: int | None = Field(default=None, ge=0, description="Pods no destination can take.")
    moved: int | None = Field(default=None, ge=0, description="Pods moved (0 in Plan mode: nothing is evicted).")
    evicting: int | None = Field(default=None, ge=0, description="Execute: pods whose eviction is in flight.")
    left: int | None = Field(default=None, ge=0, description="Pods a drain leaves where they are.")
    pods: list[DrainPodStatus] = Field(default_factory=list, description=(
        f"Each affected pod (at most {PODS_LIMIT}), by source node then pod."))


def validated(status: dict[str, Any]) -> dict[str, Any]:
    """Check a status dict against the model (raises ``ValidationError``) and return it."""
    NodeDrainStatus.model_validate(status)
    return status
