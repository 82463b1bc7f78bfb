"""Pure transforms of the lag report: per-partition lag and a Burrow-style status over a
sliding window of offset snapshots, the group's status, and lag over time.

Partition status, evaluated over the snapshots of the window, first match wins:
  STOP   lag > 0 and the group has not committed this partition within the window
         (one snapshot proves it);
  unknown  the window holds fewer than two snapshots: one shows a lag, never whether it
         moves (a group with 9,558 messages of lag and no members is not OK);
  OK     the lag was zero in some snapshot of the window (the group caught up);
  STALL  lag > 0 and the committed offset did not move across the window (at least two
         snapshots) although the group still commits;
  WARN   the lag grew across the window and never shrank between two snapshots;
  OK     otherwise (the lag is shrinking or holding while the group consumes).
A group is ERR when any partition is STALL or STOP, WARN when any is WARN, unknown when
any is unknown, else OK.
"""

from __future__ import annotations

import datetime as dt

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

REPORT_COLUMNS = (
    "group_id",
    "topic_id",
    "partition_no",
    "high_watermark",
    "committed_offset",
    "lag",
    "lag_age_seconds",
    "consume_rate",
    "produce_rate",
    "snapshots",
    "status",
    "group_status",
    "last_captured_at",
)
UNKNOWN = "unknown"
_SEVERITY = {"OK": 0, UNKNOWN: 1, "WARN": 2, "STALL": 3, "STOP": 3}


def _ts(value: dt.datetime) -> Column:
    return F.lit(value.replace(tzinfo=None)).cast("timestamp")


def _seconds_between(later: Column, earlier: Column) -> Column:
    return (F.unix_micros(later) - F.unix_micros(earlier)) / F.lit(1e6)


def in_window(snapshots: DataFrame, as_of: dt.datetime, window_seconds: int) -> DataFrame:
    """The snapshots captured in (as_of - window, as_of]."""
    start = as_of - dt.timedelta(seconds=window_seconds)
    captured = F.col("captured_at")
    return snapshots.where((captured > _ts(start)) & (captured <= _ts(as_of)))


def with_lag(snapshots: DataFrame) -> DataFrame:
    """Adds lag = high watermark - committed offset (never negative)."""
    lag = F.greatest(F.col("high_watermark") - F.col("committed_offset"), F.lit(0))
    return snapshots.withColumn("lag", lag.cast("long"))


def partition_lag(snapshots: DataFrame, as_of: dt.datetime, window_seconds: int) -> DataFrame:
    """One row per (group, partition) with lag, lag age, rates and status (see module)."""
    key = ("group_id", "partition_no")
    ordered = Window.partitionBy(*key).orderBy("captured_at")
    points = with_lag(in_window(snapshots, as_of, window_seconds)).withColumn(
        "shrank", F.col("lag") < F.lag("lag").over(ordered)
    )
    fields = F.struct(
        "captured_at",
        "committed_offset",
        "high_watermark",
        "lag",
        "committed_at",
        "oldest_unconsumed_at",
    )
    agg = points.groupBy(*key, "topic_id").agg(
        F.count("*").alias("snapshots"),
        F.min_by(fields, "captured_at").alias("first"),
        F.max_by(fields, "captured_at").alias("last"),
        F.min("lag").alias("min_lag"),
        F.count(F.when(F.col("shrank"), 1)).alias("shrinks"),
    )
    return _measures(agg, as_of, window_seconds).select(
        *[c for c in REPORT_COLUMNS if c != "group_status"]
    )


def _measures(agg: DataFrame, as_of: dt.datetime, window_seconds: int) -> DataFrame:
    first, last = F.col("first"), F.col("last")
    span = _seconds_between(last["captured_at"], first["captured_at"])

    def rate(name: str) -> Column:
        return F.when(span > 0, (last[name] - first[name]) / span)

    lag = last["lag"]
    age = (
        F.when(lag == 0, F.lit(0.0))
        .when(
            last["oldest_unconsumed_at"].isNotNull(),
            F.greatest(_seconds_between(_ts(as_of), last["oldest_unconsumed_at"]), F.lit(0.0)),
        )
        .cast("double")
    )
    silent = _seconds_between(_ts(as_of), last["committed_at"]) > F.lit(float(window_seconds))
    several = F.col("snapshots") >= 2
    status = (
        F.when((lag > 0) & silent, "STOP")
        .when(~several, UNKNOWN)
        .when(F.col("min_lag") == 0, "OK")
        .when(silent, "STOP")
        .when(several & (last["committed_offset"] == first["committed_offset"]), "STALL")
        .when(several & (F.col("shrinks") == 0) & (lag > first["lag"]), "WARN")
        .otherwise("OK")
    )
    return agg.select(
        F.col("group_id").cast("long"),
        F.col("topic_id").cast("long"),
        F.col("partition_no").cast("int"),
        last["high_watermark"].cast("long").alias("high_watermark"),
        last["committed_offset"].cast("long").alias("committed_offset"),
        lag.cast("long").alias("lag"),
        age.alias("lag_age_seconds"),
        rate("committed_offset").cast("double").alias("consume_rate"),
        rate("high_watermark").cast("double").alias("produce_rate"),
        F.col("snapshots").cast("int"),
        status.alias("status"),
        last["captured_at"].alias("last_captured_at"),
    )


def with_group_status(report: DataFrame) -> DataFrame:
    """Adds group_status: ERR if any partition of the group is STALL or STOP, WARN if any
    is WARN, unknown if any is unknown, else OK."""
    severity = F.create_map(*[F.lit(x) for kv in _SEVERITY.items() for x in kv])
    worst = F.max(severity[F.col("status")]).over(Window.partitionBy("group_id"))
    group_status = (
        F.when(worst >= 3, "ERR").when(worst == 2, "WARN").when(worst == 1, UNKNOWN)
    ).otherwise("OK")
    return report.withColumn("group_status", group_status).select(*REPORT_COLUMNS)


def lag_report(snapshots: DataFrame, as_of: dt.datetime, window_seconds: int) -> DataFrame:
    """The whole report: partition_lag with the group status."""
    return with_group_status(partition_lag(snapshots, as_of, window_seconds))


def lag_over_time(snapshots: DataFrame) -> DataFrame:
    """Total lag of each group at each capture: (group_id, captured_at, lag)."""
    return (
        with_lag(snapshots)
        .groupBy("group_id", "captured_at")
        .agg(F.sum("lag").cast("long").alias("lag"))
        .orderBy("group_id", "captured_at")
    )
