"""Parsing of the jobs' options, shared by their spark-submit mains and `ems spark`.

No pyspark here: the CLI validates its input before any Spark work starts.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence

from ems.config import MAX_SECONDS
from ems.exceptions import InvalidSetting

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
#: Crash points of the compaction job, for tests that kill it between steps.
CRASH_POINTS = ("archive-write", "archive", "summaries", "delete")


def parse_duration(text: str) -> dt.timedelta:
    """'90s', '15m', '6h', '7d', '2w' -> timedelta (positive)."""
    match = _DURATION.match(text)
    if match is None:
        raise InvalidSetting(f"{text!r} is not a duration like 90s, 15m, 6h, 7d or 2w")
    value = float(match.group(1)) * _UNITS[match.group(2)]
    if not 0 < value <= MAX_SECONDS:
        raise InvalidSetting(f"duration {text!r} must be positive and at most {MAX_SECONDS:g}s")
    return dt.timedelta(seconds=value)


def parse_timestamp(text: str) -> dt.datetime:
    """An ISO 8601 time; naive values are UTC. Returned naive, in UTC, like the database."""
    try:
        value = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidSetting(f"{text!r} is not an ISO 8601 time like 2026-11-20T00:00") from None
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    return value


def parse_crash_point(text: str | None) -> tuple[str, int] | None:
    """'archive' -> ('archive', 0); 'delete:3' -> ('delete', 3) (after the third chunk)."""
    if not text:
        return None
    name, _, count = text.partition(":")
    if name not in CRASH_POINTS or (count and not count.isdigit()):
        raise InvalidSetting(f"crash point must be one of {', '.join(CRASH_POINTS)}[:N]")
    return name, int(count or 0)


def parse_conf(pairs: Sequence[str]) -> dict[str, str]:
    """['spark.executor.memory=4g', ...] -> {'spark.executor.memory': '4g'}."""
    conf = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise InvalidSetting(f"Spark setting {pair!r} is not KEY=VALUE")
        conf[key.strip()] = value.strip()
    return conf
