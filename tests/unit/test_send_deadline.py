"""The send bound's policy (ems.producer.deadline), on a fake clock: a send rides out an
outage shorter than its bound, gives up no earlier than its deadline and no later than
the attempt under way then, and pauses 0.1 s doubling to 1 s between attempts."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ems.exceptions import (
    BodyTooLarge,
    DatabaseReadOnly,
    DatabaseUnavailable,
    LockConflict,
    OffsetConflict,
    RedisOutcomeUnknown,
    RedisReplyError,
    RedisUnavailable,
    SendTimeout,
    ServerUnavailable,
    UnknownTopic,
)
from ems.producer.deadline import MAX_PAUSE, PASSING, Attempts, backoff, pause

EPSILON = 1e-9


def simulate(outage: float, bound: float, attempt: float) -> tuple[bool, float]:
    """A send against a server away from 0 until `outage`, each attempt taking `attempt`
    seconds (one that starts once the server is back goes through), driven by Attempts
    on a fake clock: whether it went through, and when it returned or gave up."""
    clock = 0.0
    attempts = Attempts(clock + bound, bound)
    while True:
        started, clock = clock, clock + attempt
        if started >= outage:
            return True, clock
        try:
            clock += attempts.pause_after(RedisUnavailable("Redis is unreachable"), clock)
        except SendTimeout as exc:
            assert isinstance(exc.__cause__, RedisUnavailable)
            return False, clock


def test_pauses_double_from_a_tenth_of_a_second_to_one() -> None:
    assert [backoff(n) for n in range(1, 8)] == pytest.approx([0.1, 0.2, 0.4, 0.8, 1, 1, 1])
    assert backoff(10**9) == MAX_PAUSE  # a very long bound: no overflow


def test_a_pause_never_runs_past_the_deadline() -> None:
    assert pause(1, now=5.0, deadline=10.0) == pytest.approx(0.1)
    assert pause(9, now=9.75, deadline=10.0) == pytest.approx(0.25)
    assert pause(1, now=10.0, deadline=10.0) is None
    assert pause(1, now=12.0, deadline=10.0) is None


def test_an_outage_shorter_than_the_bound_is_ridden_out() -> None:
    went, at = simulate(outage=3.0, bound=45.0, attempt=0.01)
    assert went and 3.0 <= at < 3.0 + MAX_PAUSE + 0.02


def test_a_failover_under_sentinels_defaults_fits_the_default_bound() -> None:
    """30 s of down-after-milliseconds, then the vote and the promotion: about 33 s."""
    went, at = simulate(outage=33.0, bound=45.0, attempt=0.7)
    assert went and at < 33.0 + MAX_PAUSE + 2 * 0.7


def test_an_outage_past_the_bound_gives_up_at_the_deadline() -> None:
    went, at = simulate(outage=math.inf, bound=2.0, attempt=0.3)
    assert not went and 2.0 <= at < 2.0 + 0.3 + EPSILON


def test_a_zero_bound_makes_one_attempt() -> None:
    attempts = Attempts(deadline=100.0, bound=0.0)
    with pytest.raises(SendTimeout, match="EMS_SEND_TIMEOUT is 0 s") as raised:
        attempts.pause_after(DatabaseReadOnly("MySQL takes no writes"), now=100.0)
    assert isinstance(raised.value.__cause__, DatabaseReadOnly)
    assert "MySQL takes no writes" in str(raised.value)
    assert attempts.failures == 1


@given(
    outage=st.floats(0, 200) | st.just(math.inf),
    bound=st.floats(0, 100),
    attempt=st.floats(0.001, 5),
)
def test_the_bound_holds_for_any_outage(outage: float, bound: float, attempt: float) -> None:
    went, at = simulate(outage, bound, attempt)
    if not went:
        assert bound - EPSILON <= at < bound + attempt + EPSILON
    if outage <= bound - attempt:  # an attempt could start after the outage, in time
        assert went and at < outage + 2 * attempt + MAX_PAUSE + EPSILON


def test_what_passes_and_what_is_raised_at_once() -> None:
    """The failures of a lost or failing-over server pass; bad input, an unknown topic, an
    error reply or exhausted offset ranges do not."""
    passing = [
        RedisUnavailable(),
        RedisOutcomeUnknown(),
        DatabaseUnavailable(),
        DatabaseReadOnly(),
        LockConflict(),
    ]
    assert all(isinstance(e, PASSING) for e in passing)
    failing = [BodyTooLarge(), UnknownTopic(), RedisReplyError(), OffsetConflict(), SendTimeout()]
    assert not any(isinstance(e, PASSING) for e in failing)
    assert issubclass(SendTimeout, ServerUnavailable)  # exit code 3, like the causes
