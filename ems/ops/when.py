"""Parsing the points in time operators type (pure): ISO 8601 or a relative age.

Every time ems stores is UTC without a zone (the database clock's DATETIME(6)), so every
parsed value is returned as a naive UTC datetime.
"""

from __future__ import annotations

import datetime as dt
import re

from ems.exceptions import InvalidDatetime

_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)\s*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_age(text: str) -> dt.timedelta | None:
    """'90s', '15m', '2h', '7d', '1w' as a timedelta; None when text is not an age."""
    match = _AGE.match(text)
    if match is None:
        return None
    try:
        return dt.timedelta(seconds=float(match.group(1)) * _UNIT_SECONDS[match.group(2)])
    except OverflowError:
        raise InvalidDatetime(f"the age {text!r} is longer than a datetime can go back") from None


def parse_when(text: str, now: dt.datetime) -> dt.datetime:
    """A point in time as naive UTC: ISO 8601 (a value without an offset is UTC; 'Z' and
    '+02:00' are converted), or an age before `now` ('15m' means now - 15 minutes).
    InvalidDatetime for anything else."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidDatetime(f"not a datetime: {text!r}")
    age = parse_age(text)
    if age is not None:
        try:
            return now - age
        except OverflowError:
            raise InvalidDatetime(f"the age {text!r} goes back before the year 1") from None
    try:
        parsed = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidDatetime(
            f"not a datetime: {text!r} (use ISO 8601 such as 2026-11-22T10:00:00 or "
            "2026-11-22 10:00:00+02:00, or an age such as 15m, 2h, 7d)"
        ) from None
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(dt.UTC).replace(tzinfo=None)
    return parsed
