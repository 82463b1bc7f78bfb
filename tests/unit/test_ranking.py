"""Topic ranking (pure): volumes from two captures, partial windows, order."""

from __future__ import annotations

import datetime as dt

from hypothesis import given
from hypothesis import strategies as st

from ems.ops.ranking import Baseline, Capture, Volume, rank, volume

T0 = dt.datetime(2026, 11, 22, 12, 0)


def cap(minutes_ago: float, totals: dict[int, int]) -> Capture:
    return Capture(captured_at=T0 - dt.timedelta(minutes=minutes_ago), totals=totals)


def test_volume_is_the_growth_between_baseline_and_newest() -> None:
    newest = cap(0, {1: 500, 2: 40})
    base = Baseline(capture=cap(61, {1: 200}), complete=True)
    assert volume(1, newest, base) == Volume(messages=300, span_seconds=3660, complete=True)
    # A topic missing from the baseline had no messages then.
    assert volume(2, newest, base) == Volume(messages=40, span_seconds=3660, complete=True)
    assert volume(3, newest, base) == Volume(messages=0, span_seconds=3660, complete=True)


def test_a_short_history_is_marked_partial_with_its_real_span() -> None:
    newest = cap(0, {1: 500})
    base = Baseline(capture=cap(10, {1: 450}), complete=False)
    assert volume(1, newest, base) == Volume(messages=50, span_seconds=600, complete=False)


def test_one_capture_gives_no_volume() -> None:
    newest = cap(0, {1: 500})
    assert volume(1, newest, Baseline(capture=newest, complete=False)) is None
    assert volume(1, newest, None) is None
    (only,) = rank({1: "a"}, None, None, None)
    assert (only.last_hour, only.last_day) == (None, None)


def test_rank_orders_by_day_then_hour_then_name() -> None:
    newest = cap(0, {1: 100, 2: 100, 3: 100, 4: 10})
    hour = Baseline(capture=cap(60, {1: 90, 2: 50, 3: 50}), complete=True)
    day = Baseline(capture=cap(1440, {1: 0, 2: 50, 3: 50}), complete=True)
    names = {1: "d", 2: "c", 3: "b", 4: "a"}
    ranked = rank(names, newest, hour, day)
    assert [r.topic for r in ranked] == ["d", "b", "c", "a"]


@given(st.dictionaries(st.integers(1, 20), st.integers(0, 10**9), min_size=1))
def test_volumes_are_never_negative_and_sorted(totals: dict[int, int]) -> None:
    newest = cap(0, totals)
    base = Baseline(capture=cap(60, {t: n // 2 + 7 for t, n in totals.items()}), complete=True)
    ranked = rank({t: f"t{t}" for t in totals}, newest, base, base)
    days = [r.last_day.messages for r in ranked if r.last_day]
    assert all(d >= 0 for d in days)
    assert days == sorted(days, reverse=True)
