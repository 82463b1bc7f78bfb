"""The chunk boundary of a cleanup job: checkpoint() stops a run that must not go on."""

from __future__ import annotations

import threading
from contextvars import ContextVar
from dataclasses import dataclass, field

from ems.exceptions import JobInterrupted
from ems.store import Store
from ems.store.errors import NotScheduler
from ems.values.schedule import Hold

#: Seconds a run's job lock lasts without a checkpoint renewing it.
JOB_LOCK_TTL = 60.0


@dataclass(kw_only=True)
class RunControl:
    """What checkpoint() checks for the run in progress on this thread."""

    store: Store
    job_hold: Hold
    scheduler_hold: Hold | None = None
    stop: threading.Event = field(default_factory=threading.Event)
    ttl: float = JOB_LOCK_TTL

    def check(self) -> None:
        if self.stop.is_set():
            raise JobInterrupted("the scheduler is shutting down")
        if self.scheduler_hold is not None and not self.store.scheduler.check(self.scheduler_hold):
            raise NotScheduler(f"{self.scheduler_hold.holder} lost the scheduler lease")
        if not self.store.scheduler.check(self.job_hold, self.ttl):
            raise NotScheduler(f"{self.job_hold.holder} lost the lock of {self.job_hold.name}")


CONTROL: ContextVar[RunControl | None] = ContextVar("ems_job_control", default=None)


def checkpoint() -> None:
    """Between two chunks of a job: raise (JobInterrupted, NotScheduler) if the run must
    stop. Outside a run (a job called directly) it does nothing."""
    control = CONTROL.get()
    if control is not None:
        control.check()
