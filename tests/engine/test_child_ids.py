"""Child run ids: the same on every replay, distinct per child, shaped and sorted like run ids."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from workflow.engine._children import child_run_id
from worlds.semantics import new_run_id

_CROCKFORD = set("0123456789ABCDEFGHJKMNPQRSTVWXYZ")
_times = st.floats(min_value=0, max_value=253_402_300_799, allow_nan=False)  # to year 9999


@given(parent=st.text(min_size=1, max_size=40), child=st.integers(1, 10_000), at=_times)
def test_a_child_id_is_a_function_of_parent_number_and_time(
    parent: str, child: int, at: float
) -> None:
    made = child_run_id(parent, child, at)
    assert made == child_run_id(parent, child, at)
    assert len(made) == 26 and set(made) <= _CROCKFORD
    assert len(new_run_id()) == 26


@given(
    parent=st.text(min_size=1, max_size=40),
    children=st.sets(st.integers(1, 10_000), min_size=2, max_size=50),
    at=_times,
)
def test_children_of_one_parent_get_distinct_ids(
    parent: str, children: set[int], at: float
) -> None:
    assert len({child_run_id(parent, n, at) for n in children}) == len(children)


@given(earlier=_times, later=_times, parent=st.text(min_size=1, max_size=10))
def test_child_ids_sort_by_the_millisecond_of_their_start(
    earlier: float, later: float, parent: str
) -> None:
    if int(earlier * 1000) < int(later * 1000):
        assert child_run_id(parent, 1, earlier) < child_run_id(parent, 2, later)
