"""The wire encoders that avoid a Python object per node."""

from __future__ import annotations

import orjson
from hypothesis import example, given
from hypothesis import strategies as st

from berth.extender.wire import host_priority_list

HOSTS = st.lists(st.text(), unique=True, max_size=12)


@given(st.lists(st.tuples(st.integers(0, 10), HOSTS), max_size=5))
@example([(3, [","])])  # the whole encoding of this host is a separator
@example([(0, ['",'])])  # an escaped quote, a comma and the string's own closing quote
@example([(1, ['a",', "b"])])
def test_host_priority_list_reads_back_as_one_entry_per_host(runs: list[tuple[int, list[str]]]) -> None:
    """Whatever the names hold (quotes, commas, backslashes, control characters), the encoded runs
    read back as one {"Host", "Score"} per host, in order."""
    expected = [{"Host": host, "Score": score} for score, hosts in runs for host in hosts]
    assert orjson.loads(host_priority_list(runs)) == expected


def test_host_priority_list_of_names_that_look_like_glue() -> None:
    runs = [(10, ['a","b']), (4, ['","', '"', ","]), (0, ["\\\",\""]), (3, [","]), (2, ["a", ",", "b"])]
    expected = [{"Host": h, "Score": s} for s, hosts in runs for h in hosts]
    assert orjson.loads(host_priority_list(runs)) == expected
