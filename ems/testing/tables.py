"""The rows of the in-memory twin (ems.testing), and the lock that makes each step on
them atomic, as one statement or transaction is on the server; the twin's clock, which
every lease, pause and hole age is read on."""

from __future__ import annotations

import bisect
import datetime as dt
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ems.store.errors import DuplicateKey
from ems.types import AssignmentRow, GroupInfo, PartitionsAdded, StoredMessage, TopicInfo

Clock = Callable[[], dt.datetime]


def utc_now() -> dt.datetime:
    """Naive UTC, as the server's NOW(6) reads in an ems session."""
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


class ManualClock:
    """A clock that moves only when told: leases expire and retries fall due on cue."""

    def __init__(self, start: dt.datetime | None = None) -> None:
        self._now = start or utc_now()
        self._lock = threading.Lock()

    def __call__(self) -> dt.datetime:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += dt.timedelta(seconds=seconds)


def after(now: dt.datetime, seconds: float) -> dt.datetime:
    return now + dt.timedelta(seconds=seconds)


@dataclass
class ClientRow:
    group_id: int
    host: str
    pid: int
    expires: dt.datetime
    cpu_percent: float | None = None
    load_rate: float | None = None


@dataclass
class LeaderRow:
    client_id: str | None = None
    epoch: int = 0
    expires: dt.datetime = dt.datetime(1970, 1, 2)


@dataclass
class LogRow:
    """A consumption-log row: the last delivery of one message to one group."""

    client_id: str
    state: str
    attempts: int
    error: str | None = None


@dataclass
class RetryRow:
    topic_id: int
    message_id: int
    attempts: int
    due: dt.datetime
    error: str
    #: The last failed handler's traceback, bounded; None for an ack timeout or a nack().
    traceback: str | None = None


@dataclass(frozen=True)
class DeadLetterRecord:
    """A message a group gave up on, with its own copy of the message."""

    group_id: int
    partition: int
    offset: int
    message: StoredMessage
    attempts: int
    error: str
    #: The last failed handler's traceback, bounded; None for an ack timeout or a nack().
    traceback: str | None = None


@dataclass
class Tables:
    """Every row of the twin, and the lock that makes each step atomic."""

    clock: Clock = utc_now
    lock: threading.RLock = field(default_factory=threading.RLock)
    topics: dict[str, TopicInfo] = field(default_factory=dict)
    #: (topic id, partition) -> offset -> row (tombstones too).
    partitions: dict[tuple[int, int], dict[int, StoredMessage]] = field(default_factory=dict)
    #: (topic id, partition) -> low watermark, for partitions a purge emptied below it.
    lows: dict[tuple[int, int], int] = field(default_factory=dict)
    #: (topic id, partition) -> the count of partitions its rows must be routed by, written
    #: by a partition change on each old partition (partition_low.partitions).
    fences: dict[tuple[int, int], int] = field(default_factory=dict)
    groups: dict[int, GroupInfo] = field(default_factory=dict)
    paused_until: dict[int, dt.datetime] = field(default_factory=dict)
    leaders: dict[int, LeaderRow] = field(default_factory=dict)
    clients: dict[str, ClientRow] = field(default_factory=dict)
    assignments: dict[int, dict[int, AssignmentRow]] = field(default_factory=dict)
    offsets: dict[int, dict[int, int]] = field(default_factory=dict)
    #: (group id, partition, offset) -> row.
    log: dict[tuple[int, int, int], LogRow] = field(default_factory=dict)
    retries: dict[tuple[int, int, int], RetryRow] = field(default_factory=dict)
    dead: list[DeadLetterRecord] = field(default_factory=list)
    #: message id -> the write token stored with it (the first row of a producer's write).
    tokens: dict[int, int] = field(default_factory=dict)
    #: topic id -> its partition changes, oldest first.
    changes: dict[int, list[PartitionsAdded]] = field(default_factory=dict)
    #: (topic id, token) of every write named by its token (message_write).
    named: set[tuple[int, int]] = field(default_factory=set)
    _ids: dict[str, int] = field(default_factory=dict)
    #: (topic id, partition) -> its stored offsets in order; message id -> row: the
    #: indexes a fetch, a watermark and a dead letter's copy use, as on the server.
    _sorted: dict[tuple[int, int], list[int]] = field(default_factory=dict)
    _by_id: dict[int, StoredMessage] = field(default_factory=dict)

    def next_id(self, table: str) -> int:
        self._ids[table] = self._ids.get(table, 0) + 1
        return self._ids[table]

    def topic(self, topic_id: int) -> TopicInfo | None:
        return next((t for t in self.topics.values() if t.id == topic_id), None)

    def next_offset(self, topic_id: int, partition: int) -> int:
        """Past the partition's highest stored row (tombstones too), never below its low
        watermark: its high watermark."""
        stored = self.stored_offsets(topic_id, partition)
        return stored[-1] + 1 if stored else self.lows.get((topic_id, partition), 0)

    def rows(self, topic_id: int, partition: int) -> dict[int, StoredMessage]:
        return self.partitions.setdefault((topic_id, partition), {})

    def stored_offsets(self, topic_id: int, partition: int) -> list[int]:
        """The partition's stored offsets (tombstones too), in order."""
        return self._sorted.setdefault((topic_id, partition), [])

    def add(
        self,
        topic_id: int,
        partition: int,
        offset: int,
        body: bytes,
        *,
        key: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        tombstone: bool = False,
        token: int | None = None,
    ) -> StoredMessage:
        """Store one row at its offset; DuplicateKey when the offset is taken."""
        rows = self.rows(topic_id, partition)
        if offset in rows:
            raise DuplicateKey(f"offset {offset} of partition {partition} is taken")
        m = StoredMessage(
            id=self.next_id("message"),
            topic_id=topic_id,
            partition=partition,
            offset=offset,
            key=key,
            headers=dict(headers or {}),
            body=body,
            created_at=self.clock(),
            tombstone=tombstone,
        )
        rows[offset] = self._by_id[m.id] = m
        bisect.insort(self.stored_offsets(topic_id, partition), offset)
        if token is not None:
            self.tokens[m.id] = token
        return m

    def empty(self, topic_id: int, partition: int, low: int) -> None:
        """What a purge of the whole partition leaves: no rows, and its low watermark."""
        for m in self.partitions.pop((topic_id, partition), {}).values():
            self._by_id.pop(m.id, None)
            self.tokens.pop(m.id, None)
        self._sorted.pop((topic_id, partition), None)
        self.lows[(topic_id, partition)] = low

    def message(self, message_id: int) -> StoredMessage | None:
        return self._by_id.get(message_id)

    def live(self, client_id: str, now: dt.datetime) -> bool:
        client = self.clients.get(client_id)
        return client is not None and client.expires > now
