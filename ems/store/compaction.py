"""Statements of the compaction job: its run row, the archive read, the summary upsert,
chunked deletes.

Each step of a run commits together with the run row's new status, so a rerun after a
crash at any point knows exactly which steps are done.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

from pymysql.cursors import Cursor

from ems.exceptions import EmsError, JobAlreadyRunning, StoreError
from ems.store.database import Database
from ems.store.lease_holders import gone_from_this_host, holder_name, renewing
from ems.store.scheduler import SchedulerStore
from ems.types import CompactionRunInfo, IdRange
from ems.values.schedule import Hold

#: The final states; rows in start or retry are never touched.
FINAL_STATES = ("done", "dead")
#: Upper bound on the rows one DELETE removes, so the live queue keeps flowing.
MAX_DELETE_ROWS = 10_000
#: The compaction lease's row in scheduler_lease, and its time to live in seconds.
LEASE = "compaction"
LEASE_TTL = 30.0

_RUN_COLUMNS = (
    "id, status, cutoff, group_ids, min_id, max_id, archive_root, archived_rows, "
    "summary_rows, deleted_rows, deleted_through_id"
)
_SUMMARY_COLUMNS = (
    "group_id, topic_id, hour_start, run_id, done_count, retried_count, dead_count, "
    "p50_ms, p95_ms, p99_ms, max_attempts"
)
_SUMMARY_UPDATES = ", ".join(
    f"{c} = VALUES({c})"
    for c in (
        "done_count",
        "retried_count",
        "dead_count",
        "p50_ms",
        "p95_ms",
        "p99_ms",
        "max_attempts",
    )
)

_FIELDS = tuple(c.strip() for c in _RUN_COLUMNS.split(","))
_UNFINISHED = f"SELECT {_RUN_COLUMNS} FROM compaction_run WHERE status <> 'done' ORDER BY id"
_GET = f"SELECT {_RUN_COLUMNS} FROM compaction_run WHERE id = %s"
_LOG_SPAN = "SELECT MIN(id), MAX(id) FROM topic_group_log"
_START = (
    "INSERT INTO compaction_run (cutoff, group_ids, min_id, max_id, archive_root, updated_at) "
    "VALUES (%s, %s, %s, %s, %s, NOW(6))"
)
_STATUS = "UPDATE compaction_run SET status = %s, updated_at = NOW(6){sets}{finished} WHERE id = %s"
_FINISHED = ", finished_at = NOW(6)"
_CLEAR_STAGE = "DELETE FROM log_summary_stage WHERE run_id = %s"
_MERGE = (
    f"INSERT INTO log_summary ({_SUMMARY_COLUMNS}) "
    f"SELECT {_SUMMARY_COLUMNS} FROM log_summary_stage WHERE run_id = %s "
    f"ON DUPLICATE KEY UPDATE {_SUMMARY_UPDATES}"
)
_SUMMARY_COUNT = "SELECT COUNT(*) FROM log_summary WHERE run_id = %s"
_DELETE_RANGE = "DELETE FROM topic_group_log WHERE id BETWEEN %s AND %s AND {where}"
_DELETE_IDS = "DELETE FROM topic_group_log WHERE id IN ({ids}) AND {where}"
_COUNT_DELETED = (
    "UPDATE compaction_run SET deleted_through_id = GREATEST(deleted_through_id, %s), "
    "deleted_rows = deleted_rows + %s, updated_at = NOW(6) WHERE id = %s"
)
_ARCHIVE = "SELECT {selected} FROM topic_group_log WHERE id BETWEEN {low} AND {high} AND {where}"


def final_rows_predicate(cutoff: dt.datetime, group_ids: Sequence[int]) -> str:
    """SQL condition selecting the rows a run compacts (also re-checked by every DELETE,
    so a row that left its final state since it was archived stays in place)."""
    states = ", ".join(f"'{s}'" for s in FINAL_STATES)
    where = f"state IN ({states}) AND updated_at < '{cutoff.isoformat(sep=' ')}'"
    if group_ids:
        where += f" AND group_id IN ({', '.join(str(int(g)) for g in group_ids)})"
    return where


def archive_query(run: CompactionRunInfo, columns: Sequence[str]) -> str:
    """The SELECT a run archives: `columns` of the rows in its id range that
    final_rows_predicate selects. Spark's JDBC source runs it in ranges of id and takes no
    bind parameters, so the ids (from the run row) are formatted in as integers."""
    if run.min_id is None or run.max_id is None:
        raise ValueError(f"compaction run {run.id} has no rows to read")
    where = final_rows_predicate(run.cutoff, run.group_ids)
    # ENUM arrives as a padded CHAR over JDBC ('done '); TRIM makes it a plain string.
    selected = ", ".join("TRIM(state) AS state" if c == "state" else c for c in columns)
    return _ARCHIVE.format(
        selected=selected, low=int(run.min_id), high=int(run.max_id), where=where
    )


def status_statement(
    run_id: int, status: str, counts: dict[str, int]
) -> tuple[str, tuple[object, ...]]:
    """The run row's new status, with counts (column: value) and, when done, its end."""
    sets = "".join(f", {name} = %s" for name in counts)
    finished = _FINISHED if status == "done" else ""
    sql = _STATUS.format(sets=sets, finished=finished)
    return sql, (status, *counts.values(), run_id)


def delete_statement(
    run: CompactionRunInfo, chunk: IdRange, exact_ids: Sequence[int] | None
) -> tuple[str, tuple[object, ...]]:
    """The DELETE of a chunk's archived rows: its id range, or exactly `exact_ids`."""
    where = final_rows_predicate(run.cutoff, run.group_ids)
    if exact_ids is None:
        return _DELETE_RANGE.format(where=where), (chunk.low, chunk.high)
    ids = ", ".join(str(int(i)) for i in exact_ids)
    return _DELETE_IDS.format(ids=ids, where=where), ()


def _run(row: Sequence[Any]) -> CompactionRunInfo:
    values = dict(zip(_FIELDS, row, strict=True))
    raw = values.pop("group_ids")
    groups = tuple(int(g) for g in raw.split(",")) if raw else ()
    return CompactionRunInfo(group_ids=groups, **values)


class CompactionStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    @contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the compaction lease for the block: one run at a time per database, on
        every node of a cluster. A lease row, not a named lock: MySQL's named locks hold
        on one Galera node only. A thread renews it every LEASE_TTL / 3 seconds; a run
        killed on this host is recognised by its pid and its lease taken at once, one
        killed elsewhere is waited out (at most LEASE_TTL)."""
        leases = SchedulerStore(self.db)
        holder = holder_name()
        epoch = leases.hold(LEASE, holder, LEASE_TTL)
        if epoch is None:
            current = leases.lease(LEASE)
            if current is not None and current.holder and gone_from_this_host(current.holder):
                epoch = leases.take_from(LEASE, current.holder, holder, LEASE_TTL)
        if epoch is None:
            raise JobAlreadyRunning("another compaction run holds the compaction lease")
        hold = Hold(name=LEASE, holder=holder, epoch=epoch)
        try:
            with renewing(lambda: leases.check(hold, LEASE_TTL), LEASE_TTL / 3, "compaction lease"):
                yield
        finally:
            with suppress(EmsError):
                leases.release(hold)

    def unfinished(self) -> list[CompactionRunInfo]:
        return [_run(r) for r in self.db.select(_UNFINISHED, ())]

    def get(self, run_id: int) -> CompactionRunInfo:
        rows = self.db.select(_GET, (run_id,))
        if not rows:
            raise StoreError(f"no compaction run {run_id}")
        return _run(rows[0])

    def start(
        self, cutoff: dt.datetime, group_ids: Sequence[int], archive_root: str
    ) -> CompactionRunInfo:
        """Record a new run with the id range it will read: rows inserted after this
        moment are left for the next run."""
        with self.db.transaction() as cursor:
            cursor.execute(_LOG_SPAN)
            ((low, high),) = cursor.fetchall()
            groups = ",".join(str(g) for g in group_ids) or None
            cursor.execute(_START, (cutoff, groups, low, high, archive_root))
            run_id = int(cursor.lastrowid)
        return self.get(run_id)

    def _status(self, cursor: Cursor, run_id: int, status: str, **counts: int) -> None:
        cursor.execute(*status_statement(run_id, status, counts))

    def mark_archived(self, run_id: int, rows: int) -> None:
        with self.db.single() as cursor:
            self._status(cursor, run_id, "archived", archived_rows=rows)

    def clear_stage(self, run_id: int) -> None:
        """Drop what an interrupted attempt left in the staging table."""
        with self.db.single() as cursor:
            cursor.execute(_CLEAR_STAGE, (run_id,))

    def merge_summaries(self, run_id: int) -> int:
        """Upsert the run's staged summaries and mark the run summarized, in one
        transaction. A rerun of the same run replaces its rows, so nothing counts twice."""
        with self.db.transaction() as cursor:
            cursor.execute(_MERGE, (run_id,))
            cursor.execute(_CLEAR_STAGE, (run_id,))
            cursor.execute(_SUMMARY_COUNT, (run_id,))
            ((count,),) = cursor.fetchall()
            self._status(cursor, run_id, "summarized", summary_rows=int(count))
        return int(count)

    def delete_chunk(
        self, run: CompactionRunInfo, chunk: IdRange, exact_ids: Sequence[int] | None = None
    ) -> int | None:
        """Delete the archived rows of one id range and count them in the run, atomically
        (chunks may run in parallel, each on its own connection).

        Returns the rows deleted, or None (and deletes nothing) when the range holds more
        matching rows than were archived: a row that committed after the archive was read.
        The caller then passes `exact_ids`, the archived ids of the range; so does a rerun,
        which cannot tell a chunk it deleted before from one a late row moved into."""
        if chunk.rows > MAX_DELETE_ROWS:
            raise ValueError(f"a delete chunk holds at most {MAX_DELETE_ROWS} rows")
        with self.db.transaction() as cursor:
            deleted = int(cursor.execute(*delete_statement(run, chunk, exact_ids)))
            if exact_ids is None and deleted > chunk.rows:
                cursor.connection.rollback()  # the block then commits nothing
                return None
            cursor.execute(_COUNT_DELETED, (chunk.high, deleted, run.id))
        return int(deleted)

    def finish(self, run_id: int) -> None:
        with self.db.single() as cursor:
            self._status(cursor, run_id, "done")
