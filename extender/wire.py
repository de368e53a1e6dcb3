"""The JSON types of ``k8s.io/kube-scheduler/extender/v1``.

The Go types carry no json tags, so the keys on the wire are the Go field names (``Pod``,
``NodeNames``, ``FailedNodes`` ...). Pods and Nodes travel as raw Kubernetes JSON: the core
reads them through :mod:`berth.core.kube`, and a filter reply with ``nodeCacheCapable: false``
echoes the passing Node objects back unchanged.

Request bodies are decoded with orjson and validated here (FastAPI's own body parsing is
several times slower on the large bodies of ``nodeCacheCapable: false``); replies are built
as plain dicts and encoded with orjson. The models also document the endpoints in the
OpenAPI schema.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

MAX_EXTENDER_PRIORITY = 10
"""extenderv1.MaxExtenderPriority: prioritize scores are 0..10."""


class _Wire(BaseModel):
    # Unknown keys are ignored, as Go's encoding/json ignores them: a newer scheduler may add fields.
    model_config = ConfigDict(extra="ignore", frozen=True)


class NodeList(_Wire):
    """A v1.NodeList as the scheduler sends it (``{"metadata": {}, "items": [...]}``, no kind)."""

    metadata: dict[str, Any] | None = None
    items: list[dict[str, Any]] = Field(default_factory=list)


class ExtenderArgs(_Wire):
    """The body of filter and prioritize."""

    Pod: dict[str, Any]
    Nodes: NodeList | None = None  # nodeCacheCapable: false
    NodeNames: list[str] | None = None  # nodeCacheCapable: true


class ExtenderFilterResult(_Wire):
    Nodes: NodeList | None = None
    NodeNames: list[str] | None = None
    FailedNodes: dict[str, str] = Field(default_factory=dict)
    FailedAndUnresolvableNodes: dict[str, str] = Field(default_factory=dict)
    Error: str = ""


class HostPriority(_Wire):
    Host: str
    Score: int = Field(ge=0, le=MAX_EXTENDER_PRIORITY)


class ExtenderBindingArgs(_Wire):
    PodName: str = Field(min_length=1)
    PodNamespace: str = Field(min_length=1)
    PodUID: str = Field(min_length=1)
    Node: str = Field(min_length=1)


class ExtenderBindingResult(_Wire):
    Error: str = ""


class MetaPod(_Wire):
    UID: str


class MetaVictims(_Wire):
    Pods: list[MetaPod] | None = None
    NumPDBViolations: int = 0


class Victims(_Wire):
    Pods: list[dict[str, Any]] | None = None
    NumPDBViolations: int = 0


class ExtenderPreemptionArgs(_Wire):
    Pod: dict[str, Any]
    NodeNameToVictims: dict[str, Victims] | None = None  # nodeCacheCapable: false
    NodeNameToMetaVictims: dict[str, MetaVictims] | None = None  # nodeCacheCapable: true


class ExtenderPreemptionResult(_Wire):
    NodeNameToMetaVictims: dict[str, MetaVictims] | None = None


class BadRequest(ValueError):
    """A request body that is not the JSON the endpoint expects; answered with HTTP 400."""


M = TypeVar("M", bound=BaseModel)


def decode(body: bytes, model: type[M]) -> M:
    """Parse ``body`` with orjson and validate it against ``model``, or raise :class:`BadRequest`."""
    if not body:
        raise BadRequest("empty request body: expected a JSON object")
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"request body is not valid JSON: {exc}") from None
    return validate(data, model)


def validate(data: object, model: type[M]) -> M:
    if not isinstance(data, dict):
        raise BadRequest(f"request body must be a JSON object ({model.__name__}), found {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise BadRequest(f"invalid {model.__name__}: {describe(exc)}") from None


def describe(exc: ValidationError) -> str:
    """``NodeNames[2]: Input should be a valid string`` for the first few errors."""
    parts = []
    for err in exc.errors()[:3]:
        loc = ""
        for item in err["loc"]:
            loc += f"[{item}]" if isinstance(item, int) else (f".{item}" if loc else str(item))
        parts.append(f"{loc or '(body)'}: {err['msg']}")
    more = exc.error_count() - len(parts)
    if more > 0:
        parts.append(f"and {more} more")
    return "; ".join(parts)


def host_priority_list(runs: Iterable[tuple[int, Sequence[str]]]) -> bytes:
    """A HostPriorityList (``[{"Host": ..., "Score": ...}, ...]``) encoded from runs of hosts sharing
    a score, without a dict per host: each run is encoded as one JSON array of strings, whose
    ``","`` separators become the glue between two entries. Inside an encoded string every quote is
    escaped, so another ``","`` needs a string's own quote: the whole encoding of a host named ``,``,
    or an escaped quote and a comma ending a host (``"\\","``). No Node's name holds either, but the
    function takes any string: a run holding one (or any escaped quote) is encoded entry by entry.
    kube-scheduler adds the scores up by host, in any order."""
    parts: list[bytes] = []
    for score, hosts in runs:
        if not hosts:
            continue
        encoded = orjson.dumps(hosts)[1:-1]
        if "," in hosts or b'\\"' in encoded:
            parts.extend(orjson.dumps({"Host": host, "Score": score}) for host in hosts)
        else:
            glue = b'","Score":%d},{"Host":"' % score
            parts.append(b'{"Host":' + encoded.replace(b'","', glue) + b',"Score":%d}' % score)
    return b"[" + b",".join(parts) + b"]"


_PERCENT = re.compile(r"(?<=\d)%|%")


def scheduler_text(text: str) -> str:
    """A reason as kube-scheduler will show it. The scheduler passes refusal reasons to its event
    recorder as a *format string*, so ``10%`` reaches the pod's FailedScheduling event as
    ``10%!f(MISSING)``; ``%`` is spelt ``percent`` in what berth sends it (the explain API keeps
    the core's text)."""
    if "%" not in text:
        return text
    return _PERCENT.sub(lambda m: " percent" if m.start() > 0 and text[m.start() - 1].isdigit() else "percent",
                        text)


def pod_identity(pod: dict[str, Any]) -> tuple[str, str, str]:
    """(namespace, name, uid) of a raw pod, with empty strings for what is missing."""
    meta = pod.get("metadata")
    if not isinstance(meta, dict):
        return "", "", ""
    return str(meta.get("namespace") or "default"), str(meta.get("name") or ""), str(meta.get("uid") or "")


def node_name(node: dict[str, Any]) -> str:
    meta = node.get("metadata")
    if not isinstance(meta, dict):
        return ""
    name = meta.get("name")
    return name if isinstance(name, str) else ""


def meta_victims_from_full(victims: Victims) -> dict[str, Any]:
    """A NodeNameToVictims entry (full pods) in MetaVictims form (pod UIDs)."""
    pods = []
    for pod in victims.Pods or ():
        _, _, uid = pod_identity(pod)
        pods.append({"UID": uid})
    return {"Pods": pods, "NumPDBViolations": victims.NumPDBViolations}


def meta_victims(victims: MetaVictims) -> dict[str, Any]:
    return {"Pods": [{"UID": p.UID} for p in victims.Pods or ()], "NumPDBViolations": victims.NumPDBViolations}
