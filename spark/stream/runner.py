"""One stream job: the query started, its windows written per micro-batch, and for
Trigger.AvailableNow its end awaited (CLI and spark-submit entry point).

Each micro-batch's windows go to MySQL in one upsert transaction and to Parquet under
batch_id=N/ (overwritten): a batch Spark runs again after a crash (the same offsets from
the checkpoint, so the same windows) leaves the same rows and files. Nothing imports
pyspark at module level (the preflight comes first).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping
from contextlib import closing
from typing import Any

from ems.config import Settings
from ems.store import Store
from ems.store.reading_windows import ReadingWindow
from spark import runtime
from spark.stream.request import StreamOutcome, StreamRequest, interval

log = logging.getLogger(__name__)
APP_NAME = "ems-stream"
#: Seconds between looks at whether a long-running query should stop (SIGTERM).
POLL = 1.0


def run(
    settings: Settings,
    request: StreamRequest,
    *,
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
) -> StreamOutcome:
    request.check()
    with closing(Store(settings)) as store:
        store.topics.get(request.topic)  # UnknownTopic before Spark starts
        with runtime.session(APP_NAME, settings, master=master, conf=conf) as spark:
            return _stream(spark, settings, store, request)


def _stream(spark: Any, settings: Settings, store: Store, request: StreamRequest) -> StreamOutcome:
    import spark.source as source
    from spark.stream.windows import project_windows

    source.register(spark)
    reader = (
        spark.readStream.format("ems")
        .option("subscribe", request.topic)
        .option("startingOffsets", "earliest")
        .option("ems.database.url", settings.database_url)
        .option("ems.query.name", request.query_name)
    )
    if request.max_offsets is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(request.max_offsets))
    windows = project_windows(reader.load(), interval(request.window), interval(request.watermark))
    counts = {"batches": 0, "windows": 0}

    def write(batch: Any, batch_id: int) -> None:
        found = write_batch(store, request.parquet, batch, batch_id)
        counts["batches"] += 1
        counts["windows"] += found

    writer = (
        windows.writeStream.outputMode("append")
        .foreachBatch(write)
        .option("checkpointLocation", request.checkpoint)
    )
    if request.available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=interval(request.trigger))
    with runtime.spark_errors():
        query = writer.start()
        _await(query, request.available_now)
    return StreamOutcome(batches=counts["batches"], windows=counts["windows"])


def _await(query: Any, available_now: bool) -> None:
    if available_now:
        query.awaitTermination()
        return
    with runtime.stop_on_sigterm() as stop:
        while not stop.is_set() and query.isActive:
            query.awaitTermination(POLL)
        if query.isActive:
            query.stop()
    if query.exception() is not None:
        query.awaitTermination()  # raises the query's failure


def write_batch(store: Store, parquet: str | None, batch: Any, batch_id: int) -> int:
    """One micro-batch's windows to MySQL and Parquet; how many."""
    rows = batch.collect()
    windows = [as_window(r) for r in rows]
    store.reading_windows.upsert(windows, batch_id)
    if parquet and windows:
        batch.write.mode("overwrite").parquet(f"{parquet.rstrip('/')}/batch_id={batch_id}")
    log.info("stream batch %d: %d windows", batch_id, len(windows))
    return len(windows)


def as_window(row: Any) -> ReadingWindow:
    return ReadingWindow(
        project_id=int(row["project_id"]),
        start=_utc(row["window_start"]),
        end=_utc(row["window_end"]),
        readings=int(row["readings"]),
        avg_temperature=float(row["avg_temperature"]),
        min_temperature=float(row["min_temperature"]),
        max_temperature=float(row["max_temperature"]),
    )


def _utc(value: dt.datetime) -> dt.datetime:
    """collect() gives local naive times; the table holds UTC."""
    if value.tzinfo is None:
        value = value.astimezone()
    return value.astimezone(dt.UTC).replace(tzinfo=None)


def describe(outcome: StreamOutcome) -> list[str]:
    return [f"{outcome.batches} micro-batches, {outcome.windows} windows written"]
