"""The sign-in throttle's policy (pure): when a scope waits, for how long, and how an
admitted attempt is counted."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ems.values.login_limits import (
    ADDRESS_LIMIT,
    BASE_DELAY,
    FREE_FAILURES,
    MAX_DELAY,
    WINDOW_SECONDS,
    Counter,
    LoginLimits,
    admit,
    backoff_delay,
)

T0 = dt.datetime(2026, 11, 25, 12, 0, 0)
LIMITS = LoginLimits()
PAIR = "pair:10.0.0.1 alice"
ADDRESS = "address:10.0.0.1"


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def counter(failures: int, first: float = 0.0, last: float = 0.0) -> Counter:
    return Counter(failures=failures, first_at=at(first), last_at=at(last))


def test_the_defaults() -> None:
    assert (FREE_FAILURES, BASE_DELAY, MAX_DELAY) == (3, 1.0, 900.0)
    assert (ADDRESS_LIMIT, WINDOW_SECONDS) == (20, 900.0)


def test_the_back_off_doubles_up_to_its_cap() -> None:
    delays = [backoff_delay(n, LIMITS) for n in range(16)]
    assert delays[:FREE_FAILURES] == [0.0] * FREE_FAILURES
    assert delays[3:8] == [1.0, 2.0, 4.0, 8.0, 16.0]
    assert delays[-1] == MAX_DELAY
    assert backoff_delay(10**9, LIMITS) == MAX_DELAY


def test_a_pair_waits_its_delay_from_the_last_failure() -> None:
    pair = {PAIR: counter(5, last=100)}
    assert admit(pair, at(101), LIMITS).wait == pytest.approx(3.0)
    assert admit(pair, at(104), LIMITS).wait == 0.0
    # A last failure ahead of now counts as now: the wait is never longer than the delay.
    assert admit(pair, at(50), LIMITS).wait == 4.0


def test_an_address_waits_until_its_window_ends() -> None:
    full = {ADDRESS: counter(ADDRESS_LIMIT, first=0, last=10)}
    assert admit(full, at(100), LIMITS).wait == 800.0
    assert admit(full, at(900), LIMITS).wait == 0.0
    assert admit({ADDRESS: counter(ADDRESS_LIMIT - 1)}, at(1), LIMITS).wait == 0.0


def test_a_refused_attempt_counts_nothing() -> None:
    refused = admit({PAIR: counter(3, last=0), ADDRESS: counter(3)}, at(0.5), LIMITS)
    assert refused.wait > 0 and refused.counted == {}


def test_an_admitted_attempt_counts_in_every_scope() -> None:
    admitted = admit({PAIR: counter(3, first=0, last=0), ADDRESS: counter(0)}, at(5), LIMITS)
    assert admitted.wait == 0.0
    assert admitted.counted == {
        PAIR: Counter(failures=4, first_at=at(0), last_at=at(5)),
        ADDRESS: Counter(failures=1, first_at=at(5), last_at=at(5)),
    }


def test_counts_start_again_after_a_quiet_pair_or_an_ended_window() -> None:
    admitted = admit(
        {PAIR: counter(9, last=0), ADDRESS: counter(19, first=0)}, at(MAX_DELAY), LIMITS
    )
    assert {s: c.failures for s, c in admitted.counted.items()} == {PAIR: 1, ADDRESS: 1}


@given(
    failures=st.integers(0, 200),
    last=st.floats(-2000, 2000),
    now=st.floats(-2000, 2000),
)
def test_a_pair_never_waits_longer_than_the_cap(failures: int, last: float, now: float) -> None:
    wait = admit({PAIR: counter(failures, last=last)}, at(now), LIMITS).wait
    assert 0.0 <= wait <= MAX_DELAY
