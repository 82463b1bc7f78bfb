"""The spark-stream suite: the ems Structured Streaming source and sink (docs/spark.md).

- source: a backlog over 16 partitions read by `readStream.format("ems")` into Spark's
  no-op sink (Trigger.AvailableNow, local[2]), twice (the first run of a new JVM, then a
  second from a fresh checkpoint), beside one SDK Consumer (poll + ack) draining the same
  backlog in its own group, on the same machine;
- sink: as many generated rows written by `df.write.format("ems")` (local[2]) beside the
  Producer.send_batch calls (1,000 rows each, one process) that published the backlog;
- latency: messages paced at --spark-stream-rate per second for 20 s, each carrying its
  send time, read by a query with a 1 s processing-time trigger; a foreachBatch on the
  driver takes the time each row reaches it.

The backlog is --spark-stream-messages (default 1,000,000; the suite takes about 5
minutes on a 2-core host).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from statistics import quantiles
from typing import TYPE_CHECKING, Any

from benchmarks.consumer import drop_databases
from benchmarks.harness import BenchConfig, BenchError, on_database
from ems import Consumer, Producer, Record, TopicAdmin
from ems.config import DEFAULT_JDBC_JAR, Settings
from ems.store import migrate

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

RESULTS = Path(__file__).resolve().parent / "results" / "spark-stream-latest.md"
DATABASE = "ems_bench_spark_stream"
BACKLOG, SINK, PACED = "bench.stream", "bench.stream.sink", "bench.stream.paced"
PARTITIONS = 16
BATCH = 1_000
VALUE = b"x" * 100
PACED_SECONDS = 20.0
MASTER = "local[2]"
SEND_BATCH = "Producer.send_batch (1 process)"
SDK_DRAIN = "SDK Consumer poll + ack (1 member)"
SOURCE = f"ems source -> noop, {MASTER}"
SINK_WRITE = f"ems sink (df.write), {MASTER}"


def log(message: str) -> None:
    print(f"[bench spark-stream] {message}", file=sys.stderr, flush=True)


@dataclass(kw_only=True)
class Results:
    messages: int
    #: name -> (rows, seconds)
    rates: dict[str, tuple[int, float]] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)
    batch_ms: list[int] = field(default_factory=list)
    paced_rate: float = 0.0
    notes: list[str] = field(default_factory=list)

    def rate(self, name: str) -> float:
        rows, seconds = self.rates[name]
        return rows / seconds


def prepare(cfg: BenchConfig) -> Settings:
    drop_databases(cfg, DATABASE)
    migrate.create_database(cfg.settings)
    migrate.upgrade(cfg.settings)
    with TopicAdmin(cfg.settings) as admin:
        for name in (BACKLOG, SINK, PACED):
            admin.create(name, partitions=PARTITIONS)
    return cfg.settings


def publish_backlog(settings: Settings, count: int, results: Results) -> None:
    """The backlog, by Producer.send_batch of BATCH rows: the sink's baseline."""
    records = [Record(VALUE, key=f"p{i % 50}") for i in range(BATCH)]
    started = time.perf_counter()
    with Producer(settings) as producer:
        for first in range(0, count, BATCH):
            producer.send_batch(BACKLOG, records[: min(BATCH, count - first)])
    results.rates[SEND_BATCH] = (count, time.perf_counter() - started)
    log(f"published {count:,}: {results.rate(SEND_BATCH):,.0f} msg/s")


def sdk_drain(settings: Settings, count: int, results: Results) -> None:
    consumer = Consumer("bench-stream-drain", BACKLOG, settings=settings, start="earliest")
    handled, started = 0, time.perf_counter()
    try:
        while handled < count:
            batch = consumer.poll(timeout=1.0)
            consumer.ack(batch)
            handled += len(batch)
        seconds = time.perf_counter() - started
    finally:
        consumer.close()
    results.rates[SDK_DRAIN] = (handled, seconds)
    log(f"SDK consumer drained {handled:,} in {seconds:.1f} s")


@contextmanager
def session() -> Iterator[SparkSession]:
    import spark.source
    from spark.session import get_session

    started = time.perf_counter()
    spark_session = get_session(
        "ems-bench-stream",
        DEFAULT_JDBC_JAR,
        master=MASTER,
        conf={
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "2",
        },
    )
    spark_session.sparkContext.setLogLevel("ERROR")
    spark.source.register(spark_session)
    log(f"{MASTER}: session started in {time.perf_counter() - started:.1f} s")
    try:
        yield spark_session
    finally:
        spark_session.stop()


def source_drain(spark: SparkSession, settings: Settings, checkpoint: Path) -> tuple[int, float]:
    """(rows, seconds) of one Trigger.AvailableNow query over the backlog into noop."""
    started = time.perf_counter()
    query = (
        spark.readStream.format("ems")
        .option("subscribe", BACKLOG)
        .option("startingOffsets", "earliest")
        .option("ems.database.url", settings.database_url)
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    seconds = time.perf_counter() - started
    return sum(p.numInputRows for p in query.recentProgress), seconds


def sink_write(spark: SparkSession, settings: Settings, count: int) -> float:
    from pyspark.sql import functions as F

    rows = spark.range(count, numPartitions=4).select(
        F.concat(F.lit("p"), (F.col("id") % 50).cast("string")).alias("key"),
        F.lit(VALUE).alias("value"),
    )
    rows.cache().count()  # generated before the clock starts
    started = time.perf_counter()
    (
        rows.write.format("ems")
        .mode("append")
        .option("topic", SINK)
        .option("ems.database.url", settings.database_url)
        .option("ems.redis.url", settings.redis_url)
        .save()
    )
    return time.perf_counter() - started


def paced(settings: Settings, rate: float, seconds: float, stop: threading.Event) -> int:
    """Messages carrying their send time, `rate` per second in ticks of 10 ms."""
    sent, started = 0, time.time()
    with Producer(settings) as producer:
        while not stop.is_set() and time.time() - started < seconds:
            due = int((time.time() - started) * rate)
            if due > sent:
                now = f"{time.time():.6f}".encode()
                producer.send_batch(PACED, [Record(now) for _ in range(due - sent)])
                sent = due
            time.sleep(0.01)
    return sent


def latency(spark: SparkSession, settings: Settings, rate: float, tmp: Path, out: Results) -> None:
    seen: list[float] = []

    def batch(df: Any, batch_id: int) -> None:
        values = [bytes(r.value) for r in df.select("value").collect()]
        now = time.time()
        seen.extend(now - float(v) for v in values)

    query = (
        spark.readStream.format("ems")
        .option("subscribe", PACED)
        .option("startingOffsets", "latest")
        .option("ems.database.url", settings.database_url)
        .load()
        .writeStream.foreachBatch(batch)
        .option("checkpointLocation", str(tmp / "paced"))
        .trigger(processingTime="1 second")
        .start()
    )
    try:
        _wait(lambda: bool(query.recentProgress), 120, "the paced query's first batch")
        stop = threading.Event()
        started = time.time()
        sent = paced(settings, rate, PACED_SECONDS, stop)
        out.paced_rate = sent / (time.time() - started)
        _wait(lambda: len(seen) >= sent, 60, f"{sent:,} paced messages")
        out.latencies = seen
        out.batch_ms = [
            int(p.durationMs.get("triggerExecution", 0))
            for p in query.recentProgress
            if p.numInputRows > 0
        ]
    finally:
        query.stop()
    log(f"paced {sent:,} at {out.paced_rate:,.0f}/s: {len(out.batch_ms)} batches")


def _wait(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise BenchError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.1)


def measure(settings: Settings, count: int, rate: float, results: Results, tmp: Path) -> None:
    publish_backlog(settings, count, results)
    sdk_drain(settings, count, results)
    with session() as spark:
        for n, label in enumerate(("first query of its JVM", "second query"), start=1):
            rows, seconds = source_drain(spark, settings, tmp / f"source-{n}")
            if rows != count:
                raise BenchError(f"the source read {rows:,} of {count:,}")
            results.rates[f"{SOURCE}, {label}"] = (rows, seconds)
            log(f"source ({label}): {rows:,} in {seconds:.1f} s")
        seconds = sink_write(spark, settings, count)
        results.rates[SINK_WRITE] = (count, seconds)
        log(f"sink: {count:,} in {seconds:.1f} s")
        latency(spark, settings, rate, tmp, results)


def render(results: Results, env: list[str]) -> str:
    lines = ["| measured | rows | seconds | rows/s |", "|---|---:|---:|---:|"]
    for name, (rows, seconds) in results.rates.items():
        lines.append(f"| {name} | {rows:,} | {seconds:.1f} | {rows / seconds:,.0f} |")
    cuts = quantiles(results.latencies, n=100) if len(results.latencies) > 1 else [0.0] * 99
    source = results.rate(f"{SOURCE}, second query")
    sink = results.rate(SINK_WRITE)
    return "\n".join(
        [
            "# Spark Structured Streaming benchmark",
            "",
            *env,
            "",
            *lines,
            "",
            f"Source / SDK consumer: {source / results.rate(SDK_DRAIN):.2f}x "
            f"(second query). Sink / Producer.send_batch: "
            f"{sink / results.rate(SEND_BATCH):.2f}x.",
            "",
            "### Micro-batch latency",
            "",
            f"{len(results.latencies):,} messages paced at {results.paced_rate:,.0f}/s for "
            f"{PACED_SECONDS:.0f} s, read with a 1 s processing-time trigger; latency is from "
            "the send to the row reaching foreachBatch on the driver.",
            "",
            "| p50 s | p90 s | p99 s | max s | batches | batch duration median ms |",
            "|---:|---:|---:|---:|---:|---:|",
            f"| {cuts[49]:.3f} | {cuts[89]:.3f} | {cuts[98]:.3f} | "
            f"{max(results.latencies, default=0.0):.3f} | {len(results.batch_ms)} | "
            f"{sorted(results.batch_ms)[len(results.batch_ms) // 2] if results.batch_ms else 0} |",
            "",
            *[f"- {note}" for note in results.notes],
            "",
        ]
    )


def run(cfg: BenchConfig, args: argparse.Namespace) -> int:
    from importlib.metadata import version

    count, rate = args.spark_stream_messages, args.spark_stream_rate
    cfg = on_database(cfg, DATABASE)
    settings = prepare(cfg)
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    env = [
        f"- date: {dt.datetime.now(dt.UTC).isoformat(timespec='seconds')}; nproc "
        f"{len(os.sched_getaffinity(0))}; load average at start {load} (a shared host)",
        f"- Python {platform.python_version()}, pyspark {version('pyspark')}",
        f"- backlog: {count:,} messages of {len(VALUE)} bytes over {PARTITIONS} partitions "
        f"(--spark-stream-messages); Spark {MASTER}; paced rate {rate:,.0f}/s "
        "(--spark-stream-rate)",
    ]
    results = Results(messages=count)
    tmp = Path(tempfile.mkdtemp(prefix="ems-bench-stream-"))
    try:
        measure(settings, count, rate, results, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    text = render(results, env)
    print(text)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text)
    log(f"wrote {RESULTS}")
    return 0
