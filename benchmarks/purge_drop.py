"""The purge-drop suite: what retention by dropping table partitions would cost publishers.

The measurement behind a design decision, not a feature: ems purges row by row, and the
alternative is a `message` table partitioned by a time segment, whose retention drops a
whole partition. This suite builds such a table in its own database (ems_bench_partitions,
recreated; the table has the message table's columns and indexes, with the segment in the
primary and unique keys, as MariaDB requires), seeds N rows into each of two old segments,
and publishes single-row INSERTs into the newest one at 1,000 rows/s from four threads
(autocommit, PyMySQL, as the raw case of the producer suite). While publishing it:

- drops the first old partition (`ALTER TABLE ... DROP PARTITION`);
- detaches the second (`EXCHANGE PARTITION` with an empty table), then drops that table;
- adds a partition (`REORGANIZE PARTITION` of the catch-all one), as a roll job would.

Each operation's duration is reported with the sends that started during it (their worst
latency, and their p99), against the publish p99 of the idle window before.
"""

from __future__ import annotations

import argparse
import threading
import time
from pathlib import Path

from benchmarks.harness import BenchConfig, mysql_connect, on_database
from benchmarks.purge import BODY, RATE, SEED_BATCH, SENDERS, log, percentile
from benchmarks.report import environment

RESULTS = Path(__file__).resolve().parent / "results" / "purge-drop-latest.md"
DATABASE = "ems_bench_partitions"
QUIET_SECONDS = 5.0

_TABLE = """
CREATE TABLE seg_message (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  segment_no INT NOT NULL,
  topic_id BIGINT UNSIGNED NOT NULL,
  partition_no INT NOT NULL,
  offset_no BIGINT NOT NULL,
  msg_key VARBINARY(255) NULL,
  headers LONGTEXT NULL,
  body MEDIUMBLOB NOT NULL,
  tombstone TINYINT(1) NOT NULL DEFAULT 0,
  created_at DATETIME(6) NOT NULL DEFAULT NOW(6),
  PRIMARY KEY (id, segment_no),
  UNIQUE KEY (topic_id, partition_no, offset_no, segment_no),
  KEY (topic_id, partition_no, created_at),
  KEY (topic_id, msg_key, created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
PARTITION BY RANGE (segment_no) (
  PARTITION s0 VALUES LESS THAN (1),
  PARTITION s1 VALUES LESS THAN (2),
  PARTITION s2 VALUES LESS THAN (3),
  PARTITION smax VALUES LESS THAN MAXVALUE
)"""


def prepare(cfg: BenchConfig, rows: int) -> None:
    conn = mysql_connect(cfg.settings.database_url, database=False)
    try:
        with conn.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
            cursor.execute(f"CREATE DATABASE {DATABASE}")
            cursor.execute(f"USE {DATABASE}")
            cursor.execute(_TABLE)
            cursor.execute("CREATE TABLE detached LIKE seg_message")
            cursor.execute("ALTER TABLE detached REMOVE PARTITIONING")
            for segment in (0, 1):
                for first in range(0, rows, SEED_BATCH):
                    batch = [
                        (segment, 1, n % 8, n // 8, BODY)
                        for n in range(first, min(rows, first + SEED_BATCH))
                    ]
                    # Only placeholders in VALUES: PyMySQL then sends one multi-row INSERT.
                    cursor.executemany(
                        "INSERT INTO seg_message (segment_no, topic_id, partition_no, "
                        "offset_no, body) VALUES (%s, %s, %s, %s, %s)",
                        batch,
                    )
    finally:
        conn.close()


class Publisher:
    """SENDERS threads of paced single-row INSERTs into segment 2; samples are (wall time
    the send started, seconds)."""

    def __init__(self, cfg: BenchConfig) -> None:
        self.cfg = cfg
        self.samples: list[tuple[float, float]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._send, args=(k,)) for k in range(SENDERS)]

    def __enter__(self) -> Publisher:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _send(self, k: int) -> None:
        conn = mysql_connect(self.cfg.settings.database_url)
        mine: list[tuple[float, float]] = []
        start, seq = time.perf_counter(), k
        try:
            with conn.cursor() as cursor:
                while not self._stop.is_set():
                    wait = start + seq / RATE - time.perf_counter()
                    if wait > 0:
                        time.sleep(wait)
                    began, t0 = time.time(), time.perf_counter()
                    cursor.execute(
                        "INSERT INTO seg_message (segment_no, topic_id, partition_no, offset_no, "
                        "body) VALUES (2, 1, %s, %s, %s)",
                        (k, seq, BODY),
                    )
                    mine.append((began, time.perf_counter() - t0))
                    seq += SENDERS
        finally:
            conn.close()
            with self._lock:
                self.samples.extend(mine)

    def window(self, start: float, end: float) -> list[float]:
        """Sends started in [start, end); read once the publisher has stopped."""
        return [lat for at, lat in self.samples if start <= at < end]


def run(cfg: BenchConfig, args: argparse.Namespace) -> int:
    cfg = on_database(cfg, DATABASE)
    rows = args.purge_rows
    log(f"partitioned table: seeding {rows:,} rows into each of two old segments")
    prepare(cfg, rows)
    steps = [
        ("DROP PARTITION s0", "ALTER TABLE seg_message DROP PARTITION s0"),
        (
            "EXCHANGE PARTITION s1 (detach)",
            "ALTER TABLE seg_message EXCHANGE PARTITION s1 WITH TABLE detached",
        ),
        ("DROP TABLE of the detached rows", "DROP TABLE detached"),
        (
            "REORGANIZE PARTITION smax (add a segment)",
            "ALTER TABLE seg_message REORGANIZE PARTITION smax INTO "
            "(PARTITION s3 VALUES LESS THAN (4), PARTITION smax VALUES LESS THAN MAXVALUE)",
        ),
    ]
    spans: list[tuple[str, float, float]] = []
    ddl = mysql_connect(cfg.settings.database_url)
    try:
        with ddl.cursor() as cursor, Publisher(cfg) as publisher:
            cursor.execute("SET SESSION lock_wait_timeout = 5")
            time.sleep(1.0)
            idle_from = time.time()
            time.sleep(args.purge_idle_seconds)
            idle_to = time.time()
            for name, sql in steps:
                log(name)
                began = time.time()
                cursor.execute(sql)
                spans.append((name, began, time.time()))
                time.sleep(QUIET_SECONDS)
    finally:
        ddl.close()
    text = render(cfg, rows, publisher, (idle_from, idle_to), spans)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(text)
    print(text)
    return 0


def render(
    cfg: BenchConfig,
    rows: int,
    publisher: Publisher,
    idle: tuple[float, float],
    spans: list[tuple[str, float, float]],
) -> str:
    idle_sends = publisher.window(*idle)
    idle99 = percentile(idle_sends, 0.99)
    lines = [
        "# Purge-drop benchmark: retention by dropping table partitions (latest run)",
        "",
        f"`python -m benchmarks purge-drop`: a copy of the message table partitioned by "
        f"segment, {rows:,} rows in each of two old segments; {SENDERS} threads publish "
        f"single-row INSERTs at {RATE:.0f} rows/s into the newest segment while each "
        f"operation runs ({QUIET_SECONDS:.0f} s apart).",
        "",
        *environment(cfg),
        "",
        f"Idle: {len(idle_sends):,} sends, publish p50 {percentile(idle_sends, 0.5) * 1000:.2f} "
        f"ms, p99 {idle99 * 1000:.2f} ms.",
        "",
        "| operation | took ms | sends started during it | their worst ms | their p99 ms "
        "| p99 / idle p99 |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, began, ended in spans:
        during = publisher.window(began, ended)
        worst = max(during, default=float("nan"))
        p99 = percentile(during, 0.99)
        lines.append(
            f"| {name} | {(ended - began) * 1000:.1f} | {len(during):,} | {worst * 1000:.1f} "
            f"| {p99 * 1000:.1f} | {p99 / idle99:.1f}x |"
        )
    return "\n".join([*lines, ""])
