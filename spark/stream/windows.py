"""The stream job's transform: the demo's readings (JSON bodies: project_id, device, ts,
temperature) as per-project windows of their own time, with a watermark. Pure: a
DataFrame in, a DataFrame out."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

COLUMNS = (
    "project_id",
    "window_start",
    "window_end",
    "readings",
    "avg_temperature",
    "min_temperature",
    "max_temperature",
)


def readings(source: DataFrame) -> DataFrame:
    """The source's rows as (project_id, event_time, temperature); a body that is not a
    reading (no project, time or temperature) is dropped."""
    body = F.col("value").cast("string")
    parsed = source.select(
        F.get_json_object(body, "$.project_id").cast("long").alias("project_id"),
        F.to_timestamp(F.get_json_object(body, "$.ts")).alias("event_time"),
        F.get_json_object(body, "$.temperature").cast("double").alias("temperature"),
    )
    return parsed.dropna()


def project_windows(source: DataFrame, window: str, watermark: str) -> DataFrame:
    """Per project and tumbling window of `window` (Spark interval text) of the readings'
    own time: count, mean, min and max temperature. A window is emitted once the
    watermark (latest reading time seen, less `watermark`) passes its end, so in append
    mode every window is written once, final."""
    grouped = (
        readings(source)
        .withWatermark("event_time", watermark)
        .groupBy(F.window("event_time", window).alias("w"), "project_id")
        .agg(
            F.count("*").alias("readings"),
            F.avg("temperature").alias("avg_temperature"),
            F.min("temperature").alias("min_temperature"),
            F.max("temperature").alias("max_temperature"),
        )
    )
    return grouped.select(
        "project_id",
        F.col("w.start").alias("window_start"),
        F.col("w.end").alias("window_end"),
        "readings",
        "avg_temperature",
        "min_temperature",
        "max_temperature",
    )
