"""The systems under test, behind one small interface.

- ems: the public Producer (Redis offset range + one INSERT per call).
- raw: the floor ems is measured against: one multi-row INSERT per call on an autocommit
  PyMySQL connection, built as bytes in ems's own literal encoding (hex literals, the
  headers' utf8mb4 introducer: ems.store.inserts.values; each key's literal and the
  headers' made once and kept, as ems keeps them) and written with the driver's lowest call
  (Connection.query), into the same `message` table and columns; partitions
  precomputed, offsets from a local per-partition counter (strided by worker index so
  workers never collide). The same rows and the same commits as ems, without ems: no
  fence, no offset allocation, no wake-up.
- raw+redis: raw plus the two Redis steps the design adds to every publish call and
  nothing else: the call's offsets from Redis INCRBY (one round trip; several partitions
  pipelined) and one wake-up PUBLISH after the commit (one write, replies off). What ems
  adds beyond it is the cost of its own layers; what raw+redis loses against raw is the
  cost of the design on this machine.
- raw+redis+guard: raw+redis writing ems's own statement (ems.store.inserts): its rows
  checked against the partitions' fences read once (ems.store.fences) and each carrying
  its partition's fence, which message's foreign key checks, and a write token on its
  first row. The floor of the design with its guard: what ems adds beyond it is the cost
  of its Python; what it adds to raw+redis is the guard's cost.
- kombu: Kombu's SQLAlchemy transport on the same server, Producer.publish per message.
  Kombu has no batch API, so its "batch" is a loop of single publishes.
"""

from __future__ import annotations

from binascii import hexlify
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
    topic_fences,
)
from ems import Producer
from ems.offsets.allocators import offset_key
from ems.offsets.resp import RespConnection, pack
from ems.store.fences import refusal
from ems.store.inserts import INSERT_HEAD, PLAIN_ROW, insert_statements, key_headers
from ems.types import Placed, Prepared
from ems.wakeups import Publisher

#: _new(Placed, fields): Placed(*fields) without a named tuple's Python __new__, as ems's
#: producer makes its writes.
_new = tuple.__new__


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
        # Plain (body, key, headers) tuples: the cheapest form send_batch takes.
        self.producer.send_batch(self.topic, [(r.body, r.key, HEADERS) for r in rows])

    def close(self) -> None:
        self.producer.close()


#: The bench rows' headers literal (all rows share the headers).
_HEADERS_SQL = key_headers(None, HEADERS_JSON)[1]


def raw_statement(
    topic_id: int, rows: Sequence[tuple[Reading, int]], keys: dict[str, bytes] | None = None
) -> bytes:
    """The raw writers' INSERT of (reading, offset) pairs: ems's encoding (the rows of
    ems.store.inserts.values), no guard. The fastest honest way to those bytes: one loop,
    the headers' literal made once and each key's once per writer (`keys`), as ems keeps
    them too."""
    keys = {} if keys is None else keys
    parts: list[bytes] = []
    append = parts.append
    for r, offset in rows:
        key_sql = keys.get(r.key)
        if key_sql is None:
            key_sql = keys[r.key] = key_headers(r.key.encode(), None)[0]
        append(PLAIN_ROW % (topic_id, r.partition, offset, key_sql, _HEADERS_SQL, hexlify(r.body)))
    return INSERT_HEAD + b",".join(parts)


class RawWriter:
    def __init__(self, cfg: BenchConfig, index: int, workers: int) -> None:
        self.conn = mysql_connect(cfg.settings.database_url)
        cursor = self.conn.cursor()
        cursor.execute("SELECT id FROM topic WHERE name = %s", (cfg.topic,))
        (self.topic_id,) = cursor.fetchone()
        cursor.close()
        self.next = [index] * PARTITIONS
        self.stride = workers
        self.literals: dict[str, bytes] = {}  # each key's literal, made once

    def _offset(self, row: Reading) -> int:
        offset = self.next[row.partition]
        self.next[row.partition] = offset + self.stride
        return offset

    def send(self, row: Reading) -> None:
        self.conn.query(self.statement([(row, self._offset(row))]))

    def send_batch(self, rows: Sequence[Reading]) -> None:
        # One statement on an autocommit connection: atomic, one commit, as ems's.
        self.conn.query(self.statement([(r, self._offset(r)) for r in rows]))

    def statement(self, rows: Sequence[tuple[Reading, int]]) -> bytes:
        return raw_statement(self.topic_id, rows, self.literals)

    def close(self) -> None:
        self.conn.close()


def batch_counts(rows: Sequence[Reading]) -> dict[int, int]:
    """raw+redis's count of a batch's rows per partition (its INCRBYs)."""
    counts: dict[int, int] = {}
    for r in rows:
        counts[r.partition] = counts.get(r.partition, 0) + 1
    return counts


def placed_pairs(rows: Sequence[Reading], cursor: dict[int, int]) -> list[tuple[Reading, int]]:
    """raw+redis's (reading, offset) pairs: each row at the next offset of its partition's
    range, `cursor` (each range's first) moved past the range."""
    placed = []
    for r in rows:
        placed.append((r, cursor[r.partition]))
        cursor[r.partition] += 1
    return placed


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

    def send(self, row: Reading) -> None:
        offset = self._allocate({row.partition: 1})[row.partition]
        self.conn.query(self.statement([(row, offset)]))
        self.wakeups.messages(self.topic_id, {row.partition: offset})

    def send_batch(self, rows: Sequence[Reading]) -> None:
        cursor = self._allocate(batch_counts(rows))
        self.conn.query(self.statement(placed_pairs(rows, cursor)))
        self.wakeups.messages(self.topic_id, {p: o - 1 for p, o in cursor.items()})

    def close(self) -> None:
        self.counters.close()
        self.wakeups.close()
        super().close()


class GuardedWriter(RawRedisWriter):
    """raw+redis sending ems's statement: its rows checked against the partitions' fences
    read once (the watermarks and the count they were routed by) and carrying them, the
    first with a write token. The fastest way to that statement: the write made straight
    from the readings and the allocated ranges' firsts, as ems's producer has it."""

    def __init__(self, cfg: BenchConfig, index: int, workers: int) -> None:
        super().__init__(cfg, index, workers)
        # ems's insert sessions run REPEATABLE READ (the escaped path's locking read).
        self.conn.query("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        self.token = index << 40
        self.fences = topic_fences(self.conn, self.topic_id)
        #: Each key encoded once, as ems's producer keeps its keys' encodings: the same
        #: bytes object each time, whose hash the literals' cache finds made.
        self.encoded: dict[str, bytes] = {}

    def _key(self, key: str) -> bytes:
        """A key met for the first time, encoded and kept (then found in self.encoded)."""
        encoded = self.encoded[key] = key.encode()
        return encoded

    def send(self, row: Reading) -> None:
        firsts = self._allocate({row.partition: 1})
        key = self.encoded.get(row.key) or self._key(row.key)
        prepared = [(row.partition, key, HEADERS_JSON, row.body)]
        self.conn.query(self.guarded(firsts, prepared))
        self.wakeups.messages(self.topic_id, firsts)  # one row: its first is its last

    def send_batch(self, rows: Sequence[Reading]) -> None:
        counts = batch_counts(rows)
        firsts = self._allocate(counts)
        encoded, key = self.encoded, self._key
        prepared = [
            (r.partition, encoded.get(r.key) or key(r.key), HEADERS_JSON, r.body) for r in rows
        ]
        self.conn.query(self.guarded(firsts, prepared))
        self.wakeups.messages(self.topic_id, {p: firsts[p] + n - 1 for p, n in counts.items()})

    def guarded(self, firsts: dict[int, int], prepared: Sequence[Prepared]) -> bytes:
        """ems's statement of the prepared rows, each partition's at consecutive offsets
        from its first."""
        self.token += 1
        why = refusal(firsts, self.fences, PARTITIONS)
        if why is not None:
            raise BenchError(why)
        placed = _new(Placed, (self.topic_id, prepared, firsts))
        (statement,) = insert_statements(placed, self.token, self.fences.fences) or [b""]
        return statement


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
    "raw+redis+guard": GuardedWriter,
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
