"""The demo's pure parts: the schedule, the progress line, the summary."""

from __future__ import annotations

import datetime as dt
import random

from hypothesis import given
from hypothesis import strategies as st

from ems.demo import DemoOptions
from ems.demo.monitor import Sample, progress_line, sample_of, summary
from ems.demo.processes import pause
from ems.demo.readings import parse, readings
from ems.groups import GroupDescription, MemberDescription, PartitionDescription

NOW = dt.datetime(2026, 11, 25, 12, 0, 0)


def _sample(
    at: float, published: int, consumed: int, lag: int, **members: tuple[int, ...]
) -> Sample:
    return Sample(at=at, published=published, consumed=consumed, lag=lag, members=members)


def test_a_handler_joins_at_a_third_and_one_leaves_at_two_thirds() -> None:
    assert DemoOptions(duration=30).schedule() == (10.0, 20.0)
    assert DemoOptions(duration=6).schedule() == (2.0, 4.0)
    assert DemoOptions(duration=0).schedule() == (10.0, 20.0)  # forever: early on


def test_the_progress_line_shows_rates_lag_and_who_holds_what() -> None:
    before = _sample(100.0, 1000, 900, 100)
    now = _sample(102.0, 3000, 2500, 500, **{"handler-1": (0, 1), "handler-2": (2, 3)})
    line = progress_line(95.0, before, now, "data-handlers")
    assert line.split() == [
        "7.0s", "publish", "1000", "msg/s", "consume", "800", "msg/s",
        "lag", "data-handlers", "500", "handler-1[0,1]", "handler-2[2,3]",
    ]  # fmt: skip
    empty = progress_line(95.0, before, _sample(102.0, 1000, 900, 100), "g")
    assert empty.endswith("(no members)")


def _member(client_id: str, pid: int, live: bool, partitions: tuple[int, ...]) -> MemberDescription:
    return MemberDescription(
        client_id=client_id,
        host="h",
        pid=pid,
        lease_expires_at=NOW,
        seconds_left=5.0 if live else -1.0,
        live=live,
        partitions=partitions,
    )


def _partition(p: int, committed: int, high: int) -> PartitionDescription:
    return PartitionDescription(
        partition=p,
        owner=None,
        owner_live=False,
        state="released",
        generation=1,
        committed_offset=committed,
        high_watermark=high,
        lag=high - committed,
    )


def test_a_sample_names_live_members_by_process_and_sums_the_cursors() -> None:
    group = GroupDescription(
        group="g",
        topic="t",
        mode="cluster",
        start_position="earliest",
        ordered=False,
        retry_ladder="10s",
        max_attempts=3,
        ack_timeout_seconds=300,
        generation=4,
        leader=None,
        members=(
            _member("10.0.0.1-41-x", 41, True, (0,)),
            _member("10.0.0.1-42-y", 42, True, (1,)),
            _member("10.0.0.1-43-z", 43, False, ()),
        ),
        partitions=(_partition(0, 5, 9), _partition(1, 7, 7)),
        total_lag=4,
    )
    s = sample_of(1.0, group, {41: "handler-1"})
    assert (s.published, s.consumed, s.lag) == (16, 12, 4)
    assert s.members == {"10.0.0.1-42-y": (1,), "handler-1": (0,)}  # the expired one is gone


def test_the_summary_counts_from_the_baseline() -> None:
    baseline = _sample(0.0, 100, 100, 0)
    first = _sample(2.0, 150, 120, 30)
    last = _sample(12.0, 2100, 2100, 0)
    assert summary(baseline, first, last, "iot.readings", "data-handlers") == [
        "done: 2000 messages to iot.readings in 10.0s (200 msg/s)",
        "data-handlers: handled 2000, lag 0",
    ]


def test_readings_are_keyed_by_project_and_parse_back() -> None:
    for record in readings(random.Random(1), 5, 20):
        project, temperature = parse(
            record.body.encode() if isinstance(record.body, str) else record.body
        )
        assert record.key == str(project) and 1 <= project <= 5
        assert isinstance(temperature, float)


@given(
    st.floats(0, 1e6),
    st.integers(0, 10**6),
    st.floats(1, 1e5),
    st.floats(0, 1e4),
)
def test_a_paced_gateway_waits_just_long_enough_for_its_rate(
    began: float, sent: int, rate: float, elapsed: float
) -> None:
    wait = pause(began, sent, rate, began + elapsed)
    assert wait >= 0
    if wait > 0:  # sent by the next batch's start: exactly `rate` a second on average
        assert abs((began + elapsed + wait) - (began + sent / rate)) < 1e-6 * max(1, began)
    else:
        assert elapsed >= sent / rate - 1e-9 * max(1.0, began)
    assert pause(began, sent, 0.0, began) == 0.0  # unpaced
