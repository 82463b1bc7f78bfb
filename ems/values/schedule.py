"""Scheduler values: a job lease held, a lease as the store shows it, one job run."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True, slots=True)
class Hold:
    """A lease row held at an epoch: what a fenced write is conditioned on."""

    name: str
    holder: str
    epoch: int


@dataclass(frozen=True, kw_only=True, slots=True)
class LeaseInfo:
    name: str
    holder: str | None
    epoch: int
    lease_expires_at: dt.datetime
    #: Seconds left on the lease (negative once expired), by the database clock.
    expires_in: float


@dataclass(frozen=True, kw_only=True, slots=True)
class JobRunInfo:
    id: int
    job: str
    runner: str
    status: str
    counts: dict[str, int] | None
    error: str | None
    started_at: dt.datetime
    finished_at: dt.datetime | None
