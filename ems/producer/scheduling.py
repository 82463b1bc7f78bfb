"""Scheduled sends: the pure check of `delay=` and `deliver_at=` (no I/O, the clock given).

A scheduled message is written into message_outbox with the time from which a relay may
move it into its topic; it gets its offset at that move, as a transactional send's message
does. The time is compared with the database clock, never a client's: a delay becomes
"this many microseconds after the row is written" on the server, and a deliver_at already
past (by the caller's clock) becomes a delay of 0, so the server's clock says "now".
"""

from __future__ import annotations

import datetime as dt
import math

from ems.exceptions import InvalidSchedule
from ems.types import Schedule

#: What delay= takes: seconds, or a timedelta.
Delay = float | int | dt.timedelta


def schedule_of(
    delay: Delay | None,
    deliver_at: dt.datetime | None,
    max_delay: float,
    now: dt.datetime,
) -> Schedule | None:
    """The schedule a send asked for (None: at once, not scheduled). `now` is the caller's
    clock (aware), used only to bound deliver_at by max_delay and to tell a time already
    past. InvalidSchedule for both given, a negative or non-finite delay, a naive
    datetime, or either one beyond max_delay seconds."""
    if delay is not None and deliver_at is not None:
        raise InvalidSchedule("a send takes delay= or deliver_at=, not both")
    if delay is not None:
        return Schedule(delay_us=_delay_us(delay, max_delay))
    if deliver_at is not None:
        return _at(deliver_at, max_delay, now)
    return None


def _delay_us(delay: object, max_delay: float) -> int:
    if isinstance(delay, dt.timedelta):
        seconds = delay.total_seconds()
    elif isinstance(delay, int | float) and not isinstance(delay, bool):
        seconds = float(delay)
    else:
        raise InvalidSchedule(
            f"delay= takes seconds or a datetime.timedelta, not a {type(delay).__name__}"
        )
    if not math.isfinite(seconds) or seconds < 0:
        raise InvalidSchedule(f"a delay must be 0 or more seconds, not {delay!r}")
    if seconds > max_delay:
        raise InvalidSchedule(
            f"a delay of {seconds:g} s is beyond the longest allowed, {max_delay:g} s "
            "(EMS_MAX_DELAY)"
        )
    return round(seconds * 1_000_000)


def _at(deliver_at: object, max_delay: float, now: dt.datetime) -> Schedule:
    if not isinstance(deliver_at, dt.datetime):
        raise InvalidSchedule(
            f"deliver_at= takes a datetime.datetime, not a {type(deliver_at).__name__}"
        )
    if deliver_at.tzinfo is None or deliver_at.utcoffset() is None:
        raise InvalidSchedule(
            f"deliver_at= needs a time zone (a naive datetime is ambiguous): {deliver_at}"
        )
    ahead = (deliver_at - now).total_seconds()
    if ahead > max_delay:
        raise InvalidSchedule(
            f"deliver_at {deliver_at.isoformat()} is {ahead:.0f} s ahead, beyond the longest "
            f"delay allowed, {max_delay:g} s (EMS_MAX_DELAY)"
        )
    if ahead <= 0:
        return Schedule(delay_us=0)  # already past: now, by the server's clock
    return Schedule(at=deliver_at.astimezone(dt.UTC).replace(tzinfo=None))


def parse_delay(text: str) -> float:
    """A delay as the CLI takes it: seconds, or a number with a unit: 500ms, 30s, 5m, 2h,
    1d. InvalidSchedule when it is none of these."""
    raw = text.strip().lower()
    number, factor = raw, 1.0
    unit = next((u for u in _UNITS if raw.endswith(u)), None)
    if unit is not None:
        number, factor = raw[: -len(unit)], _UNITS[unit]
    try:
        value = float(number)
    except ValueError:
        raise InvalidSchedule(
            f"a delay is seconds or a number with a unit (500ms, 30s, 5m, 2h, 1d), not {text!r}"
        ) from None
    return value * factor


def parse_deliver_at(text: str) -> dt.datetime:
    """A time as the CLI takes it: RFC 3339 (2026-11-29T12:00:00Z, or with an offset such
    as +02:00). InvalidSchedule when it is not one, or names no time zone."""
    try:
        parsed = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise InvalidSchedule(
            f"a time to deliver at is RFC 3339 with its offset (2026-11-29T12:00:00Z, "
            f"2026-11-29T13:00:00+01:00), not {text!r}"
        )
    return parsed


#: Units in the order they are tried ("ms" before "s" and "m").
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
