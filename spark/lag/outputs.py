"""What a lag report writes besides its table: the report as Parquet or CSV, and one PNG
chart of lag over time per group."""

from __future__ import annotations

import datetime as dt

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark.chart import write_lag_charts
from spark.lag.request import LagRequest
from spark.transforms.lag import lag_over_time


def write_output(
    spark: SparkSession, rows: DataFrame, names: dict[int, str], request: LagRequest
) -> str | None:
    """The report rows with each group's name, to the requested path; None if none."""
    if request.output is None:
        return None
    labels = spark.createDataFrame(
        [(gid, label) for gid, label in names.items()], "group_id long, group_label string"
    )
    named = rows.join(F.broadcast(labels), "group_id", "left").orderBy("group_id", "partition_no")
    writer = named.coalesce(1).write.mode("overwrite")
    if request.output_format == "csv":
        writer.option("header", "true").csv(request.output)
    else:
        writer.parquet(request.output)
    return request.output


def write_charts(snapshots: DataFrame, names: dict[int, str], chart_dir: str | None) -> list[str]:
    """One chart per group in `chart_dir`; the paths written ([] without a directory)."""
    if chart_dir is None:
        return []
    series: dict[str, list[tuple[dt.datetime, int]]] = {}
    # Aggregated first: one point per group and capture reaches the driver.
    for row in lag_over_time(snapshots).collect():
        label = names.get(row["group_id"], str(row["group_id"]))
        series.setdefault(label, []).append((row["captured_at"], row["lag"]))
    return write_lag_charts(series, chart_dir)
