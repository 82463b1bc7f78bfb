from __future__ import annotations

import datetime as dt

import pytest

from ems.display import json_time, parse_age, parse_when
from ems.exceptions import InvalidDatetime

NOW = dt.datetime(2026, 11, 22, 12, 0, 0)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-22T10:00:00", dt.datetime(2026, 11, 22, 10, 0)),
        ("2026-11-22 10:00:00.250000", dt.datetime(2026, 11, 22, 10, 0, 0, 250000)),
        ("2026-11-22T10:00:00Z", dt.datetime(2026, 11, 22, 10, 0)),
        ("2026-11-22T10:00:00+02:00", dt.datetime(2026, 11, 22, 8, 0)),
        ("2026-11-22", dt.datetime(2026, 11, 22)),
        ("15m", NOW - dt.timedelta(minutes=15)),
        ("2h", NOW - dt.timedelta(hours=2)),
        ("7d", NOW - dt.timedelta(days=7)),
        (" 90s ", NOW - dt.timedelta(seconds=90)),
    ],
)
def test_parses(text: str, expected: dt.datetime) -> None:
    assert parse_when(text, NOW) == expected


@pytest.mark.parametrize("text", ["", " ", "yesterday", "2026-13-01", "15 minutes", "-5m", "5y"])
def test_rejects(text: str) -> None:
    with pytest.raises(InvalidDatetime):
        parse_when(text, NOW)


def test_age_is_none_for_a_datetime() -> None:
    assert parse_age("2026-11-22") is None
    assert parse_age("1.5h") == dt.timedelta(minutes=90)


@pytest.mark.parametrize("text", ["9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+01:00"])
def test_a_time_that_leaves_the_calendar_once_in_utc_is_refused(text: str) -> None:
    with pytest.raises(InvalidDatetime, match="outside the years 1 to 9999"):
        parse_when(text, dt.datetime(2026, 11, 27))


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (dt.datetime(2026, 11, 22, 10, 0, 0, 123456), "2026-11-22T10:00:00.123456Z"),
        (dt.datetime(2026, 11, 22, 10, 0), "2026-11-22T10:00:00.000000Z"),  # digits kept
        (dt.datetime(2026, 11, 22, 10, 0, tzinfo=dt.UTC), "2026-11-22T10:00:00.000000Z"),
        (
            dt.datetime(2026, 11, 22, 12, 0, 0, 5, tzinfo=dt.timezone(dt.timedelta(hours=2))),
            "2026-11-22T10:00:00.000005Z",
        ),
        (None, None),
    ],
)
def test_json_time_is_utc_with_microseconds_and_z(
    value: dt.datetime | None, expected: str | None
) -> None:
    assert json_time(value) == expected


def test_a_json_time_is_read_back_as_the_same_time() -> None:
    at = dt.datetime(2026, 11, 22, 10, 0, 0, 123456)
    assert parse_when(json_time(at), NOW) == at
