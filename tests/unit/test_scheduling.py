"""The check of delay= and deliver_at= (pure, the caller's clock given), the CLI's delay
syntax, and the relay loop's wake-up for the soonest scheduled row."""

from __future__ import annotations

import datetime as dt
import math
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ems.exceptions import InvalidInput, InvalidSchedule
from ems.producer.relay import next_due
from ems.producer.scheduling import parse_delay, schedule_of
from ems.store.outbox import due_sql, outbox_statements
from ems.types import Schedule

NOW = dt.datetime(2026, 11, 29, 12, 0, 0, tzinfo=dt.UTC)
WEEK = 7 * 86400.0


def test_nothing_asked_is_not_scheduled() -> None:
    assert schedule_of(None, None, WEEK, NOW) is None


@pytest.mark.parametrize(
    ("delay", "micros"),
    [(0, 0), (30, 30_000_000), (0.25, 250_000), (dt.timedelta(minutes=5), 300_000_000)],
)
def test_a_delay_counts_in_microseconds_on_the_server(delay: float, micros: int) -> None:
    assert schedule_of(delay, None, WEEK, NOW) == Schedule(delay_us=micros)


def test_an_aware_time_is_kept_in_utc() -> None:
    paris = dt.datetime(2026, 11, 29, 14, 30, tzinfo=ZoneInfo("Europe/Paris"))
    assert schedule_of(None, paris, WEEK, NOW) == Schedule(at=dt.datetime(2026, 11, 29, 13, 30))


@pytest.mark.parametrize("back", [dt.timedelta(0), dt.timedelta(days=400)])
def test_a_time_already_past_means_now_by_the_servers_clock(back: dt.timedelta) -> None:
    assert schedule_of(None, NOW - back, WEEK, NOW) == Schedule(delay_us=0)


@pytest.mark.parametrize(
    ("delay", "deliver_at", "says"),
    [
        (-1, None, "0 or more"),
        (dt.timedelta(seconds=-0.5), None, "0 or more"),
        (math.nan, None, "0 or more"),
        (math.inf, None, "0 or more"),
        (WEEK + 1, None, "EMS_MAX_DELAY"),
        (True, None, "bool"),
        ("30s", None, "str"),
        (None, dt.datetime(2026, 11, 29, 13, 0), "time zone"),
        (None, NOW + dt.timedelta(days=7, seconds=1), "EMS_MAX_DELAY"),
        (None, dt.date(2026, 11, 30), "date"),
        (5, NOW + dt.timedelta(seconds=5), "not both"),
    ],
)
def test_bad_schedules_are_typed_errors(delay: object, deliver_at: object, says: str) -> None:
    with pytest.raises(InvalidSchedule, match=says) as raised:
        schedule_of(delay, deliver_at, WEEK, NOW)  # type: ignore[arg-type]
    assert isinstance(raised.value, InvalidInput)


def test_the_bound_itself_is_allowed() -> None:
    assert schedule_of(WEEK, None, WEEK, NOW) == Schedule(delay_us=int(WEEK * 1e6))
    at = NOW + dt.timedelta(seconds=WEEK)
    assert schedule_of(None, at, WEEK, NOW) == Schedule(at=at.replace(tzinfo=None))


@given(st.floats(min_value=0, max_value=WEEK), st.sampled_from([-11, -3, 0, 5, 14]))
def test_any_time_within_the_bound_is_scheduled_at_that_instant(seconds: float, hours: int) -> None:
    zone = dt.timezone(dt.timedelta(hours=hours))
    at = (NOW + dt.timedelta(seconds=seconds)).astimezone(zone)
    got = schedule_of(None, at, WEEK, NOW)
    assert got is not None
    if got.at is None:
        assert got.delay_us == 0 and at <= NOW
    else:
        assert got.at.replace(tzinfo=dt.UTC) == at


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30", 30), ("30s", 30), ("500ms", 0.5), ("5m", 300), ("2h", 7200), ("1d", 86400)],
)
def test_the_clis_delays(text: str, seconds: float) -> None:
    assert parse_delay(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "5x", "1.2.3s"])
def test_the_clis_bad_delays(text: str) -> None:
    with pytest.raises(InvalidSchedule):
        parse_delay(text)


def test_a_scheduled_rows_time_in_sql() -> None:
    assert due_sql(None) is None
    assert due_sql(Schedule(delay_us=1_500_000)) == (
        "UTC_TIMESTAMP(6) + INTERVAL 1500000 MICROSECOND"
    )
    at = dt.datetime(2026, 11, 29, 13, 30, 0, 5)
    assert due_sql(Schedule(at=at)) == "'2026-11-29 13:30:00.000005'"
    ((sql, params),) = outbox_statements("ems", 7, [(0, None, None, b"x")], Schedule(at=at))
    assert sql.endswith(
        "(topic_id, partition_no, msg_key, headers, body, deliver_at) VALUES "
        "(7,0,NULL,NULL,X'78','2026-11-29 13:30:00.000005')"
    )
    assert params == ()


@pytest.mark.parametrize(
    ("found", "moved", "owed"),
    [(None, 0, None), (2.5, 0, 2.5), (0.0, 3, 0.0), (0.0, 0, None), (1.0, 4, 1.0)],
)
def test_when_the_relay_owes_a_scheduled_row_its_next_pass(
    found: float | None, moved: int, owed: float | None
) -> None:
    # Rows due now and moved: at once, to learn the time of those after them; due but
    # moved by no one here (another relay holds the topic): the interval, not a loop.
    assert next_due(found, moved) == owed
