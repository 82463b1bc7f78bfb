"""The sign-in throttle's policy (pure): failed sign-ins are counted per scope (one
account, one client address) in a window that starts at the first failure; once a scope
has `limit` failures, sign-ins in it wait until its window ends, and the next failure
after that starts a new window.

The account limit stops guessing one password; the address limit, higher because many
people may share an address, stops one client from trying many accounts.
"""

from __future__ import annotations

import datetime as dt

#: Failures per account ("user:<name>") within the window.
ACCOUNT_LIMIT = 5
#: Failures per client address ("address:<ip>") within the window.
ADDRESS_LIMIT = 20
#: Seconds of the window, from the first failure.
WINDOW_SECONDS = 15 * 60.0


def throttle_seconds(
    failures: int, first_at: dt.datetime, now: dt.datetime, *, limit: int, window: float
) -> float:
    """0 when a sign-in is allowed, else the seconds until the window ends: `failures`
    since `first_at` have reached `limit` and the window has not ended at `now`. A
    first_at ahead of now (clocks that disagree) counts as now, so the wait never
    exceeds the window."""
    if failures < limit:
        return 0.0
    elapsed = max(0.0, (now - first_at).total_seconds())
    return max(0.0, window - elapsed)


def window_ended(first_at: dt.datetime, now: dt.datetime, window: float) -> bool:
    """Whether a window that started at first_at is over at now (the next failure then
    starts a new one)."""
    return (now - first_at).total_seconds() >= window
