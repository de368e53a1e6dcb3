"""Merge patches between statuses and metav1.Condition bookkeeping."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from berth.operator import conditions as cond
from berth.operator.patches import apply_merge_patch, merge_patch

leaf = st.one_of(st.integers(), st.text(max_size=3), st.booleans(), st.lists(st.integers(), max_size=2))
tree = st.recursive(leaf, lambda inner: st.dictionaries(st.text("abc", max_size=2), inner, max_size=3), max_leaves=8)
docs = st.dictionaries(st.text("abcd", max_size=2), tree, max_size=4)


# no deadline: an example takes microseconds, but a process starved of the CPU for 200 ms fails
# the first run of the example and passes its rerun, which hypothesis reports as a flaky failure
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs, docs)
def test_merge_patch_turns_old_into_new(old: dict[str, Any], new: dict[str, Any]) -> None:
    patch = merge_patch(old, new)
    assert apply_merge_patch(old, patch) == new
    assert (patch == {}) == (old == new)


def test_a_removed_map_entry_is_nulled_not_merged() -> None:
    old = {"placed": {"node-a": 2, "node-b": 1}, "pending": 1, "plan": {"node-b": 1}}
    new = {"placed": {"node-a": 3}, "pending": 0}
    assert merge_patch(old, new) == {"placed": {"node-a": 3, "node-b": None}, "pending": 0, "plan": None}


def test_lists_are_replaced_whole() -> None:
    old = {"conditions": [{"type": "Valid", "status": "True"}]}
    new = {"conditions": [{"type": "Valid", "status": "False"}]}
    assert merge_patch(old, new) == new


def test_conditions_keep_their_transition_time_until_the_status_changes() -> None:
    first = cond.apply(None, [cond.ConditionUpdate("Ready", "False", "PodsPending", "1 pending")], 1, "T1")
    second = cond.apply(first, [cond.ConditionUpdate("Ready", "False", "PodsPending", "2 pending")], 2, "T2")
    assert second == [{"type": "Ready", "status": "False", "observedGeneration": 2, "lastTransitionTime": "T1",
                       "reason": "PodsPending", "message": "2 pending"}]
    third = cond.apply(second, [cond.ConditionUpdate("Ready", "True", "AllPodsPlaced", "done")], 2, "T3")
    assert third[0]["lastTransitionTime"] == "T3"


def test_conditions_of_other_types_are_kept() -> None:
    foreign = [{"type": "Audited", "status": "True", "lastTransitionTime": "T0", "reason": "X", "message": ""}]
    out = cond.apply(foreign, [cond.ConditionUpdate("Valid", "True", "Validated", "ok")], 1, "T1")
    assert [c["type"] for c in out] == ["Audited", "Valid"]


def test_reasons_are_camel_case() -> None:
    assert cond.camel("insufficient_resource") == "InsufficientResource"
    assert cond.camel("already_filled") == "AlreadyFilled"
    assert cond.camel("affinity_unsatisfied") == "AffinityUnsatisfied"
    assert cond.camel("placement_busy") == "PlacementBusy"


MESSAGES = [
    ("short", "insufficient cpu", "insufficient cpu"),
    ("at_the_limit", "x" * cond.MESSAGE_LIMIT, "x" * cond.MESSAGE_LIMIT),
    ("every_node_refused", "node-0001: down; " * 3000, None),
    ("multibyte", "n\u00f6de \u2014 " * 10000, None),
]


@given(st.text(max_size=40))
def test_a_message_within_the_limit_is_kept_whole(message: str) -> None:
    assert cond.bounded(message, limit=200) == message or len(message.encode()) > 200


def test_condition_messages_fit_in_what_the_api_server_accepts() -> None:
    for name, message, expected in MESSAGES:
        [condition] = cond.apply(None, [cond.ConditionUpdate("Satisfied", "False", "InsufficientResource", message)],
                                 1, "2026-01-01T00:00:00Z")
        kept = condition["message"]
        assert len(kept.encode()) <= cond.MESSAGE_LIMIT, name
        if expected is not None:
            assert kept == expected, name
        else:
            assert kept.endswith(cond.CUT) and message.startswith(kept[:-len(cond.CUT)]), name
