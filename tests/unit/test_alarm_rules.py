"""The alarm conditions and the scan's plan, as pure functions (with properties)."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from ems.alarms.rules import evaluate, plan, stalled
from ems.values.alarms import (
    DEAD_LETTER_COUNT_CAP,
    AlarmRecord,
    Condition,
    DeadLetterObservation,
    InFlightObservation,
    Observations,
    PartitionObservation,
)

QUIET = PartitionObservation(
    group_id=7,
    group="g",
    topic_id=3,
    topic="t",
    partition=2,
    committed_offset=100,
    high_watermark=100,
    since_commit=5.0,
    oldest_unconsumed_age=None,
    lag_alarm_messages=None,
    lag_alarm_seconds=None,
    stall_alarm_seconds=300,
)


def kinds(*observed: PartitionObservation) -> set[str]:
    return {c.kind for c in evaluate(Observations(partitions=observed))}


def test_a_quiet_partition_fires_nothing() -> None:
    assert kinds(QUIET) == set()


def test_lag_above_the_threshold() -> None:
    lagging = replace(QUIET, high_watermark=150, lag_alarm_messages=49)
    (c,) = evaluate(Observations(partitions=[lagging]))
    assert (c.kind, c.key, c.value, c.threshold, c.partition) == ("lag", "lag:7:2", 50, 49, 2)
    assert kinds(replace(lagging, lag_alarm_messages=50)) == set()  # not above
    assert kinds(replace(lagging, lag_alarm_messages=None)) == set()  # off


def test_lag_age_needs_lag() -> None:
    old = replace(QUIET, oldest_unconsumed_age=120.0, lag_alarm_seconds=60)
    assert kinds(old) == set()
    assert kinds(replace(old, high_watermark=101)) == {"lag_age"}
    assert kinds(replace(old, high_watermark=101, lag_alarm_seconds=None)) == set()


def test_stall_needs_an_old_commit_an_old_backlog_and_lag() -> None:
    stuck = replace(QUIET, high_watermark=101, since_commit=600.0, oldest_unconsumed_age=400.0)
    assert stalled(stuck)
    assert not stalled(replace(stuck, high_watermark=100))  # no lag
    assert not stalled(replace(stuck, since_commit=200.0))  # committed lately
    assert not stalled(replace(stuck, oldest_unconsumed_age=10.0))  # backlog just arrived
    assert stalled(replace(stuck, oldest_unconsumed_age=None))  # unknown: the commit decides


def test_consumption_timeout_and_dead_letters() -> None:
    flight = InFlightObservation(
        group_id=7,
        group="g",
        topic_id=3,
        topic="t",
        partition=1,
        in_flight=4,
        overdue=2,
        oldest_age=900.0,
        ack_timeout_seconds=300,
    )
    dead = DeadLetterObservation(
        group_id=7, group="g", topic_id=3, topic="t", unhandled=3, newest_age=1.0
    )
    found = {c.key: c for c in evaluate(Observations(in_flight=[flight], dead_letters=[dead]))}
    assert set(found) == {"consumption_timeout:7:1", "dead_letter:7"}
    assert found["consumption_timeout:7:1"].value == 900.0
    assert found["dead_letter:7"].partition is None
    assert evaluate(Observations(in_flight=[replace(flight, overdue=0, oldest_age=10.0)])) == []
    capped = replace(dead, unhandled=DEAD_LETTER_COUNT_CAP)
    (c,) = evaluate(Observations(dead_letters=[capped]))
    assert f"{DEAD_LETTER_COUNT_CAP}+ dead letters" in c.message


partitions = st.builds(
    PartitionObservation,
    group_id=st.integers(1, 3),
    group=st.just("g"),
    topic_id=st.just(1),
    topic=st.just("t"),
    partition=st.integers(0, 3),
    committed_offset=st.integers(0, 1000),
    high_watermark=st.integers(0, 1000),
    since_commit=st.floats(0, 10_000),
    oldest_unconsumed_age=st.none() | st.floats(0, 10_000),
    lag_alarm_messages=st.none() | st.integers(1, 1000),
    lag_alarm_seconds=st.none() | st.integers(1, 10_000),
    stall_alarm_seconds=st.integers(1, 10_000),
)


@given(st.lists(partitions, max_size=20, unique_by=lambda p: (p.group_id, p.partition)))
def test_each_firing_condition_matches_its_threshold(observed: list[PartitionObservation]) -> None:
    firing = evaluate(Observations(partitions=observed))
    assert len({c.key for c in firing}) == len(firing)
    by_key = {(p.group_id, p.partition): p for p in observed}
    for c in firing:
        p = by_key[(c.group_id, c.partition)]
        assert c.key == f"{c.kind}:{c.group_id}:{c.partition}"
        assert p.lag > 0, "nothing fires without lag"
        assert c.value > c.threshold
        if c.kind == "lag":
            assert p.lag_alarm_messages is not None and p.lag > p.lag_alarm_messages
    for p in by_key.values():
        keys = {c.key for c in firing if (c.group_id, c.partition) == (p.group_id, p.partition)}
        limit = p.lag_alarm_messages
        assert (f"lag:{p.group_id}:{p.partition}" in keys) == (limit is not None and p.lag > limit)


def record(key: str, alarm_id: int) -> AlarmRecord:
    at = dt.datetime(2026, 1, 1)
    return AlarmRecord(
        id=alarm_id,
        kind=key.split(":")[0],
        condition_key=key,
        status="open",
        group_id=1,
        group="g",
        topic_id=1,
        topic="t",
        partition=None,
        value=1.0,
        threshold=0.0,
        message="m",
        opened_at=at,
        last_seen_at=at,
        cleared_at=None,
        notified_at=None,
        notify_attempts=0,
        notify_error=None,
    )


def condition(key: str) -> Condition:
    return Condition(
        kind="dead_letter",
        key=key,
        group_id=1,
        topic_id=1,
        partition=None,
        value=1.0,
        threshold=0.0,
        message="m",
    )


keys = st.sets(st.sampled_from([f"dead_letter:{i}" for i in range(12)]))


@given(keys, keys)
def test_the_plan_opens_refreshes_and_clears_exactly(firing: set[str], open_: set[str]) -> None:
    work = plan(
        [condition(k) for k in sorted(firing)],
        {k: record(k, i) for i, k in enumerate(sorted(open_))},
    )
    opened = {c.key for c in work.open}
    refreshed = {c.key for c in work.refresh}
    cleared = {a.condition_key for a in work.clear}
    assert opened == firing - open_
    assert refreshed == firing & open_
    assert cleared == open_ - firing
    # After the plan, exactly the firing conditions are open: one alarm each.
    assert (open_ - cleared) | opened == firing
