"""Verdict tables: kept in step with the view's changes in what their checks read, and their orders
kept sorted."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from berth.core.index.cluster import Changes
from berth.core.index.verdicts import VerdictTable
from berth.core.model import NodeInfo
from berth.core.plugins import Depends
from berth.core.plugins import rules as rules_check
from berth.core.view import ClusterView
from tests.builders import make_policy


def _node(name: str, cpu: int) -> NodeInfo:
    return NodeInfo(name=name, labels={}, allocatable={"cpu": cpu})


def _cpu(v: NodeInfo) -> tuple[object, ...]:
    return (v.allocatable["cpu"], v.name)


def _cpu_only(v: NodeInfo) -> tuple[object, ...]:
    return (v.allocatable["cpu"],)  # not unique: the table must notice and sort again


def _table(view: ClusterView) -> VerdictTable[NodeInfo]:
    table: VerdictTable[NodeInfo] = VerdictTable(lambda v: (), Depends.NODE)
    table.sync(view, lambda node: node)
    return table


def _change(view: ClusterView, table: VerdictTable[NodeInfo], name: str, cpu: int | None) -> None:
    """Add, change (cpu) or remove (None) node ``name``, and let the table catch up."""
    if cpu is None:
        view.remove_node(name)
    else:
        view.upsert_node(_node(name, cpu))
    table.sync(view, lambda node: node)


CHANGES = st.lists(st.tuples(st.sampled_from("abcdefgh"), st.one_of(st.none(), st.integers(0, 6))), max_size=30)


@given(CHANGES)
def test_an_order_kept_across_changes_equals_a_fresh_sort(changes: list[tuple[str, int | None]]) -> None:
    view = ClusterView()
    for i, name in enumerate("abcd"):
        view.upsert_node(_node(name, i % 3))
    table = _table(view)
    assert list(table.order(_cpu)) == sorted(table.verdicts, key=lambda n: _cpu(table.verdicts[n]))
    for name, cpu in changes:
        _change(view, table, name, cpu)
        assert list(table.order(_cpu)) == sorted(view.nodes, key=lambda n: _cpu(view.nodes[n]))


@given(CHANGES)
def test_an_order_by_a_key_that_is_not_unique_still_holds_every_node(changes: list[tuple[str, int | None]]) -> None:
    view = ClusterView()
    table = _table(view)
    for name, cpu in changes:
        _change(view, table, name, cpu)
        order = list(table.order(_cpu_only))
        assert sorted(order) == sorted(view.nodes)
        assert [_cpu_only(view.nodes[n]) for n in order] == sorted(_cpu_only(n) for n in view.nodes.values())


def test_an_order_that_falls_behind_the_log_is_sorted_again() -> None:
    view = ClusterView()
    for i in range(50):
        view.upsert_node(_node(f"n{i:02d}", i % 7))
    table = _table(view)
    table.order(_cpu)
    for step in range(5000):  # more changes between two reads than the table's log keeps
        _change(view, table, f"n{step % 50:02d}", (step * 31) % 11)
    assert list(table.order(_cpu)) == sorted(view.nodes, key=lambda n: _cpu(view.nodes[n]))


def _tagged_by_cpu(v: NodeInfo) -> tuple[str, ...]:
    return (f"cpu-{v.allocatable['cpu']}",)


def _judge_failing_on(bad: str) -> Callable[[NodeInfo], NodeInfo]:
    def judge(node: NodeInfo) -> NodeInfo:
        if node.name == bad:
            raise OverflowError("a verdict that cannot be made")
        return node
    return judge


@pytest.mark.parametrize("first_sync", [True, False], ids=["first_sync", "catching_up"])
def test_a_failed_judgement_leaves_the_table_as_it_was(first_sync: bool) -> None:
    """A judge that raises part-way (a node berth cannot judge) changes nothing: the verdicts, the
    tags and the token stay, so the next sync judges the same nodes again instead of reading
    verdicts that were never made."""
    view = ClusterView()
    for i, name in enumerate("abcd"):
        view.upsert_node(_node(name, i))
    table: VerdictTable[NodeInfo] = VerdictTable(_tagged_by_cpu, Depends.NODE)
    if not first_sync:
        table.sync(view, lambda node: node)
        table.order(_cpu)
        for name in "abcd":
            view.upsert_node(_node(name, 7))
    before = (dict(table.verdicts), {t: set(n) for t, n in table.tagged.items()}, list(table.order(_cpu))
              if not first_sync else [])
    with pytest.raises(OverflowError):
        table.sync(view, _judge_failing_on("c"))
    after = (dict(table.verdicts), {t: set(n) for t, n in table.tagged.items()}, list(table.order(_cpu))
             if not first_sync else [])
    assert after == before
    table.sync(view, lambda node: node)  # judged again in full, not trusted
    assert table.verdicts == dict(view.nodes)
    assert table.tagged[f"cpu-{view.nodes['c'].allocatable['cpu']}"] >= {"c"}


# -- the one log of changes, read by what a check depends on ---------------------------------------

KINDS = {"node": Depends.NODE, "pods": Depends.NODE_PODS, "lease": Depends.LEASES}
READS = [Depends.NODE, Depends.NODE | Depends.NODE_PODS, Depends.NODE | Depends.LEASES, Depends.LEASES,
         Depends.NODE | Depends.DOMAIN_PODS, Depends.NODE | Depends.NODE_PODS | Depends.DOMAIN_PODS]
NOTES = st.lists(st.tuples(st.sampled_from(sorted(KINDS)), st.sampled_from("abcd")), max_size=20)


@given(NOTES, NOTES, st.sampled_from(READS))
def test_changes_since_a_token_name_the_nodes_changed_in_what_a_check_reads(
        before: list[tuple[str, str]], after: list[tuple[str, str]], reads: Depends) -> None:
    """A cache made at a token learns exactly the nodes changed since in what its check reads; a
    check reading a whole domain's pods starts over once pods changed anywhere."""
    changes = Changes()
    for kind, name in before:
        getattr(changes, kind)(name)
    token = changes.token
    for kind, name in after:
        getattr(changes, kind)(name)
    want = {name for kind, name in after if KINDS[kind] & reads}
    if Depends.DOMAIN_PODS in reads and any(kind == "pods" for kind, _ in after):
        assert changes.since(token, reads) is None
    else:
        assert changes.since(token, reads) == want
    assert changes.changed(token, reads) == any(KINDS[kind] & (reads | (
        Depends.NODE_PODS if Depends.DOMAIN_PODS in reads else Depends(0))) for kind, _ in after)
    assert changes.since(None, reads) is None


def test_a_verdict_that_reads_the_round_is_never_kept() -> None:
    with pytest.raises(ValueError, match="never kept"):
        Changes().since(Changes().token, Depends.NODE | Depends.ROUND)
    with pytest.raises(ValueError, match="never kept"):
        VerdictTable(lambda v: (), Depends.NODE | Depends.ROUND)


RULE_DEPENDS = [
    ("node_rule_reads_the_node", {"resource": "Node", "operator": "Has", "labels": {"disk": "ssd"}},
     Depends.NODE),
    ("pod_rule_reads_the_pods_on_the_node", {"resource": "Pod", "operator": "HasNot", "labels": {"app": "db"}},
     Depends.NODE | Depends.NODE_PODS),
    ("pod_rule_within_reads_the_pods_of_its_group",
     {"resource": "Pod", "operator": "Has", "labels": {"app": "db"}, "within": "rack"},
     Depends.NODE | Depends.NODE_PODS | Depends.DOMAIN_PODS),
    ("group_reads_what_its_members_read",
     {"anyOf": [{"resource": "Node", "operator": "Has", "labels": {"disk": "ssd"}},
                {"resource": "Pod", "operator": "HasNot", "labels": {"app": "db"}}]},
     Depends.NODE | Depends.NODE_PODS),
]


@pytest.mark.parametrize(("rule", "want"), [pytest.param(r, w, id=i) for i, r, w in RULE_DEPENDS])
def test_a_rule_declares_what_its_verdict_reads(rule: dict[str, object], want: Depends) -> None:
    policy = make_policy().rules(rule).build()
    assert rules_check.depends(policy.rules[0]) == want
