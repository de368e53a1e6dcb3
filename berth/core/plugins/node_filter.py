"""The policy's node filter: ``includes`` names the only nodes allowed; else ``labels`` must all
match and ``excludes`` names nodes never used. Liveness (which ``includes`` and ``all`` turn off)
is the :mod:`.liveness` check's. Refusals here are unresolvable: preemption cannot change them
(docs/behaviour.md#node-filter)."""

from __future__ import annotations

from collections.abc import Container

from berth.core.compiled import NodeFilter
from berth.core.decision import Refusal
from berth.core.model import NodeInfo
from berth.core.plugins import Depends, PodContext

DEPENDS = Depends.NODE


def filter(ctx: PodContext, node: NodeInfo) -> Refusal | None:
    nf = ctx.node_filter
    if nf is None:
        return None
    reason = node_filter_refusal(nf, node)
    return None if reason is None else Refusal(reason, False)


def node_filter_refusal(nf: NodeFilter, node: NodeInfo) -> str | None:
    """The policy's node filter. ``includes`` short-circuits labels and excludes."""
    if nf.includes:
        return None if node.name in nf.included else "not in nodeFilter.includes"
    for key, value in nf.labels.items():
        have = node.labels.get(key)
        if have != value:
            found = "absent" if have is None else f"{key}={have}"
            return f"nodeFilter.labels needs {key}={value} ({found})"
    if node.name in nf.excludes:
        return "excluded by nodeFilter.excludes"
    return None


def in_node_filter(nf: NodeFilter, node: NodeInfo) -> bool:
    """The node filter without liveness: the policy's notion of where its pods may go at all."""
    return node_filter_refusal(nf, node) is None


def unknown_includes_warning(nf: NodeFilter, known: Container[str]) -> str | None:
    """What to say when ``includes`` names nodes that are not ``known``: a typo or a node gone
    silently narrows where the policy's pods may go."""
    missing = [name for name in dict.fromkeys(nf.includes) if name not in known]
    if not missing:
        return None
    return (f"nodeFilter.includes names {len(missing)} node{'s' if len(missing) > 1 else ''} berth has not seen: "
            + ", ".join(missing))
