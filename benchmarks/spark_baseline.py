"""The plain-Python baselines the Spark jobs are measured against: the same work done with
PyMySQL (streaming fetch) and pyarrow (Parquet write, hash aggregation), in one process."""

from __future__ import annotations

import datetime as dt
import itertools
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pymysql
import pymysql.cursors

from benchmarks.harness import mysql_connect
from ems.store.compaction import MAX_DELETE_ROWS, final_rows_predicate
from spark.transforms.compaction import LOG_COLUMNS

FETCH_BATCH = 10_000
ARROW_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("group_id", pa.int64()),
        ("topic_id", pa.int64()),
        ("partition_no", pa.int32()),
        ("offset_no", pa.int64()),
        ("client_id", pa.string()),
        ("state", pa.string()),
        ("attempts", pa.int32()),
        ("error", pa.string()),
        ("started_at", pa.timestamp("us")),
        ("finished_at", pa.timestamp("us")),
        ("updated_at", pa.timestamp("us")),
    ]
)


def fetch(url: str, cutoff: dt.datetime) -> pa.Table:
    """Stream the compactable rows with an unbuffered cursor into an Arrow table."""
    conn = mysql_connect(url)
    try:
        cursor = conn.cursor(pymysql.cursors.SSCursor)
        cursor.execute(
            f"SELECT {', '.join(LOG_COLUMNS)} FROM topic_group_log "
            f"WHERE {final_rows_predicate(cutoff, [])}"
        )
        batches = []
        while rows := cursor.fetchmany(FETCH_BATCH):
            columns = list(zip(*rows, strict=True))
            batches.append(pa.RecordBatch.from_arrays(list(columns), schema=ARROW_SCHEMA))
        cursor.close()
    finally:
        conn.close()
    return pa.Table.from_batches(batches, schema=ARROW_SCHEMA)


def write(table: pa.Table, root: Path) -> None:
    """Parquet partitioned by date and group, like the Spark archive."""
    finished = pc.coalesce(table["finished_at"], table["updated_at"])
    dated = table.append_column("date", pc.strftime(finished, format="%Y-%m-%d"))
    pads.write_dataset(
        dated,
        str(root),
        format="parquet",
        partitioning=["date", "group_id"],
        partitioning_flavor="hive",
        existing_data_behavior="overwrite_or_ignore",
        file_options=pads.ParquetFileFormat().make_write_options(compression="zstd"),
    )


def summarize(table: pa.Table) -> pa.Table:
    """Per (group, topic, hour): counts, processing-time percentiles (t-digest), max attempts."""
    finished = pc.coalesce(table["finished_at"], table["updated_at"])
    ms = pc.divide(
        pc.cast(pc.subtract(table["finished_at"], table["started_at"]), pa.int64()), 1000.0
    )
    work = pa.table(
        {
            "group_id": table["group_id"],
            "topic_id": table["topic_id"],
            "hour_start": pc.floor_temporal(finished, unit="hour"),
            "done": pc.cast(pc.equal(table["state"], "done"), pa.int64()),
            "dead": pc.cast(pc.equal(table["state"], "dead"), pa.int64()),
            "retried": pc.cast(pc.greater(table["attempts"], 1), pa.int64()),
            "ms": ms,
            "attempts": table["attempts"],
        }
    )
    return work.group_by(["group_id", "topic_id", "hour_start"]).aggregate(
        [
            ("done", "sum"),
            ("retried", "sum"),
            ("dead", "sum"),
            ("ms", "tdigest", pc.TDigestOptions(q=[0.5, 0.95, 0.99])),
            ("attempts", "max"),
        ]
    )


def delete(url: str, table: pa.Table, cutoff: dt.datetime) -> int:
    """The same id-range chunks of at most 10,000 rows, one autocommitted DELETE each."""
    ids = table["id"]
    chunk = pc.divide(ids, pa.scalar(MAX_DELETE_ROWS, pa.int64()))
    bounds = (
        pa.table({"chunk": chunk, "id": ids})
        .group_by("chunk")
        .aggregate([("id", "min"), ("id", "max")])
        .sort_by("id_min")
    )
    where = final_rows_predicate(cutoff, [])
    deleted = 0
    conn = mysql_connect(url)
    try:
        with conn.cursor() as cursor:
            for low, high in zip(
                bounds["id_min"].to_pylist(), bounds["id_max"].to_pylist(), strict=True
            ):
                deleted += cursor.execute(
                    f"DELETE FROM topic_group_log WHERE id BETWEEN %s AND %s AND {where}",
                    (low, high),
                )
    finally:
        conn.close()
    return deleted


def timed(fn: Any, *args: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    result = fn(*args)
    return result, time.perf_counter() - start


# -- lag report --------------------------------------------------------------------------


def lag_report(url: str, as_of: dt.datetime, window_seconds: int, report_id: int) -> int:
    """Fetch the window's snapshots, evaluate each partition in Python, insert the rows."""
    start = as_of - dt.timedelta(seconds=window_seconds)
    conn = mysql_connect(url)
    try:
        with conn.cursor() as cursor:
            cursor.execute(
                "SELECT group_id, topic_id, partition_no, captured_at, committed_offset, "
                "high_watermark, committed_at, oldest_unconsumed_at FROM offset_snapshot "
                "WHERE captured_at > %s AND captured_at <= %s ORDER BY captured_at",
                (start, as_of),
            )
            series: dict[tuple[int, int, int], list[tuple[Any, ...]]] = defaultdict(list)
            for row in cursor.fetchall():
                series[(row[0], row[1], row[2])].append(row[3:])
            rows = [
                _evaluate(key, points, as_of, window_seconds, report_id)
                for key, points in series.items()
            ]
            worst: dict[int, int] = defaultdict(int)
            for row in rows:
                worst[row[1]] = max(worst[row[1]], _SEVERITY[row[11]])
            rows = [(*r[:12], ("OK", "WARN", "ERR")[worst[r[1]]], r[12]) for r in rows]
            cursor.executemany(
                "INSERT INTO lag_report (report_id, group_id, topic_id, partition_no, "
                "high_watermark, committed_offset, lag, lag_age_seconds, consume_rate, "
                "produce_rate, snapshots, status, group_status, last_captured_at) VALUES "
                "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                rows,
            )
    finally:
        conn.close()
    return len(rows)


_SEVERITY = {"OK": 0, "WARN": 1, "STALL": 2, "STOP": 2}


def _evaluate(
    key: tuple[int, int, int],
    points: list[tuple[Any, ...]],
    as_of: dt.datetime,
    window_seconds: int,
    report_id: int,
) -> tuple[Any, ...]:
    lags = [max(high - committed, 0) for _, committed, high, _, _ in points]
    first, last = points[0], points[-1]
    span = (last[0] - first[0]).total_seconds()
    consume = (last[1] - first[1]) / span if span > 0 else None
    produce = (last[2] - first[2]) / span if span > 0 else None
    shrinks = sum(b < a for a, b in itertools.pairwise(lags))
    if min(lags) == 0:
        status = "OK"
    elif (as_of - last[3]).total_seconds() > window_seconds:
        status = "STOP"
    elif len(points) >= 2 and last[1] == first[1]:
        status = "STALL"
    elif len(points) >= 2 and shrinks == 0 and lags[-1] > lags[0]:
        status = "WARN"
    else:
        status = "OK"
    age = 0.0 if lags[-1] == 0 else (as_of - last[4]).total_seconds() if last[4] else None
    group_id, topic_id, partition = key
    return (
        report_id,
        group_id,
        topic_id,
        partition,
        last[2],
        last[1],
        lags[-1],
        age,
        consume,
        produce,
        len(points),
        status,
        last[0],
    )
