"""Verdict tables: kept in step with the view's node log, and their orders kept sorted."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from berth.core.model import NodeInfo
from berth.core.node_verdicts import VerdictTable
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
