"""What berth decided about one pod: the nodes considered, which were refused and why, the
winner and the warnings.

:class:`Decision` is the decision as the core makes it (every node judged, refusals kept as the
checks made them); :class:`DecisionRecord` is the one versioned shape it is kept in: the pod's
``berth.dev/decision`` annotation, the explain API's answer, the policy status's latest decision
and ``berth plan``'s output. Its JSON schema is ``docs/decision-record.schema.json``."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, ItemsView, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from itertools import chain, repeat
from operator import attrgetter, itemgetter
from typing import Any, Final, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from berth.core.errors import ERROR_CODES, ErrorCode, PlacementError

DECISION_ANNOTATION = "berth.dev/decision"


_CAPACITY = "insufficient capacity: "
_CAPACITY_LEN = len(_CAPACITY)
_LEASE = "node is down: Lease not renewed"
_SKEW = re.compile(r"topology spread: placing here makes skew \d+ in ([^=]+)=.*\(maxSkew (\d+)\)")
_CEILING = re.compile(r"nodesLimit: already holds \d+ pods of this workload \(per-node ceiling (\d+)\)")


_CAUSES: dict[str, str] = {}
_CAUSES_KEPT = 16384
"""Causes of the reasons seen last (:func:`_causes`), emptied when it outgrows its bound."""


def refusal_cause(reason: str) -> str:
    """A refusal reason without its per-node figures: one text per cause (:func:`_cause`)."""
    return _causes((reason,))[0]


def _causes(reasons: Sequence[str]) -> list[str]:
    """:func:`refusal_cause` of each reason, kept for the reasons seen last (the filter records the
    same nodes' reasons pod after pod) and read by a C-level map. The one reader of the kept causes,
    which are emptied when they outgrow their bound."""
    found: list[str | None] = list(map(_CAUSES.get, reasons))
    if None not in found:
        return found  # type: ignore[return-value]
    if len(_CAUSES) > _CAUSES_KEPT:
        _CAUSES.clear()
    for i, cause in enumerate(found):
        if cause is None:
            found[i] = _CAUSES[reasons[i]] = _cause(reasons[i])
    return found  # type: ignore[return-value]


def _cause(reason: str) -> str:
    """A refusal reason without its per-node figures: one text per cause.

    kube-scheduler counts identical reason texts in its FailedScheduling event ("3 insufficient
    capacity: memory"), so what berth sends it must be the same text for the same cause; the
    figures of each node stay in the pod's own record (:class:`RefusalGroup`'s ``details``).
    ``insufficient capacity: memory: needs 2.0 GiB, ...; cpu: needs ...`` becomes
    ``insufficient capacity: memory, cpu``; a skew becomes the key and maxSkew it breaks; a
    Lease's age and a nodesLimit count are dropped. Reasons without figures are kept as they are.
    """
    if reason.startswith(_CAPACITY):
        if "; " not in reason:  # one resource short: the common case, on the filter's path for every node
            colon = reason.find(":", _CAPACITY_LEN)
            return reason[:colon] if colon > 0 else reason
        parts = reason[_CAPACITY_LEN:].split("; ")
        return _CAPACITY + ", ".join(dict.fromkeys(part.split(":", 1)[0] for part in parts))
    if reason.startswith(_LEASE):
        return _LEASE
    if (skew := _SKEW.fullmatch(reason)) is not None:
        return f"topology spread: placing here breaks maxSkew {skew[2]} in {skew[1]}"
    if (ceiling := _CEILING.fullmatch(reason)) is not None:
        return f"nodesLimit: already holds the per-node ceiling of {ceiling[1]} pods of this workload"
    return reason


@dataclass(frozen=True, slots=True)
class Refusal:
    reason: str
    resolvable: bool = True  # False: preemption cannot fix it (node filter, node rules, liveness)


class Refused(Mapping[str, Refusal]):
    """The refused nodes and why, kept as the checks refused them: thousands of nodes refused
    together for one reason (a spread domain, a rule) stay one group, and single refusals a dict.
    The scheduler's FailedNodes is then built group by group (:meth:`parts`), and nothing makes a
    per-node dict of a large cluster that only a few lookups read. Each node is refused once."""

    GROUP_MIN = 16
    """Smaller groups are kept node by node, so that a lookup scans few groups."""

    __slots__ = ("_each", "_groups", "_size")

    def __init__(self, each: Mapping[str, Refusal] | None = None) -> None:
        self._each: dict[str, Refusal] = (dict(each) if type(each) is dict else dict(each.items())) if each else {}
        self._groups: list[tuple[AbstractSet[str], Refusal]] = []
        self._size = len(self._each)

    def one(self, name: str, refusal: Refusal) -> None:
        self._size += name not in self._each
        self._each[name] = refusal

    def group(self, names: AbstractSet[str], refusal: Refusal) -> None:
        """Refuse ``names``, none of which is refused yet, for one reason."""
        if len(names) < self.GROUP_MIN:
            self._each.update(dict.fromkeys(names, refusal))
        else:
            self._groups.append((names, refusal))
        self._size += len(names)

    def parts(self) -> tuple[Mapping[str, Refusal], list[tuple[AbstractSet[str], Refusal]]]:
        """(the nodes refused one by one, the groups refused together)."""
        return self._each, self._groups

    def first(self, order: Sequence[str], limit: int) -> Refused:
        """The first ``limit`` refused nodes of ``order``, with their refusals."""
        return Refused({name: self[name] for name in self.first_names(order, limit)})

    def first_names(self, order: Sequence[str], limit: int) -> list[str]:
        """The first ``limit`` refused nodes of ``order``. ``order`` is read in slices, each made a
        set and intersected with every part (C-level set operations, no call per node), until
        ``limit`` are found: a large cluster's record costs a slice or two, not a Python step per
        node of ``order``."""
        kept: list[str] = []
        each = self._each
        step = 2 * max(limit, 1)
        for start in range(0, len(order), step):
            piece = order[start:start + step]
            names = set(piece)
            hit = names.intersection(each)
            for group, _ in self._groups:
                hit.update(names.intersection(group))
            kept.extend(filter(hit.__contains__, piece))
            if len(kept) >= limit:
                break
        return kept[:limit]

    def by_node(self) -> list[tuple[str, Refusal]]:
        """(node, refusal) sorted by node name."""
        return sorted(self.items(), key=itemgetter(0))

    def __getitem__(self, name: str) -> Refusal:
        hit = self._each.get(name)
        if hit is not None:
            return hit
        for names, refusal in self._groups:
            if name in names:
                return refusal
        raise KeyError(name)

    def __contains__(self, name: object) -> bool:
        return name in self._each or any(name in names for names, _ in self._groups)

    def __iter__(self) -> Iterator[str]:
        return chain(self._each, *(names for names, _ in self._groups))

    def __len__(self) -> int:
        return self._size

    def items(self) -> ItemsView[str, Refusal]:
        return _RefusedItems(self)

    def __repr__(self) -> str:
        return f"Refused({dict(self.items())!r})"


class _RefusedItems(ItemsView[str, Refusal]):
    """(node, refusal) pairs read group by group, without a lookup per node."""

    _mapping: Refused

    def __iter__(self) -> Iterator[tuple[str, Refusal]]:
        each, groups = self._mapping.parts()
        return chain(each.items(), *(zip(names, repeat(refusal)) for names, refusal in groups))



MAX_PRIORITY = 10  # kube-scheduler's MaxExtenderPriority
RUNNER_UP_MAX = 4
"""Every node but the winner scores at most this, so that with the documented extender weight
the strategy's winner beats any sum the default score plugins can give another node."""


def ranked_score(position: int, total: int) -> int:
    """The score berth gives the node at ``position`` (0: the best) of a ranking of ``total``
    nodes: the winner 10, the rest ``4 * (total - position) // total`` (descending from 4
    towards 0; :func:`berth.core.evaluate.score_runs` gives the same scores run by run)."""
    if not 0 <= position < total:
        raise ValueError(f"position {position} is not in a ranking of {total} nodes")
    return MAX_PRIORITY if position == 0 else RUNNER_UP_MAX * (total - position) // total


@dataclass
class Decision:
    """A decision as the core makes it, every node judged (:meth:`record` is what is kept of it)."""

    pod: str  # namespace/name, or a shape's description
    policy: str | None  # namespace/name
    strategy: str
    considered: list[str] = field(default_factory=list)
    refused: Refused = field(default_factory=Refused)
    ranking: list[str] = field(default_factory=list)  # passing nodes, best first
    warnings: list[str] = field(default_factory=list)
    error: PlacementError | None = None
    trigger: str = "preview"  # filter | prioritize | bind | plan | preview
    time: str | None = None  # RFC 3339, stamped by the shell that records it
    plan: dict[str, int] | None = None  # the round's node -> count plan, when one was made
    policy_generation: int | None = None  # the policy's metadata.generation the decision followed
    round_id: str | None = None  # the round the pod was placed in, when the shell names rounds

    @property
    def winner(self) -> str | None:
        return self.ranking[0] if self.ranking and self.error is None else None

    def record(self, *, limit: int = 100, ranking_limit: int = 10, whole_plan: bool = True) -> DecisionRecord:
        """What is kept of the decision: every count, and the first ``limit`` nodes considered
        and refused (in the order considered) and ``ranking_limit`` ranked (:meth:`record_data`,
        as the model)."""
        return DecisionRecord.model_validate(self.record_data(limit=limit, ranking_limit=ranking_limit,
                                                              whole_plan=whole_plan))

    def record_data(self, *, limit: int = 100, ranking_limit: int = 10, whole_plan: bool = True) -> dict[str, Any]:
        """:meth:`record` as JSON data (every field, by its JSON name), made without the model: the
        extender records every filter's and prioritize's decision, and encodes this directly. A
        large cluster's record is made without a Python step per node listed only to be cut.
        ``whole_plan``: the round's whole plan in the record, else its size and the winner's
        places alone (:func:`round_plan_data`)."""
        if self.time is None:
            raise ValueError("a decision is recorded once its shell has stamped its time")
        considered, refused = self.considered, self.refused
        listed = refused.first_names(considered, limit) if len(refused) > limit else None
        winner = self.winner
        error = self.error
        return {
            "apiVersion": DECISION_API_VERSION, "pod": self.pod, "trigger": self.trigger, "time": self.time,
            "policy": self.policy, "policyGeneration": self.policy_generation, "strategy": self.strategy,
            "round": round_plan_data(self.round_id, self.plan, winner, whole=whole_plan) if self.plan is not None
            else None,
            "consideredCount": len(considered), "considered": considered[:limit],
            "refusedCount": len(refused), "refused": refusal_groups(refused, listed),
            "winner": {"node": winner, "rank": 1, "score": MAX_PRIORITY} if winner is not None else None,
            "rankingCount": len(self.ranking), "ranking": self.ranking[:ranking_limit],
            "warnings": list(self.warnings),
            "error": {"code": error.code.value, "message": error.message} if error is not None else None,
        }


def round_plan_data(round_id: str | None, plan: Mapping[str, int], node: str | None, *, whole: bool
                    ) -> dict[str, Any]:
    """The record of a round as JSON data (:class:`RoundPlan`): its id, its size and the places its
    plan gives ``node`` (the pod's), and, when ``whole``, the plan itself. The pods of a round
    record it without the plan but one (the extender's bind, see :mod:`berth.core.round`): a plan
    names every node it uses, and a pod's annotation must stay small whatever the size of the round."""
    return {"id": round_id, "plan": dict(plan) if whole else None, "places": sum(plan.values()),
            "onNode": plan.get(node, 0) if node is not None else None}


def round_plan(round_id: str | None, plan: Mapping[str, int], node: str | None, *, whole: bool) -> RoundPlan:
    """:func:`round_plan_data` as the model."""
    return RoundPlan.model_validate(round_plan_data(round_id, plan, node, whole=whole))


def refusal_groups(refused: Refused, listed: Collection[str] | None = None) -> list[dict[str, Any]]:
    """One group per cause (:func:`refusal_cause`) with the count of every node ``refused`` for it
    and, in name order, those of its nodes that are ``listed`` (default: every one), most refused
    first, as a record's JSON data (:class:`RefusalGroup`). The causes of the nodes refused one by
    one are looked up and counted by C-level maps (:func:`_causes`), and the nodes refused together
    counted and listed group by group (a set intersection): a large cluster's record costs a Python
    step only for each node listed that was refused on its own."""
    each, together = refused.parts()
    causes = _causes(list(map(_reason, each.values())))
    distinct = set(causes)
    # few causes (the rule): a C-level count per cause beats a Counter's step per node
    counts = {cause: causes.count(cause) for cause in distinct} if len(distinct) <= 8 else Counter(causes)
    wanted = None if listed is None else listed if isinstance(listed, (set, frozenset)) else set(listed)
    nodes: dict[str, list[str]] = {}
    details: dict[str, dict[str, str]] = {}
    for name in each.keys() if wanted is None else each.keys() & wanted:
        reason = each[name].reason
        cause = refusal_cause(reason)
        nodes.setdefault(cause, []).append(name)
        if reason != cause:  # the node's own figures, beyond its cause
            details.setdefault(cause, {})[name] = reason
    for names, refusal in together:
        cause = refusal_cause(refusal.reason)
        counts[cause] = counts.get(cause, 0) + len(names)
        hit = names if wanted is None else wanted.intersection(names)
        if hit:
            nodes.setdefault(cause, []).extend(hit)
            if refusal.reason != cause:
                details.setdefault(cause, {}).update(dict.fromkeys(hit, refusal.reason))
    for listing in nodes.values():
        listing.sort()
    return [{"reason": cause, "count": n, "nodes": nodes.get(cause, []),
             "details": dict(sorted(details[cause].items())) if cause in details else {}}
            for cause, n in sorted(counts.items(), key=lambda item: (-item[1], item[0]))]


_reason = attrgetter("reason")


# -- the record ------------------------------------------------------------------------------------

DECISION_API_VERSION: Final = "berth.dev/decision/v1"
"""The version of :class:`DecisionRecord`: a reader checks it before it trusts the fields."""

Trigger = Literal["filter", "prioritize", "bind", "plan", "preview"]


class _Record(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid",
                              json_schema_serialization_defaults_required=True)


class RecordedError(_Record):
    """Why no node was found."""

    code: ErrorCode = Field(description=f"One of {ERROR_CODES}.")
    message: str


class RefusalGroup(_Record):
    """The nodes refused for one cause."""

    reason: str = Field(min_length=1, description=(
        "The cause, without any node's own figures (e.g. `insufficient capacity: memory`): the "
        "text kube-scheduler counts in its FailedScheduling event."))
    count: int = Field(ge=1, description="How many nodes were refused for it.")
    nodes: list[str] = Field(default_factory=list, description=(
        "The first of those nodes, in name order (the record lists a bounded number of refused "
        "nodes, the first in the order considered; a group may list none)."))
    details: dict[str, str] = Field(default_factory=dict, description=(
        "The refusal of each node listed whose own text carries figures beyond `reason` "
        "(e.g. how much memory it lacks)."))

    def refusal_of(self, node: str) -> str:
        return self.details.get(node, self.reason)


class RoundPlan(_Record):
    """The round (Fill, Each) the pod belongs to."""

    id: str | None = Field(default=None, description="The round's id, as in the berth.dev/round annotation.")
    plan: dict[str, int] | None = Field(default=None, description=(
        "The round's whole plan: node -> how many of its pods go there. Recorded on one pod of the "
        "round at a time (the first bound in it, and again on the next one bound after that pod is "
        "gone) and in berth plan's output; null on the round's other pods, which name the round by "
        "`id`."))
    places: int | None = Field(default=None, ge=0, description=(
        "How many pods the round places (the plan's total). Null in a record converted from before v1."))
    on_node: int | None = Field(default=None, ge=0, description=(
        "How many of them the plan puts on the winner's node (0: none, the pod is off the plan). "
        "Null when no node was found, or in a record converted from before v1."))


class Winner(_Record):
    """The node the pod goes to, and where berth ranked it."""

    node: str
    rank: int | None = Field(default=None, ge=1, description=(
        "Its place in berth's ranking (1: berth's first choice; kube-scheduler may bind another "
        "passing node). Null when not known: kube-scheduler bound a node beyond the ranked nodes the "
        "record lists, or the record was converted from before v1."))
    score: int | None = Field(default=None, ge=0, le=MAX_PRIORITY, description=(
        f"The score berth gave it (0..{MAX_PRIORITY}, kube-scheduler's MaxExtenderPriority). "
        "Null when not known."))


class DecisionRecord(_Record):
    """What berth decided about one pod, as it is kept: the pod's ``berth.dev/decision``
    annotation, the explain API's answer, the policy status's ``latestDecision`` (with shorter
    lists) and ``berth plan``'s ``decision``. ``docs/decision-record.schema.json`` is its JSON
    schema. :meth:`read` also reads the records berth wrote before the version field existed."""

    api_version: Literal["berth.dev/decision/v1"] = Field(
        default=DECISION_API_VERSION, alias="apiVersion", description="The record's version.")
    pod: str = Field(description="namespace/name of the pod (berth plan: of the pod shape).")
    trigger: Trigger = Field(description=(
        "What asked for the decision: kube-scheduler's filter, prioritize or bind, berth plan, "
        "or a preview (the explain API)."))
    time: str = Field(json_schema_extra={"format": "date-time"},
                      description="When the decision was made (RFC 3339).")
    policy: str | None = Field(default=None,
                               description="namespace/name of the PlacementPolicy, if one governs the pod.")
    policy_generation: int | None = Field(default=None, ge=0,
                                          description="The policy's metadata.generation the decision followed.")
    strategy: str = Field(description="The strategy in force (Default when none).")
    round: RoundPlan | None = Field(default=None, description="The round of a Fill or Each policy.")
    considered_count: int = Field(ge=0, description="How many nodes were considered.")
    considered: list[str] = Field(description="The first nodes considered, in the order considered.")
    refused_count: int = Field(ge=0, description=(
        "How many nodes were refused: the groups' counts add up to it (in a record converted from "
        "before v1 only the nodes it listed are grouped)."))
    refused: list[RefusalGroup] = Field(description="The refused nodes grouped by cause, the most refused first.")
    winner: Winner | None = Field(default=None, description="Null when no node was found.")
    ranking_count: int = Field(ge=0, description="How many nodes passed, i.e. were ranked.")
    ranking: list[str] = Field(description="The first passing nodes, best first.")
    warnings: list[str] = Field(default_factory=list)
    error: RecordedError | None = Field(default=None, description="Why no node was found.")

    def refusal_of(self, node: str) -> str | None:
        """Why ``node`` was refused, if the record lists it."""
        for group in self.refused:
            if node in group.nodes:
                return group.refusal_of(node)
        return None

    def refusals(self) -> dict[str, str]:
        """Each refused node listed -> why, in name order."""
        return dict(sorted((node, group.refusal_of(node)) for group in self.refused for node in group.nodes))

    def cut(self, limit: int) -> DecisionRecord:
        """The record with at most ``limit`` nodes in each list (refused: over all the groups,
        the first groups first); the counts stay."""
        refused: list[RefusalGroup] = []
        room = limit
        for group in self.refused:
            nodes = group.nodes[:room]
            room -= len(nodes)
            details = {node: text for node, text in group.details.items() if node in nodes}
            refused.append(group.model_copy(update={"nodes": nodes, "details": details}))
        return self.model_copy(update={"considered": self.considered[:limit], "refused": refused,
                                       "ranking": self.ranking[:limit]})

    def to_json(self) -> dict[str, Any]:
        """The record as JSON data, every field present."""
        return self.model_dump(mode="json", by_alias=True)

    @classmethod
    def read(cls, data: object) -> DecisionRecord | None:
        """A record read back from JSON data: this version, or one berth wrote before the version
        field existed (converted). None for anything else: another version, or not a record."""
        if not isinstance(data, Mapping):
            return None
        try:
            if "apiVersion" in data:
                return cls.model_validate(data)
            return cls.model_validate(_from_unversioned(data))
        except (ValidationError, TypeError, ValueError, AttributeError):
            return None

    @classmethod
    def read_json(cls, text: str | bytes) -> DecisionRecord | None:
        """:meth:`read` of an annotation's text."""
        try:
            data = orjson.loads(text)
        except orjson.JSONDecodeError:
            return None
        return cls.read(data)


def _from_unversioned(data: Mapping[str, Any]) -> dict[str, Any]:
    """A record of the shape berth wrote before :data:`DECISION_API_VERSION` (the annotation, the
    explain API), or the policy status's copy of one, in this version's fields. Those listed
    ``refused`` as node -> reason, the winner by name, the round's ``plan`` at the top, and the
    full counts as ``consideredTotal`` / ``refusedTotal`` (the status: ``consideredCount`` /
    ``refusedCount``) only when the lists were cut."""
    considered = [str(n) for n in data.get("considered") or ()]
    raw_refused = data.get("refused") or {}
    refused = Refused({str(n): Refusal(str(r)) for n, r in raw_refused.items()})
    ranking = [str(n) for n in data.get("ranking") or ()]
    considered_count = _count(data.get("consideredTotal", data.get("consideredCount")), len(considered))
    refused_count = _count(data.get("refusedTotal", data.get("refusedCount")), len(refused))
    winner = data.get("winner")
    plan = data.get("plan")
    return {
        "apiVersion": DECISION_API_VERSION,
        "pod": data.get("pod"),
        "trigger": data.get("trigger") or "preview",
        "time": data.get("time"),
        "policy": data.get("policy"),
        "strategy": data.get("strategy") or "Default",
        "round": {"plan": plan} if isinstance(plan, Mapping) else None,
        "consideredCount": considered_count,
        "considered": considered,
        "refusedCount": refused_count,
        "refused": refusal_groups(refused),
        "winner": {"node": winner} if isinstance(winner, str) and winner else None,
        # before v1 only the first ranked nodes were kept: the passing nodes are those not refused
        "rankingCount": max(len(ranking), considered_count - refused_count),
        "ranking": ranking,
        "warnings": list(data.get("warnings") or ()),
        "error": data.get("error"),
    }


def _count(recorded: object, listed: int) -> int:
    return recorded if isinstance(recorded, int) and recorded >= listed else listed


def decision_record_schema() -> dict[str, Any]:
    """The JSON schema of :class:`DecisionRecord` as berth writes it (every field present),
    published as ``docs/decision-record.schema.json``."""
    schema = DecisionRecord.model_json_schema(by_alias=True, mode="serialization")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": "https://berth.dev/schemas/decision-record.schema.json", **schema}
