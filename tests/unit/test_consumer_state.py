"""The ack policy: cursors never pass an unsettled message; failures follow the ladder,
or the delay a handler's Retry asks for; a DeadLetter goes to the dead letters at once."""

from __future__ import annotations

import datetime as dt

from hypothesis import given
from hypothesis import strategies as st

from ems.consumer.state import (
    ACK_TIMEOUT_ERROR,
    Acks,
    Outcome,
    PartitionState,
    Policy,
    batch_settled,
    expired,
    failure_delay,
    settle,
    settle_acks,
)
from ems.types import Delivery

UNORDERED = Policy(ordered=False, ladder=(10.0, 30.0), max_attempts=3, ack_timeout=60.0)
ORDERED = Policy(ordered=True, ladder=(10.0, 30.0), max_attempts=3, ack_timeout=60.0)


def delivery(partition: int, offset: int, attempt: int = 1) -> Delivery:
    return Delivery(
        topic="t",
        partition=partition,
        offset=offset,
        key=None,
        headers={},
        body=b"x",
        timestamp=dt.datetime(2026, 1, 1),
        attempt=attempt,
        message_id=offset + 1000,
    )


def state_with(offsets: range, partition: int = 0, since: float = 0.0) -> PartitionState:
    state = PartitionState(
        partition=partition, generation=7, position=offsets.stop, committed=offsets.start
    )
    state.outstanding.add([delivery(partition, o) for o in offsets], since)
    return state


def test_cursor_stops_at_the_lowest_unsettled_offset() -> None:
    state = state_with(range(10, 15))
    s = settle([Outcome(delivery(0, 10)), Outcome(delivery(0, 12))], {0: state}, UNORDERED, 1.0)
    assert s.done == [(0, 10), (0, 12)]
    assert s.cursors == {0: (11, 7)}
    s = settle([Outcome(delivery(0, o)) for o in (11, 13, 14)], {0: state}, UNORDERED, 1.0)
    assert s.cursors == {0: (15, 7)}


def test_unordered_failure_goes_to_the_retry_table_and_the_cursor_moves_on() -> None:
    state = state_with(range(0, 3))
    outcomes = [Outcome(delivery(0, 0)), Outcome(delivery(0, 1), "boom"), Outcome(delivery(0, 2))]
    s = settle(outcomes, {0: state}, UNORDERED, 1.0)
    assert [(f.offset, f.attempts, f.delay, f.error) for f in s.failed] == [(1, 1, 10.0, "boom")]
    assert s.cursors == {0: (3, 7)}
    assert not s.logged_only and not s.handed_back


def test_last_attempt_is_dead_and_an_explicit_delay_wins() -> None:
    state = state_with(range(0, 0))
    state.redelivered.add([delivery(0, 5, attempt=3)], 0.0)
    state.redelivered.add([delivery(0, 6, attempt=1)], 0.0)
    s = settle(
        [Outcome(delivery(0, 5, 3), "x"), Outcome(delivery(0, 6, 1), "y", delay=2.5)],
        {0: state},
        UNORDERED,
        0.0,
    )
    assert [(f.offset, f.delay) for f in s.failed] == [(5, None), (6, 2.5)]


def test_a_dead_letter_outcome_is_dead_whatever_attempts_are_left_with_its_traceback() -> None:
    state = state_with(range(0, 2))
    outcomes = [
        Outcome(delivery(0, 0), "DeadLetter: bad", traceback="tb-0", dead=True),
        Outcome(delivery(0, 1), "ValueError: x", traceback="tb-1"),
    ]
    s = settle(outcomes, {0: state}, UNORDERED, 0.0)
    assert [(f.offset, f.delay, f.error, f.traceback) for f in s.failed] == [
        (0, None, "DeadLetter: bad", "tb-0"),
        (1, 10.0, "ValueError: x", "tb-1"),
    ]
    assert s.cursors == {0: (2, 7)}


def test_a_dead_letter_outcome_in_an_ordered_group_lets_the_partition_move_on() -> None:
    state = state_with(range(0, 3))
    s = settle([Outcome(delivery(0, 0), "DeadLetter: no", dead=True)], {0: state}, ORDERED, 5.0)
    assert [(f.offset, f.delay) for f in s.failed] == [(0, None)]
    assert not s.logged_only and not s.handed_back and state.blocked_until == 0.0


def test_a_requested_delay_is_an_attempt_and_dies_at_max_attempts() -> None:
    asked = Outcome(delivery(0, 0), "Retry: requested", delay=0.5)
    assert [failure_delay(a, asked, UNORDERED) for a in (1, 2, 3, 4)] == [0.5, 0.5, None, None]
    ladder = Outcome(delivery(0, 0), "Retry: requested")  # Retry(delay=None)
    assert [failure_delay(a, ladder, UNORDERED) for a in (1, 2, 3)] == [10.0, 30.0, None]
    dead = Outcome(delivery(0, 0), "DeadLetter: x", delay=0.5, dead=True)
    assert failure_delay(1, dead, UNORDERED) is None


def test_an_ordered_retry_waits_in_place_for_the_delay_asked() -> None:
    state = state_with(range(0, 3))
    s = settle(
        [Outcome(delivery(0, 0), "Retry", delay=0.25, traceback="tb")], {0: state}, ORDERED, 100.0
    )
    assert [(f.offset, f.delay, f.traceback) for f in s.logged_only] == [(0, 0.25, "tb")]
    assert s.handed_back == [(0, 1, 2)] and state.blocked_until == 100.25


def test_acked_redelivery_clears_its_retry_row() -> None:
    state = state_with(range(0, 0))
    state.redelivered.add([delivery(0, 4, attempt=2)], 0.0)
    s = settle([Outcome(delivery(0, 4, 2))], {0: state}, UNORDERED, 0.0)
    assert s.done == [(0, 4)] and s.cleared == [(0, 4)]
    assert state.in_flight() == 0


def test_ordered_failure_blocks_the_partition_and_hands_back_the_rest() -> None:
    state = state_with(range(20, 25))
    outcomes = [Outcome(delivery(0, 20)), Outcome(delivery(0, 21), "bad")]
    s = settle(outcomes, {0: state}, ORDERED, 100.0)
    assert s.done == [(0, 20)]
    assert [f.offset for f in s.logged_only] == [21] and not s.failed
    assert s.handed_back == [(0, 22, 24)]
    assert s.cursors == {0: (21, 7)}
    assert state.position == 21 and state.blocked_until == 110.0
    assert state.failures == {21: 1} and not state.outstanding


def test_ordered_message_dies_after_the_last_attempt_and_the_partition_moves_on() -> None:
    state = state_with(range(0, 0))
    state.position = 3
    state.outstanding.add([delivery(0, 2, attempt=3)], 0.0)
    state.failures[2] = 2
    s = settle([Outcome(delivery(0, 2, 3), "bad")], {0: state}, ORDERED, 0.0)
    assert [(f.offset, f.delay) for f in s.failed] == [(2, None)]
    assert s.cursors == {0: (3, 7)} and state.failures == {}


def test_outcomes_for_unknown_partitions_or_settled_deliveries_are_ignored() -> None:
    state = state_with(range(0, 2))
    first = settle([Outcome(delivery(0, 0))], {0: state}, UNORDERED, 0.0)
    again = settle([Outcome(delivery(0, 0)), Outcome(delivery(9, 0))], {0: state}, UNORDERED, 0.0)
    assert first.done == [(0, 0)] and not again.done and not again.failed


def test_ack_timeout_turns_old_deliveries_into_failures() -> None:
    state = state_with(range(0, 2), since=0.0)
    state.redelivered.add([delivery(0, 9, 2)], 50.0)
    late = expired([state], now=61.0, timeout=60.0)
    assert sorted(o.delivery.offset for o in late) == [0, 1]
    assert {o.error for o in late} == {ACK_TIMEOUT_ERROR}
    assert {o.traceback for o in late} == {None}  # no handler raised: no traceback


@given(st.lists(st.tuples(st.integers(0, 49), st.booleans()), max_size=60))
def test_committed_cursor_never_passes_an_unsettled_offset(acks: list[tuple[int, bool]]) -> None:
    state = state_with(range(0, 50))
    settled: set[int] = set()
    for offset, ok in acks:
        outcome = Outcome(delivery(0, offset)) if ok else Outcome(delivery(0, offset), "e")
        s = settle([outcome], {0: state}, UNORDERED, 0.0)
        settled.add(offset)
        if 0 in s.cursors:
            cursor = s.cursors[0][0]
            state.committed = cursor
            assert all(o in settled for o in range(cursor))
            assert cursor == 50 or cursor not in settled


@given(
    st.lists(st.tuples(st.integers(0, 2), st.integers(0, 19)), max_size=60),
    st.sets(st.integers(0, 19), max_size=5),
)
def test_a_batch_of_acks_settles_as_its_outcomes_of_success_do(
    places: list[tuple[int, int]], from_retry: set[int]
) -> None:
    """settle_acks (ack() and a handled batch without a failure) makes the settlement
    and leaves the states that settle() of the same successes does, but for the order
    of done: unknown partitions, offsets not in flight and repeats are ignored alike."""

    def states() -> dict[int, PartitionState]:
        made = {p: state_with(range(0, 20), p) for p in (0, 1)}
        for o in from_retry:  # offset o of partition 1 comes from the retry table
            made[1].outstanding.pop(o)
            made[1].redelivered.add([delivery(1, o, attempt=2)], 0.0)
        return made

    given_states, reference = states(), states()
    acked = settle_acks([delivery(p, o) for p, o in places], given_states)
    expected = settle([Outcome(delivery(p, o)) for p, o in places], reference, UNORDERED, 0.0)
    assert sorted(acked.done) == expected.done
    assert sorted(acked.cleared) == expected.cleared
    assert acked.cursors == expected.cursors
    assert not acked.failed and not acked.logged_only and not acked.handed_back
    for p in (0, 1):
        assert dict(given_states[p].outstanding.deliveries) == reference[p].outstanding.deliveries
        assert given_states[p].outstanding.since == reference[p].outstanding.since
        assert list(given_states[p].redelivered) == list(reference[p].redelivered)


def test_a_handled_batch_settles_as_acks_unless_something_failed() -> None:
    ok = [delivery(0, 1), delivery(1, 2)]
    assert batch_settled(ok, []) == Acks(ok)
    boom = Outcome(delivery(0, 3), "boom")
    assert batch_settled(ok, [boom]) == [Outcome(ok[0]), Outcome(ok[1]), boom]
    assert batch_settled([], []) == Acks([])
