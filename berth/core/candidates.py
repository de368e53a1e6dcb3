"""Every node judged for one pod: refused with a reason, or a candidate carrying the per-node
figures the strategies read (capacity, count, usage, rate, free share after, projected shares:
docs/behaviour.md#strategies).

The order of the checks is the order a user reasons in: does the node exist, may this pod go
there at all (its own constraints, the policy's node filter and liveness), does the round's
plan leave it room, does topology spread allow it, does it fit, and do the placement rules hold.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection, Iterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from itertools import filterfalse
from operator import attrgetter
from typing import Protocol

from berth.core.decision import Refusal, Refused
from berth.core.errors import ErrorCode, PlacementError
from berth.core.model import LabelSelector, PodInfo
from berth.core.plugins.fit import Candidate, Fitted, SortKey, weighed_dimensions
from berth.core.policy import AffinityMatching, PlacementPolicy

CONTROLLER_LABELS = frozenset({"pod-template-hash", "controller-revision-hash",
                               "statefulset.kubernetes.io/pod-name", "apps.kubernetes.io/pod-index"})

__all__ = ["CONTROLLER_LABELS", "Candidate", "CandidateSet", "SortKey", "weighed_dimensions"]

ORDER_WORTH_IT = 64
"""Fewer candidates than this are sorted: cheaper than walking every node of the view's order."""


@dataclass
class CandidateSet:
    considered: list[str]
    refused: Refused = field(default_factory=Refused)
    warnings: list[str] = field(default_factory=list)
    error: PlacementError | None = None
    order: Callable[[SortKey], Sequence[str] | None] | None = field(default=None, repr=False)
    """Every node of the view sorted by a strategy's sort key (kept between cycles), when the
    candidates are the view's own; ranking them is then a filter of that order."""
    rest_of: AbstractSet[str] | None = field(default=None, repr=False)
    """When not None (with ``order``): the candidates are exactly every node of the view not in this
    set, in the order considered, none of unknown capacity and none scored by spread, so that
    ranking them is that order less this set."""
    candidate_of: Callable[[str], Candidate] | None = field(default=None, repr=False, compare=False)
    """With :attr:`rest_of`: one candidate by its node's name, made alone (:meth:`walk_by`)."""
    _candidates: list[Candidate] | None = field(default=None, repr=False)
    _make: Callable[[], list[Candidate]] | None = field(default=None, repr=False, compare=False)

    @property
    def candidates(self) -> list[Candidate]:
        """The nodes not refused, each with its figures, in the order considered (made when first
        read, when :meth:`defer` put them off)."""
        if self._candidates is None:
            make, self._make = self._make, None
            self._candidates = make() if make is not None else []
        return self._candidates

    @candidates.setter
    def candidates(self, value: list[Candidate]) -> None:
        self._candidates, self._make = value, None

    def defer(self, make: Callable[[], list[Candidate]]) -> None:
        """The candidates are ``make()``, made only if read (with :attr:`rest_of` set, a ranking and
        the names that pass need none of them): for a caller that reads them, if at all, before the
        state judged changes."""
        self._candidates, self._make = None, make

    @property
    def count(self) -> int:
        """How many candidates, without making them when :attr:`rest_of` tells."""
        if self._candidates is None and self.rest_of is not None:
            return len(self.considered) - len(self.rest_of)
        return len(self.candidates)

    def sorted_by(self, key: SortKey) -> list[Candidate]:
        """The candidates sorted by ``key`` (one function kept for the purpose, unique per node):
        in the order the view keeps by it (:func:`kept_order`) when it serves, else each key worked
        out once a candidate and sorted."""
        candidates = self.candidates
        names = kept_order(candidates, key, self.order)
        if names is not None:
            by_name = {c.name: c for c in candidates}
            return [by_name[n] for n in names]
        return sorted(candidates, key=lambda c: c.sort_key(key))

    def walk_by(self, key: SortKey) -> Iterator[Candidate] | None:
        """The candidates in ``key``'s order, each made only when the walk reaches it: the order the
        view keeps by ``key`` less :attr:`rest_of`, for a walk that may stop early (Fill's round for
        the pods waiting). None when the candidates are not the view's nodes not refused, or the
        view keeps no order (:meth:`sorted_by` then). Walk it before the state judged changes."""
        rest_of, make = self.rest_of, self.candidate_of
        if rest_of is None or make is None or self.order is None:
            return None
        every = self.order(key)
        if every is None:
            return None
        return map(make, filterfalse(rest_of.__contains__, every) if rest_of else every)

    def passing(self) -> list[str]:
        """The candidates' names, in the order considered."""
        if self._candidates is None and self.rest_of is not None:
            # nothing refused (the rule in a uniform cluster): a copy, no test of each node
            return list(filterfalse(self.rest_of.__contains__, self.considered)) if self.rest_of else list(
                self.considered)
        return list(map(candidate_name, self.candidates))


class FitReading(Protocol):
    """Each node's fit, as the rules and the error read it (a verdict table's reading, or the
    plain path's)."""

    def __getitem__(self, name: str) -> Fitted: ...

    def among(self, tag: str, nodes: Collection[str]) -> set[str]: ...


def workload_selector(pod: PodInfo, policy: PlacementPolicy | None) -> LabelSelector:
    """The pods that count as this pod's workload: the policy's, else pods labelled like it."""
    if policy is not None:
        return policy.selector
    return LabelSelector({k: v for k, v in pod.labels.items() if k not in CONTROLLER_LABELS})


def no_node_error(result: CandidateSet, held: Sequence[AbstractSet[str]], failing: Sequence[AbstractSet[str]],
                   fit: FitReading) -> PlacementError:
    """Why no node can take the pod: spread_unsatisfied when topology spread refuses nodes that
    have room for it and meet the rules (spread alone holds the pod back), else a lack of room."""
    roomy = set().union(*held)
    roomy -= fit.among("refused", roomy)
    for breaking in failing:
        roomy -= breaking
    if not roomy:
        return PlacementError(ErrorCode.INSUFFICIENT_RESOURCE, no_node_message(result))
    listed = heapq.nsmallest(LISTED, roomy)
    more = f"; and {len(roomy) - LISTED} more" if len(roomy) > LISTED else ""
    return PlacementError(ErrorCode.SPREAD_UNSATISFIED,
                          f"0/{len(result.considered)} nodes can take the pod; topology spread refuses every node "
                          "with room for it: " + "; ".join(f"{n}: {result.refused[n].reason}" for n in listed) + more)


class Refusals:
    """Records refusals and adds the refused nodes to ``out``. Thousands of nodes share a
    handful of reasons, so they share the objects."""

    def __init__(self, into: Refused, out: set[str]) -> None:
        self._into = into
        self._out = out
        self._shared: dict[tuple[str, bool], Refusal] = {}

    def _refusal(self, reason: str, resolvable: bool) -> Refusal:
        key = (reason, resolvable)
        shared = self._shared.get(key)
        if shared is None:
            shared = self._shared[key] = Refusal(reason, resolvable)
        return shared

    @property
    def out(self) -> AbstractSet[str]:
        """Every node refused so far (and those the runner set aside)."""
        return self._out

    def one(self, name: str, reason: str, resolvable: bool) -> None:
        self._into.one(name, self._refusal(reason, resolvable))
        self._out.add(name)

    def group(self, names: AbstractSet[str], reason: str, resolvable: bool) -> None:
        """``names``: a set of its own, none of them refused yet (it is kept, not copied)."""
        if names:
            self._into.group(names, self._refusal(reason, resolvable))
            self._out |= names


candidate_name = attrgetter("name")
is_unverified = attrgetter("unverified")  # the dimensions whose capacity is unknown: truthy if any
spread_scored = attrgetter("spread_score")


def kept_order(candidates: Sequence[Candidate], key: SortKey,
               order: Callable[[SortKey], Sequence[str] | None] | None) -> list[str] | None:
    """The candidates' names sorted by ``key``, read off ``order`` (every node of the view as kept
    sorted by that key, ``CandidateSet.order``) with no key worked out nor sort. None when that
    does not serve: no order, too few candidates for a walk of every node to pay
    (:data:`ORDER_WORTH_IT`), or a candidate the order does not hold."""
    if order is None or len(candidates) < ORDER_WORTH_IT:
        return None
    every = order(key)
    if every is None:
        return None
    names = set(map(candidate_name, candidates))
    ranking = list(filter(names.__contains__, every))
    return ranking if len(ranking) == len(names) == len(candidates) else None


LISTED = 10
"""Nodes named one by one in a spread_unsatisfied message; the rest are counted."""


def no_node_message(result: CandidateSet, leave_out: AbstractSet[str] = frozenset(),
                    more: Sequence[str] = ()) -> str:
    """Every refused node's reason (but ``leave_out``'s), then ``more`` lines."""
    lines = [f"{node}: {refusal.reason}" for node, refusal in result.refused.by_node() if node not in leave_out]
    lines.extend(more)
    if not result.considered:
        return "no node to consider"
    return f"0/{len(result.considered)} nodes can take the pod: " + "; ".join(lines)


def apply_rules(result: CandidateSet, passing: list[Candidate],
                 broken: Sequence[tuple[AbstractSet[str], tuple[str, bool]]],
                 policy: PlacementPolicy | None, fit: FitReading, require_fit: bool,
                 refused: Refusals) -> list[Candidate]:
    """When a node that meets the rules has room, the others go; when none does,
    Preferred ignores the rules and Enforced refuses: affinity_unsatisfied when nodes that break
    the rules have room, insufficient_resource (with the shortfall of the nodes that meet them)
    when nothing has room anywhere."""
    if any(c.capacity > 0 for c in passing):
        for group, (reason, resolvable) in broken:
            refused.group(group, reason, resolvable)
        return passing
    assert policy is not None
    reasons = {name: verdict for group, verdict in broken for name in group}
    in_order = [n for n in result.considered if n in reasons]
    if policy.affinity_matching is AffinityMatching.PREFERRED:
        result.warnings.append("no node that meets placementRules has room; Preferred matching ignores the rules")
        unfit = fit.among("refused" if require_fit else "refused-anyway", set(reasons))
        for name in in_order:
            if name in unfit:
                refused.one(name, fit[name].fit.refusal or "", True)
            else:
                passing.append(fit[name].candidate)
        return passing
    for group, (reason, resolvable) in broken:
        refused.group(group, reason, resolvable)
    if not any(fit[name].candidate.capacity > 0 for name in in_order):
        # Nothing fits anywhere: room, not the rules, is what is missing.
        # A fixed round keeps candidates with no room (it judges room itself): their shortfall too.
        no_room = [f"{c.name}: {fit[c.name].fit.refusal}" for c in passing if fit[c.name].fit.refusal]
        message = no_node_message(result, leave_out=reasons.keys(), more=no_room)
        result.error = PlacementError(
            ErrorCode.INSUFFICIENT_RESOURCE,
            f"{message}; the {len(in_order)} node(s) that do not meet placementRules have no room either")
        return []
    result.error = PlacementError(
        ErrorCode.AFFINITY_UNSATISFIED,
        "no node that meets placementRules has room: " + "; ".join(f"{n}: {reasons[n][0]}" for n in in_order))
    return []
