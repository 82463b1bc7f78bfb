"""Compaction of the consumption log (topic_group_log).

Rows in a final state (done, dead) last updated before a cutoff are archived to Parquet
under <archive root>/date=YYYY-MM-DD/group_id=N/run_id=R/, summarized per (group, topic,
hour) into log_summary, then deleted from MySQL in id-range chunks of at most 10,000 rows.

Crash-safe and idempotent. A run records its cutoff, scope and id range before reading, and
each step commits with the run's new status: archived (Parquet committed and published;
only now may rows be deleted), summarized (summaries, computed from the archive while the
chunks are deleted, upserted), done (every chunk deleted; each chunk's DELETE commits with
its count). A rerun first finishes unfinished runs from their last completed step,
re-reading nothing it already archived; deletes only remove rows the archive holds. Rows in
start or retry are never read or touched.

    spark-submit --jars /usr/share/java/mariadb-java-client.jar \\
        spark/jobs/compact.py --older-than 7d --archive-root /var/lib/ems/archive

With --every (e.g. 1h) the job stays up and compacts at that interval in one Spark session,
so the JVM compiles the job's code once instead of on every run, as a cron-started job must.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import closing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if __name__ == "__main__" and not __package__:
    # spark-submit puts only this script's directory on sys.path; a checkout without an
    # installed ems[spark] still finds the spark package at the repository root.
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ems.config import Settings
from ems.exceptions import EmsError, InvalidCutoff, SparkJobFailed, UnknownGroup
from ems.store import Store
from ems.store.compaction import MAX_DELETE_ROWS, final_rows_predicate
from ems.types import CompactionRunInfo, GroupRef, IdRange
from spark.jobs import _runtime
from spark.options import parse_crash_point, parse_duration, parse_timestamp
from spark.preflight import check_environment

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

APP_NAME = "ems-compact"
#: Rows per JDBC read partition when --read-partitions is not given.
ROWS_PER_READ_PARTITION = 500_000
#: Parallel DELETE connections at most: MySQL, not Spark, does this work, and the store's
#: connection pool (5 + 10 overflow) also serves the compaction lock.
MAX_DELETE_WORKERS = 8
DEFAULT_ARCHIVE_ROOT = "var/archive"


@dataclass(frozen=True, kw_only=True)
class CompactRequest:
    """What to compact. Exactly one of cutoff / older_than."""

    archive_root: str = DEFAULT_ARCHIVE_ROOT
    cutoff: dt.datetime | None = None
    older_than: dt.timedelta | None = None
    groups: tuple[str, ...] = ()
    topic: str | None = None
    #: JDBC read partitions; None: from the id span and the cluster's parallelism.
    read_partitions: int | None = None
    fetchsize: int = 10_000
    #: Parallel DELETE connections; None: the cluster's default parallelism (at most 8).
    delete_workers: int | None = None
    #: Test hook: ('archive-write' | 'archive' | 'summaries' | 'delete', n).
    crash_after: tuple[str, int] | None = None


@dataclass(frozen=True, kw_only=True)
class Plan:
    """A checked request: the cutoff resolved against the database clock, groups by id."""

    cutoff: dt.datetime
    groups: tuple[GroupRef, ...]
    archive_root: str


@dataclass(frozen=True, kw_only=True)
class RunOutcome:
    run_id: int
    resumed_from: str | None
    archived: int
    summaries: int
    deleted: int
    timings: dict[str, float] = field(default_factory=dict)


def plan(store: Store, request: CompactRequest) -> Plan:
    """Validate against the database before Spark starts: unreachable database, unknown
    group and a cutoff in the future all fail here, with nothing read or deleted."""
    from spark.archive import normalize_root

    now = store.group_refs.now()
    if (request.cutoff is None) == (request.older_than is None):
        raise InvalidCutoff("give exactly one of a cutoff time and an age (--older-than)")
    if request.cutoff is not None:
        cutoff = request.cutoff
        if cutoff > now:
            raise InvalidCutoff(
                f"cutoff {cutoff.isoformat(sep=' ')} is in the future "
                f"(database time {now.isoformat(sep=' ', timespec='seconds')})"
            )
    else:
        assert request.older_than is not None
        # Rounded down to the hour: each hour is then summarized by a single run.
        cutoff = (now - request.older_than).replace(minute=0, second=0, microsecond=0)
    groups = scope(store, request.groups, request.topic)
    return Plan(
        cutoff=cutoff,
        groups=tuple(groups),
        archive_root=normalize_root(request.archive_root),
    )


def scope(store: Store, names: Sequence[str], topic: str | None) -> list[GroupRef]:
    """The groups a job is limited to: [] means every group."""
    if not names and topic is None:
        return []
    groups = store.group_refs.resolve(names, topic)
    if not groups:
        raise UnknownGroup(f"topic {topic!r} has no consumer groups")
    return groups


class Compactor:
    """The steps of a run, each resumable. Holds the session, store and archive."""

    def __init__(self, spark: SparkSession, settings: Settings, store: Store, root: str) -> None:
        from spark.archive import Archive
        from spark.jdbc import jdbc_target

        self.spark = spark
        self.store = store
        self.target = jdbc_target(settings.database_url)
        self.archive = Archive(spark, root)
        self.crash_after: tuple[str, int] | None = None
        self.read_partitions: int | None = None
        self.delete_workers: int | None = None
        self.fetchsize = 10_000

    def _checkpoint(self, step: str, count: int = 0) -> None:
        if self.crash_after == (step, count):
            _runtime.crash_now()

    # -- step 1: archive -------------------------------------------------------------

    def read_log(self, run: CompactionRunInfo) -> DataFrame:
        from spark.jdbc import RangeRead, read_ranges
        from spark.transforms.compaction import LOG_COLUMN_TYPES, LOG_COLUMNS

        assert run.min_id is not None and run.max_id is not None
        where = final_rows_predicate(run.cutoff, run.group_ids)
        # ENUM arrives as a padded CHAR over JDBC ('done '); TRIM makes it a plain string.
        columns = ", ".join("TRIM(state) AS state" if c == "state" else c for c in LOG_COLUMNS)
        query = (
            f"SELECT {columns} FROM topic_group_log "
            f"WHERE id BETWEEN {run.min_id} AND {run.max_id} AND {where}"
        )
        span = run.max_id - run.min_id + 1
        parallelism = self.spark.sparkContext.defaultParallelism
        partitions = self.read_partitions or max(
            parallelism, math.ceil(span / ROWS_PER_READ_PARTITION)
        )
        read = RangeRead(
            query=query,
            column="id",
            low=run.min_id,
            high=run.max_id,
            partitions=min(partitions, span),
            fetchsize=self.fetchsize,
            column_types=LOG_COLUMN_TYPES,
        )
        return read_ranges(self.spark, self.target, read)

    def archive_step(self, run: CompactionRunInfo) -> int:
        from spark.transforms.compaction import (
            ARCHIVE_PARTITIONS,
            LOG_UNIQUE_COLUMNS,
            archive_frame,
        )

        # Anything an interrupted attempt published is replaced, never added to.
        self.archive.unpublish(run.id)
        if run.min_id is not None:
            frame = archive_frame(self.read_log(run))
            self.archive.write(frame, run.id, ARCHIVE_PARTITIONS, plain=LOG_UNIQUE_COLUMNS)
            self._checkpoint("archive-write")
            self.archive.publish(run.id)
        archived = self.archive.read_run(run.id)
        rows = 0 if archived is None else archived.count()
        self._checkpoint("archive")
        self.store.compaction.mark_archived(run.id, rows)
        return rows

    # -- step 2: summaries ----------------------------------------------------------

    def summary_step(self, run: CompactionRunInfo) -> int:
        from spark.jdbc import append
        from spark.transforms.compaction import hourly_summaries

        self.store.compaction.clear_stage(run.id)
        archived = self.archive.read_run(run.id)
        if archived is not None:
            summaries = hourly_summaries(archived, run.id).coalesce(1)
            append(summaries, self.target, "log_summary_stage")
        self._checkpoint("summaries")
        return self.store.compaction.merge_summaries(run.id)

    # -- step 3: chunked delete -------------------------------------------------------

    def start_deletes(self, run: CompactionRunInfo, *, exact: bool) -> Deletes | None:
        """Start deleting the archived rows in chunks, `delete_workers` connections at a
        time, in the background. `exact`: by archived ids (a rerun, see finish)."""
        from spark.transforms.compaction import delete_chunks

        archived = self.archive.read_run(run.id)
        if archived is None:
            return None
        plan = delete_chunks(archived.select("id"), MAX_DELETE_ROWS, with_ids=exact)
        chunks = [
            (IdRange(low=r["low"], high=r["high"], rows=r["rows"]), r["ids"] if exact else None)
            for r in plan.collect()
        ]
        workers = self.delete_workers or self.spark.sparkContext.defaultParallelism
        return Deletes(self, run, archived, chunks, workers)

    def _delete(
        self, run: CompactionRunInfo, archived: DataFrame, chunk: IdRange, ids: list[int] | None
    ) -> int:
        from pyspark.sql import functions as F

        count = self.store.compaction.delete_chunk(run, chunk, ids)
        if count is None:
            # A row committed into this range after the archive was read: delete by the
            # archived ids instead, so only archived rows go.
            exact = archived.where(F.col("id").between(chunk.low, chunk.high)).select("id")
            count = self.store.compaction.delete_chunk(
                run, chunk, [r["id"] for r in exact.collect()]
            )
            assert count is not None
        return count

    # -- a whole run ---------------------------------------------------------------

    def finish(self, run: CompactionRunInfo, *, resumed: bool = False) -> RunOutcome:
        """Run the steps still to do, from the status the run row records."""
        import time

        timings: dict[str, float] = {}
        status = run.status
        if status == "started":
            start = time.perf_counter()
            self.archive_step(run)
            timings["archive"] = time.perf_counter() - start
            status = "archived"
        if status in ("archived", "summarized"):
            # Once the archive has committed, the rows may go: chunks are deleted in the
            # background while the summaries are computed (from the archive, not from MySQL).
            start = time.perf_counter()
            current = self.store.compaction.get(run.id)
            # Chunks an interrupted attempt deleted cannot be told from ranges a late row
            # moved into since: a rerun deletes by archived ids.
            deletes = self.start_deletes(current, exact=resumed and run.status != "started")
            try:
                if status == "archived":
                    self.summary_step(current)
                    timings["summaries"] = time.perf_counter() - start
            except BaseException:
                if deletes is not None:
                    deletes.cancel()
                raise
            if deletes is not None:
                deletes.wait()
            timings["delete"] = time.perf_counter() - start
            self.store.compaction.finish(run.id)
        final = self.store.compaction.get(run.id)
        return RunOutcome(
            run_id=run.id,
            resumed_from=run.status if resumed else None,
            archived=final.archived_rows,
            summaries=final.summary_rows,
            deleted=final.deleted_rows,
            timings=timings,
        )


class Deletes:
    """Delete chunks running on a thread pool; each chunk commits with its count."""

    def __init__(
        self,
        compactor: Compactor,
        run: CompactionRunInfo,
        archived: DataFrame,
        chunks: list[tuple[IdRange, list[int] | None]],
        workers: int,
    ) -> None:
        self.compactor = compactor
        self.run = run
        self.archived = archived
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.completed = 0
        size = max(1, min(workers, len(chunks), MAX_DELETE_WORKERS))
        self.pool = ThreadPoolExecutor(max_workers=size)
        self.futures = [self.pool.submit(self._one, chunk, ids) for chunk, ids in chunks]

    def _one(self, chunk: IdRange, ids: list[int] | None) -> int:
        if self.stopping.is_set():
            return 0
        count = self.compactor._delete(self.run, self.archived, chunk, ids)
        with self.lock:
            self.completed += 1
            completed = self.completed
        try:
            self.compactor._checkpoint("delete", completed)
        except BaseException:
            self.stopping.set()
            raise
        return count

    def wait(self) -> int:
        """The rows deleted, once every chunk is done (re-raises a chunk's error)."""
        try:
            deleted = sum(future.result() for future in as_completed(self.futures))
        except BaseException:
            self.cancel()
            raise
        self.pool.shutdown()
        return deleted

    def cancel(self) -> None:
        """Start no more chunks; wait for those running."""
        self.stopping.set()
        self.pool.shutdown(wait=True, cancel_futures=True)


def compact(
    spark: SparkSession, settings: Settings, store: Store, request: CompactRequest
) -> list[RunOutcome]:
    """Finish any interrupted run, then run the requested compaction. Holds the compaction
    lock throughout, so two invocations never interleave."""
    checked = plan(store, request)
    with store.compaction.lock(), _runtime.spark_errors():
        outcomes = []
        for unfinished in store.compaction.unfinished():
            worker = _compactor(spark, settings, store, unfinished.archive_root, request)
            outcomes.append(worker.finish(unfinished, resumed=True))
        run = store.compaction.start(
            checked.cutoff, [g.id for g in checked.groups], checked.archive_root
        )
        worker = _compactor(spark, settings, store, checked.archive_root, request)
        outcomes.append(worker.finish(run))
    return outcomes


def _compactor(
    spark: SparkSession, settings: Settings, store: Store, root: str, request: CompactRequest
) -> Compactor:
    worker = Compactor(spark, settings, store, root)
    worker.crash_after = request.crash_after
    worker.read_partitions = request.read_partitions
    worker.fetchsize = request.fetchsize
    worker.delete_workers = request.delete_workers
    return worker


def run(
    settings: Settings,
    request: CompactRequest,
    *,
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
) -> list[RunOutcome]:
    """Check everything, then start Spark and compact. The entry point of both the CLI
    and spark-submit."""
    with closing(Store(settings)) as store:
        check_environment(settings.jdbc_jar)
        plan(store, request)
        with _runtime.session(APP_NAME, settings, master=master, conf=conf) as spark:
            return compact(spark, settings, store, request)


def serve(
    settings: Settings,
    request: CompactRequest,
    every: dt.timedelta,
    *,
    stop: threading.Event,
    on_outcome: Callable[[RunOutcome], None],
    on_error: Callable[[EmsError], None],
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
) -> int:
    """Compact every `every` in one Spark session until `stop` is set; returns the runs
    completed. Each run recomputes its cutoff from --older-than. A run that fails (database
    unreachable, another run holding the lock) is reported to on_error and the next run
    still comes: an interrupted run is finished by the next, as under cron. A run that
    fails because the stop signal also reached Spark's JVM ends the loop quietly, and one
    whose JVM died otherwise ends it with SparkJobFailed."""
    if request.older_than is None:
        raise InvalidCutoff("compacting at an interval needs an age (--older-than), not a cutoff")
    with closing(Store(settings)) as store:
        check_environment(settings.jdbc_jar)
        plan(store, request)
        session = _runtime.session(APP_NAME, settings, master=master, conf=conf, shield_jvm=True)
        with session as spark:
            runs = 0
            while not stop.is_set():
                started = time.monotonic()
                try:
                    for outcome in compact(spark, settings, store, request):
                        on_outcome(outcome)
                except EmsError as exc:
                    if stop.is_set():
                        break
                    on_error(exc)
                    if not _runtime.alive(spark):
                        raise SparkJobFailed("Spark's JVM has gone; start the job again") from exc
                runs += 1
                stop.wait(pause_after(every, time.monotonic() - started))
            return runs


def serve_until_stopped(
    settings: Settings,
    request: CompactRequest,
    every: dt.timedelta,
    *,
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
    echo: Callable[[str], None] = lambda line: print(line, flush=True),
    echo_error: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
) -> int:
    """serve() until SIGTERM, printing each run's outcome and each failed run's error."""
    with _runtime.stop_on_sigterm() as stop:
        return serve(
            settings,
            request,
            every,
            stop=stop,
            on_outcome=lambda outcome: echo(describe(outcome)),
            on_error=lambda exc: echo_error(f"error: {exc}"),
            master=master,
            conf=conf,
        )


def pause_after(every: dt.timedelta, took: float) -> float:
    """Seconds to wait after a run that took `took` s: runs start `every` apart, and one
    that overran is followed at once by the next (never by a burst of missed ones)."""
    return max(0.0, every.total_seconds() - took)


def describe(outcome: RunOutcome) -> str:
    resumed = f" (resumed after {outcome.resumed_from})" if outcome.resumed_from else ""
    return (
        f"run {outcome.run_id}{resumed}: archived {outcome.archived} rows, "
        f"{outcome.summaries} summary rows, deleted {outcome.deleted} rows"
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="compact.py", description=__doc__.split("\n\n")[0])
    when = p.add_mutually_exclusive_group(required=True)
    when.add_argument("--older-than", help="age cutoff, e.g. 7d (rounded down to the hour)")
    when.add_argument("--cutoff", help="absolute cutoff, ISO 8601 (UTC when naive)")
    p.add_argument("--archive-root", default=DEFAULT_ARCHIVE_ROOT, help="Parquet archive root")
    p.add_argument("--group", action="append", default=[], help="only this group (repeatable)")
    p.add_argument("--topic", help="only groups of this topic")
    p.add_argument("--master", help="Spark master when not given to spark-submit")
    p.add_argument("--read-partitions", type=int, help="JDBC read partitions")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="Spark setting")
    p.add_argument("--fetchsize", type=int, default=10_000)
    p.add_argument("--delete-workers", type=int, help="parallel DELETE connections")
    p.add_argument("--every", help="stay up and compact at this interval, e.g. 1h")
    p.add_argument("--crash-after", help=argparse.SUPPRESS)
    return p


def request_from_args(args: argparse.Namespace) -> CompactRequest:
    return CompactRequest(
        archive_root=args.archive_root,
        cutoff=parse_timestamp(args.cutoff) if args.cutoff else None,
        older_than=parse_duration(args.older_than) if args.older_than else None,
        groups=tuple(args.group),
        topic=args.topic,
        read_partitions=args.read_partitions,
        fetchsize=args.fetchsize,
        delete_workers=args.delete_workers,
        crash_after=parse_crash_point(args.crash_after),
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if not args.every:
        return _runtime.main_for(
            args, run, request_from_args, lambda outcomes: map(describe, outcomes)
        )

    def forever(
        settings: Settings, request: CompactRequest, *, master: str | None, conf: Mapping[str, str]
    ) -> int:
        every = parse_duration(args.every)
        return serve_until_stopped(settings, request, every, master=master, conf=conf)

    return _runtime.main_for(
        args, forever, request_from_args, lambda runs: [f"stopped after {runs} runs"]
    )


if __name__ == "__main__":
    sys.exit(main())
