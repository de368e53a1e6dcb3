"""What the chart's ServiceAccounts may do: exactly the verbs each component uses.

One table for the render tests (the rendered Roles hold these rules and no others) and the
end-to-end tests (a real API server answers ``kubectl auth can-i`` yes for each of them, and no
for the FORBIDDEN ones). A rule is (apiGroup, resource, verb, resourceName or "").
"""

from __future__ import annotations

NODE_LEASES = "kube-node-lease"

EXTENDER_CLUSTER = {
    ("", "nodes", "list", ""), ("", "nodes", "watch", ""),
    ("", "pods", "get", ""), ("", "pods", "list", ""), ("", "pods", "watch", ""),
    ("", "pods/binding", "create", ""),
    ("", "events", "create", ""),
    ("berth.dev", "placementpolicies", "list", ""), ("berth.dev", "placementpolicies", "watch", ""),
    ("berth.dev", "nodedrains", "get", ""),  # GET /api/v1/drains/{name}
    ("berth.dev", "nodedrains", "list", ""), ("berth.dev", "nodedrains", "watch", ""),  # rooms held for drains
    ("authentication.k8s.io", "tokenreviews", "create", ""),
    ("authorization.k8s.io", "subjectaccessreviews", "create", ""),
}
EXTENDER_NOMINATE = {("", "pods/status", "patch", "")}  # scheduler.profile nominate (the default) only
EXTENDER_NOMINATOR_ELECTION = {("coordination.k8s.io", "leases", "create", "")}  # likewise, in the release namespace


def nominator_lease(name: str) -> set[tuple[str, str, str, str]]:
    """The extender's rights on the Lease that elects the replica that nominates (release namespace)."""
    return {("coordination.k8s.io", "leases", "get", name), ("coordination.k8s.io", "leases", "update", name)}


PLACEMENT_READER_CLUSTER = {  # the page, the explain API and kubectl berth, with a person's own rights
    ("", "pods", "get", ""), ("", "pods", "list", ""), ("", "nodes", "list", ""),
    ("berth.dev", "placementpolicies", "get", ""), ("berth.dev", "placementpolicies", "list", ""),
}
PLACEMENT_READER_PORT_FORWARD = {
    ("", "services", "get", ""), ("", "services", "list", ""), ("", "pods", "get", ""), ("", "pods", "list", ""),
    ("", "pods/portforward", "create", ""),
}
EXTENDER_NODE_LEASES = {
    ("coordination.k8s.io", "leases", "list", ""), ("coordination.k8s.io", "leases", "watch", ""),
}

OPERATOR_CLUSTER = {
    ("berth.dev", "placementpolicies", "list", ""), ("berth.dev", "placementpolicies", "watch", ""),
    ("berth.dev", "placementpolicies", "patch", ""),
    ("berth.dev", "placementpolicies/status", "patch", ""),
    ("berth.dev", "nodedrains", "list", ""), ("berth.dev", "nodedrains", "watch", ""),
    ("berth.dev", "nodedrains", "patch", ""),
    ("berth.dev", "nodedrains/status", "patch", ""),
    ("", "pods", "list", ""), ("", "pods", "watch", ""),
    ("", "nodes", "list", ""), ("", "nodes", "watch", ""),
    ("", "nodes", "patch", ""),  # an executing NodeDrain cordons its nodes
    ("", "pods/eviction", "create", ""),  # and evicts through the Eviction API
    ("coordination.k8s.io", "leases", "list", ""), ("coordination.k8s.io", "leases", "watch", ""),
    ("", "events", "create", ""),
    ("apiextensions.k8s.io", "customresourcedefinitions", "list", ""),
    ("apiextensions.k8s.io", "customresourcedefinitions", "watch", ""),
}


def operator_peering(peering_name: str) -> set[tuple[str, str, str, str]]:
    return {
        ("kopf.dev", "clusterkopfpeerings", "list", ""), ("kopf.dev", "clusterkopfpeerings", "watch", ""),
        ("kopf.dev", "clusterkopfpeerings", "patch", peering_name),
    }


SCHEDULER_LEADER_ELECTION = {
    ("coordination.k8s.io", "leases", "create", ""),
}


def scheduler_lease(name: str) -> set[tuple[str, str, str, str]]:
    return {("coordination.k8s.io", "leases", "get", name), ("coordination.k8s.io", "leases", "update", name)}


# (verb, resource, namespace or "") that a component must NOT be allowed.
FORBIDDEN = {
    "extender": [
        ("get", "secrets", "default"), ("list", "secrets", ""), ("delete", "pods", "default"),
        ("patch", "pods", "default"),
        ("create", "pods", "default"), ("update", "pods", "default"), ("patch", "nodes", ""),
        ("patch", "placementpolicies.berth.dev", "default"), ("create", "leases.coordination.k8s.io", NODE_LEASES),
        ("list", "leases.coordination.k8s.io", "kube-system"), ("create", "pods/eviction", "default"),
        ("patch", "nodedrains.berth.dev", ""), ("delete", "nodedrains.berth.dev", ""),
    ],
    "operator": [
        ("get", "secrets", "default"), ("create", "pods/binding", "default"), ("patch", "pods", "default"),
        ("delete", "pods", "default"), ("delete", "nodes", ""),
        ("delete", "placementpolicies.berth.dev", "default"), ("create", "placementpolicies.berth.dev", "default"),
        ("create", "validatingwebhookconfigurations.admissionregistration.k8s.io", ""),
        ("patch", "customresourcedefinitions.apiextensions.k8s.io", ""), ("delete", "nodedrains.berth.dev", ""),
    ],
    "scheduler": [
        ("get", "secrets", "default"), ("delete", "nodes", ""), ("update", "configmaps", "kube-system"),
    ],
}
