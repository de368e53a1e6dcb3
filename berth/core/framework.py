"""One runner for the checks of :mod:`berth.core.plugins`: pre-filter (once per pod), filter
(each node through each check, the first refusal standing), score and record, as a
:class:`~berth.core.candidates.CandidateSet` (the nodes considered, those refused with their
reasons, the candidates, warnings and the error when no node is left); ranking it is
:func:`~berth.core.evaluate.rank`.

This is the plain path: every check judges every node it reaches, reading the cluster pod by pod,
with nothing kept between calls. The index (:mod:`berth.core.index`) answers the same questions
from tables kept in step with the view; ``Settings.index`` (``BERTH_INDEX=off``) chooses this path
instead, and the tests hold both to the same answers.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence

from berth.core import index
from berth.core.candidates import (
    CandidateSet,
    Refusals,
    apply_rules,
    no_node_error,
    workload_selector,
)
from berth.core.decision import Refusal
from berth.core.fit import demand, unverified_warning
from berth.core.model import NodeInfo, PodInfo
from berth.core.node_filter import unknown_includes
from berth.core.plugins import PodContext, constraints, liveness, node_filter, rules, spread
from berth.core.plugins import fit as fit_check
from berth.core.plugins import quota as round_quota
from berth.core.plugins.fit import Fitted
from berth.core.policy import PlacementPolicy, Strategy
from berth.core.settings import Settings
from berth.core.topology import SpreadContext
from berth.core.view import ClusterState

UNKNOWN = Refusal("unknown node: berth has not seen it", False)


def collect_candidates(state: ClusterState, pod: PodInfo, policy: PlacementPolicy | None, settings: Settings,
                       now: float, *, nodes: Sequence[str] | None = None, quota: Mapping[str, int] | None = None,
                       strategy: Strategy | None = None, require_fit: bool = True,
                       spread: SpreadContext | None = None, room_only: bool = False) -> CandidateSet:
    """Judge ``nodes`` (default: every node) for ``pod``. ``settings`` must already carry the policy's
    overrides. With ``require_fit=False`` nodes that cannot take one pod stay candidates with
    capacity 0 (round strategies and the capacity query judge capacity themselves). With
    ``room_only`` topology spread and placement rules are not judged: where the pod may go at
    all (its own constraints, the node filter, liveness) and how much room it has there.
    ``spread``: the pod's spread constraints with their domain counts, when the caller has them.

    Through the index (:func:`berth.core.index.judge`) unless ``settings.index`` turns it off;
    then :func:`run` judges every node plainly."""
    if settings.indexed:
        return index.judge(state, pod, policy, settings, now, nodes=nodes, quota=quota, strategy=strategy,
                           require_fit=require_fit, spread=spread, room_only=room_only)
    return run(state, pod, policy, settings, now, nodes=nodes, quota=quota, strategy=strategy,
               require_fit=require_fit, spread_context=spread, room_only=room_only)


def run(state: ClusterState, pod: PodInfo, policy: PlacementPolicy | None, settings: Settings, now: float, *,
        nodes: Sequence[str] | None = None, quota: Mapping[str, int] | None = None,
        strategy: Strategy | None = None, require_fit: bool = True, spread_context: SpreadContext | None = None,
        room_only: bool = False) -> CandidateSet:
    """:func:`collect_candidates`, plainly: every check over every node it reaches."""
    ctx = PodContext(state, pod, policy, settings, now, workload_selector(pod, policy), demand(pod), strategy,
                     quota, require_fit)
    judged = spread_context if spread_context is not None or room_only else spread.pre_filter(ctx)
    with_rules = policy is not None and bool(policy.rules) and not room_only
    names = sorted(state.nodes) if nodes is None else list(nodes)
    result = CandidateSet(considered=names, candidates=[])
    nf = ctx.node_filter
    if nf is not None and nf.includes and (unknown := unknown_includes(nf, state.nodes)):
        result.warnings.append(unknown)
    refused = Refusals(result.refused, set())
    fitted = _Fits(ctx)
    held: set[str] = set()  # refused by topology spread
    broken: dict[int, set[str]] = {}  # top-level rule -> the nodes breaking it first
    breaking: dict[int, Refusal] = {}
    standing: set[str] = set()
    for name in dict.fromkeys(names):
        node = state.nodes.get(name)
        refusal = UNKNOWN if node is None else _first_refusal(ctx, node)
        if refusal is None and judged is not None and judged.hard:
            assert node is not None
            refusal = spread.filter(judged, node)
            if refusal is not None:
                held.add(name)
        if refusal is not None:
            refused.one(name, refusal.reason, refusal.resolvable)
            continue
        assert node is not None
        index = rules.first_broken(ctx, node) if with_rules else None
        if index is not None:
            assert policy is not None
            broken.setdefault(index, set()).add(name)
            breaking[index] = rules.refusal(index, policy.rules[index])
            continue
        if fit_check.refuses(fitted[name], require_fit, settings.reject_unknown_capacity):
            refused.one(name, fitted[name].fit.refusal or "", True)
            continue
        standing.add(name)
    passing = [fitted[name].candidate for name in names if name in standing]
    if broken:
        groups = [(broken[i], (breaking[i].reason, breaking[i].resolvable)) for i in sorted(broken)]
        passing = apply_rules(result, passing, groups, policy, fitted, require_fit, refused)
    if judged is not None and judged.soft:
        scores = judged.scores(state.nodes[c.name] for c in passing)
        passing = [c.with_spread_score(scores.get(c.name, 0)) for c in passing]
    result.candidates = passing
    result.warnings.extend(unverified_warning(c.name, c.unverified) for c in passing if c.unverified)
    if not result.candidates and result.error is None:
        failing = [{n for n in held if not rules.holds(ctx, rule, state.nodes[n])}
                   for rule in (policy.rules if with_rules and policy is not None else ())]
        result.error = no_node_error(result, [held], failing, fitted)
    return result


def _first_refusal(ctx: PodContext, node: NodeInfo) -> Refusal | None:
    """The first refusal of the checks that judge a node by itself, its pods and its Lease."""
    refusal = constraints.filter(ctx, node) or node_filter.filter(ctx, node)
    if refusal is None and liveness.applies(ctx):
        refusal = liveness.filter(ctx, node)
    return refusal or round_quota.quota_filter(ctx, node) or round_quota.limit_filter(ctx, node)


class _Fits:
    """Each node's fit, judged when first asked: the reading the rules and the error read."""

    def __init__(self, ctx: PodContext) -> None:
        self._ctx = ctx
        self._fits: dict[str, Fitted] = {}

    def __getitem__(self, name: str) -> Fitted:
        hit = self._fits.get(name)
        if hit is None:
            hit = self._fits[name] = fit_check.judge_naively(self._ctx, self._ctx.state.nodes[name])
        return hit

    def each(self, names: Iterable[str]) -> list[Fitted]:
        return [self[n] for n in names]

    def among(self, tag: str, nodes: Collection[str]) -> set[str]:
        """The nodes the fit refuses (``refused``), or refuses even where the caller judges room
        itself (``refused-anyway``)."""
        require_fit = tag == "refused"
        reject = self._ctx.settings.reject_unknown_capacity
        return {n for n in nodes if fit_check.refuses(self[n], require_fit, reject)}
