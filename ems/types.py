"""Frozen values that cross layers. ORM objects never leave ems.store."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from operator import itemgetter
from typing import Any, Literal, NamedTuple, overload

#: A member reads a partition at most this many offsets past the cursor it last committed
#: (as RocketMQ's consumeConcurrentlyMaxSpan). So the consumption log's rows in flight of a
#: cluster group's partition lie in [committed cursor, cursor + IN_FLIGHT_SPAN), or are
#: redeliveries of a retry row: the store finds them by primary key ranges, with no index
#: on the log's state for every ack to rewrite.
IN_FLIGHT_SPAN = 10_000


@dataclass(frozen=True, kw_only=True, slots=True)
class TopicInfo:
    id: int
    name: str
    partitions: int
    retention_hours: int
    max_body_bytes: int
    created_at: dt.datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class PartitionsAdded:
    """One change of a topic's partition count (ems topic alter --partitions): the count
    before and after, and the high watermark every old partition had at the change (its
    rows below it were routed by the count before, the rest by `after` or a later count)."""

    topic_id: int
    before: int
    after: int
    #: Index: an old partition (0 to before - 1).
    watermarks: tuple[int, ...]
    created_at: dt.datetime | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class PartitionStats:
    partition: int
    #: Offset of the oldest row still stored (None when the partition is empty).
    low_watermark: int | None
    #: Next offset to be written: one past the highest stored offset (Kafka's log end).
    high_watermark: int
    #: Stored offsets (high - low watermark), or with exact counts the stored messages
    #: without tombstones.
    messages: int
    #: Tombstones stored; None unless exact counts were asked for.
    tombstones: int | None


# The per-message values of the publish path are named tuples: immutable like the frozen
# dataclasses elsewhere, and several times cheaper to create, which shows at 50,000 msg/s.


class Record(NamedTuple):
    """A message to publish."""

    body: bytes | str
    key: str | bytes | None = None
    headers: Mapping[str, str] | None = None


class RecordMetadata(NamedTuple):
    """Where a published message landed."""

    topic: str
    partition: int
    offset: int


#: _tuple_new(RecordMetadata, fields) is RecordMetadata(*fields) without the Python-level
#: constructor a named tuple has: half the cost, for every message whose place is read.
_tuple_new = tuple.__new__


class _Write:
    """The places of one write's messages, shared by a BatchMetadata and its slices: the
    topic, each message's partition in order, and each partition's first offset."""

    __slots__ = ("firsts", "made", "partitions", "topic")

    def __init__(self, topic: str, partitions: Sequence[int], firsts: Mapping[int, int]) -> None:
        self.topic = topic
        self.partitions = partitions
        self.firsts = firsts
        self.made: list[RecordMetadata] | None = None

    def make(self) -> list[RecordMetadata]:
        """Every message's RecordMetadata, made once (two threads may both make it: the
        lists are equal, and either is kept)."""
        made = self.made
        if made is None:
            topic, cursor, made = self.topic, dict(self.firsts), []
            append = made.append
            for partition in self.partitions:
                offset = cursor[partition]
                cursor[partition] = offset + 1
                append(_tuple_new(RecordMetadata, (topic, partition, offset)))
            self.made = made
        return made


class BatchMetadata(Sequence[RecordMetadata]):
    """Where each message of one write landed, in input order: a read-only sequence of
    RecordMetadata, made on first access. A message's offset is its partition's first
    offset in the write plus the number of the write's messages before it in that
    partition, as Kafka's producer derives a record's offset from its batch's base offset
    when asked; so a caller that does not read the results pays for no object per message.
    A slice is a BatchMetadata too. Equal to any sequence of the same RecordMetadata in
    the same order (a list of them included)."""

    __slots__ = ("_start", "_stop", "_write")

    def __init__(self, topic: str, partitions: Sequence[int], firsts: Mapping[int, int]) -> None:
        self._write = _Write(topic, partitions, firsts)
        self._start, self._stop = 0, len(partitions)

    def __len__(self) -> int:
        return self._stop - self._start

    @overload
    def __getitem__(self, index: int) -> RecordMetadata: ...

    @overload
    def __getitem__(self, index: slice) -> BatchMetadata: ...

    def __getitem__(self, index: int | slice) -> RecordMetadata | BatchMetadata:
        if not isinstance(index, slice):
            made = self._write.make()
            if self._start == 0 and self._stop == len(made):
                return made[index]
            # A slice's item without copying the slice (range() bounds it as a list would).
            return made[range(self._start, self._stop)[index]]
        start, stop, step = index.indices(len(self))
        if step != 1:
            return _made(self._list()[index])
        view = object.__new__(BatchMetadata)
        view._write = self._write
        view._start, view._stop = self._start + start, self._start + max(start, stop)
        return view

    def __iter__(self) -> Iterator[RecordMetadata]:
        return iter(self._list())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(self) == len(other) and self._list() == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __add__(self, other: Sequence[RecordMetadata]) -> list[RecordMetadata]:
        """Results joined, as lists join: a list."""
        if not isinstance(other, Sequence):
            return NotImplemented
        return [*self._list(), *other]

    def __radd__(self, other: Sequence[RecordMetadata]) -> list[RecordMetadata]:
        if not isinstance(other, Sequence):
            return NotImplemented
        return [*other, *self._list()]

    def __repr__(self) -> str:
        return f"BatchMetadata({self._list()!r})"

    def _list(self) -> list[RecordMetadata]:
        made = self._write.make()
        if self._start == 0 and self._stop == len(made):
            return made
        return made[self._start : self._stop]


def _made(found: list[RecordMetadata]) -> BatchMetadata:
    """A BatchMetadata of RecordMetadata already made (an extended slice's)."""
    batch = BatchMetadata(found[0].topic if found else "", [m.partition for m in found], {})
    batch._write.made = found
    return batch


class NewMessage(NamedTuple):
    """A validated message with its place assigned, ready to insert."""

    topic_id: int
    partition: int
    offset: int
    key: bytes | None
    headers: str | None  # JSON text
    body: bytes


#: (partition, key, headers JSON, body) of a validated message.
Prepared = tuple[int, bytes | None, str | None, bytes]


class Placed(NamedTuple):
    """One atomic write of a topic's messages, as the producer has it: the messages
    (`rows`, in their order), each at the next offset of its partition's range, which
    starts at firsts[partition]. So a partition's rows take consecutive offsets, the
    lowest being its first: what the store checks a write by, and builds its statement
    from, with no row object per message."""

    topic_id: int
    rows: Sequence[Prepared]
    firsts: Mapping[int, int]


def first_place(placed: Placed) -> tuple[int, int, int]:
    """The (topic id, partition, offset) of the write's first row, which carries its
    write token."""
    partition = placed.rows[0][0]
    return placed.topic_id, partition, placed.firsts[partition]


def placed_messages(placed: Placed) -> list[NewMessage]:
    """The write's rows as NewMessages, in their order."""
    cursor = dict(placed.firsts)
    messages = []
    for partition, key, headers, body in placed.rows:
        offset = cursor[partition]
        cursor[partition] = offset + 1
        messages.append(NewMessage(placed.topic_id, partition, offset, key, headers, body))
    return messages


def placed_of(messages: Sequence[NewMessage]) -> Placed:
    """The write of these rows: ValueError unless they are of one topic and each
    partition's take consecutive offsets in their order."""
    if not messages:
        raise ValueError("a write has rows")
    topic_id = messages[0].topic_id
    firsts: dict[int, int] = {}
    following: dict[int, int] = {}
    for m in messages:
        if m.topic_id != topic_id:
            raise ValueError("a write's rows are of one topic")
        if m.partition not in firsts:
            firsts[m.partition] = m.offset
        elif m.offset != following[m.partition]:
            raise ValueError(f"partition {m.partition}'s rows do not take consecutive offsets")
        following[m.partition] = m.offset + 1
    return Placed(topic_id, [(m[1], m[3], m[4], m[5]) for m in messages], firsts)


@dataclass(frozen=True, kw_only=True, slots=True)
class Schedule:
    """When a scheduled send's message may reach its topic: `delay_us` microseconds after
    it is written (the database clock's), or at `at` (UTC, without tzinfo). One is set."""

    delay_us: int | None = None
    at: dt.datetime | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class OutboxWaiting:
    """What a relay's pass finds in the outbox: the topics with rows to move now, and how
    many seconds until the soonest scheduled row comes due (None: no row waits for later)."""

    topics: list[TopicInfo]
    next_due: float | None


@dataclass(frozen=True, kw_only=True, slots=True)
class Scheduled:
    """A topic's scheduled messages not yet due: how many, and the soonest's time (UTC;
    None when none wait)."""

    count: int
    next_at: dt.datetime | None


@dataclass(frozen=True, slots=True)
class OutboxRow:
    """A transactional send's message, committed and waiting for its offset: what a relay
    needs to place it (its headers and body stay on the server, which moves them)."""

    id: int
    partition: int
    key: bytes | None


#: (outbox row id, partition, offset): where a relay's move puts a committed outbox row.
OutboxPlace = tuple[int, int, int]


@dataclass(frozen=True, kw_only=True, slots=True)
class StoredMessage:
    """A message read back from a partition."""

    id: int
    topic_id: int
    partition: int
    offset: int
    key: bytes | None
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes
    created_at: dt.datetime
    tombstone: bool = False
    #: Published inside the caller's transaction (read by the message trace only).
    transactional: bool = False


# The read paths build a StoredMessage (a Reader) or a Delivery (a consumer) per message
# read, from the driver's row (MessageRow). A frozen dataclass's __init__ takes keywords
# and sets each field through object.__setattr__ (about 3 us each); these build the same
# instances by setting the slots directly (a quarter of that), with every field given in
# order. They are for ems's own read paths: the classes, their fields, equality and
# immutability stay those of the dataclasses.


def stored_message(
    id: int,
    topic_id: int,
    partition: int,
    offset: int,
    key: bytes | None,
    headers: dict[str, str],
    body: bytes,
    created_at: dt.datetime,
    tombstone: bool,
    transactional: bool = False,
) -> StoredMessage:
    """StoredMessage(id=id, ...), built without the dataclass's keyword __init__."""
    m = _new(StoredMessage)
    _sm_id(m, id)
    _sm_topic_id(m, topic_id)
    _sm_partition(m, partition)
    _sm_offset(m, offset)
    _sm_key(m, key)
    _sm_headers(m, headers)
    _sm_body(m, body)
    _sm_created_at(m, created_at)
    _sm_tombstone(m, tombstone)
    _sm_transactional(m, transactional)
    return m


def _slot_setters(cls: type) -> list[Any]:
    """The __set__ of each slot of cls, in field order (a slot's descriptor sets it even
    on a frozen class: freezing only overrides __setattr__)."""
    return [cls.__dict__[f.name].__set__ for f in fields(cls)]


_new = object.__new__
(
    _sm_id,
    _sm_topic_id,
    _sm_partition,
    _sm_offset,
    _sm_key,
    _sm_headers,
    _sm_body,
    _sm_created_at,
    _sm_tombstone,
    _sm_transactional,
) = _slot_setters(StoredMessage)


@dataclass(frozen=True, kw_only=True, slots=True)
class Fetched:
    """Rows of a partition in offset order, as a byte-bounded fetch returns them."""

    rows: list[StoredMessage]
    #: Rows that follow the last one were left out because of the byte budget (not
    #: because there were none, nor because of the row limit).
    cut: bool = False
    #: The topic's partition count as of the read (None: not told); a row written after
    #: partitions were added comes with the new count.
    partitions: int | None = None


#: A message row as a partition read returns it (ems.ports.MessageLog.fetch_rows), the
#: driver's own tuple until it becomes a StoredMessage or a Delivery: (id, offset, key,
#: headers as JSON text (None or empty: none), body, created_at, tombstone flag (truthy
#: for a tombstone)). A store may put columns of its own after these.
MessageRow = tuple[Any, ...]
ROW_ID, ROW_OFFSET, ROW_KEY, ROW_HEADERS, ROW_BODY, ROW_CREATED_AT, ROW_TOMBSTONE = range(7)


@dataclass(frozen=True, kw_only=True, slots=True)
class FetchedRows:
    """Fetched, its rows as MessageRow tuples: what a partition reader reads."""

    rows: Sequence[MessageRow]
    cut: bool = False
    partitions: int | None = None


def stored_messages(
    topic_id: int, partition: int, rows: Sequence[MessageRow], headers: Sequence[dict[str, str]]
) -> list[StoredMessage]:
    """The StoredMessage of each row, with its decoded headers."""
    return [
        stored_message(r[0], topic_id, partition, r[1], r[2], h, r[4], r[5], bool(r[6]))
        for r, h in zip(rows, headers, strict=True)
    ]


@dataclass(frozen=True, kw_only=True, slots=True)
class PartitionBatch:
    """The gap-free prefix of a partition read: messages (tombstones dropped) and the
    offset to read from next."""

    partition: int
    messages: list[StoredMessage]
    next_offset: int
    #: The read stopped at its row limit or byte budget, not at the end of what can be
    #: read: more may be ready at next_offset now.
    more: bool = False
    #: The topic's partition count as the read saw it (None: not told; see Fetched).
    partitions: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class DeliveryBatch:
    """A PartitionBatch as a consumer hands it out: its messages as first deliveries."""

    deliveries: list[Delivery]
    next_offset: int
    more: bool = False
    partitions: int | None = None


# -- consumer groups -------------------------------------------------------------------

GroupMode = Literal["cluster", "broadcast"]
StartPosition = Literal["earliest", "latest"]


@dataclass(frozen=True, kw_only=True, slots=True)
class GroupInfo:
    """A consumer group's subscription to one topic and its delivery policy."""

    id: int
    name: str
    topic_id: int
    mode: GroupMode
    start_position: StartPosition
    ordered: bool
    retry_ladder: str
    max_attempts: int
    ack_timeout_seconds: int
    generation: int


@dataclass(frozen=True, kw_only=True, slots=True)
class MemberInfo:
    client_id: str
    host: str
    pid: int
    lease_expires_at: dt.datetime
    #: Seconds until the lease expires, by the database clock (negative once expired).
    expires_in: float


@dataclass(frozen=True, kw_only=True, slots=True)
class LeaderInfo:
    client_id: str | None
    epoch: int
    lease_expires_at: dt.datetime
    expires_in: float


@dataclass(frozen=True, kw_only=True, slots=True)
class AssignmentRow:
    """One partition of a group: its owner, the generation it was granted in, and where
    a handoff stands (assigned, revoking, released)."""

    partition: int
    client_id: str | None
    generation: int
    state: Literal["assigned", "revoking", "released"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Delivery:
    """A message handed to a consumer. attempt counts deliveries to this group, from 1."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    headers: dict[str, str]
    body: bytes
    timestamp: dt.datetime
    attempt: int
    message_id: int


def delivery(
    topic: str,
    partition: int,
    offset: int,
    key: bytes | None,
    headers: dict[str, str],
    body: bytes,
    timestamp: dt.datetime,
    attempt: int,
    message_id: int,
) -> Delivery:
    """Delivery(topic=topic, ...), built as stored_message() builds a StoredMessage."""
    d = _new(Delivery)
    _d_topic(d, topic)
    _d_partition(d, partition)
    _d_offset(d, offset)
    _d_key(d, key)
    _d_headers(d, headers)
    _d_body(d, body)
    _d_timestamp(d, timestamp)
    _d_attempt(d, attempt)
    _d_message_id(d, message_id)
    return d


(
    _d_topic,
    _d_partition,
    _d_offset,
    _d_key,
    _d_headers,
    _d_body,
    _d_timestamp,
    _d_attempt,
    _d_message_id,
) = _slot_setters(Delivery)


def deliveries(
    topic: str, partition: int, rows: Sequence[MessageRow], headers: Sequence[dict[str, str]]
) -> list[Delivery]:
    """A first delivery of each row (none a tombstone), with its decoded headers: the
    consume path builds one object per message, straight from the driver's row."""
    return [
        delivery(topic, partition, r[1], r[2], h, r[4], r[5], 1, r[0])
        for r, h in zip(rows, headers, strict=True)
    ]


class Failure(NamedTuple):
    """A delivery that failed: retried after delay seconds, or dead when delay is None.
    traceback: the handler's, bounded (ems.retry.tracebacks); None for an ack timeout or
    a nack()."""

    partition: int
    offset: int
    message_id: int
    attempts: int
    error: str
    delay: float | None
    traceback: str | None = None


_first = itemgetter(0)


@dataclass(frozen=True, kw_only=True, slots=True)
class Settlement:
    """Everything one ack batch writes, in one transaction."""

    #: Delivered messages handled successfully: (partition, offset).
    done: list[tuple[int, int]] = field(default_factory=list)
    failed: list[Failure] = field(default_factory=list)
    #: Ordered groups retry in place: these failures are only logged, not queued.
    logged_only: list[Failure] = field(default_factory=list)
    #: Acked redeliveries from the retry table, whose retry rows go: (partition, offset).
    cleared: list[tuple[int, int]] = field(default_factory=list)
    #: Ordered groups: log rows of messages fetched but handed back unhandled, as
    #: (partition, first offset, last offset).
    handed_back: list[tuple[int, int, int]] = field(default_factory=list)
    #: New cursors: partition -> (next offset, generation the partition was granted in).
    cursors: dict[int, tuple[int, int]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(
            self.done
            or self.failed
            or self.logged_only
            or self.cleared
            or self.handed_back
            or self.cursors
        )

    def partitions(self) -> set[int]:
        """The partitions this settlement writes to."""
        return {
            *map(_first, self.done),
            *(f.partition for f in self.failed),
            *(f.partition for f in self.logged_only),
            *map(_first, self.cleared),
            *map(_first, self.handed_back),
            *self.cursors,
        }

    def only(self, partitions: set[int]) -> Settlement:
        """The part of this settlement that concerns these partitions."""
        return Settlement(
            done=[d for d in self.done if d[0] in partitions],
            failed=[f for f in self.failed if f.partition in partitions],
            logged_only=[f for f in self.logged_only if f.partition in partitions],
            cleared=[c for c in self.cleared if c[0] in partitions],
            handed_back=[h for h in self.handed_back if h[0] in partitions],
            cursors={p: c for p, c in self.cursors.items() if p in partitions},
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class GroupRef:
    """A consumer group: its subscription to one topic."""

    id: int
    name: str
    topic_id: int
    topic: str


@dataclass(frozen=True, kw_only=True, slots=True)
class CompactionRunInfo:
    """A compaction run as recorded in compaction_run."""

    id: int
    status: str
    cutoff: dt.datetime
    #: consumer_group ids in scope; empty means every group.
    group_ids: tuple[int, ...]
    min_id: int | None
    max_id: int | None
    archive_root: str
    archived_rows: int
    summary_rows: int
    deleted_rows: int
    deleted_through_id: int


@dataclass(frozen=True, kw_only=True, slots=True)
class IdRange:
    """Inclusive bounds of a primary-key range and the rows it should hold."""

    low: int
    high: int
    rows: int
