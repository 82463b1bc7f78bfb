"""The scheduler lease and the job-run records it fences.

Same pattern as the group leader row (ems/store/leases.py): one conditional UPDATE takes a
free or expired row or renews the caller's own, the epoch grows on takeover only, and every
fenced write starts with an UPDATE that matches only while the caller holds the row at its
epoch. One row per name: "scheduler" for the active scheduler, "job:<name>" for the lock
each run of a job takes (scheduler and `ems cleanup run` alike).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pymysql.cursors import Cursor

from ems.store.database import Database
from ems.store.errors import NotScheduler
from ems.values.schedule import Hold, JobRunInfo, LeaseInfo

_US = 1_000_000
_CREATE = (
    "INSERT IGNORE INTO scheduler_lease (name, holder, epoch, lease_expires_at) "
    "VALUES (%s, NULL, 0, '1970-01-02')"
)
# The epoch is computed first, from the old holder and expiry (SET clauses apply in order).
_HOLD = (
    "UPDATE scheduler_lease SET "
    "epoch = IF(holder = %s AND lease_expires_at > NOW(6), epoch, epoch + 1), "
    "holder = %s, lease_expires_at = NOW(6) + INTERVAL %s MICROSECOND "
    "WHERE name = %s AND (holder = %s OR holder IS NULL OR lease_expires_at <= NOW(6))"
)
# A holder known to be gone (its process is no more) is replaced without waiting out its
# lease; the holder condition makes two takers race safely.
_TAKE_FROM = (
    "UPDATE scheduler_lease SET epoch = epoch + 1, holder = %s, "
    "lease_expires_at = NOW(6) + INTERVAL %s MICROSECOND WHERE name = %s AND holder = %s"
)
# A fence writes the row (fences + 1), so that the server's bound on idle write
# transactions ends a scheduler stalled inside a fenced one (see ems.store.leases._FENCE).
_FENCE = (
    "UPDATE scheduler_lease SET fences = fences + 1 "
    "WHERE name = %s AND holder = %s AND epoch = %s AND lease_expires_at > NOW(6)"
)
_RENEW_FENCED = (
    "UPDATE scheduler_lease SET lease_expires_at = NOW(6) + INTERVAL %s MICROSECOND "
    "WHERE name = %s AND holder = %s AND epoch = %s AND lease_expires_at > NOW(6)"
)
_RELEASE = (
    "UPDATE scheduler_lease SET lease_expires_at = NOW(6) "
    "WHERE name = %s AND holder = %s AND epoch = %s"
)
_LEASE = (
    "SELECT name, holder, epoch, lease_expires_at, "
    "TIMESTAMPDIFF(MICROSECOND, NOW(6), lease_expires_at) FROM scheduler_lease WHERE name = %s"
)
# Runs of the job still marked running when a new run holds the job lock: their runner is
# gone (killed, or fenced out), since nobody else can hold the lock.
_ABANDON = (
    "UPDATE job_run SET status = 'failed', finished_at = NOW(6), "
    "error = 'abandoned: its runner stopped without finishing' "
    "WHERE job = %s AND status = 'running'"
)
_START = "INSERT INTO job_run (job, runner, status) VALUES (%s, %s, 'running')"
_FINISH = (
    "UPDATE job_run SET status = %s, counts = %s, error = %s, finished_at = NOW(6) "
    "WHERE id = %s AND status = 'running'"
)
_RUN_COLUMNS = "id, job, runner, status, counts, error, started_at, finished_at"
_LAST_RUNS = (
    f"SELECT {_RUN_COLUMNS} FROM job_run WHERE id IN "
    "(SELECT MAX(id) FROM job_run WHERE job IN ({jobs}) GROUP BY job)"
)
_RUNS = f"SELECT {_RUN_COLUMNS} FROM job_run ORDER BY id DESC LIMIT %s"
_PRUNE = (
    "DELETE FROM job_run WHERE job = %s AND started_at < NOW(6) - INTERVAL %s SECOND "
    "AND status <> 'running' LIMIT %s"
)


_EPOCH = "SELECT epoch FROM scheduler_lease WHERE name = %s"


def _run(row: tuple[Any, ...]) -> JobRunInfo:
    counts = row[4]
    if isinstance(counts, str | bytes):
        counts = json.loads(counts)
    return JobRunInfo(
        id=int(row[0]),
        job=row[1],
        runner=row[2],
        status=row[3],
        counts=counts,
        error=row[5],
        started_at=row[6],
        finished_at=row[7],
    )


def last_runs_query(jobs: Sequence[str]) -> tuple[str, tuple[object, ...]]:
    return _LAST_RUNS.format(jobs=", ".join(["%s"] * len(jobs))), tuple(jobs)


class SchedulerStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def hold(self, name: str, holder: str, ttl: float) -> int | None:
        """Take or renew lease row `name`: the epoch held, or None while another holds it."""
        params = (holder, holder, int(ttl * _US), name, holder)
        with self.db.single() as cursor:
            if cursor.execute(_HOLD, params) == 1:
                return self._epoch(cursor, name)
            cursor.execute(_CREATE, (name,))
            if cursor.execute(_HOLD, params) == 1:
                return self._epoch(cursor, name)
        return None

    def take_from(self, name: str, gone: str, holder: str, ttl: float) -> int | None:
        """Take lease row `name` from `gone`, a holder whose process has stopped: the
        epoch held, or None when the row is no longer gone's (someone took it first)."""
        with self.db.single() as cursor:
            if cursor.execute(_TAKE_FROM, (holder, int(ttl * _US), name, gone)) == 1:
                return self._epoch(cursor, name)
        return None

    @staticmethod
    def _epoch(cursor: Cursor, name: str) -> int:
        cursor.execute(_EPOCH, (name,))
        return int(cursor.fetchone()[0])

    def check(self, hold: Hold, ttl: float | None = None) -> bool:
        """Whether `hold` is still held (and, given a ttl, renew it for that long)."""
        with self.db.single() as cursor:
            return _check(cursor, hold, ttl)

    def release(self, hold: Hold) -> None:
        """Give the row up at once so the next holder need not wait out the lease."""
        with self.db.single() as cursor:
            cursor.execute(_RELEASE, (hold.name, hold.holder, hold.epoch))

    def lease(self, name: str) -> LeaseInfo | None:
        rows = self.db.select(_LEASE, (name,))
        if not rows:
            return None
        r = rows[0]
        return LeaseInfo(
            name=r[0],
            holder=r[1],
            epoch=int(r[2]),
            lease_expires_at=r[3],
            expires_in=int(r[4]) / _US,
        )

    def start_run(self, job: str, runner: str, fences: Sequence[Hold]) -> int:
        """Record a run of `job` as running, in one transaction that first checks every
        fence (and holds their rows until commit): NotScheduler, nothing written, if one
        is no longer held. Older runs of the job still marked running are abandoned."""
        with self.db.transaction() as cursor:
            for hold in fences:
                fence(cursor, hold)
            cursor.execute(_ABANDON, (job,))
            cursor.execute(_START, (job, runner))
            return int(cursor.lastrowid)

    def finish_run(
        self, run_id: int, status: str, counts: Mapping[str, int] | None, error: str | None
    ) -> None:
        encoded = json.dumps(dict(counts)) if counts is not None else None
        with self.db.single() as cursor:
            cursor.execute(_FINISH, (status, encoded, error, run_id))

    def last_runs(self, jobs: Sequence[str]) -> dict[str, JobRunInfo]:
        """The newest run of each of these jobs that has one."""
        if not jobs:
            return {}
        rows = self.db.select(*last_runs_query(jobs))
        return {run.job: run for run in map(_run, rows)}

    def runs(self, limit: int = 100) -> list[JobRunInfo]:
        """The newest runs first."""
        return [_run(r) for r in self.db.select(_RUNS, (limit,))]

    def prune_runs(self, job: str, older_than: float, chunk: int) -> int:
        """Delete up to `chunk` finished runs of the job started more than older_than
        seconds ago; the rows deleted."""
        with self.db.single() as cursor:
            return int(cursor.execute(_PRUNE, (job, int(older_than), chunk)))


def fence(cursor: Cursor, hold: Hold) -> None:
    """Within the caller's transaction: hold lease row `hold` until it ends (nobody takes
    the row over meanwhile), or NotScheduler if it is no longer held at that epoch."""
    if not _check(cursor, hold, None):
        raise NotScheduler(f"{hold.holder} no longer holds {hold.name} at epoch {hold.epoch}")


def _check(cursor: Cursor, hold: Hold, ttl: float | None) -> bool:
    key = (hold.name, hold.holder, hold.epoch)
    if ttl is None:
        return bool(cursor.execute(_FENCE, key) == 1)
    return bool(cursor.execute(_RENEW_FENCED, (int(ttl * _US), *key)) == 1)
