"""Verdict tables: kept in step with the view's node log, and their orders kept sorted."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from berth.core.index.verdicts import VerdictTable
from berth.core.model import NodeInfo
from berth.core.view import ClusterView


def _node(name: str, cpu: int) -> NodeInfo:
    return NodeInfo(name=name, labels={}, allocatable={"cpu": cpu})


def _cpu(v: NodeInfo) -> tuple[object, ...]:
    return (v.allocatable["cpu"], v.name)


def _cpu_only(v: NodeInfo) -> tuple[object, ...]:
    return (v.allocatable["cpu"],)  # not unique: the table must notice and sort again


def _table(view: ClusterView) -> VerdictTable[NodeInfo]:
    table: VerdictTable[NodeInfo] = VerdictTable(lambda v: ())
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
    table: VerdictTable[NodeInfo] = VerdictTable(_tagged_by_cpu)
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
