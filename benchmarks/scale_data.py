"""The scale suite's data side: a large topic filled inside the server, its time index
built, and resets by datetime looked up with and without the index.

The fill generates every row in MariaDB (INSERT ... SELECT FROM seq_0_to_K, the sequence
engine) in chunks, so that millions of rows take seconds rather than a producer's
minutes. The partitions are uneven, as keyed traffic is (a few busy projects, many quiet
ones): partition p gets p + 1 rows of every CYCLE (16 x 17 / 2 = 136), so the busiest
gets sixteen times the quietest. A reader that drains every partition at the same pace
is then at the same offset in each but at very different places in the order the rows
were written, which is what tells a table clustered by (partition, offset) from one
clustered by arrival. Each row has a 256-byte body and a created_at one millisecond after
the row before it; one row in ten is committed up to 30 s late (a later created_at at a
lower offset), as producers that commit out of order leave it.
"""

from __future__ import annotations

import datetime as dt
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from benchmarks.consumer import drop_databases
from benchmarks.consumer_workers import BODY_BYTES
from benchmarks.harness import PARTITIONS, BenchConfig, mysql_connect, query
from ems import TopicAdmin
from ems.store import Store, migrate
from ems.types import TopicInfo

#: created_at of row 0; row i is created i ms later (plus its lateness).
EPOCH = dt.datetime(2026, 11, 1)
#: Rows per INSERT ... SELECT.
CHUNK = 500_000
#: Rows read per time-index extend call.
EXTEND_ROWS = 200_000
#: Partitions whose reset lookups are timed.
LOOKUP_PARTITIONS = (0, 5, 10, 15)

#: Rows per round of the partitions' uneven shares: partition p takes p + 1 of them.
CYCLE = PARTITIONS * (PARTITIONS + 1) // 2

# Row n of the fill is row r = n % CYCLE of round c = n // CYCLE; the rows of a round go to
# partitions 0, 1, 1, 2, 2, 2, ... so r's partition p solves p (p + 1) / 2 <= r, and its
# offset is p's c rounds of p + 1 rows plus its place among p's rows of this round.
_FILL = (
    "INSERT INTO message (topic_id, partition_no, offset_no, body, created_at) "
    "SELECT %(topic)s, p, c * (p + 1) + r - p * (p + 1) DIV 2, REPEAT('x', %(body)s), "
    "CAST(%(epoch)s AS DATETIME(6)) + INTERVAL (n + late) * 1000 MICROSECOND FROM ("
    "SELECT n, n DIV %(cycle)s AS c, n MOD %(cycle)s AS r, "
    "FLOOR((SQRT(8 * (n MOD %(cycle)s) + 1) - 1) / 2) AS p, late FROM ("
    "SELECT seq + %(base)s AS n, IF((seq * 7919) %% 10 = 0, (seq * 104729) %% 30000, 0) AS late "
    "FROM seq_0_to_{last}) AS s) AS x"
)
_SIZE = (
    "SELECT data_length + index_length FROM information_schema.tables "
    "WHERE table_schema = DATABASE() AND table_name = 'message'"
)


@dataclass(frozen=True, kw_only=True)
class Filled:
    rows: int
    seconds: float
    table_bytes: int
    buffer_pool_bytes: int


@dataclass(frozen=True, kw_only=True)
class Lookup:
    """One reset-by-datetime lookup of one partition, with and without the index."""

    label: str
    partition: int
    indexed_s: float
    exact_s: float
    indexed: int | None
    exact: int | None


def create_topic(cfg: BenchConfig, database: str, revision: str = "head") -> TopicInfo:
    """A fresh database at an Alembic revision with cfg.topic of PARTITIONS partitions."""
    drop_databases(cfg, database)
    migrate.create_database(cfg.settings)
    migrate.upgrade(cfg.settings, revision)
    admin = TopicAdmin(cfg.settings)
    try:
        return admin.create(cfg.topic, PARTITIONS)
    finally:
        admin.close()


def fill(cfg: BenchConfig, topic: TopicInfo, rows: int, log: Callable[[str], None]) -> Filled:
    """rows messages generated in the server (see the module docstring)."""
    conn = mysql_connect(cfg.settings.database_url)
    started = time.monotonic()
    try:
        with conn.cursor() as cursor:
            for base in range(0, rows, CHUNK):
                n = min(CHUNK, rows - base)
                args = {
                    "topic": topic.id,
                    "base": base,
                    "cycle": CYCLE,
                    "body": BODY_BYTES,
                    "epoch": EPOCH,
                }
                cursor.execute(_FILL.format(last=n - 1), args)
                log(f"filled {base + n:,} of {rows:,} rows")
    finally:
        conn.close()
    seconds = time.monotonic() - started
    ((pool,),) = query(cfg.settings.database_url, "SELECT @@innodb_buffer_pool_size")
    return Filled(
        rows=rows, seconds=seconds, table_bytes=table_bytes(cfg), buffer_pool_bytes=int(pool)
    )


def table_bytes(cfg: BenchConfig) -> int:
    """The message table's data + indexes, freshly counted."""
    query(cfg.settings.database_url, "ANALYZE TABLE message")  # refreshes data_length
    ((size,),) = query(cfg.settings.database_url, _SIZE)
    return int(size)


def build_index(store: Store, topic: TopicInfo) -> tuple[int, float]:
    """Extend the time index of every partition until it covers all it can, as the
    time-index job does run after run: (offsets covered, seconds)."""
    started = time.monotonic()
    covered = 0
    for p in range(topic.partitions):
        while got := store.time_index.extend(topic.id, p, None, EXTEND_ROWS):
            covered += got
    return covered, time.monotonic() - started


def lookup_times(rows: int) -> dict[str, dt.datetime]:
    """The points in time sought: a tenth into the data and its middle."""
    return {
        "a tenth in": EPOCH + dt.timedelta(milliseconds=rows // 10),
        "middle": EPOCH + dt.timedelta(milliseconds=rows // 2),
    }


def lookups(store: Store, topic: TopicInfo, rows: int) -> list[Lookup]:
    """Each point of lookup_times in each of LOOKUP_PARTITIONS: first_at (the index)
    beside _first_past (the exact search without it), over the whole partition."""
    highs = store.messages.high_watermarks(topic)
    found = []
    for label, at in lookup_times(rows).items():
        for p in LOOKUP_PARTITIONS:
            t0 = time.monotonic()
            indexed = store.resets.first_at(topic.id, p, at, 0, highs[p])
            t1 = time.monotonic()
            exact = store.resets._first_past(topic.id, p, at, 0, highs[p])
            t2 = time.monotonic()
            found.append(
                Lookup(
                    label=label,
                    partition=p,
                    indexed_s=t1 - t0,
                    exact_s=t2 - t1,
                    indexed=indexed,
                    exact=exact,
                )
            )
    return found


def summary(values: list[float]) -> tuple[float, float]:
    """(median, max)"""
    return statistics.median(values), max(values)
