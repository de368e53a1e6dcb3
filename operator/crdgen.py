"""Generate the PlacementPolicy and NodeDrain CRDs, and the decision record's JSON schema, from
the core's pydantic models.

    python -m berth.operator.crdgen > crds/placementpolicies.berth.dev.yaml
    python -m berth.operator.crdgen nodedrains > crds/nodedrains.berth.dev.yaml
    python -m berth.operator.crdgen decision-record > docs/decision-record.schema.json

The spec schema comes from :class:`berth.core.policy.PlacementPolicySpec`, the status schema
from :class:`berth.operator.status_model.PolicyStatus`, and the rule tree from the limits of
:mod:`berth.core.placement_rules`; what CEL can check is added as ``x-kubernetes-validations``.
``tests/crd`` fails when the committed YAML differs from this output, so the CRD cannot drift
from the models.

Structural schemas cannot recurse: the ``anyOf`` / ``allOf`` groups are nested explicitly down
to the rule language's limit (groups nest at most 5 deep, so the members of a fifth-level
group are plain rules). The apiserver prices every CEL rule by the most instances it could have (the product of
the ``maxItems`` above it), so the rule-tree CEL rules stop at :data:`CEL_RULE_DEPTH`; what they
check below it, and what CEL cannot check at all (at most 16 rules in total, keys unique after
trimming), the validating webhook refuses.
"""

from __future__ import annotations

import copy
import json
import sys
from typing import Any

import yaml
from pydantic import BaseModel

from berth.core import (
    API_GROUP,
    CRD_VERSION,
    NODEDRAIN_KIND,
    NODEDRAIN_PLURAL,
    POLICY_KIND,
    POLICY_PLURAL,
    RULE_LIMITS,
    NodeDrainSpec,
    PlacementPolicySpec,
    RuleOperator,
    RuleResource,
    decision_record_schema,
)
from berth.operator.drain_status import REFUSED_LIMIT, NodeDrainStatus
from berth.operator.status_model import PolicyStatus

SINGULAR = "placementpolicy"
SHORT_NAMES = ["ppol", "pp"]
CRD_NAME = f"{POLICY_PLURAL}.{API_GROUP}"

CEL_RULE_DEPTH = 4
"""Rule-tree levels that carry CEL rules. A rule at level d can have 16**d instances, and each
level has 2**(d-1) copies of the node schema (anyOf / allOf branches); the apiserver refuses a
rule whose cost times its instances exceeds 10**7, and a CRD whose rules add up to more than
10**8: level 5 is over both (checked against kube-apiserver 1.37). Level 6 (plain rules only)
has ``required`` instead."""

Schema = dict[str, Any]

_KEEP = ("type", "format", "enum", "minimum", "maximum", "minLength", "maxLength", "pattern",
         "minItems", "maxItems", "minProperties", "maxProperties", "description", "required")


def _resolve(node: Schema, defs: dict[str, Schema]) -> Schema:
    """Inline ``$ref`` and drop the ``null`` branch of optional fields."""
    if "$ref" in node:
        target = defs[node["$ref"].rsplit("/", 1)[-1]]
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _resolve(merged, defs)
    if "anyOf" in node:
        branches = [b for b in node["anyOf"] if b != {"type": "null"}]
        if len(branches) != 1:
            raise ValueError(f"cannot express a union in a structural schema: {node}")
        merged = {**branches[0], **{k: v for k, v in node.items() if k != "anyOf"}}
        return _resolve(merged, defs)
    return node


def structural(node: Schema, defs: dict[str, Schema]) -> Schema:
    """A pydantic JSON schema node as a Kubernetes structural schema node."""
    node = _resolve(node, defs)
    if not node:
        return {}  # ``Any`` (placementRules' items): replaced by a hand-made schema, see spec_schema()
    out: Schema = {k: copy.deepcopy(node[k]) for k in _KEEP if k in node}
    if "const" in node:
        out["enum"] = [node["const"]]
    if "enum" in out and "type" not in out:
        out["type"] = "string"
    default = node.get("default")
    if default is not None and not isinstance(default, (list, dict)):
        out["default"] = default  # scalars only: an empty list or map is the same as absent
    kind = out.get("type")
    if kind == "object":
        properties = node.get("properties")
        if properties:
            out["properties"] = {name: structural(sub, defs) for name, sub in properties.items()}
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            out["additionalProperties"] = structural(extra, defs)
        if not properties and not isinstance(extra, dict):
            raise ValueError(f"an object schema without properties: {node}")
    elif kind == "array":
        out["items"] = structural(node.get("items") or {}, defs)
    elif kind is None:
        raise ValueError(f"a schema without a type: {node}")
    return _ordered(out)


_ORDER = ("description", "type", "format", "enum", "default", "minimum", "maximum", "minLength",
          "maxLength", "pattern", "minItems", "maxItems", "minProperties", "maxProperties", "required",
          "properties", "additionalProperties", "items")


def _ordered(node: Schema) -> Schema:
    return {k: node[k] for k in sorted(node, key=lambda k: (_ORDER.index(k) if k in _ORDER else 99, k))}


def model_schema(model: type[BaseModel]) -> Schema:
    raw = model.model_json_schema(by_alias=True, mode="validation")
    return structural(raw, raw.get("$defs", {}))


def _cel(rule: str, message: str, **extra: str) -> dict[str, str]:
    return {"rule": rule, "message": message, **extra}


# -- the rule tree (docs/behaviour.md#placement-rules) ----------------------------------------

def rule_node_schema(depth: int) -> Schema:
    """One node of ``placementRules`` at ``depth`` (1 = an item of the top-level list)."""
    labels: Schema = {
        "description": f"Labels the resource must carry, every pair on the same resource; "
                       f"1 to {RULE_LIMITS.pairs} pairs, keys of 1 to {RULE_LIMITS.key} characters, values of at "
                       f"most {RULE_LIMITS.value}, keys unique after trimming.",
        "type": "object",
        "minProperties": 1,
        "maxProperties": RULE_LIMITS.pairs,
        "additionalProperties": {"type": "string", "maxLength": RULE_LIMITS.value},
    }
    properties: Schema = {
        "resource": {"description": "Node reads the labels of the candidate node; Pod reads the labels "
                                    "of the pods of the policy's namespace on it.",
                     "type": "string", "enum": [r.value for r in RuleResource]},
        "operator": {"description": "Has: a resource carries every pair; HasNot: the opposite.",
                     "type": "string", "enum": [o.value for o in RuleOperator]},
        "labels": labels,
        "within": {"description": "Pod rules only: a node label key; the rule reads the pods on every node "
                                  "sharing the candidate's value for it (e.g. rack).",
                   "type": "string", "minLength": 1, "maxLength": RULE_LIMITS.within},
    }
    node: Schema = {
        "description": "A rule (resource, operator, labels, within) or a group: an object with exactly one "
                       "key, anyOf or allOf." if depth <= RULE_LIMITS.depth else
                       f"A rule: groups nest at most {RULE_LIMITS.depth} deep.",
        "type": "object",
    }
    if depth <= RULE_LIMITS.depth:
        member = rule_node_schema(depth + 1)
        for key, word in (("anyOf", "at least one"), ("allOf", "every")):
            properties[key] = {"description": f"A group that holds when {word} member holds.",
                               "type": "array", "minItems": 1, "maxItems": RULE_LIMITS.rules, "items": member}
    else:
        node["required"] = ["resource", "operator", "labels"]
    node["properties"] = properties
    rules: list[dict[str, str]] = []
    if depth <= CEL_RULE_DEPTH:
        rules.append(_cel("!(has(self.anyOf) || has(self.allOf)) || ((has(self.anyOf) != has(self.allOf)) "
                          "&& !has(self.resource) && !has(self.operator) && !has(self.labels) "
                          "&& !has(self.within))",
                          "a group object must have exactly one key (anyOf or allOf)"))
        rules.append(_cel("has(self.anyOf) || has(self.allOf) || (has(self.resource) && has(self.operator) "
                          "&& has(self.labels))",
                          "a rule needs resource, operator and labels"))
        rules.append(_cel("!has(self.within) || (has(self.resource) && self.resource == 'Pod')",
                          "within is only allowed on Pod rules", fieldPath=".within"))
    if rules:
        node["x-kubernetes-validations"] = rules
    return node


# -- spec ----------------------------------------------------------------------------------------

DESCRIPTIONS: dict[str, str] = {
    "spec": "How the pods the policy selects are placed. The namespace is the tenant: the policy "
            "governs and reads only pods of its own namespace.",
    "spec.selector": "The pods, in this namespace, that the policy governs (a metav1.LabelSelector; "
                     "empty selects every pod).",
    "spec.selector.matchLabels": "Labels a pod must carry.",
    "spec.selector.matchExpressions": "Requirements a pod's labels must meet.",
    "spec.strategy": "Auto, Fill, Each, Global, Drained, Balanced, Spread or BestFit; absent: the default "
                     "ranking (most free share of the tightest resource).",
    "spec.count": "Fill: pods per node to top up to; Each: pods to add to each node.",
    "spec.nodesLimit": "Auto: at most this many pods per node; Fill and Each: how many nodes; 0: no limit.",
    "spec.nodeFilter": "The candidate nodes. includes, when set, is the whole list (labels, all and "
                       "excludes are then ignored).",
    "spec.nodeFilter.includes": "Exactly these nodes.",
    "spec.nodeFilter.excludes": "Never these nodes.",
    "spec.nodeFilter.labels": "Labels a node must carry.",
    "spec.nodeFilter.all": "Keep nodes that are down (not Ready, lease expired, cordoned, bypassed).",
    "spec.topologySpreadConstraints": "Kubernetes' TopologySpreadConstraint, with kube-scheduler's semantics.",
    "spec.placementRules": f"Affinity rules, every one must hold; at most {RULE_LIMITS.rules} rules "
                           f"in total, groups included; groups nest at most {RULE_LIMITS.depth} deep.",
    "spec.affinityMatching": "Enforced: no node meeting the rules with room fails the placement; Preferred: "
                             "the rules are then ignored.",
    "spec.capacity": "Overrides of the cluster's capacity settings for this policy's pods; unset fields "
                     "use the cluster's.",
    "spec.capacity.cpuOvercommitPercent": "100 never overcommits CPU; above 100 allows it.",
    "spec.capacity.memoryOvercommitPercent": "100 never overcommits memory; above 100 allows it.",
    "spec.capacity.minFreeDiskPercent": "A node is refused when placing would leave less free disk.",
    "spec.capacity.rejectUnknownCapacity": "Refuse nodes that do not report a resource the pod asks for "
                                           "(otherwise they rank last, with a warning).",
    "status": "What the operator observed; written by berth only.",
}

_REQUIREMENT_RULES = [
    _cel("!(self.operator in ['In', 'NotIn']) || (has(self.values) && size(self.values) > 0)",
         "operators In and NotIn need at least one value", fieldPath=".values"),
    _cel("!(self.operator in ['Exists', 'DoesNotExist']) || !has(self.values) || size(self.values) == 0",
         "operators Exists and DoesNotExist take no values", fieldPath=".values"),
]


def _at(schema: Schema, path: str) -> Schema:
    """The sub-schema at a dotted path; ``[]`` steps into array items."""
    node = schema
    for part in path.split("."):
        node = node["properties"][part[:-2]]["items"] if part.endswith("[]") else node["properties"][part]
    return node


def _selector_rules(selector: Schema) -> None:
    _at(selector, "matchExpressions[]").setdefault("x-kubernetes-validations", []).extend(
        copy.deepcopy(_REQUIREMENT_RULES))


def spec_schema() -> Schema:
    spec = model_schema(PlacementPolicySpec)
    spec["properties"]["placementRules"] = {"type": "array", "maxItems": RULE_LIMITS.rules,
                                            "items": rule_node_schema(1)}
    _selector_rules(_at(spec, "selector"))
    constraint = _at(spec, "topologySpreadConstraints[]")
    _selector_rules(_at(constraint, "labelSelector"))
    constraint["x-kubernetes-validations"] = [
        _cel("!has(self.minDomains) || !has(self.whenUnsatisfiable) || self.whenUnsatisfiable == "
             "'DoNotSchedule'", "minDomains is only allowed with whenUnsatisfiable: DoNotSchedule",
             fieldPath=".minDomains"),
        _cel("!has(self.matchLabelKeys) || size(self.matchLabelKeys) == 0 || has(self.labelSelector)",
             "matchLabelKeys must not be specified when labelSelector is not set", fieldPath=".matchLabelKeys")]
    constraint["description"] = ("Spread the selected pods over the domains of topologyKey; the label "
                                 "selector defaults to the policy's.")
    return spec


def status_schema() -> Schema:
    status = model_schema(PolicyStatus)
    conditions = status["properties"]["conditions"]
    conditions["x-kubernetes-list-type"] = "map"
    conditions["x-kubernetes-list-map-keys"] = ["type"]
    return status


def _describe(root: Schema) -> None:
    for path, text in DESCRIPTIONS.items():
        _at(root, path)["description"] = text


def _sort_schema(node: Schema) -> Schema:
    out = _ordered(node)
    if "properties" in out:
        out["properties"] = {k: _sort_schema(v) for k, v in out["properties"].items()}
    if "items" in out:
        out["items"] = _sort_schema(out["items"])
    if isinstance(out.get("additionalProperties"), dict):
        out["additionalProperties"] = _sort_schema(out["additionalProperties"])
    return out


def open_api_schema() -> Schema:
    root: Schema = {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec_schema(),
            "status": status_schema(),
        },
    }
    _describe(root)
    _check_typed(root, "openAPIV3Schema")
    return _sort_schema(root)


def _check_typed(node: Schema, path: str) -> None:
    if "type" not in node:
        raise ValueError(f"{path}: no type")
    for name, sub in (node.get("properties") or {}).items():
        _check_typed(sub, f"{path}.{name}")
    if "items" in node:
        _check_typed(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        _check_typed(node["additionalProperties"], f"{path}{{}}")


PRINTER_COLUMNS = [
    {"name": "Strategy", "type": "string", "jsonPath": ".status.strategy",
     "description": "The strategy in force."},
    {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
     "description": "Every selected pod is placed."},
    {"name": "Placed", "type": "integer", "jsonPath": ".status.placedTotal",
     "description": "Selected pods placed on a node."},
    {"name": "Pending", "type": "integer", "jsonPath": ".status.pending", "priority": 1,
     "description": "Selected pods waiting for a node."},
    {"name": "Valid", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Valid")].status',
     "priority": 1, "description": "The spec passed validation."},
    {"name": "Satisfied", "type": "string",
     "jsonPath": '.status.conditions[?(@.type=="Satisfied")].status', "priority": 1,
     "description": "The pending pods can be placed now."},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def crd() -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME},
        "spec": {
            "group": API_GROUP,
            "scope": "Namespaced",
            "names": {"kind": POLICY_KIND, "listKind": f"{POLICY_KIND}List", "plural": POLICY_PLURAL,
                      "singular": SINGULAR, "shortNames": list(SHORT_NAMES), "categories": ["berth"]},
            "versions": [{
                "name": CRD_VERSION,
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "additionalPrinterColumns": PRINTER_COLUMNS,
                "schema": {"openAPIV3Schema": open_api_schema()},
            }],
        },
    }


# -- NodeDrain ----------------------------------------------------------------------------------

DRAIN_CRD_NAME = f"{NODEDRAIN_PLURAL}.{API_GROUP}"

DRAIN_DESCRIPTIONS: dict[str, str] = {
    "spec": "Which nodes to drain, which of their pods to move, and where the pods may go. Every "
            "pod's destination is planned under its PlacementPolicy before anything is evicted.",
    "spec.nodes": "The nodes to drain, by name.",
    "spec.nodeSelector": "More nodes to drain: those whose labels it matches.",
    "spec.podSelector": "A move: only the pods of the drained nodes that it matches (absent: every pod). "
                        "With exactly one node in destinations, that node is the move's explicit target: "
                        "honoured even where berth's own checks would refuse it, with a warning.",
    "spec.destinations": "The only nodes the pods may go to, by name (never a drained node).",
    "spec.destinationSelector": "More destinations: the nodes whose labels it matches.",
    "spec.anyDestination": "Any node but the drained ones may take the pods (instead of destinations).",
    "spec.includeUnmanagedPods": "Also move pods that no controller would recreate (kubectl drain's "
                                 "--force); DaemonSet and mirror pods are always left alone.",
    "spec.mode": "Plan: compute and report each pod's destination in the status; nothing is evicted. "
                 "Execute: cordon the drained nodes, then evict the planned pods through the Eviction API "
                 "(PodDisruptionBudgets respected); blocked pods stay and are planned again as the cluster "
                 "changes. Deleting the NodeDrain stops it; the nodes stay cordoned.",
    "spec.maxEvictionsInFlight": "Execute: at most this many pods evicting at once (asked for and not gone "
                                 "yet, a refused eviction waiting for its retry included).",
    "status": "What the operator planned; written by berth only.",
}


def drain_spec_schema() -> Schema:
    spec = model_schema(NodeDrainSpec)
    for name in ("nodeSelector", "podSelector", "destinationSelector"):
        _selector_rules(_at(spec, name))
    spec["x-kubernetes-validations"] = [
        _cel("(has(self.nodes) && size(self.nodes) > 0) || has(self.nodeSelector)",
             "name the nodes to drain or select them (nodeSelector)"),
        _cel("(has(self.anyDestination) && self.anyDestination) || (has(self.destinations) && "
             "size(self.destinations) > 0) || has(self.destinationSelector)",
             "no destination: name the destinations or allow any destination", fieldPath=".destinations"),
        _cel("!(has(self.anyDestination) && self.anyDestination) || ((!has(self.destinations) || "
             "size(self.destinations) == 0) && !has(self.destinationSelector))",
             "anyDestination allows every node: it cannot be combined with destinations",
             fieldPath=".anyDestination"),
        _cel("!has(self.nodes) || !has(self.destinations) || self.destinations.all(d, !(d in self.nodes))",
             "a drained node is never a destination", fieldPath=".destinations"),
    ]
    return spec


def drain_status_schema() -> Schema:
    status = model_schema(NodeDrainStatus)
    conditions = status["properties"]["conditions"]
    conditions["x-kubernetes-list-type"] = "map"
    conditions["x-kubernetes-list-map-keys"] = ["type"]
    refused = _at(status, "pods[].refused")
    refused["maxProperties"] = REFUSED_LIMIT
    return status


def drain_open_api_schema() -> Schema:
    root: Schema = {
        "type": "object",
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": drain_spec_schema(),
            "status": drain_status_schema(),
        },
    }
    for path, text in DRAIN_DESCRIPTIONS.items():
        _at(root, path)["description"] = text
    _check_typed(root, "openAPIV3Schema")
    return _sort_schema(root)


DRAIN_PRINTER_COLUMNS = [
    {"name": "Phase", "type": "string", "jsonPath": ".status.phase",
     "description": "Planned: every pod has a destination; Blocked: some pod has none; Invalid; Execute: "
                    "Draining, Drained."},
    {"name": "Moved", "type": "integer", "jsonPath": ".status.moved", "description": "Pods moved."},
    {"name": "Planned", "type": "integer", "jsonPath": ".status.planned", "description": "Pods with a destination."},
    {"name": "Blocked", "type": "integer", "jsonPath": ".status.blocked",
     "description": "Pods no destination can take."},
    {"name": "Mode", "type": "string", "jsonPath": ".spec.mode", "priority": 1, "description": "Plan or Execute."},
    {"name": "Left", "type": "integer", "jsonPath": ".status.left", "priority": 1,
     "description": "Pods a drain leaves where they are."},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def nodedrain_crd() -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": DRAIN_CRD_NAME},
        "spec": {
            "group": API_GROUP,
            "scope": "Cluster",
            "names": {"kind": NODEDRAIN_KIND, "listKind": f"{NODEDRAIN_KIND}List", "plural": NODEDRAIN_PLURAL,
                      "singular": "nodedrain", "shortNames": ["ndrain"], "categories": ["berth"]},
            "versions": [{
                "name": CRD_VERSION,
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "additionalPrinterColumns": DRAIN_PRINTER_COLUMNS,
                "schema": {"openAPIV3Schema": drain_open_api_schema()},
            }],
        },
    }


HEADER = ("# Generated by `python -m berth.operator.crdgen` from berth/core/policy.py, berth/core/"
          "placement_rules.py\n# and operator/status_model.py. Do not edit: change the models and "
          "regenerate (tests/crd checks it).\n")


class _NoAliases(yaml.SafeDumper):
    """Writes shared sub-trees out in full: a YAML anchor would be a cycle to readers of a schema."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


DRAIN_HEADER = ("# Generated by `python -m berth.operator.crdgen nodedrains` from berth/core/nodedrain.py and "
                "operator/drain_status.py.\n# Do not edit: change the models and regenerate (tests/crd checks "
                "it).\n")


def render() -> str:
    return HEADER + yaml.dump(crd(), Dumper=_NoAliases, sort_keys=False, width=110, allow_unicode=True)


def render_nodedrain() -> str:
    return DRAIN_HEADER + yaml.dump(nodedrain_crd(), Dumper=_NoAliases, sort_keys=False, width=110,
                                    allow_unicode=True)


def render_decision_record() -> str:
    """The JSON schema of every decision berth records (:class:`berth.core.decision.DecisionRecord`)."""
    return json.dumps(decision_record_schema(), indent=2, ensure_ascii=False) + "\n"


RENDERERS = {POLICY_PLURAL: render, NODEDRAIN_PLURAL: render_nodedrain, "decision-record": render_decision_record}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    which = args[0] if args else POLICY_PLURAL
    if len(args) > 1 or which not in RENDERERS:
        sys.stderr.write(f"usage: python -m berth.operator.crdgen [{' | '.join(RENDERERS)}]\n")
        return 2
    sys.stdout.write(RENDERERS[which]())
    return 0


if __name__ == "__main__":
    sys.exit(main())
