"""The systems under test, behind one small interface.

- ems: the public Producer (Redis offset range + one INSERT per call).
- raw: the floor ems is measured against: plain PyMySQL on an autocommit connection into
  the same `message` table and columns, partitions precomputed, offsets from a local
  per-partition counter (strided by worker index so workers never collide).
- raw+redis: raw plus the two Redis steps the design adds to every publish call and
  nothing else: the call's offsets from Redis INCRBY (one round trip; several partitions
  pipelined) and one wake-up PUBLISH after the commit (one write, replies off). What ems
  adds beyond it is the cost of its own layers; what raw+redis loses against raw is the
  cost of the design on this machine.
- kombu: Kombu's SQLAlchemy transport on the same server, Producer.publish per message.
  Kombu has no batch API, so its "batch" is a loop of single publishes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from kombu.connection import Connection
from kombu.entity import Queue

from benchmarks.harness import (
    HEADERS,
    HEADERS_JSON,
    KOMBU_QUEUE,
    PARTITIONS,
    BenchConfig,
    BenchError,
    Reading,
    mysql_connect,
)
from ems import Producer, Record
from ems.offsets.allocators import offset_key
from ems.offsets.resp import RespConnection, pack
from ems.wakeups import Publisher

_INSERT = (
    "INSERT INTO message (topic_id, partition_no, offset_no, msg_key, headers, body) "
    "VALUES (%s, %s, %s, %s, %s, %s)"
)


class Writer(Protocol):
    def send(self, row: Reading) -> None: ...
    def send_batch(self, rows: Sequence[Reading]) -> None: ...
    def close(self) -> None: ...


class EmsWriter:
    def __init__(self, cfg: BenchConfig, index: int, workers: int) -> None:
        self.topic = cfg.topic
        self.producer = Producer(cfg.settings)

    def send(self, row: Reading) -> None:
        self.producer.send(self.topic, row.body, key=row.key, headers=HEADERS)

    def send_batch(self, rows: Sequence[Reading]) -> None:
        self.producer.send_batch(self.topic, [Record(r.body, r.key, HEADERS) for r in rows])

    def close(self) -> None:
        self.producer.close()


class RawWriter:
    def __init__(self, cfg: BenchConfig, index: int, workers: int) -> None:
        self.conn = mysql_connect(cfg.settings.database_url)
        self.cursor = self.conn.cursor()
        self.cursor.execute("SELECT id FROM topic WHERE name = %s", (cfg.topic,))
        (self.topic_id,) = self.cursor.fetchone()
        self.next = [index] * PARTITIONS
        self.stride = workers

    def _params(self, row: Reading) -> tuple[object, ...]:
        offset = self.next[row.partition]
        self.next[row.partition] = offset + self.stride
        return (self.topic_id, row.partition, offset, row.key.encode(), HEADERS_JSON, row.body)

    def send(self, row: Reading) -> None:
        self.cursor.execute(_INSERT, self._params(row))

    def send_batch(self, rows: Sequence[Reading]) -> None:
        # PyMySQL rewrites this into one multi-row INSERT; autocommit makes it atomic.
        self.cursor.executemany(_INSERT, [self._params(r) for r in rows])

    def close(self) -> None:
        self.conn.close()


class RawRedisWriter(RawWriter):
    def __init__(self, cfg: BenchConfig, index: int, workers: int) -> None:
        super().__init__(cfg, index, workers)
        url, timeout = cfg.settings.redis_url, cfg.settings.connect_timeout
        counters = RespConnection.from_url(url, timeout=timeout, retries=0)
        if counters is None:
            raise ValueError(f"raw+redis speaks plain redis:// URLs only, not {url!r}")
        self.counters = counters
        # ems's own wake-up writer: one PUBLISH written with replies off, nothing more.
        self.wakeups = Publisher(cfg.settings)
        prefix = cfg.settings.redis_prefix
        self.keys = [offset_key(prefix, self.topic_id, p) for p in range(PARTITIONS)]

    def _allocate(self, counts: dict[int, int]) -> dict[int, int]:
        """First offset of each partition's range: one round trip for all partitions."""
        packed = b"".join(pack("INCRBY", self.keys[p], n) for p, n in counts.items())
        firsts = {}
        for (p, n), end in zip(
            counts.items(), self.counters.execute(packed, len(counts)), strict=True
        ):
            if not isinstance(end, int):
                raise BenchError(f"Redis answered INCRBY with {end!r}")
            firsts[p] = end - n
        return firsts

    def _row(self, row: Reading, offset: int) -> tuple[object, ...]:
        return (self.topic_id, row.partition, offset, row.key.encode(), HEADERS_JSON, row.body)

    def send(self, row: Reading) -> None:
        offset = self._allocate({row.partition: 1})[row.partition]
        self.cursor.execute(_INSERT, self._row(row, offset))
        self.wakeups.messages(self.topic_id, {row.partition: offset})

    def send_batch(self, rows: Sequence[Reading]) -> None:
        counts: dict[int, int] = {}
        for r in rows:
            counts[r.partition] = counts.get(r.partition, 0) + 1
        cursor = self._allocate(counts)
        params = []
        for r in rows:
            params.append(self._row(r, cursor[r.partition]))
            cursor[r.partition] += 1
        self.cursor.executemany(_INSERT, params)
        self.wakeups.messages(self.topic_id, {p: o - 1 for p, o in cursor.items()})

    def close(self) -> None:
        self.counters.close()
        self.wakeups.close()
        super().close()


class KombuWriter:
    def __init__(self, cfg: BenchConfig, index: int, workers: int) -> None:
        # kombu is only partly typed; its calls are untyped to mypy.
        self.conn = Connection(cfg.kombu_url)  # type: ignore[no-untyped-call]
        self.producer = self.conn.Producer()  # type: ignore[no-untyped-call]

    def send(self, row: Reading) -> None:
        # The default exchange routes straight to the queue named by the routing key.
        self.producer.publish(row.body, routing_key=KOMBU_QUEUE, headers=HEADERS)

    def send_batch(self, rows: Sequence[Reading]) -> None:
        for row in rows:  # no batch API in kombu
            self.send(row)

    def close(self) -> None:
        self.conn.release()  # type: ignore[no-untyped-call]


WRITERS: dict[str, type[EmsWriter] | type[RawWriter] | type[KombuWriter]] = {
    "ems": EmsWriter,
    "raw+redis": RawRedisWriter,
    "raw": RawWriter,
    "kombu": KombuWriter,
}


def declare_kombu_queue(cfg: BenchConfig) -> None:
    """Create kombu's tables and queue row once, so concurrent workers do not race on them.
    Run it in a child process: kombu's SQLAlchemy channel never closes its session, and the
    transaction that session leaves open would block TRUNCATE on kombu's tables."""
    with Connection(cfg.kombu_url) as conn:  # type: ignore[no-untyped-call]
        queue = Queue(KOMBU_QUEUE, routing_key=KOMBU_QUEUE)  # type: ignore[no-untyped-call]
        queue(conn.default_channel).declare()  # type: ignore[no-untyped-call]
