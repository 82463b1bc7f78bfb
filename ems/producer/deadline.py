"""A send's bound (EMS_SEND_TIMEOUT) as pure policy: which failures a send rides out, how
long it pauses before its next attempt, and when it gives up. Both producers loop on it,
one blocking and one awaiting; nothing here sleeps or reads a clock, so a fake clock
tests it whole."""

from __future__ import annotations

from ems.exceptions import (
    DatabaseUnavailable,
    EmsError,
    LockConflict,
    RedisUnavailable,
    SendTimeout,
    caused,
)

#: Failures that pass, so a send tries again until its deadline: Redis unreachable or
#: failing over (no master yet, a demoted master, an allocation's reply lost), a database
#: node lost or not ready (Galera's 1047), a server taking no writes (read_only,
#: DatabaseReadOnly), a deadlock or lock-wait timeout. Anything else (bad input, an unknown
#: topic, an error reply from Redis) is raised at once: trying again would not change it.
PASSING: tuple[type[EmsError], ...] = (RedisUnavailable, DatabaseUnavailable, LockConflict)

#: The pause after the first failure; it doubles per failure in a row, up to MAX_PAUSE:
#: a brief blip costs a tenth of a second, a failover of many seconds about one attempt
#: a second (each attempt is a connection or a statement: cheap for a recovering server).
FIRST_PAUSE = 0.1
MAX_PAUSE = 1.0


def backoff(failures: int) -> float:
    """The pause after `failures` failed attempts in a row (at least 1)."""
    return min(MAX_PAUSE, FIRST_PAUSE * 2.0 ** min(failures - 1, 32))


def pause(failures: int, now: float, deadline: float) -> float | None:
    """Seconds to wait before the next attempt, or None: give up. A pause never runs past
    the deadline, so the last attempt starts at it; once the deadline has passed no
    attempt starts. A send therefore gives up no earlier than its deadline, and later only
    by the attempt under way then."""
    left = deadline - now
    if not left > 0:
        return None
    return min(backoff(failures), left)


class Attempts:
    """The failed attempts of one send, or of one group of sends committed together
    (whose deadline is the earliest of theirs), against a deadline on the monotonic
    clock."""

    __slots__ = ("bound", "deadline", "failures")

    def __init__(self, deadline: float, bound: float) -> None:
        self.deadline = deadline
        #: EMS_SEND_TIMEOUT, for the error's message.
        self.bound = bound
        self.failures = 0

    def pause_after(self, error: EmsError, now: float) -> float:
        """The pause before the next attempt after `error` (one of PASSING); raises
        SendTimeout, whose cause is `error`, once the deadline has passed."""
        self.failures += 1
        wait = pause(self.failures, now, self.deadline)
        if wait is None:
            bound = f"EMS_SEND_TIMEOUT is {self.bound:g} s"
            message = f"{error} (the send gave up at its deadline: {bound})"
            raise caused(SendTimeout(message), error)
        return wait
