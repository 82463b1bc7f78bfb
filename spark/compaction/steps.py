"""The steps of one compaction run, each resumable: archive (Parquet committed and
published), summaries (computed from the archive), chunked deletes (beside the summaries).
Each step commits with the run row's new status, so a rerun starts where a crash left off.
"""

from __future__ import annotations

import math
import time
from functools import partial

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ems.config import Settings
from ems.store import Store
from ems.store.compaction import MAX_DELETE_ROWS, archive_query
from ems.types import CompactionRunInfo, IdRange
from spark import runtime
from spark.archive import Archive
from spark.compaction.deletes import Deletes
from spark.compaction.request import CompactRequest, RunOutcome
from spark.jdbc import RangeRead, append, jdbc_target, read_ranges
from spark.transforms.compaction import (
    ARCHIVE_PARTITIONS,
    LOG_COLUMN_TYPES,
    LOG_COLUMNS,
    LOG_UNIQUE_COLUMNS,
    archive_frame,
    delete_chunks,
    hourly_summaries,
)

#: Rows per JDBC read partition when --read-partitions is not given.
ROWS_PER_READ_PARTITION = 500_000


class Compactor:
    """The steps of a run, each resumable. Holds the session, store and archive."""

    def __init__(self, spark: SparkSession, settings: Settings, store: Store, root: str) -> None:
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
            runtime.crash_now()

    # -- step 1: archive -------------------------------------------------------------

    def read_log(self, run: CompactionRunInfo) -> DataFrame:
        assert run.min_id is not None and run.max_id is not None
        span = run.max_id - run.min_id + 1
        parallelism = self.spark.sparkContext.defaultParallelism
        partitions = self.read_partitions or max(
            parallelism, math.ceil(span / ROWS_PER_READ_PARTITION)
        )
        read = RangeRead(
            query=archive_query(run, LOG_COLUMNS),
            column="id",
            low=run.min_id,
            high=run.max_id,
            partitions=min(partitions, span),
            fetchsize=self.fetchsize,
            column_types=LOG_COLUMN_TYPES,
        )
        return read_ranges(self.spark, self.target, read)

    def archive_step(self, run: CompactionRunInfo) -> int:
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
        archived = self.archive.read_run(run.id)
        if archived is None:
            return None
        ranges = delete_chunks(archived.select("id"), MAX_DELETE_ROWS, with_ids=exact)
        chunks = [
            (IdRange(low=r["low"], high=r["high"], rows=r["rows"]), r["ids"] if exact else None)
            for r in ranges.collect()
        ]
        workers = self.delete_workers or self.spark.sparkContext.defaultParallelism
        delete = partial(self._delete, run, archived)
        return Deletes(delete, partial(self._checkpoint, "delete"), chunks, workers)

    def _delete(
        self, run: CompactionRunInfo, archived: DataFrame, chunk: IdRange, ids: list[int] | None
    ) -> int:
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
        timings: dict[str, float] = {}
        status = run.status
        if status == "started":
            start = time.perf_counter()
            self.archive_step(run)
            timings["archive"] = time.perf_counter() - start
            status = "archived"
        if status in ("archived", "summarized"):
            # Chunks an interrupted attempt deleted cannot be told from ranges a late row
            # moved into since: a rerun deletes by archived ids.
            exact = resumed and run.status != "started"
            summarize = status == "archived"
            timings.update(self._summaries_and_deletes(run.id, summarize=summarize, exact=exact))
        return self._outcome(run, resumed, timings)

    def _summaries_and_deletes(
        self, run_id: int, *, summarize: bool, exact: bool
    ) -> dict[str, float]:
        """Once the archive has committed, the rows may go: chunks are deleted in the
        background while the summaries are computed (from the archive, not from MySQL)."""
        timings: dict[str, float] = {}
        start = time.perf_counter()
        current = self.store.compaction.get(run_id)
        deletes = self.start_deletes(current, exact=exact)
        try:
            if summarize:
                self.summary_step(current)
                timings["summaries"] = time.perf_counter() - start
        except BaseException:
            if deletes is not None:
                deletes.cancel()
            raise
        if deletes is not None:
            deletes.wait()
        timings["delete"] = time.perf_counter() - start
        self.store.compaction.finish(run_id)
        return timings

    def _outcome(
        self, run: CompactionRunInfo, resumed: bool, timings: dict[str, float]
    ) -> RunOutcome:
        final = self.store.compaction.get(run.id)
        return RunOutcome(
            run_id=run.id,
            resumed_from=run.status if resumed else None,
            archived=final.archived_rows,
            summaries=final.summary_rows,
            deleted=final.deleted_rows,
            timings=timings,
        )


def compactor_for(
    spark: SparkSession, settings: Settings, store: Store, root: str, request: CompactRequest
) -> Compactor:
    """A Compactor for one run under `root`, tuned as the request asks."""
    worker = Compactor(spark, settings, store, root)
    worker.crash_after = request.crash_after
    worker.read_partitions = request.read_partitions
    worker.fetchsize = request.fetchsize
    worker.delete_workers = request.delete_workers
    return worker
