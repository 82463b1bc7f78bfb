"""The three systems under test, behind one small interface.

- ems: the public Producer (Redis offset range + one INSERT per call).
- raw: the floor ems is measured against: plain PyMySQL on an autocommit connection into
  the same `message` table and columns, partitions precomputed, offsets from a local
  per-partition counter (strided by worker index so workers never collide).
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
    Reading,
    mysql_connect,
)
from ems import Producer, Record

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
