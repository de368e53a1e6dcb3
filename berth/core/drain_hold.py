"""An executing drain's plan kept for the replacement pods: what the extender asks the core when a
pending pod comes while a drain is under way (the extender only feeds it; nothing here reads the
cluster, a clock or the network).

* A *hold* is the room a drained pod's planned destination keeps for its replacement, from its
  eviction until the replacement binds or a bounded wait passes. The extender counts a
  placeholder of the evicted pod's shape on the destination, like any reservation, so that no
  other pod takes the room.
* A pending pod *claims* a hold when it is of the same workload and shape as the evicted pod
  (namespace, controller, requests): the controller's replacement. It is then offered the
  destination alone (see :func:`steer`).
* A pod of a drained workload that claims no hold is never offered a drained node.
* An executing drain's status keeps the shape of each pod it moves (:func:`shape_of`): a hold
  is rebuilt from it (:func:`evicted_from_entry`) by an extender that never saw the pod, such
  as one restarted after the eviction.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from berth.core.decision import Refused
from berth.core.drain import scheduler_refusal
from berth.core.evaluate import Evaluation
from berth.core.model import Owner, PodInfo
from berth.core.quantity import CPU, to_base_units
from berth.core.view import ClusterView

HOLD_UID_PREFIX = "berth-drain-hold/"
"""The uid of a hold's placeholder pod (never a real pod's uid)."""
HOLD_ANNOTATION = "berth.dev/drain-hold"
"""On a pod bound through a hold: the uid of the evicted pod it replaces. The hold is done for
good, and an extender that restarts learns it from the pod."""


@dataclass(frozen=True, slots=True)
class Hold:
    """The room ``destination`` keeps for the replacement of ``pod`` (the evicted pod)."""

    drain: str  # the NodeDrain's name
    pod: PodInfo  # the evicted pod, as it was: its workload and shape
    destination: str
    explicit: bool  # the move's one named target: honoured where berth's checks would refuse it
    deadline: float  # the room is kept until then at most (the extender's clock)

    @property
    def placeholder_uid(self) -> str:
        return HOLD_UID_PREFIX + self.pod.uid

    def placeholder(self) -> PodInfo:
        """The pod counted on the destination while the hold lasts: the evicted pod's shape."""
        p = self.pod
        return PodInfo(uid=self.placeholder_uid, name=p.name, namespace=p.namespace, labels=p.labels,
                       requests=p.requests, tolerations=p.tolerations, node_affinity=p.node_affinity,
                       controller=p.controller)


def shape_of(pod: PodInfo) -> dict[str, Any]:
    """What a hold needs of a pod once it is gone, as a drain's status keeps it: its requests as
    exact Kubernetes quantities (millicores for CPU, base units otherwise) and its labels."""
    out: dict[str, Any] = {"requests": {r: f"{n}m" if r == CPU else str(n) for r, n in sorted(pod.requests.items())
                                        if n}}
    if pod.labels:
        out["labels"] = dict(sorted(pod.labels.items()))
    return out


def evicted_from_entry(entry: Mapping[str, Any]) -> PodInfo | None:
    """The evicted pod a drain status entry describes (``pod``, ``uid``, ``workload`` and the
    fields of :func:`shape_of`), or None when the entry lacks any of them or cannot be read."""
    pod, uid, workload, requests = entry.get("pod"), entry.get("uid"), entry.get("workload"), entry.get("requests")
    labels = entry.get("labels") or {}
    if not (isinstance(pod, str) and isinstance(uid, str) and uid and isinstance(workload, str)
            and isinstance(requests, Mapping) and isinstance(labels, Mapping)):
        return None
    namespace, _, name = pod.partition("/")
    kind, _, owner = workload.partition("/")
    if not (namespace and name and kind and owner):
        return None
    try:
        amounts = {str(r): to_base_units(str(r), str(q)) for r, q in requests.items()}
    except ValueError:
        return None
    return PodInfo(uid=uid, name=name, namespace=namespace, labels={str(k): str(v) for k, v in labels.items()},
                   requests=amounts, controller=Owner(kind, owner))


def same_shape(evicted: PodInfo, pod: PodInfo) -> bool:
    """``pod`` could be ``evicted``'s replacement: same namespace, same controller, same requests."""
    return (evicted.controller is not None and pod.controller == evicted.controller
            and pod.namespace == evicted.namespace
            and {k: v for k, v in pod.requests.items() if v} == {k: v for k, v in evicted.requests.items() if v})


def claim(holds: Iterable[Hold], pod: PodInfo, now: float, taken: Collection[str] = ()) -> Hold | None:
    """The hold ``pod`` takes: the first (by destination, then evicted pod) of its workload and
    shape, still within its deadline at ``now``, whose evicted pod's uid is not in ``taken``
    (holds other pending pods took already)."""
    found = [h for h in holds if h.deadline > now and h.pod.uid not in taken and same_shape(h.pod, pod)]
    return min(found, key=lambda h: (h.destination, h.pod.uid)) if found else None


@dataclass(frozen=True, slots=True)
class Steer:
    """What the drains say about one pending pod's nodes."""

    hold: Hold | None = None  # the hold it claims: offered its destination alone
    avoid: frozenset[str] = frozenset()  # drained nodes its workload left: never offered

    def nodes(self, names: Iterable[str]) -> list[str]:
        """The nodes of ``names`` the pod may be judged on."""
        if self.hold is not None:
            return [n for n in names if n == self.hold.destination]
        return [n for n in names if n not in self.avoid]


NO_STEER = Steer()

Workload = tuple[str, Owner]
"""(namespace, controller)."""


def steer(pod: PodInfo, holds: Iterable[Hold], drained: Mapping[Workload, frozenset[str]], now: float,
          taken: Collection[str] = ()) -> Steer:
    """The drains' say on ``pod``: the hold it claims, else the drained nodes its workload left
    (``drained``: the nodes drains moved each workload's pods off)."""
    hold = claim(holds, pod, now, taken)
    if hold is not None:
        return Steer(hold=hold)
    if pod.controller is None:
        return NO_STEER
    avoid = drained.get((pod.namespace, pod.controller))
    return Steer(avoid=avoid) if avoid else NO_STEER


def honour_target(view: ClusterView, pod: PodInfo, hold: Hold, evaluation: Evaluation) -> None:
    """An explicit move target that berth's checks refused is honoured (in place, with a warning in
    the decision), unless kube-scheduler itself would refuse it too (then it stays refused)."""
    decision = evaluation.decision
    target = hold.destination
    refusal = decision.refused.get(target)
    if not hold.explicit or (refusal is None and decision.error is None) or target in decision.ranking[:1]:
        return
    if target not in view.nodes or scheduler_refusal(view.overlay(), pod, target) is not None:
        return
    why = refusal.reason if refusal is not None else (decision.error.message if decision.error else "refused")
    decision.refused = Refused()  # judged on the target alone (see Steer.nodes)
    decision.error = None
    decision.ranking = [target]
    decision.warnings.append(f"{target}: berth's checks refuse it ({why}); honoured as the explicit target of "
                             f"NodeDrain {hold.drain}")
    if target not in evaluation.passing:
        evaluation.passing.append(target)
