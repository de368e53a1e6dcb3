"""What berth records about one placement: the nodes considered, which were refused and
why, the winner and the warnings. Stored on the pod (annotation), in the policy status and
served by the explain API; it round-trips through JSON unchanged."""

from __future__ import annotations

import re
from collections.abc import ItemsView, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from itertools import chain, repeat
from operator import itemgetter
from typing import Any

from berth.core.errors import ErrorCode, PlacementError

DECISION_ANNOTATION = "berth.dev/decision"


_CAPACITY = "insufficient capacity: "
_CAPACITY_LEN = len(_CAPACITY)
_LEASE = "node is down: Lease not renewed"
_SKEW = re.compile(r"topology spread: placing here makes skew \d+ in ([^=]+)=.*\(maxSkew (\d+)\)")
_CEILING = re.compile(r"nodesLimit: already holds \d+ pods of this workload \(per-node ceiling (\d+)\)")


def refusal_cause(reason: str) -> str:
    """A refusal reason without its per-node figures: one text per cause.

    kube-scheduler counts identical reason texts in its FailedScheduling event ("3 insufficient
    capacity: memory"), so what berth sends it must be the same text for the same cause; the
    figures of each node stay in the pod's own record (:meth:`Decision.refusal_lines`).
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
        self._each: dict[str, Refusal] = dict(each.items()) if each else {}
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
        """The first ``limit`` refused nodes of ``order``, with their refusals. ``order`` is read in
        slices, each tested against every part by C-level filters, until ``limit`` are found: a
        large cluster's record costs a slice or two, not a Python step per node of ``order``."""
        found: dict[str, Refusal] = {}
        kept: list[str] = []
        step = 2 * max(limit, 1)
        for start in range(0, len(order), step):
            piece = order[start:start + step]
            found.update((name, self._each[name]) for name in filter(self._each.__contains__, piece))
            for names, refusal in self._groups:
                found.update(dict.fromkeys(filter(names.__contains__, piece), refusal))
            kept.extend(filter(found.__contains__, piece))
            if len(kept) >= limit:
                break
        return Refused({name: found[name] for name in kept[:limit]})

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


@dataclass
class Decision:
    pod: str  # namespace/name, or a shape's description
    policy: str | None  # namespace/name
    strategy: str
    considered: list[str] = field(default_factory=list)
    refused: Refused = field(default_factory=Refused)
    ranking: list[str] = field(default_factory=list)  # passing nodes, best first
    warnings: list[str] = field(default_factory=list)
    error: PlacementError | None = None
    trigger: str = "preview"  # filter | bind | plan | preview
    time: str | None = None  # RFC 3339, stamped by the shell that records it
    plan: dict[str, int] | None = None  # the round's node -> count plan, when one was made

    @property
    def winner(self) -> str | None:
        return self.ranking[0] if self.ranking and self.error is None else None

    def refusal_lines(self) -> list[str]:
        """``node-a: insufficient capacity: ...`` for every refused node, in name order."""
        return [f"{node}: {refusal.reason}" for node, refusal in self.refused.by_node()]

    def to_dict(self, *, ranking_limit: int = 10) -> dict[str, Any]:
        return {
            "pod": self.pod,
            "policy": self.policy,
            "strategy": self.strategy,
            "trigger": self.trigger,
            "time": self.time,
            "considered": list(self.considered),
            "refused": {node: refusal.reason for node, refusal in self.refused.by_node()},
            "winner": self.winner,
            "ranking": self.ranking[:ranking_limit],
            "warnings": list(self.warnings),
            "error": self.error.to_dict() if self.error else None,
            "plan": dict(self.plan) if self.plan is not None else None,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Decision:
        error = data.get("error")
        return cls(
            pod=str(data.get("pod", "")),
            policy=data.get("policy"),
            strategy=str(data.get("strategy", "")),
            considered=list(data.get("considered") or []),
            refused=Refused({n: Refusal(str(r)) for n, r in (data.get("refused") or {}).items()}),
            ranking=list(data.get("ranking") or []),
            warnings=list(data.get("warnings") or []),
            error=PlacementError(ErrorCode(error["code"]), str(error["message"])) if error else None,
            trigger=str(data.get("trigger", "preview")),
            time=data.get("time"),
            plan={str(k): int(v) for k, v in data["plan"].items()} if data.get("plan") else None,
        )
