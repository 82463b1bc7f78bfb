"""The ems source for Spark: `spark.readStream.format("ems")` and `spark.read.format("ems")`.

    import spark.source
    spark.source.register(session)
    df = session.readStream.format("ems").option("subscribe", "iot.readings").load()

Rows have Kafka's shape (key, value, topic, partition, offset, timestamp, timestampType,
headers with includeHeaders); options take Kafka's names (options.py). Offsets are
planned on the driver (planner.py) and read by the executors (read.py), one task per
partition range; docs/spark.md has the whole story.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

FORMAT = "ems"


def register(spark: SparkSession) -> None:
    """Make format("ems") known to this session (once per session; again is harmless)."""
    from spark.source.datasource import EmsDataSource

    spark.dataSource.register(EmsDataSource)


def offsets_behind(source: Any) -> dict[str, float]:
    """Kafka's avgOffsetsBehindLatest, maxOffsetsBehindLatest and minOffsetsBehindLatest
    of one entry of a query's progress (query.lastProgress.sources[i])."""
    from spark.source.lag import offsets_behind as compute

    return compute(source)


__all__ = ["FORMAT", "offsets_behind", "register"]
