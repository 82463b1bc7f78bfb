"""The backoff ladder and the retry-or-dead decision, as pure functions.

A ladder is a list of delays such as "10s 30s 1m 2h": the n-th failed delivery waits the
n-th rung, and every failure past the end of the ladder waits the last rung. Once a
message has failed `max_attempts` times it goes to the dead table instead.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ems.exceptions import InvalidInput, InvalidSetting

__all__ = ["DEFAULT_LADDER", "Dead", "Retry", "format_ladder", "next_step", "parse_ladder"]

# The same text as ems.models.groups.DEFAULT_RETRY_LADDER (the column default); kept here so
# the retry policy does not import the schema (and sqlalchemy). A unit test keeps them equal.
DEFAULT_LADDER = "10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"

#: Unit -> seconds, largest first: format_ladder prefers the largest unit that is exact.
UNITS = {"d": 86_400, "h": 3_600, "m": 60, "s": 1, "ms": 0.001}

#: Whole counts above this print as long digit strings; repr is shorter there.
_EXACT = 2.0**53
_SEPARATORS = re.compile(r"[\s,]+")
_TOKEN = re.compile(r"(?P<number>[+-]?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)(?P<unit>[A-Za-z]*)")


@dataclass(frozen=True, kw_only=True)
class Retry:
    """Deliver the message again after `delay` seconds."""

    delay: float


@dataclass(frozen=True, kw_only=True)
class Dead:
    """Give up: move the message to the dead table."""


def parse_ladder(text: str) -> tuple[float, ...]:
    """Delays in seconds from text like "10s, 30s 1m 2h"; units ms, s, m, h, d.

    Raises InvalidSetting for an empty ladder or a malformed, zero, negative or unitless
    token, naming the token.
    """
    tokens = [t for t in _SEPARATORS.split(text) if t]
    if not tokens:
        raise InvalidSetting(f"retry ladder {text!r} is empty; expected delays like '10s 1m'")
    return tuple(_parse_token(token) for token in tokens)


def format_ladder(delays: Sequence[float]) -> str:
    """The inverse of parse_ladder: parse_ladder(format_ladder(d)) == d for any valid d."""
    if not delays:
        raise InvalidSetting("a retry ladder needs at least one delay")
    return " ".join(_format_delay(delay) for delay in delays)


def next_step(attempts: int, ladder: tuple[float, ...], max_attempts: int) -> Retry | Dead:
    """What to do after the `attempts`-th failed delivery (attempts >= 1).

    Dead once attempts reaches max_attempts; otherwise retry after ladder[attempts - 1],
    or after the last rung when the ladder is shorter than that.
    """
    if max_attempts < 1:
        raise InvalidSetting(f"max_attempts must be at least 1, not {max_attempts}")
    if not ladder:
        raise InvalidSetting("a retry ladder needs at least one delay")
    if attempts < 1:
        raise InvalidInput(f"attempts counts failed deliveries and starts at 1, not {attempts}")
    if attempts >= max_attempts:
        return Dead()
    return Retry(delay=ladder[min(attempts, len(ladder)) - 1])


def _parse_token(token: str) -> float:
    match = _TOKEN.fullmatch(token)
    if match is None:
        raise InvalidSetting(
            f"retry ladder token {token!r} is malformed; expected a number and a unit, like '30s'"
        )
    unit = match["unit"]
    if unit not in UNITS:
        raise InvalidSetting(
            f"retry ladder token {token!r} has "
            + (f"unknown unit {unit!r}" if unit else "no unit")
            + "; use one of ms, s, m, h, d"
        )
    seconds = _scale(float(match["number"]), unit)
    if not math.isfinite(seconds) or seconds <= 0:
        raise InvalidSetting(f"retry ladder token {token!r} must be a positive, finite delay")
    return seconds


def _scale(number: float, unit: str) -> float:
    # Dividing by 1000 (not multiplying by 0.001) keeps "5ms" exactly 5 / 1000.
    return number / 1000 if unit == "ms" else number * UNITS[unit]


def _format_delay(delay: float) -> str:
    if not math.isfinite(delay) or delay <= 0:
        raise InvalidSetting(f"retry delay {delay!r} must be a positive, finite number of seconds")
    for unit in UNITS:
        count = delay * 1000 if unit == "ms" else delay / UNITS[unit]
        if count.is_integer() and count < _EXACT and _scale(count, unit) == delay:
            return f"{int(count)}{unit}"
    # Not a whole number of any unit: the shortest repr of the seconds parses back exactly.
    return f"{delay!r}s"
