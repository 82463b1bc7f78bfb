"""The sign-in throttle's policy (pure): when a scope waits, and for how long."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ems.values.login_limits import (
    ACCOUNT_LIMIT,
    ADDRESS_LIMIT,
    WINDOW_SECONDS,
    throttle_seconds,
    window_ended,
)

T0 = dt.datetime(2026, 11, 25, 12, 0, 0)


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def test_the_defaults() -> None:
    assert (ACCOUNT_LIMIT, ADDRESS_LIMIT, WINDOW_SECONDS) == (5, 20, 900.0)


def test_below_the_limit_nothing_waits() -> None:
    assert throttle_seconds(4, T0, at(1), limit=5, window=900) == 0.0
    assert throttle_seconds(0, T0, T0, limit=5, window=900) == 0.0


def test_at_the_limit_the_rest_of_the_window_is_waited() -> None:
    assert throttle_seconds(5, T0, at(0), limit=5, window=900) == 900.0
    assert throttle_seconds(5, T0, at(100), limit=5, window=900) == 800.0
    assert throttle_seconds(50, T0, at(899.5), limit=5, window=900) == pytest.approx(0.5)
    assert throttle_seconds(5, T0, at(900), limit=5, window=900) == 0.0
    assert throttle_seconds(5, T0, at(5000), limit=5, window=900) == 0.0


def test_a_first_failure_ahead_of_now_waits_no_longer_than_the_window() -> None:
    assert throttle_seconds(5, at(60), T0, limit=5, window=900) == 900.0


def test_window_ended() -> None:
    assert not window_ended(T0, at(899.999), 900)
    assert window_ended(T0, at(900), 900)


@given(
    failures=st.integers(0, 1000),
    limit=st.integers(1, 100),
    window=st.floats(1, 86_400),
    elapsed=st.floats(-86_400, 200_000),
)
def test_the_wait_is_within_the_window_and_only_at_the_limit(
    failures: int, limit: int, window: float, elapsed: float
) -> None:
    now = at(elapsed)
    elapsed = (now - T0).total_seconds()  # as a datetime holds it: whole microseconds
    wait = throttle_seconds(failures, T0, now, limit=limit, window=window)
    assert 0.0 <= wait <= window
    if failures < limit or elapsed >= window:
        assert wait == 0.0
    else:
        assert wait > 0.0
        assert wait == pytest.approx(window - max(0.0, elapsed), abs=1e-5)


@given(
    failures=st.integers(0, 100),
    first=st.floats(0, 1000),
    later=st.floats(0, 1000),
)
def test_the_wait_only_shrinks_as_time_passes(failures: int, first: float, later: float) -> None:
    a, b = sorted((first, later))
    before = throttle_seconds(failures, T0, at(a), limit=5, window=900)
    after = throttle_seconds(failures, T0, at(b), limit=5, window=900)
    assert after <= before
