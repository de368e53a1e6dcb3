"""The questions the explain API and the page ask (:mod:`berth.extender.routes.explain`): a pod's
recorded decision, a fresh preview, a policy's latest decision, the capacity for a shape, every
node's allocations. Each reads the store under its lock and counts nothing: preview and capacity
read the caches the scheduling path keeps but never add to them, and no round is opened, no pod
assumed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

import orjson

from berth.core import (
    DECISION_ANNOTATION,
    ROUND_STRATEGIES,
    ClusterView,
    DecisionRecord,
    ObjectError,
    Overlay,
    PlacementPolicy,
    PodInfo,
    Settings,
    Strategy,
    capacity_report,
    evaluate_pod,
    format_time,
    node_allocations,
    parse_time,
    read_only_caches,
    rounds,
)
from berth.extender.binder import Binder
from berth.extender.store import ClusterStore

CAPACITY_PLAN_LIMIT = 100
"""Pods the capacity API plans at most for its ``placeable`` figure: it plans under the lock that
filter and bind take, so the work one query causes is bounded (about 0.3 s at 5,000 nodes with
spread and rules, 10 ms without); the CLI, offline, plans further."""


class Questions:
    """The explain API's answers over ``store``, judged with ``core_settings`` at ``eval_clock``
    (a snapshot's time offline); ``binder`` reads a decision no longer kept in memory from the
    pod's annotation."""

    def __init__(self, store: ClusterStore, core_settings: Settings, binder: Binder, *,
                 round_timeout_seconds: float, clock: Callable[[], float],
                 eval_clock: Callable[[], float]) -> None:
        self._store = store
        self._core = core_settings
        self._binder = binder
        self._round_timeout = round_timeout_seconds
        self._clock = clock
        self._eval_clock = eval_clock

    async def drain(self, name: str) -> dict[str, Any] | None:
        """The NodeDrain ``name`` as the API server holds it (None when there is none, or offline)."""
        return await self._binder.fetch_drain(name)

    async def decision_of(self, namespace: str, name: str) -> bytes | None:
        """The recorded decision as JSON: kept in memory, else read from the pod's annotation."""
        key = f"{namespace}/{name}"
        with self._store.lock:
            hit = self._store.decisions.get(key)
        if hit is not None:
            return hit
        raw = await self._binder.fetch_pod(namespace, name)
        if raw is None:
            return None
        annotations = (raw.get("metadata") or {}).get("annotations") or {}
        text = annotations.get(DECISION_ANNOTATION)
        if not isinstance(text, str):
            return None
        # an annotation berth wrote before the record had a version is answered in this version
        record = DecisionRecord.read_json(text)
        return record.model_dump_json(by_alias=True).encode() if record is not None else None

    def preview(self, pod: PodInfo, policy_name: str | None, nodes: Sequence[str] | None) -> dict[str, Any]:
        with self._store.lock, read_only_caches(self._store.view):
            policy = self._policy_named(pod, policy_name)
            strategy = None if policy is not None else self._core.default_strategy
            eval_now = self._eval_clock()
            left = None
            if policy is not None and policy.strategy in ROUND_STRATEGIES:
                rnd = self._store.rounds.get(policy.key)
                timeout = self._round_timeout
                if rnd is not None and rounds.in_force(rnd, self._clock(), timeout, pod.uid):
                    left = rounds.quota(rnd, pod.uid)
            # the pod itself counted nowhere: a pod already placed (or held for its bind) is judged
            # as if it were to be placed again now, not against the room it takes itself
            view = self._store.view
            placed = view.pod(pod.uid)
            state: ClusterView | Overlay = view
            if placed is not None:
                state = Overlay(view)
                state.remove(placed)
            ev = evaluate_pod(state, pod, policy, self._core, eval_now, nodes=nodes,
                              quota=left, strategy=strategy)
        decision = ev.decision
        decision.trigger = "preview"
        decision.time = format_time(self._clock(), digits=3)
        # every node listed: the page and berth explain show each node's verdict
        record = decision.record(limit=len(decision.considered), ranking_limit=len(decision.ranking))
        return {"decision": record.to_json(), "scores": ev.scores}

    def policy_decision(self, namespace: str, name: str) -> dict[str, Any]:
        """A policy's latest decision and a fresh preview. The latest decision is the newest (by its
        ``time``) of those this extender recorded for the policy's pods and the ``latestDecision`` the
        operator keeps in the policy's status (read from the pods' annotations, so it outlives a
        restart). The preview judges, now, the first pending pod the policy governs, else the pod
        of the latest decision while berth still holds it. :class:`LookupError` for no such policy."""
        key = f"{namespace}/{name}"
        with self._store.lock:
            policy = self._store.policy_named(namespace, name)
            if policy is None:
                raise LookupError(f"no valid PlacementPolicy {key}")
            recorded = [raw for raw in self._store.decisions.values() if _of_policy(raw, key)]
            status_copy = (self._store.policy_status.get(key) or {}).get("latestDecision")
            pending = sorted((pod for pod in self._store.pending_in(namespace)
                              if policy.governs(pod.namespace, pod.labels)), key=lambda pod: pod.name)
        candidates = [(DecisionRecord.model_validate_json(raw), "extender") for raw in recorded]
        copied = DecisionRecord.read(status_copy)  # a status an older operator wrote is read too
        if copied is not None:
            candidates.append((copied, "policyStatus"))
        latest, source = max(candidates, key=lambda item: _decision_time(item[0]), default=(None, None))
        subject = pending[0] if pending else None
        if subject is None and latest is not None:
            pod_name = latest.pod.partition("/")[2]
            with self._store.lock:
                subject = next((pod for pod in self._store.view.pods_in_namespace(namespace)
                                if pod.name == pod_name), None)
        preview = None
        if subject is not None:
            preview = {"pod": subject.key, "pending": not subject.node_name,
                       **self.preview(subject, name, None)}
        return {"policy": key, "decision": latest.to_json() if latest is not None else None,
                "decisionSource": source, "preview": preview}

    def _policy_named(self, pod: PodInfo, policy_name: str | None) -> PlacementPolicy | None:
        if policy_name:
            policy = self._store.policy_named(pod.namespace, policy_name)
            if policy is None:
                raise LookupError(f"no valid PlacementPolicy {pod.namespace}/{policy_name}")
            return policy
        return self._store.policy_for(pod)

    def capacity(self, pod: PodInfo, policy_name: str | None) -> dict[str, Any]:
        with self._store.lock, read_only_caches(self._store.view):
            policy = self._policy_named(pod, policy_name)
            table = capacity_report(self._store.view, pod, policy, self._core, self._eval_clock(),
                                    CAPACITY_PLAN_LIMIT)
        out = table.to_dict()
        out["policy"] = policy.key if policy is not None else None
        return out

    def allocations(self) -> dict[str, Any]:
        with self._store.lock:
            nodes = node_allocations(self._store.view, self._core)
            policies = {}
            for policy in self._store.iter_policies():
                in_force = self._core.for_policy(policy)
                policies[policy.key] = {"strategy": policy.strategy_name, "settings": _settings_dict(in_force)}
            invalid = dict(self._store.invalid_policies)
        return {"settings": _settings_dict(self._core), "policies": policies,
                "invalidPolicies": invalid, "nodes": nodes}


def _decision_time(record: DecisionRecord) -> float:
    try:
        return parse_time(record.time)
    except ObjectError:
        return float("-inf")


def _of_policy(encoded: bytes, key: str) -> bool:
    """Whether a kept record (encoded) is of the policy ``key``: read without a model, since most
    of the records kept are not."""
    return bool(orjson.loads(encoded).get("policy") == key)


def _settings_dict(settings: Settings) -> dict[str, Any]:
    data = asdict(settings)
    strategy = data.get("default_strategy")
    data["default_strategy"] = strategy.value if isinstance(strategy, Strategy) else strategy
    return data
