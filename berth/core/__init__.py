"""The placement core: plain typed data in, decisions out.

Nothing in this package performs I/O, reads a clock or draws random numbers: the
extender, the operator and the CLI hand it everything it needs. This module is the one
door the shells use: they import from ``berth.core`` only, never a module beneath it (a
test holds them to it), so what is below can change without touching them.

- Judging one pod: :func:`evaluate_pod` (filter, prioritize, bind recheck, preview), which
  gives an :class:`Evaluation` holding the :class:`Decision` (considered, refused with reasons,
  ranking, warnings, error); :func:`scores` turns a ranking into the extender's 0..10.
- Planning a round: :func:`plan_round` (:func:`shared_plan_key`: when policies alike share one
  plan); placing pods one after another, the one greedy placer every round goes through:
  :func:`place_in_turn` (of :func:`replicas` of one pod, or of a list).
- What a Fill or Each round is: :class:`Round` and the pure functions of :mod:`rounds`
  (``rounds.open_round``, ``next_node``, ``consume``, ``in_force``, ``resume``, ...), with the
  one count rule every shell follows.
- Room rather than places: :func:`capacity_report`, :func:`capacity_table`, :func:`node_allocations`.
- Drains: :func:`plan_drain` and its :class:`DrainPlan`; while one executes, :func:`steer` and
  :class:`Hold` keep the room of each drained pod for its replacement.
- The cluster as the core sees it: :class:`ClusterView` (and an :class:`Overlay` over it for
  what-ifs) of :class:`NodeInfo` and :class:`PodInfo`, read from Kubernetes objects by
  :func:`node_from_object` and :func:`pod_from_object`.
- Policies and settings: :func:`policy_from_manifest` gives a :class:`PlacementPolicy`;
  :class:`Settings` are the cluster's.
"""

from berth.core import round as rounds
from berth.core.capacity import capacity_report, capacity_table, node_allocations
from berth.core.decision import (
    DECISION_ANNOTATION,
    Decision,
    DecisionRecord,
    Refused,
    Winner,
    decision_record_schema,
    ranked_score,
    refusal_cause,
    round_plan,
)
from berth.core.drain import DrainPlan, DrainRequest, InvalidDrain, PodPlan, PodState, PolicyLookup, plan_drain
from berth.core.drain_hold import (
    HOLD_ANNOTATION,
    HOLD_UID_PREFIX,
    NO_STEER,
    Hold,
    Steer,
    Workload,
    evicted_from_entry,
    honour_target,
    shape_of,
    steer,
)
from berth.core.errors import ERROR_CODES, InvalidPolicy, PlacementError
from berth.core.evaluate import Evaluation, evaluate_pod, score_runs, scores
from berth.core.fit import check_fit, demand
from berth.core.framework import collect_candidates
from berth.core.index.cluster import cache_sizes, prepare_index, read_only_caches
from berth.core.index.records import bind_record_data
from berth.core.kube import (
    LEASE_NAMESPACE,
    ObjectError,
    format_time,
    is_terminal,
    lease_renew_seconds,
    node_from_object,
    parse_label_selector,
    parse_time,
    pod_from_object,
)
from berth.core.model import SLEEPY_ANNOTATION, LabelSelector, NodeInfo, Owner, PodInfo
from berth.core.nodedrain import KIND as NODEDRAIN_KIND
from berth.core.nodedrain import PLURAL as NODEDRAIN_PLURAL
from berth.core.nodedrain import DrainMode, NodeDrainSpec, nodedrain_spec
from berth.core.placement_rules import RULE_LIMITS
from berth.core.placement_rules import Operator as RuleOperator
from berth.core.placement_rules import Resource as RuleResource
from berth.core.plan import place_in_turn, plan_round, replicas, shared_plan_key
from berth.core.plugins.node_filter import unknown_includes_warning
from berth.core.policy import (
    API_GROUP,
    API_VERSION,
    CRD_VERSION,
    ROUND_STRATEGIES,
    PlacementPolicy,
    PlacementPolicySpec,
    Strategy,
    policy_from_manifest,
    spec_from_dict,
)
from berth.core.policy import KIND as POLICY_KIND
from berth.core.policy import PLURAL as POLICY_PLURAL
from berth.core.quantity import CPU, DISK, MEMORY, PODS, format_amount
from berth.core.round import ROUND_ANNOTATION, ROUND_TIMEOUT_SECONDS, Round, RoundMark
from berth.core.settings import (
    LIVENESS_THRESHOLD_SECONDS,
    MIN_FREE_DISK_PERCENT,
    OVERCOMMIT_PERCENT,
    SLEEPY_MEMORY_FACTOR,
    Bounds,
    Settings,
    index_from_environment,
)
from berth.core.view import ClusterView, Overlay

__all__ = [
    "API_GROUP",
    "API_VERSION",
    "CPU",
    "CRD_VERSION",
    "DECISION_ANNOTATION",
    "DISK",
    "ERROR_CODES",
    "HOLD_ANNOTATION",
    "HOLD_UID_PREFIX",
    "LEASE_NAMESPACE",
    "LIVENESS_THRESHOLD_SECONDS",
    "MEMORY",
    "MIN_FREE_DISK_PERCENT",
    "NODEDRAIN_KIND",
    "NODEDRAIN_PLURAL",
    "NO_STEER",
    "OVERCOMMIT_PERCENT",
    "PODS",
    "POLICY_KIND",
    "POLICY_PLURAL",
    "ROUND_ANNOTATION",
    "ROUND_STRATEGIES",
    "ROUND_TIMEOUT_SECONDS",
    "RULE_LIMITS",
    "SLEEPY_ANNOTATION",
    "SLEEPY_MEMORY_FACTOR",
    "Bounds",
    "ClusterView",
    "Decision",
    "DecisionRecord",
    "DrainMode",
    "DrainPlan",
    "DrainRequest",
    "Evaluation",
    "Hold",
    "InvalidDrain",
    "InvalidPolicy",
    "LabelSelector",
    "NodeDrainSpec",
    "NodeInfo",
    "ObjectError",
    "Overlay",
    "Owner",
    "PlacementError",
    "PlacementPolicy",
    "PlacementPolicySpec",
    "PodInfo",
    "PodPlan",
    "PodState",
    "PolicyLookup",
    "Refused",
    "Round",
    "RoundMark",
    "RuleOperator",
    "RuleResource",
    "Settings",
    "Steer",
    "Strategy",
    "Winner",
    "Workload",
    "bind_record_data",
    "cache_sizes",
    "capacity_report",
    "capacity_table",
    "check_fit",
    "collect_candidates",
    "decision_record_schema",
    "demand",
    "evaluate_pod",
    "evicted_from_entry",
    "format_amount",
    "format_time",
    "honour_target",
    "index_from_environment",
    "is_terminal",
    "lease_renew_seconds",
    "node_allocations",
    "node_from_object",
    "nodedrain_spec",
    "parse_label_selector",
    "parse_time",
    "place_in_turn",
    "plan_drain",
    "plan_round",
    "pod_from_object",
    "policy_from_manifest",
    "prepare_index",
    "ranked_score",
    "read_only_caches",
    "refusal_cause",
    "replicas",
    "round_plan",
    "rounds",
    "score_runs",
    "scores",
    "shape_of",
    "shared_plan_key",
    "spec_from_dict",
    "steer",
    "unknown_includes_warning",
]
