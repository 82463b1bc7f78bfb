"""`ems scheduler`: the cleanup jobs on intervals, by one active scheduler across replicas.

Every replica runs APScheduler with the same interval jobs, and every few seconds tries to
take or renew the "scheduler" row of scheduler_lease (TTL ~15 s). Only the holder runs
jobs: a job fires everywhere, and the replicas that do not hold the lease skip it. Each
run is fenced by the lease (ems.maintenance.jobs.run_job): a scheduler that loses the lease starts
no run, and its running job stops at the next chunk boundary. A standby takes over once
the lease expires (kill -9) or at once when the holder releases it (SIGTERM).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from apscheduler.executors.pool import ThreadPoolExecutor  # type: ignore[import-untyped]
from apscheduler.schedulers.background import BackgroundScheduler  # type: ignore[import-untyped]

from ems.config import Settings
from ems.exceptions import EmsError, InvalidPolicy, JobAlreadyRunning, JobInterrupted
from ems.maintenance.jobs import JOBS, job, run_job
from ems.metrics import SCHEDULER_ACTIVE
from ems.store import Store
from ems.store.errors import NotScheduler
from ems.values.schedule import Hold

log = logging.getLogger(__name__)

LEASE_NAME = "scheduler"
#: Seconds between runs of each job (jobs not registered in this build are skipped).
DEFAULT_INTERVALS: Mapping[str, float] = {
    "purge-retention": 300.0,
    "delete-consumed": 60.0,
    "purge-log": 3600.0,
    "retry-due": 30.0,
    "reclaim-inflight": 60.0,
    "snapshots": 30.0,
    "time-index": 60.0,
    "alarms": 30.0,
    "relay-outbox": 10.0,
}


@dataclass(frozen=True, kw_only=True)
class SchedulerConfig:
    """Intervals in seconds per job name; the lease's TTL and renewal period."""

    intervals: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_INTERVALS))
    lease_ttl: float = 15.0
    renew_every: float = 3.0
    #: Jobs of different names may run side by side; one name never twice at once.
    workers: int = 2

    def checked(self) -> SchedulerConfig:
        """InvalidPolicy unless the lease outlives two renewals and intervals are positive."""
        if self.renew_every <= 0 or self.lease_ttl < 2 * self.renew_every:
            raise InvalidPolicy(
                f"the lease TTL ({self.lease_ttl}s) must be at least twice the renewal "
                f"period ({self.renew_every}s)"
            )
        for name, seconds in self.intervals.items():
            job(name)  # UnknownJob
            if seconds <= 0:
                raise InvalidPolicy(f"interval of {name} must be positive, not {seconds}")
        return self


def holder_id() -> str:
    """host:pid:random, unique per process."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Scheduler:
    def __init__(
        self,
        store: Store,
        settings: Settings,
        config: SchedulerConfig | None = None,
        holder: str | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.config = (config or SchedulerConfig()).checked()
        self.holder = holder or holder_id()
        self.stop = threading.Event()
        self._hold: Hold | None = None
        self._lock = threading.Lock()

    @property
    def hold(self) -> Hold | None:
        with self._lock:
            return self._hold

    def heartbeat(self) -> bool:
        """Take or renew the scheduler lease; whether this scheduler is active."""
        try:
            epoch = self.store.scheduler.hold(LEASE_NAME, self.holder, self.config.lease_ttl)
        except EmsError as exc:
            log.warning("scheduler lease not renewed: %s", exc)
            epoch = None
        hold = None if epoch is None else Hold(name=LEASE_NAME, holder=self.holder, epoch=epoch)
        with self._lock:
            before, self._hold = self._hold, hold
        if (before is None) != (hold is None) or (before and hold and before.epoch != hold.epoch):
            log.info(
                "scheduler %s: %s", self.holder, f"active at epoch {epoch}" if hold else "standby"
            )
        SCHEDULER_ACTIVE.set(1 if hold else 0)
        return hold is not None

    def run_job(self, name: str) -> bool:
        """Run one job if this scheduler is active; whether it ran to its end. Every
        outcome is logged, none raised (APScheduler's worker thread is no place for one)."""
        hold = self.hold
        if hold is None or self.stop.is_set():
            return False
        try:
            run_job(
                self.store,
                self.settings,
                name,
                holder=self.holder,
                runner=f"{self.holder}#{hold.epoch}",
                scheduler_hold=hold,
                stop=self.stop,
            )
            return True
        except (JobAlreadyRunning, NotScheduler, JobInterrupted) as exc:
            log.info("job %s not run to its end: %s", name, exc)
        except EmsError as exc:
            log.warning("job %s failed: %s", name, exc)
        except Exception:
            log.exception("job %s failed", name)
        return False

    def _jobs(self) -> list[tuple[str, float]]:
        return [(n, s) for n, s in self.config.intervals.items() if n in JOBS]

    def run_forever(self) -> None:
        """Renew the lease and run jobs until stop is set; then let the running jobs stop
        at their next chunk boundary and release the lease."""
        scheduler = BackgroundScheduler(
            executors={"default": ThreadPoolExecutor(self.config.workers)},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
            timezone=dt.UTC,
        )
        self.heartbeat()
        start = dt.datetime.now(dt.UTC)
        for name, seconds in self._jobs():
            scheduler.add_job(
                self.run_job, "interval", seconds=seconds, args=[name], id=name, next_run_time=start
            )
        scheduler.start()
        try:
            while not self.stop.wait(self.config.renew_every):
                self.heartbeat()
        finally:
            self.stop.set()
            scheduler.shutdown(wait=True)
            self.resign()

    def run_once(self) -> list[str]:
        """Take the lease, run every job once in order, release; the jobs that did not run
        to their end. NotScheduler if another scheduler holds the lease."""
        if not self.heartbeat():
            current = self.store.scheduler.lease(LEASE_NAME)
            who = current.holder if current is not None else "another scheduler"
            raise NotScheduler(f"{who} holds the scheduler lease")
        try:
            return [name for name, _ in self._jobs() if not self.run_job(name)]
        finally:
            self.resign()

    def resign(self) -> None:
        hold = self.hold
        if hold is not None:
            self.store.scheduler.release(hold)
        with self._lock:
            self._hold = None
        SCHEDULER_ACTIVE.set(0)
