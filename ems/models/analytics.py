"""Tables of the Spark jobs: compaction runs and log summaries, offset snapshots, lag reports.

None of them is on the publish or consume path. Offset snapshots are written by a cheap
periodic capture; the rest only by the Spark jobs (and read by the admin console).
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import BigInteger, Double, Enum, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from ems.models.base import (
    TABLE_ARGS,
    Base,
    BigId,
    Timestamp,
    bigint_pk,
    created_ts,
    name_str,
    optional_ts,
    timestamp,
)

#: Steps of a compaction run, in order. A rerun resumes after the last one recorded.
COMPACTION_STATES = ("started", "archived", "summarized", "done")
#: "unknown": the window held fewer than two snapshots (see spark/transforms/lag.py).
LAG_STATUSES = ("OK", "WARN", "STALL", "STOP", "unknown")
GROUP_STATUSES = ("OK", "WARN", "ERR", "unknown")


class CompactionRun(Base):
    """One compaction of the consumption log. The id range, cutoff and group scope are fixed
    when the run starts, so a rerun after a crash works on exactly the same rows."""

    __tablename__ = "compaction_run"
    __table_args__ = (Index(None, "status"), TABLE_ARGS)

    id: Mapped[bigint_pk]
    status: Mapped[str] = mapped_column(
        Enum(*COMPACTION_STATES, name="compaction_status"),
        nullable=False,
        server_default="started",
    )
    #: Rows whose updated_at is older than this (UTC) are compacted.
    cutoff: Mapped[timestamp]
    #: Comma-separated consumer_group ids, or NULL for every group.
    group_ids: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: topic_group_log.id range read by this run (NULL bounds: nothing to compact).
    min_id: Mapped[int | None] = mapped_column(BigId, nullable=True)
    max_id: Mapped[int | None] = mapped_column(BigId, nullable=True)
    archive_root: Mapped[str] = mapped_column(String(1024), nullable=False)
    archived_rows: Mapped[int] = mapped_column(BigInteger, nullable=False, server_default="0")
    summary_rows: Mapped[int] = mapped_column(BigInteger, nullable=False, server_default="0")
    deleted_rows: Mapped[int] = mapped_column(BigInteger, nullable=False, server_default="0")
    #: Highest id-range end deleted so far (progress; each chunk commits with its DELETE).
    deleted_through_id: Mapped[int] = mapped_column(BigId, nullable=False, server_default="0")
    started_at: Mapped[created_ts]
    updated_at: Mapped[optional_ts]
    finished_at: Mapped[optional_ts]


class _SummaryColumns:
    """Per (group, topic, hour of finished_at) counts of one run's archived log rows."""

    group_id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=False)
    topic_id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=False)
    hour_start: Mapped[dt.datetime] = mapped_column(Timestamp, primary_key=True)
    run_id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=False)
    done_count: Mapped[int] = mapped_column(BigInteger, nullable=False)
    #: Rows that needed more than one attempt (done or dead).
    retried_count: Mapped[int] = mapped_column(BigInteger, nullable=False)
    dead_count: Mapped[int] = mapped_column(BigInteger, nullable=False)
    #: Processing time (finished_at - started_at) percentiles in milliseconds.
    p50_ms: Mapped[float | None] = mapped_column(Double, nullable=True)
    p95_ms: Mapped[float | None] = mapped_column(Double, nullable=True)
    p99_ms: Mapped[float | None] = mapped_column(Double, nullable=True)
    max_attempts: Mapped[int] = mapped_column(Integer, nullable=False)


class LogSummary(_SummaryColumns, Base):
    """Summaries kept after the rows are archived. Keyed by run as well: a rerun replaces its
    own rows, and a row that committed late into an already compacted hour adds a row of
    its own run instead of being counted twice or lost. Counts sum exactly across runs."""

    __tablename__ = "log_summary"
    __table_args__ = TABLE_ARGS


class LogSummaryStage(_SummaryColumns, Base):
    """Spark's JDBC writer only inserts: summaries land here, then one upsert moves them."""

    __tablename__ = "log_summary_stage"
    __table_args__ = TABLE_ARGS


class OffsetSnapshot(Base):
    """A periodic capture of a group's committed offset and the partition's high watermark."""

    __tablename__ = "offset_snapshot"
    __table_args__ = (
        UniqueConstraint("group_id", "partition_no", "captured_at"),
        Index(None, "captured_at"),
        TABLE_ARGS,
    )

    id: Mapped[bigint_pk]
    #: Database clock at capture; one value for every row of a capture.
    captured_at: Mapped[timestamp]
    group_id: Mapped[int] = mapped_column(BigId, nullable=False)
    topic_id: Mapped[int] = mapped_column(BigId, nullable=False)
    partition_no: Mapped[int] = mapped_column(Integer, nullable=False)
    #: The next offset the group will consume (group_offset.committed_offset).
    committed_offset: Mapped[int] = mapped_column(BigInteger, nullable=False)
    #: The next offset to be written: MAX(offset_no) + 1, 0 for an empty partition.
    high_watermark: Mapped[int] = mapped_column(BigInteger, nullable=False)
    #: When the group last committed this partition (group_offset.updated_at).
    committed_at: Mapped[timestamp]
    #: created_at of the message at the committed offset: the oldest unconsumed one.
    oldest_unconsumed_at: Mapped[dt.datetime | None] = mapped_column(Timestamp, nullable=True)


class LagReportRun(Base):
    """One lag report; the console reads the rows of the newest run whose status is done."""

    __tablename__ = "lag_report_run"
    __table_args__ = (Index(None, "status", "id"), TABLE_ARGS)

    id: Mapped[bigint_pk]
    status: Mapped[str] = mapped_column(
        Enum("running", "done", name="lag_report_status"), nullable=False
    )
    #: The report describes the snapshots in (as_of - window_seconds, as_of].
    as_of: Mapped[timestamp]
    window_seconds: Mapped[int] = mapped_column(Integer, nullable=False)
    partitions: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    created_at: Mapped[created_ts]
    finished_at: Mapped[optional_ts]


class LagReport(Base):
    """Lag of one group on one partition, as evaluated by one report run."""

    __tablename__ = "lag_report"
    __table_args__ = (Index(None, "group_id", "report_id"), TABLE_ARGS)

    report_id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=False)
    group_id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=False)
    partition_no: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    topic_id: Mapped[int] = mapped_column(BigId, nullable=False)
    high_watermark: Mapped[int] = mapped_column(BigInteger, nullable=False)
    committed_offset: Mapped[int] = mapped_column(BigInteger, nullable=False)
    lag: Mapped[int] = mapped_column(BigInteger, nullable=False)
    #: Seconds since the oldest unconsumed message was written (0 without lag).
    lag_age_seconds: Mapped[float | None] = mapped_column(Double, nullable=True)
    #: Committed offsets per second over the window.
    consume_rate: Mapped[float | None] = mapped_column(Double, nullable=True)
    #: High-watermark growth per second over the window.
    produce_rate: Mapped[float | None] = mapped_column(Double, nullable=True)
    snapshots: Mapped[int] = mapped_column(Integer, nullable=False)
    status: Mapped[str] = mapped_column(Enum(*LAG_STATUSES, name="lag_status"), nullable=False)
    group_status: Mapped[str] = mapped_column(
        Enum(*GROUP_STATUSES, name="group_lag_status"), nullable=False
    )
    last_captured_at: Mapped[timestamp]


class ReadingWindow(Base):
    """The stream job's per-project windows of the demo's readings (`ems spark stream`):
    one row per project and window, upserted by each micro-batch that emits it (a batch
    Spark runs again writes the same values)."""

    __tablename__ = "reading_window"
    __table_args__ = (Index(None, "window_start"), TABLE_ARGS)

    project_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    window_start: Mapped[dt.datetime] = mapped_column(
        Timestamp, primary_key=True, autoincrement=False
    )
    window_end: Mapped[timestamp]
    readings: Mapped[int] = mapped_column(BigInteger, nullable=False)
    avg_temperature: Mapped[float] = mapped_column(Double, nullable=False)
    min_temperature: Mapped[float] = mapped_column(Double, nullable=False)
    max_temperature: Mapped[float] = mapped_column(Double, nullable=False)
    #: The micro-batch that wrote the row last.
    batch_id: Mapped[int] = mapped_column(BigInteger, nullable=False)
    updated_at: Mapped[created_ts]


class StreamQueryPosition(Base):
    """Where a Structured Streaming query over ems topics stands, per partition: the next
    offset it reads, written by the ems source when Spark commits a micro-batch, for the
    queries named by the source's ems.query.name option. Spark's checkpoint, not this
    table, is where a query restarts from; the row is what operators see (`ems spark
    queries`), as a consumer group's committed cursor."""

    __tablename__ = "stream_query_position"
    __table_args__ = (TABLE_ARGS,)

    query_name: Mapped[name_str] = mapped_column(primary_key=True)
    topic_id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=False)
    partition_no: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    committed_offset: Mapped[int] = mapped_column(BigInteger, nullable=False)
    committed_at: Mapped[created_ts]
    #: Offsets retention purged before the query read them, which it skipped
    #: (failOnDataLoss=false), summed over its committed micro-batches.
    skipped_offsets: Mapped[int] = mapped_column(BigInteger, nullable=False, server_default="0")
