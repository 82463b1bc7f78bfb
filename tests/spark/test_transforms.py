"""The pure transforms on small DataFrames."""

from __future__ import annotations

import datetime as dt

from pyspark.sql import Row, SparkSession
from pyspark.testing import assertDataFrameEqual

from spark.transforms.compaction import archive_frame, delete_chunks, hourly_summaries
from spark.transforms.lag import lag_over_time, lag_report

T0 = dt.datetime(2026, 11, 20, 10, 0, 0)
LOG_SCHEMA = (
    "id long, group_id long, topic_id long, partition_no int, offset_no long, "
    "client_id string, state string, attempts int, error string, started_at timestamp, "
    "finished_at timestamp, updated_at timestamp, exactly_once boolean"
)
SNAPSHOT_SCHEMA = (
    "captured_at timestamp, group_id long, topic_id long, partition_no int, "
    "committed_offset long, high_watermark long, committed_at timestamp, "
    "oldest_unconsumed_at timestamp"
)


def log_row(
    i: int, state: str, attempts: int, start: dt.datetime, ms: int | None, group: int = 1
) -> tuple[object, ...]:
    finished = None if ms is None else start + dt.timedelta(milliseconds=ms)
    row = (i, group, 7, 0, i, "c", state, attempts, None, start, finished, finished or start)
    return (*row, i % 2 == 0)


def test_hourly_summaries(spark: SparkSession) -> None:
    late = T0 + dt.timedelta(minutes=59, seconds=59)
    rows = [
        log_row(1, "done", 1, T0, 10),
        log_row(2, "done", 3, T0, 30),
        log_row(3, "dead", 16, T0, 20),
        log_row(4, "done", 1, T0, 40),
        # Finishes in the next hour: bucketed by finishing time, not by start.
        log_row(5, "done", 2, late, 2000),
        log_row(6, "done", 1, T0, 5, group=2),
    ]
    frame = spark.createDataFrame(rows, LOG_SCHEMA)
    hour = T0
    next_hour = T0 + dt.timedelta(hours=1)
    expected = spark.createDataFrame(
        [
            (1, 7, hour, 9, 3, 2, 1, 20.0, 40.0, 40.0, 16),
            (1, 7, next_hour, 9, 1, 1, 0, 2000.0, 2000.0, 2000.0, 2),
            (2, 7, hour, 9, 1, 0, 0, 5.0, 5.0, 5.0, 1),
        ],
        "group_id long, topic_id long, hour_start timestamp, run_id long, done_count long, "
        "retried_count long, dead_count long, p50_ms double, p95_ms double, p99_ms double, "
        "max_attempts int",
    )
    assertDataFrameEqual(hourly_summaries(frame, 9), expected)


def test_archive_frame_adds_the_utc_date_and_keeps_the_exactly_once_mark(
    spark: SparkSession,
) -> None:
    before_midnight = dt.datetime(2026, 11, 19, 23, 59, 59, 999_000)
    frame = spark.createDataFrame(
        [log_row(1, "done", 1, before_midnight, 0), log_row(2, "done", 1, before_midnight, 1)],
        LOG_SCHEMA,
    )
    archived = archive_frame(frame).orderBy("id").collect()
    assert [(r["id"], r["date"], r["exactly_once"]) for r in archived] == [
        (1, "2026-11-19", False),
        (2, "2026-11-20", True),
    ]


def test_delete_chunks_never_exceed_the_bound(spark: SparkSession) -> None:
    ids = spark.createDataFrame([(i,) for i in (1, 2, 9999, 10000, 10001, 25000)], "id long")
    expected = spark.createDataFrame(
        [(1, 9999, 3), (10000, 10001, 2), (25000, 25000, 1)], "low long, high long, rows long"
    )
    assertDataFrameEqual(delete_chunks(ids, 10_000), expected, checkRowOrder=True)
    dense = spark.range(1, 25_001).toDF("id")
    chunks = delete_chunks(dense, 10_000).collect()
    assert max(c["rows"] for c in chunks) <= 10_000
    assert sum(c["rows"] for c in chunks) == 25_000


def snapshots(
    group: int, partition: int, points: list[tuple[int, int, int, int]]
) -> list[tuple[object, ...]]:
    """points: (minute, committed, high watermark, minute of the last commit)."""
    return [
        (
            T0 + dt.timedelta(minutes=m),
            group,
            7,
            partition,
            committed,
            high,
            T0 + dt.timedelta(minutes=at),
            T0 + dt.timedelta(minutes=m) - dt.timedelta(seconds=30) if high > committed else None,
        )
        for m, committed, high, at in points
    ]


def test_lag_report_statuses(spark: SparkSession) -> None:
    as_of = T0 + dt.timedelta(minutes=10)
    rows = (
        # caught up once in the window: OK although lag is back
        snapshots(1, 0, [(2, 10, 10, 2), (6, 20, 25, 6), (10, 30, 40, 10)])
        # offsets move, lag grows at every capture: WARN
        + snapshots(1, 1, [(2, 10, 20, 2), (6, 20, 35, 6), (10, 30, 50, 10)])
        # commits keep coming, offset stuck, lag > 0: STALL
        + snapshots(2, 0, [(2, 50, 60, 2), (6, 50, 61, 6), (10, 50, 62, 9)])
        # no commit for longer than the window: STOP
        + snapshots(2, 1, [(2, 70, 80, -20), (6, 70, 90, -20), (10, 70, 95, -20)])
        # lag shrinking while consuming: OK
        + snapshots(3, 0, [(2, 100, 200, 2), (6, 150, 220, 6), (10, 200, 230, 10)])
        # outside the window (before as_of - 10 min): ignored
        + snapshots(3, 0, [(-1, 0, 500, -1)])
    )
    frame = spark.createDataFrame(rows, SNAPSHOT_SCHEMA)
    report = lag_report(frame, as_of, 600)
    got = {
        (r["group_id"], r["partition_no"]): (r["status"], r["group_status"], r["lag"])
        for r in report.collect()
    }
    assert got == {
        (1, 0): ("OK", "WARN", 10),
        (1, 1): ("WARN", "WARN", 20),
        (2, 0): ("STALL", "ERR", 12),
        (2, 1): ("STOP", "ERR", 25),
        (3, 0): ("OK", "OK", 30),
    }
    shrinking = report.where("group_id = 3").first()
    assert shrinking is not None
    # 100 offsets committed and 30 produced over the 8 minutes between first and last capture.
    assert shrinking["consume_rate"] == 100 / 480
    assert shrinking["produce_rate"] == 30 / 480
    assert shrinking["snapshots"] == 3
    # The oldest unconsumed message was written 30 s before the last capture, at as_of.
    assert shrinking["lag_age_seconds"] == 30.0
    assert shrinking["last_captured_at"] == as_of


def test_fewer_than_two_snapshots_is_unknown_not_ok(spark: SparkSession) -> None:
    """One snapshot shows a lag, never whether it moves: the partition and its group are
    "unknown" (a group with 9,558 lag and no members read OK), unless that one snapshot
    already proves a STOP; a group with an unknown partition and an OK one is unknown."""
    as_of = T0 + dt.timedelta(minutes=10)
    rows = (
        # the case: one snapshot, a large lag, a commit within the window
        snapshots(1, 0, [(10, 100, 9_658, 9)])
        # one snapshot and caught up: still unknown (nothing says it keeps up)
        + snapshots(2, 0, [(10, 50, 50, 9)])
        # one snapshot with lag and no commit for longer than the window: STOP
        + snapshots(3, 0, [(10, 70, 95, -20)])
        # two snapshots, caught up: OK; its other partition has one snapshot: unknown
        + snapshots(4, 0, [(2, 10, 10, 2), (10, 20, 20, 10)])
        + snapshots(4, 1, [(10, 5, 8, 10)])
        # an earlier snapshot outside the window does not count
        + snapshots(5, 0, [(-1, 0, 500, -1), (10, 100, 600, 9)])
    )
    report = lag_report(spark.createDataFrame(rows, SNAPSHOT_SCHEMA), as_of, 600)
    got = {
        (r["group_id"], r["partition_no"]): (r["status"], r["group_status"], r["snapshots"])
        for r in report.collect()
    }
    assert got == {
        (1, 0): ("unknown", "unknown", 1),
        (2, 0): ("unknown", "unknown", 1),
        (3, 0): ("STOP", "ERR", 1),
        (4, 0): ("OK", "unknown", 2),
        (4, 1): ("unknown", "unknown", 1),
        (5, 0): ("unknown", "unknown", 1),
    }


def test_lag_over_time_sums_partitions(spark: SparkSession) -> None:
    rows = snapshots(1, 0, [(1, 5, 10, 1), (2, 6, 20, 2)]) + snapshots(
        1, 1, [(1, 0, 3, 1), (2, 3, 3, 2)]
    )
    expected = [
        Row(group_id=1, captured_at=T0 + dt.timedelta(minutes=1), lag=8),
        Row(group_id=1, captured_at=T0 + dt.timedelta(minutes=2), lag=14),
    ]
    assert lag_over_time(spark.createDataFrame(rows, SNAPSHOT_SCHEMA)).collect() == expected
