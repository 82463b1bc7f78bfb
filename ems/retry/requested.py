"""What a handler asks for by raising: a retry after a delay of its choosing (Retry), or
the dead letters at once (DeadLetter); and how any handler exception becomes the
message's failure (pure).

As dramatiq's Retry and River's JobSnooze / JobCancel: a handler that knows better than
the group's ladder says so by raising. A requested retry is an attempt like any failure
(after max_attempts the message is dead-lettered, as dramatiq's Retry counts against
max_retries); a DeadLetter skips the attempts left.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from ems.exceptions import InvalidSetting

__all__ = [
    "ERROR_CHARS",
    "MAX_DELAY",
    "DeadLetter",
    "Retry",
    "Verdict",
    "check_delay",
    "verdict",
]

#: Longest delay a retry may ask for: a year. The due time is NOW(6) plus the delay in
#: microseconds; this keeps it well inside a DATETIME and a BIGINT.
MAX_DELAY = 366 * 86_400.0
#: Characters of a failure's error text kept (the log row, the retry row, the dead letter).
ERROR_CHARS = 2000


def check_delay(delay: object, what: str = "retry delay") -> float:
    """A retry delay in seconds: a finite number from 0 to MAX_DELAY; else InvalidSetting."""
    if isinstance(delay, bool) or not isinstance(delay, int | float):
        raise InvalidSetting(f"{what} must be a number of seconds, not {type(delay).__name__}")
    seconds = float(delay)
    if not math.isfinite(seconds) or not 0 <= seconds <= MAX_DELAY:
        raise InvalidSetting(
            f"{what} must be a finite number of seconds from 0 to {MAX_DELAY:.0f} (a year), "
            f"not {delay!r}"
        )
    return seconds


class Retry(Exception):
    """Raised by a handler: deliver this message again after `delay` seconds (None: the
    group's backoff ladder). It counts as an attempt: after the group's max_attempts the
    message is dead-lettered. A negative, NaN or infinite delay raises InvalidSetting."""

    def __init__(self, delay: float | None = None) -> None:
        self.delay = None if delay is None else check_delay(delay)
        when = "by the group's ladder" if self.delay is None else f"after {self.delay:g}s"
        super().__init__(f"requested by the handler, {when}")

    def __reduce__(self) -> tuple[type[Retry], tuple[float | None]]:
        return type(self), (self.delay,)


class DeadLetter(Exception):
    """Raised by a handler: give up on this message now, whatever attempts are left; it
    goes to the dead letters with its reason as the error (`DeadLetter: <reason>`)."""

    def __init__(self, reason: str) -> None:
        self.reason = str(reason)
        super().__init__(self.reason)

    def __reduce__(self) -> tuple[type[DeadLetter], tuple[str]]:
        return type(self), (self.reason,)


def _text(exc: BaseException) -> str:
    """The exception's type and text; a text that cannot be made (a broken __str__) is
    said to be missing rather than failing the consumer."""
    try:
        return f"{type(exc).__name__}: {exc}"
    except Exception:
        return f"{type(exc).__name__}: <str() failed>"


class Verdict(NamedTuple):
    """How a handler's exception settles its message: its error text; the delay asked
    for (None: the ladder's); dead at once."""

    error: str
    delay: float | None = None
    dead: bool = False


def verdict(exc: BaseException) -> Verdict:
    """The failure a handler's exception stands for: a Retry's delay, a DeadLetter's
    reason and the dead letters, or any other exception's type and text (a retry by the
    ladder). The text names the exception type, so a requested outcome reads as one."""
    error = _text(exc)
    steered = isinstance(exc, Retry | DeadLetter)
    if steered and exc.__cause__ is not None:  # raise Retry(...) from exc: say what failed
        error += f" (after {_text(exc.__cause__)})"
    delay = exc.delay if isinstance(exc, Retry) else None
    return Verdict(error[:ERROR_CHARS], delay, dead=isinstance(exc, DeadLetter))
