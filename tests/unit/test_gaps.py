from __future__ import annotations

import datetime as dt

from hypothesis import given
from hypothesis import strategies as st

from ems.offsets.gaps import MAX_FILL, plan_read

NOW = dt.datetime(2026, 1, 1, 12, 0, 0)


def rows(offsets: list[int], age: float) -> list[tuple[int, dt.datetime]]:
    return [(o, NOW - dt.timedelta(seconds=age)) for o in offsets]


def test_contiguous_rows_are_all_ready() -> None:
    plan = plan_read(rows([5, 6, 7], 0), 5, NOW, 5.0)
    assert plan.ready == 3 and plan.fill is None


def test_young_hole_stops_the_prefix() -> None:
    plan = plan_read(rows([5, 6, 8, 9], 1.0), 5, NOW, 5.0)
    assert plan.ready == 2 and plan.fill is None


def test_old_hole_is_filled_up_to_the_next_row() -> None:
    plan = plan_read(rows([5, 6, 9], 10.0), 5, NOW, 5.0)
    assert plan.ready == 2 and plan.fill == (7, 9)


def test_hole_at_the_cursor() -> None:
    plan = plan_read(rows([8], 10.0), 5, NOW, 5.0)
    assert plan.ready == 0 and plan.fill == (5, 8)


def test_huge_hole_is_filled_in_bounded_steps() -> None:
    plan = plan_read(rows([10_000_000], 10.0), 0, NOW, 5.0)
    assert plan.fill == (0, MAX_FILL)


def test_no_rows_no_plan() -> None:
    assert plan_read([], 3, None, 5.0).ready == 0


@given(
    st.lists(st.integers(min_value=0, max_value=60), unique=True),
    st.integers(min_value=0, max_value=30),
    st.floats(min_value=0, max_value=20),
)
def test_prefix_is_gap_free_and_fill_is_exactly_the_first_hole(
    offsets: list[int], start: int, age: float
) -> None:
    present = sorted(o for o in offsets if o >= start)
    plan = plan_read(rows(present, age), start, NOW, 5.0)
    assert present[: plan.ready] == list(range(start, start + plan.ready))
    if plan.ready < len(present):
        hole_start, next_row = start + plan.ready, present[plan.ready]
        assert next_row > hole_start
        if age >= 5.0:
            assert plan.fill == (hole_start, min(next_row, hole_start + MAX_FILL))
        else:
            assert plan.fill is None
    else:
        assert plan.fill is None
