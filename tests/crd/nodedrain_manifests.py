"""NodeDrain manifests, valid and invalid, with the field the core names and what refuses each at
apply time: the CRD's tests check them against its schema and the core, the e2e tests against a
real API server."""

from __future__ import annotations

from typing import Any

from berth.core.nodedrain import EVICTIONS_IN_FLIGHT_MAX, MAX_NODES


def manifest(**spec: Any) -> dict[str, Any]:
    """A NodeDrain named drain-n1 with ``spec``."""
    return {"apiVersion": "berth.dev/v1alpha1", "kind": "NodeDrain", "metadata": {"name": "drain-n1"},
            "spec": spec}


VALID = [
    ("named_nodes_any_destination", manifest(nodes=["n1"], anyDestination=True)),
    ("named_destinations", manifest(nodes=["n1", "n2"], destinations=["n3"])),
    ("selectors", manifest(nodeSelector={"matchLabels": {"pool": "old"}},
                           destinationSelector={"matchExpressions": [{"key": "pool", "operator": "In",
                                                                      "values": ["new"]}]})),
    ("move_of_selected_pods", manifest(nodes=["n1"], podSelector={"matchLabels": {"app": "web"}},
                                       destinations=["n2"], includeUnmanagedPods=True, mode="Plan")),
    ("execute_with_evictions_in_flight", manifest(nodes=["n1"], anyDestination=True, mode="Execute",
                                                  maxEvictionsInFlight=EVICTIONS_IN_FLIGHT_MAX)),
]

SCHEMA = "schema"
# name, manifest, the field the core names, what refuses it at apply time: the structural schema
# (SCHEMA) or the CEL rule with this message (tests/e2e applies them to a real API server)
INVALID = [
    ("unknown_field", manifest(nodes=["n1"], anyDestination=True, maxUnavailable=1), "spec.maxUnavailable",
     SCHEMA),
    ("unknown_mode", manifest(nodes=["n1"], anyDestination=True, mode="Evict"), "spec.mode", SCHEMA),
    ("no_evictions_in_flight", manifest(nodes=["n1"], anyDestination=True, mode="Execute", maxEvictionsInFlight=0),
     "spec.maxEvictionsInFlight", SCHEMA),
    ("too_many_evictions_in_flight", manifest(nodes=["n1"], anyDestination=True, mode="Execute",
                                              maxEvictionsInFlight=EVICTIONS_IN_FLIGHT_MAX + 1),
     "spec.maxEvictionsInFlight", SCHEMA),
    ("empty_node_name", manifest(nodes=[""], anyDestination=True), "spec.nodes[0]", SCHEMA),
    ("too_many_nodes", manifest(nodes=[f"n{i}" for i in range(MAX_NODES + 1)], anyDestination=True), "spec.nodes",
     SCHEMA),
    ("selector_in_without_values", manifest(nodes=["n1"], anyDestination=True, podSelector={
        "matchExpressions": [{"key": "app", "operator": "In"}]}), "spec.podSelector.matchExpressions[0]",
     "operators In and NotIn need at least one value"),
    ("no_nodes", manifest(anyDestination=True), "spec.nodes", "name the nodes to drain or select them (nodeSelector)"),
    ("no_destination", manifest(nodes=["n1"]), "spec.destinations",
     "no destination: name the destinations or allow any destination"),
    ("any_and_named_destinations", manifest(nodes=["n1"], destinations=["n2"], anyDestination=True),
     "spec.anyDestination", "anyDestination allows every node: it cannot be combined with destinations"),
    ("drained_node_as_destination", manifest(nodes=["n1"], destinations=["n1"]), "spec.destinations",
     "a drained node is never a destination"),
]
