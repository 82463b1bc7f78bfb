"""Pure transforms of the compaction job: archive layout, hourly summaries, delete chunks."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

#: The consumption-log columns archived, in order.
LOG_COLUMNS = (
    "id",
    "group_id",
    "topic_id",
    "partition_no",
    "offset_no",
    "client_id",
    "state",
    "attempts",
    "error",
    "started_at",
    "finished_at",
    "updated_at",
    "exactly_once",
)
#: BIGINT UNSIGNED arrives over JDBC as DECIMAL(20,0): a BigDecimal per value, and a
#: fixed-length binary in Parquet. Ids never approach 2^63, so they are read as BIGINT,
#: the type the archive stores (and every Parquet reader expects of an id). exactly_once
#: (a settlement made in the handler's transaction, TINYINT(1)) is read as BOOLEAN
#: whatever the driver makes of TINYINT(1) (tinyInt1isBit).
LOG_COLUMN_TYPES = "id BIGINT, group_id BIGINT, topic_id BIGINT, exactly_once BOOLEAN"
#: Columns whose values almost never repeat: dictionary encoding them in Parquet only
#: costs time (each file's dictionary fills up, then is dropped), so they are written plain.
LOG_UNIQUE_COLUMNS = ("id", "offset_no", "started_at", "finished_at", "updated_at")
#: The archive's partition columns, outermost first: date=YYYY-MM-DD/group_id=N.
ARCHIVE_PARTITIONS = ("date", "group_id")
SUMMARY_COLUMNS = (
    "group_id",
    "topic_id",
    "hour_start",
    "run_id",
    "done_count",
    "retried_count",
    "dead_count",
    "p50_ms",
    "p95_ms",
    "p99_ms",
    "max_attempts",
)
#: percentile_approx accuracy: relative rank error 1/10,000.
PERCENTILE_ACCURACY = 10_000


def finished_time() -> Column:
    """When a row reached its final state (updated_at for rows without finished_at)."""
    return F.coalesce(F.col("finished_at"), F.col("updated_at"))


def archive_frame(log: DataFrame) -> DataFrame:
    """The log rows as archived: every column, plus the `date` (UTC) partition column."""
    return log.select(*LOG_COLUMNS).withColumn("date", F.date_format(finished_time(), "yyyy-MM-dd"))


def processing_ms() -> Column:
    """finished_at - started_at in milliseconds (NULL while unfinished)."""
    micros = F.unix_micros(F.col("finished_at")) - F.unix_micros(F.col("started_at"))
    return micros / F.lit(1000.0)


def hourly_summaries(archived: DataFrame, run_id: int) -> DataFrame:
    """One row per (group, topic, hour of finishing): done / retried / dead counts,
    processing-time percentiles and the most attempts any row needed."""
    state = F.col("state")
    percentiles = F.percentile_approx(
        processing_ms(), [0.5, 0.95, 0.99], PERCENTILE_ACCURACY
    ).alias("p")
    summary = (
        archived.withColumn("hour_start", F.date_trunc("hour", finished_time()))
        .groupBy("group_id", "topic_id", "hour_start")
        .agg(
            F.count(F.when(state == "done", 1)).alias("done_count"),
            F.count(F.when(F.col("attempts") > 1, 1)).alias("retried_count"),
            F.count(F.when(state == "dead", 1)).alias("dead_count"),
            percentiles,
            F.max("attempts").alias("max_attempts"),
        )
    )
    return summary.select(
        F.col("group_id").cast("long"),
        F.col("topic_id").cast("long"),
        "hour_start",
        F.lit(run_id).cast("long").alias("run_id"),
        "done_count",
        "retried_count",
        "dead_count",
        F.col("p")[0].cast("double").alias("p50_ms"),
        F.col("p")[1].cast("double").alias("p95_ms"),
        F.col("p")[2].cast("double").alias("p99_ms"),
        F.col("max_attempts").cast("int"),
    )


def delete_chunks(ids: DataFrame, max_rows: int, *, with_ids: bool = False) -> DataFrame:
    """Split the archived ids into id ranges of at most `max_rows` ids each, as
    (low, high, rows), ordered by low, plus the sorted `ids` of each range if asked.
    Ranges follow the id space (id div max_rows), so no range can hold more than
    max_rows rows whatever the gaps between ids."""
    aggregates = [
        F.min("id").cast("long").alias("low"),
        F.max("id").cast("long").alias("high"),
        F.count("*").alias("rows"),
    ]
    if with_ids:
        aggregates.append(F.sort_array(F.collect_list(F.col("id").cast("long"))).alias("ids"))
    columns = ["low", "high", "rows", *(["ids"] if with_ids else [])]
    return (
        ids.groupBy(F.floor(F.col("id") / F.lit(max_rows)).alias("chunk"))
        .agg(*aggregates)
        .select(*columns)
        .orderBy("low")
    )
