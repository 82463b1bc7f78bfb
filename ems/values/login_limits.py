"""The sign-in throttle's policy (pure). Failed sign-ins are counted in two scopes:

- one client address and one account ("pair:..."): after FREE_FAILURES the next attempt
  waits, BASE_DELAY seconds and then twice as long after each further failure, up to
  MAX_DELAY. It never locks: once the wait has passed, one more attempt is checked. A
  quiet MAX_DELAY since the last failure forgets the count.
- one client address across accounts ("address:..."): ADDRESS_LIMIT failures in a window
  of WINDOW_SECONDS from the first, then that address waits until the window ends. It
  bounds the rate of one client spraying many accounts.

Nothing is counted per account alone, so failures from one address never keep the
account's owner out from another address. An attempt is counted when it is admitted,
before its password is checked (and forgiven when the password is right): the check and
the count are one step, so parallel guesses get no more checks than the limits allow.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

#: Failures of one (address, account) pair before its attempts wait.
FREE_FAILURES = 3
#: Seconds of the first wait; each further failure doubles it.
BASE_DELAY = 1.0
#: Longest wait of a pair, and the quiet time after which its count is forgotten.
MAX_DELAY = 15 * 60.0
#: Failures per client address, across accounts, within the window.
ADDRESS_LIMIT = 20
#: Seconds of an address's window, from its first failure.
WINDOW_SECONDS = 15 * 60.0
#: Kept for the counters' housekeeping: a counter untouched this long throttles nobody.
FORGET_SECONDS = max(MAX_DELAY, WINDOW_SECONDS)


@dataclass(frozen=True, kw_only=True, slots=True)
class LoginLimits:
    """The throttle's numbers (the defaults above; tests use smaller ones)."""

    free_failures: int = FREE_FAILURES
    base_delay: float = BASE_DELAY
    max_delay: float = MAX_DELAY
    address_limit: int = ADDRESS_LIMIT
    window: float = WINDOW_SECONDS


@dataclass(frozen=True, kw_only=True, slots=True)
class Counter:
    """Failures of one scope: how many, when the first and the last were."""

    failures: int
    first_at: dt.datetime
    last_at: dt.datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class Admission:
    """wait > 0: the attempt is refused for that many seconds and nothing changes;
    otherwise the attempt is admitted and the counters become `counted`."""

    wait: float
    counted: dict[str, Counter]


def backoff_delay(failures: int, limits: LoginLimits) -> float:
    """Seconds a pair waits after its last failure, given how many it has had."""
    if failures < limits.free_failures:
        return 0.0
    doublings = min(failures - limits.free_failures, 64)
    return float(min(limits.max_delay, limits.base_delay * 2.0**doublings))


def pair_wait(counter: Counter, now: dt.datetime, limits: LoginLimits) -> float:
    """Seconds until the pair's next attempt may be checked (0: now). A last failure
    ahead of now (clocks that disagree) counts as now, so the wait is never longer than
    the back-off."""
    elapsed = max(0.0, (now - counter.last_at).total_seconds())
    return max(0.0, backoff_delay(counter.failures, limits) - elapsed)


def address_wait(counter: Counter, now: dt.datetime, limits: LoginLimits) -> float:
    """Seconds until the address's window ends when it has reached its limit, else 0."""
    if counter.failures < limits.address_limit:
        return 0.0
    elapsed = max(0.0, (now - counter.first_at).total_seconds())
    return max(0.0, limits.window - elapsed)


def _one_more(counter: Counter, now: dt.datetime, *, fresh: bool) -> Counter:
    if fresh or counter.failures == 0:
        return Counter(failures=1, first_at=now, last_at=now)
    return Counter(failures=counter.failures + 1, first_at=counter.first_at, last_at=now)


def admit(counters: dict[str, Counter], now: dt.datetime, limits: LoginLimits) -> Admission:
    """Whether an attempt with these counters ("pair:..." and "address:..." scopes) may be
    checked now, and the counters with it counted as a failure."""
    waits = [
        pair_wait(c, now, limits) if scope.startswith("pair:") else address_wait(c, now, limits)
        for scope, c in counters.items()
    ]
    wait = max(waits, default=0.0)
    if wait > 0:
        return Admission(wait=wait, counted={})
    counted = {
        scope: _one_more(c, now, fresh=_ended(scope, c, now, limits))
        for scope, c in counters.items()
    }
    return Admission(wait=0.0, counted=counted)


def _ended(scope: str, counter: Counter, now: dt.datetime, limits: LoginLimits) -> bool:
    """Whether the scope's count starts again: a pair quiet for max_delay, an address
    whose window is over."""
    if scope.startswith("pair:"):
        return (now - counter.last_at).total_seconds() >= limits.max_delay
    return (now - counter.first_at).total_seconds() >= limits.window
