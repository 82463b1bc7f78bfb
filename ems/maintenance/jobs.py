"""The cleanup job registry and the one way a job runs: under its job lock, fenced, recorded.

A job is a function (store, settings) -> counts. It is idempotent, works in bounded
chunks and calls checkpoint() between them: that renews the run's job lock and, for a
scheduler run, checks that the scheduler still holds the scheduler lease, so a run whose
scheduler was deposed (or is shutting down) stops at the next chunk boundary.

Every run, from the scheduler or from `ems cleanup run` (system cron), first takes the
lease row "job:<name>" in scheduler_lease: two runs of one job never overlap, whoever
started them. A run that finds the lock held is refused with JobAlreadyRunning.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial

from ems.alarms.scan import scan_alarms
from ems.config import Settings
from ems.exceptions import ConflictingOptions, EmsError, JobAlreadyRunning, UnknownJob
from ems.maintenance.checkpoint import CONTROL, JOB_LOCK_TTL, RunControl
from ems.maintenance.housekeeping import (
    purge_log,
    reclaim_inflight,
    relay_outbox,
    retry_due,
    snapshots,
    time_index,
)
from ems.maintenance.purge import delete_consumed, purge_retention
from ems.metrics import JOB_RUNS, JOB_SECONDS
from ems.store import Store
from ems.values.schedule import Hold

log = logging.getLogger(__name__)

JobFn = Callable[[Store, Settings], Mapping[str, int]]

#: Name -> job. Each is idempotent and returns what it did as counts.
JOBS: dict[str, JobFn] = {
    "purge-retention": purge_retention,
    "delete-consumed": delete_consumed,
    "purge-log": purge_log,
    "retry-due": retry_due,
    "reclaim-inflight": reclaim_inflight,
    "snapshots": snapshots,
    "time-index": time_index,
    "alarms": scan_alarms,
    "relay-outbox": relay_outbox,
}
#: Jobs that can count what they would delete without deleting (`--dry-run`).
DRY_RUNS: dict[str, JobFn] = {
    "purge-retention": partial(purge_retention, dry_run=True),
    "delete-consumed": partial(delete_consumed, dry_run=True),
}
#: Jobs that delete or move rows: `ems cleanup run` asks before running them.
DESTRUCTIVE = frozenset({"purge-retention", "delete-consumed", "purge-log", "reclaim-inflight"})


def job(name: str) -> JobFn:
    """The job called `name`; UnknownJob if there is none."""
    found = JOBS.get(name)
    if found is None:
        raise UnknownJob(f"unknown job {name!r}; jobs: {', '.join(JOBS)}")
    return found


@dataclass(frozen=True, kw_only=True, slots=True)
class JobResult:
    job: str
    run_id: int
    counts: dict[str, int]
    seconds: float


def dry_run(store: Store, settings: Settings, name: str) -> dict[str, int]:
    """What job `name` would delete, counted the way it would delete it (no lock taken,
    no run recorded). ConflictingOptions for a job without a dry run."""
    job(name)
    fn = DRY_RUNS.get(name)
    if fn is None:
        raise ConflictingOptions(
            f"--dry-run is available for {' and '.join(DRY_RUNS)}, not for {name}"
        )
    return dict(fn(store, settings))


def run_job(
    store: Store,
    settings: Settings,
    name: str,
    *,
    holder: str,
    runner: str | None = None,
    scheduler_hold: Hold | None = None,
    stop: threading.Event | None = None,
    ttl: float = JOB_LOCK_TTL,
) -> JobResult:
    """Run job `name` once under its job lock (and the scheduler lease, if given),
    recording it in job_run. JobAlreadyRunning if another run holds the lock; NotScheduler
    if the scheduler lease is lost before or during the run; the job's own error if it
    failed (the run is recorded as failed either way)."""
    fn = job(name)
    lock = f"job:{name}"
    epoch = store.scheduler.hold(lock, holder, ttl)
    if epoch is None:
        current = store.scheduler.lease(lock)
        who = current.holder if current is not None else "another runner"
        raise JobAlreadyRunning(f"job {name} is running ({who} holds {lock})")
    control = RunControl(
        store=store,
        job_hold=Hold(name=lock, holder=holder, epoch=epoch),
        scheduler_hold=scheduler_hold,
        stop=stop or threading.Event(),
        ttl=ttl,
    )
    try:
        fences = [h for h in (scheduler_hold, control.job_hold) if h is not None]
        run_id = store.scheduler.start_run(name, runner or holder, fences)
        return _execute(store, settings, name, fn, run_id, control)
    finally:
        store.scheduler.release(control.job_hold)


def _execute(
    store: Store, settings: Settings, name: str, fn: JobFn, run_id: int, control: RunControl
) -> JobResult:
    started = time.monotonic()
    token = CONTROL.set(control)
    try:
        counts = dict(fn(store, settings))
    except EmsError as exc:
        _record(store, name, run_id, "failed", None, str(exc), started)
        raise
    except Exception as exc:
        _record(store, name, run_id, "failed", None, f"{type(exc).__name__}: {exc}", started)
        raise
    finally:
        CONTROL.reset(token)
    seconds = _record(store, name, run_id, "done", counts, None, started)
    log.info("job %s done in %.2fs: %s", name, seconds, counts)
    return JobResult(job=name, run_id=run_id, counts=counts, seconds=seconds)


def _record(
    store: Store,
    name: str,
    run_id: int,
    status: str,
    counts: Mapping[str, int] | None,
    error: str | None,
    started: float,
) -> float:
    seconds = time.monotonic() - started
    JOB_RUNS.labels(job=name, status=status).inc()
    JOB_SECONDS.labels(job=name).observe(seconds)
    if error is not None:
        log.warning("job %s failed after %.2fs: %s", name, seconds, error)
    store.scheduler.finish_run(run_id, status, counts, error)
    return seconds
