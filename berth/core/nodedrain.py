"""The NodeDrain: a cluster-scoped request to drain nodes (or to move some pods off them), as a
pydantic model with the Kubernetes field names. The CRD is generated from it
(:mod:`berth.operator.crdgen`); :func:`nodedrain_from_manifest` validates a manifest and
raises :class:`~berth.core.drain.InvalidDrain` naming the first bad field path;
:meth:`NodeDrainSpec.to_request` is what :func:`berth.core.drain.plan_drain` plans.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from berth.core.drain import DrainRequest, InvalidDrain
from berth.core.policy import Selector, _path, _problem, checked_manifest

KIND = "NodeDrain"
PLURAL = "nodedrains"
MAX_NODES = 500
"""Nodes named in ``nodes`` or ``destinations``, at most (a selector names more)."""
NODE_NAME_MAX = 253
EVICTIONS_IN_FLIGHT_MAX = 100
"""The most evictions an executing drain may have in flight (asked for, the pod not gone yet)."""


class DrainMode(StrEnum):
    PLAN = "Plan"  # compute and report each pod's destination; evict nothing
    EXECUTE = "Execute"  # cordon the nodes, then evict the planned pods through the Eviction API


NodeName = Annotated[str, Field(min_length=1, max_length=NODE_NAME_MAX)]


class NodeDrainSpec(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)

    nodes: list[NodeName] = Field(default_factory=list, max_length=MAX_NODES)
    node_selector: Selector | None = None
    pod_selector: Selector | None = None
    destinations: list[NodeName] = Field(default_factory=list, max_length=MAX_NODES)
    destination_selector: Selector | None = None
    any_destination: bool = False
    include_unmanaged_pods: bool = False
    mode: DrainMode = DrainMode.PLAN
    max_evictions_in_flight: int = Field(default=5, ge=1, le=EVICTIONS_IN_FLIGHT_MAX)

    @model_validator(mode="after")
    def _consistent(self) -> NodeDrainSpec:
        # the core's own checks, with the core's messages, before any cluster is read
        request = self.to_request()
        if not request.nodes and request.node_selector is None:
            raise InvalidDrain("nodes", "name the nodes to drain or select them (nodeSelector)")
        named = set(self.nodes) & set(self.destinations)
        if named:
            raise InvalidDrain("destinations", f"{sorted(named)[0]} is drained: a drained node is never a "
                                               "destination")
        if self.any_destination and (self.destinations or self.destination_selector is not None):
            raise InvalidDrain("anyDestination", "allows every node: it cannot be combined with destinations")
        if not self.any_destination and not self.destinations and self.destination_selector is None:
            raise InvalidDrain("destinations", "no destination: name the destinations or allow any destination")
        return self

    def to_request(self) -> DrainRequest:
        return DrainRequest(
            nodes=tuple(self.nodes),
            node_selector=self.node_selector.to_core() if self.node_selector is not None else None,
            pods=self.pod_selector.to_core() if self.pod_selector is not None else None,
            destinations=tuple(self.destinations),
            destination_selector=self.destination_selector.to_core() if self.destination_selector is not None
            else None,
            any_destination=self.any_destination,
            include_unmanaged=self.include_unmanaged_pods,
        )


def nodedrain_spec(raw: object, path: str = "spec") -> NodeDrainSpec:
    """Validate a NodeDrain's spec; the error names the field path (``spec.destinations``)."""
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise InvalidDrain(path, "must be an object")
    try:
        return NodeDrainSpec.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        cause = (first.get("ctx") or {}).get("error")
        if isinstance(cause, InvalidDrain):
            raise InvalidDrain(f"{path}.{cause.field}", cause.problem) from None
        raise InvalidDrain(_path(path, first["loc"]), _problem(first)) from None


def nodedrain_from_manifest(obj: object) -> tuple[str, NodeDrainSpec]:
    """A NodeDrain manifest's name and validated spec."""
    manifest, meta = checked_manifest(obj, KIND, InvalidDrain)
    return str(meta["name"]), nodedrain_spec(manifest.get("spec"))
