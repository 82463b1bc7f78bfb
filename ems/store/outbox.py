"""Transactional publishing's statements: the outbox rows a send writes through the
caller's own connection, inside the caller's transaction, and the relay's move of
committed rows into the message table.

An outbox row has a partition but no offset. It becomes visible when the caller commits,
all of a transaction's rows at once, and a relay then gives them offsets and inserts them
into the message table in the same transaction that deletes them from the outbox: a row is
moved once, whatever fails, and the outbox itself says whether a move whose reply was lost
committed. An open transaction holds nothing but its own rows: no offset is taken for it,
so no reader waits on a hole it made, and the relay reads the outbox without locking.
"""

from __future__ import annotations

from binascii import hexlify
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from operator import itemgetter
from typing import Any

import pymysql

from ems.exceptions import StoreError
from ems.store.caller import CallerConnection, Installation
from ems.store.database import Database
from ems.store.errors import BelowLowWatermark
from ems.store.fences import FENCES_QUERY, read_fences, refusal
from ems.store.inserts import _HEX_ROW_BYTES, _STATEMENT_BYTES, key_headers
from ems.store.translation import NO_PARENT, error_number
from ems.types import OutboxPlace, OutboxRow, OutboxWaiting, Schedule, Scheduled, TopicInfo

#: (partition, key, headers JSON, body) of a validated message (ems.producer.planning).
OutboxItem = tuple[int, bytes | None, str | None, bytes]  # as ems.ports.OutboxItem

_HEAD = (
    "INSERT INTO {schema}.message_outbox (topic_id, partition_no, msg_key, headers, body{due}) "
    "VALUES "
)
_ROW = "(%d,%d,%s,%s,X'%s'{due})"
_PARAMS_ROW = "(%s,%s,%s,%s,%s{due})"

# Every time of a scheduled row is UTC: the caller's session may run in any time zone,
# so NOW() is never used for it.
_NOW = "UTC_TIMESTAMP(6)"
# Per topic with outbox rows: whether undelayed rows wait, and its soonest scheduled time
# (with the database's clock to compare it with). Every read is a few index entries,
# however many rows wait for a later time: the topics by a loose scan of the outbox's
# index (one dive per topic), then one dive each for the probes (rows of a topic since
# deleted are left where they are).
_WAITING = (
    "SELECT t.id, t.name, t.partitions, t.retention_hours, t.max_body_bytes, t.created_at, "
    "EXISTS (SELECT 1 FROM message_outbox o WHERE o.topic_id = t.id AND o.deliver_at IS NULL), "
    "(SELECT o.deliver_at FROM message_outbox o WHERE o.topic_id = t.id "
    "AND o.deliver_at IS NOT NULL ORDER BY o.deliver_at LIMIT 1), "
    f"{_NOW} FROM (SELECT topic_id FROM message_outbox GROUP BY topic_id) AS w "
    "JOIN topic t ON t.id = w.topic_id ORDER BY t.id"
)
# The topic's relay row, made by a relay's first pass on it. Looked for by a plain read
# first: an INSERT IGNORE of a row that exists waits on its lock, and a relay holds it for
# its whole pass, where every other relay skips the topic instead.
_HAS_RELAY_ROW = "SELECT 1 FROM outbox_relay WHERE topic_id = %s"
_ENSURE = "INSERT IGNORE INTO outbox_relay (topic_id) VALUES (%s)"
# One relay per topic at a time keeps a transaction's rows in order; the others skip the
# topic rather than wait for it.
_TAKE = "SELECT topic_id FROM outbox_relay WHERE topic_id = %s FOR UPDATE SKIP LOCKED"
# A consistent read: rows of transactions still open are not seen and not waited for.
# Undelayed rows in send order; due scheduled rows in the order of their times, then of
# their sends. Both are ranges of (topic_id, deliver_at, id): rows not yet due are not read.
# What placing a row needs, and no more: its headers and body stay on the server (_MOVE).
_PENDING = (
    "SELECT id, partition_no, msg_key FROM message_outbox "
    "WHERE topic_id = %s AND deliver_at IS NULL ORDER BY id LIMIT %s"
)
_DUE = (
    "SELECT id, partition_no, msg_key FROM message_outbox "
    f"WHERE topic_id = %s AND deliver_at <= {_NOW} ORDER BY deliver_at, id LIMIT %s"
)
# The rows a move takes, each with its place and, the first of each partition, that
# partition's fence: a JSON array of [id, partition, offset, fence or null].
_PLACES = (
    "JSON_TABLE('[{places}]', '$[*]' COLUMNS (id BIGINT UNSIGNED PATH '$[0]', "
    "p INT PATH '$[1]', o BIGINT UNSIGNED PATH '$[2]', f BIGINT PATH '$[3]')) AS r"
)
_PLACE = "[%d,%d,%d,%d]"
_UNFENCED_PLACE = "[%d,%d,%d,null]"
# The move, on the server: each row copied from the outbox into its topic at the place the
# relay gave it, marked as published in a transaction (no write token: the outbox itself
# tells whether a move committed). The places come first (STRAIGHT_JOIN) and each finds
# its row by the primary key: under REPEATABLE READ this read of the outbox locks what it
# reads, and so reads the rows moved and no other. A scan would lock its way through rows
# of open transactions among them (smaller ids committed later) and wait for each. Each
# partition's first row carries its fence (ems.store.fences), which message's foreign key
# checks: the relay checked the places against the fences it read, and a fence moved on
# since refuses the whole statement (the check's lock guards the partition's other rows,
# which carry none, until the move commits, as the producer's writes do). The rows go in
# the order of the places: by partition, as the producer's rows go and as fencers take the
# fences (no deadlock between them), each partition's in the order they were read in, so
# message ids follow it as offsets do.
_MOVE = (
    "INSERT INTO message (topic_id, partition_no, offset_no, msg_key, headers, body, "
    "transactional, fence) SELECT STRAIGHT_JOIN {topic}, r.p, r.o, o.msg_key, o.headers, "
    "o.body, 1, r.f FROM {places} JOIN message_outbox o FORCE INDEX (PRIMARY) ON o.id = r.id"
)
# The moved rows' delete, by the same point reads.
_DELETE = (
    "DELETE o FROM {places} STRAIGHT_JOIN message_outbox o FORCE INDEX (PRIMARY) ON o.id = r.id"
)
# Index entries only: one read per message waiting (up to a cap, when one is given).
_SCHEDULED = (
    "SELECT COUNT(*), MIN(deliver_at) FROM (SELECT deliver_at FROM message_outbox "
    f"WHERE topic_id = %s AND deliver_at > {_NOW} ORDER BY deliver_at LIMIT %s) AS s"
)
_partition_of = itemgetter(1)  # of an OutboxPlace
#: A LIMIT that reads every row.
_ALL = 2**63 - 1
_COUNT = "SELECT COUNT(*) FROM message_outbox WHERE topic_id = %s"
_MOVED = "UPDATE outbox_relay SET moved = moved + %s, moved_at = NOW(6) WHERE topic_id = %s"


def lowest_places(places: Sequence[OutboxPlace]) -> dict[int, int]:
    """The lowest offset of each partition among the places: what the fences check."""
    lowest: dict[int, int] = {}
    for _, partition, offset in places:
        if offset < lowest.get(partition, offset + 1):
            lowest[partition] = offset
    return lowest


def move_statements(
    topic_id: int, places: Sequence[OutboxPlace], fences: Sequence[int]
) -> tuple[str, str]:
    """The INSERT ... SELECT that copies the rows to their places, each partition's first
    with its fence (fences[partition]), in partition order, and the DELETE of the rows."""
    ordered = sorted(places, key=_partition_of)  # stable: a partition's rows in their order
    cells, last = [], None
    for i, p, o in ordered:
        cells.append(_UNFENCED_PLACE % (i, p, o) if p == last else _PLACE % (i, p, o, fences[p]))
        last = p
    table = _PLACES.format(places=",".join(cells))
    return _MOVE.format(topic=topic_id, places=table), _DELETE.format(places=table)


def due_sql(schedule: Schedule | None) -> str | None:
    """The SQL of a scheduled row's deliver_at (None: not scheduled): a delay counts on the
    server's clock from the row's write; a time is a literal (UTC)."""
    if schedule is None:
        return None
    if schedule.at is not None:
        return f"'{schedule.at:%Y-%m-%d %H:%M:%S.%f}'"
    return f"{_NOW} + INTERVAL {int(schedule.delay_us or 0)} MICROSECOND"


def outbox_statements(
    schema: str,
    topic_id: int,
    items: Sequence[OutboxItem],
    schedule: Schedule | None = None,
) -> list[tuple[str, tuple[object, ...]]]:
    """The INSERTs of the items into the outbox, in order, with their parameters: hex
    literals in multi-row statements under the producer's statement size, and a row too
    large for hex alone with the driver's escaping; each row with the schedule's
    deliver_at, if any. Every statement is formatted by the driver (so a % in the
    schema's name is written %%; the schedule's SQL holds none)."""
    due = due_sql(schedule)
    head = _HEAD.format(schema=schema, due="" if due is None else ", deliver_at")
    row_sql = _ROW.replace("{due}", "" if due is None else f",{due}")
    params_row = _PARAMS_ROW.replace("{due}", "" if due is None else f",{due}")
    statements: list[tuple[str, tuple[object, ...]]] = []
    rows: list[str] = []
    size = len(head)
    for partition, key, headers, body in items:
        if len(body) + len(key or b"") + len(headers or "") > _HEX_ROW_BYTES:
            if rows:
                statements.append((head + ",".join(rows), ()))
                rows, size = [], len(head)
            statements.append((head + params_row, (topic_id, partition, key, headers, body)))
            continue
        key_sql, headers_sql = key_headers(key, headers)
        row = row_sql % (
            topic_id,
            partition,
            key_sql.decode(),
            headers_sql.decode(),
            hexlify(body).decode(),
        )
        if rows and size + len(row) + 1 > _STATEMENT_BYTES:
            statements.append((head + ",".join(rows), ()))
            rows, size = [], len(head)
        rows.append(row)
        size += len(row) + 1
    if rows:
        statements.append((head + ",".join(rows), ()))
    return statements


class OutboxWriter:
    """Writes a transactional send's rows through the caller's connection, having checked
    once per connection that it reaches this ems database (its installation row)."""

    def __init__(self, db: Database) -> None:
        self.installation = Installation(db)
        self.schema = self.installation.schema

    def write(
        self,
        tx: object,
        topic_id: int,
        items: Sequence[OutboxItem],
        on_commit: Callable[[], None] | None = None,
        schedule: Schedule | None = None,
    ) -> None:
        """Insert the items into the outbox inside the caller's transaction (scheduled,
        if a schedule is given), and have on_commit called when it commits (where the
        caller's library tells): InvalidTransaction when tx cannot carry them,
        ForeignTransaction when it runs on a server that does not hold this ems
        database."""
        conn = CallerConnection(tx)
        self.installation.check(conn)
        for sql, params in outbox_statements(self.schema, topic_id, items, schedule):
            conn.execute(sql, params)
        if on_commit is not None:
            conn.on_commit(on_commit)


class RelayBatch:
    """A topic's committed outbox rows, oldest first, taken by one relay inside its
    transaction; move() copies them to their places and deletes them, all at commit,
    without their bodies leaving the server."""

    def __init__(self, cursor: Any, topic_id: int, rows: list[OutboxRow]) -> None:
        self._cursor = cursor
        self.topic_id = topic_id
        self.rows = rows

    def move(self, places: Sequence[OutboxPlace], *, partitions: int | None = None) -> None:
        """Copy the rows into the message table at their places ((id, partition,
        offset), in the rows' order) and delete them: DuplicateKey when an offset is
        taken, BelowLowWatermark when one lies below its partition's low watermark or when
        the topic no longer has the `partitions` the rows were routed by (the relay's
        transaction then rolls back, the rows stay)."""
        self._cursor.execute(FENCES_QUERY, (self.topic_id,))
        found = read_fences(self.topic_id, self._cursor.fetchall())
        why = refusal(lowest_places(places), found, partitions)
        if why is not None:
            raise BelowLowWatermark(why)
        insert, delete = move_statements(self.topic_id, places, found.fences)
        try:
            copied = self._cursor.execute(insert)
        except pymysql.err.Error as exc:
            if error_number(exc) in NO_PARENT:  # a fence moved on since the read
                raise BelowLowWatermark("a partition's fence moved on during the move") from exc
            raise
        # Only a topic's delete removes rows under its relay: move none rather than some.
        if copied != len(places) or self._cursor.execute(delete) != len(places):
            raise StoreError("outbox rows were deleted while being moved")
        self._cursor.execute(_MOVED, (len(places), self.topic_id))


class OutboxStore:
    """The relay's side: which topics have committed rows waiting, and their move."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.writer = OutboxWriter(db)
        self._ensured: set[int] = set()

    def waiting(self) -> OutboxWaiting:
        """The topics with outbox rows to move now (committed, and undelayed or due), and
        the seconds until the soonest scheduled row comes due: 0 when one is due now
        (the rows due after it are seen by the next pass, once it has moved)."""
        topics: list[TopicInfo] = []
        soonest: float | None = None
        for i, n, p, r, m, c, undelayed, first_at, now in self.db.select(_WAITING, ()):
            due_in = None if first_at is None else max((first_at - now).total_seconds(), 0.0)
            if undelayed or due_in == 0.0:
                topics.append(
                    TopicInfo(
                        id=int(i),
                        name=n,
                        partitions=int(p),
                        retention_hours=int(r),
                        max_body_bytes=int(m),
                        created_at=c,
                    )
                )
            if due_in is not None and (soonest is None or due_in < soonest):
                soonest = due_in
        return OutboxWaiting(topics=topics, next_due=soonest)

    def schedule(self, topic_id: int, items: Sequence[OutboxItem], schedule: Schedule) -> None:
        """Write a scheduled send's rows (not in a caller's transaction: in one of ems's
        own), all or none."""
        with self.db.transaction() as cursor:
            for sql, params in outbox_statements(self.writer.schema, topic_id, items, schedule):
                cursor.execute(sql, params)

    @contextmanager
    def relay(
        self, topic_id: int, limit: int, *, scheduled: bool = False
    ) -> Iterator[RelayBatch | None]:
        """The topic's oldest committed undelayed rows (up to limit), or with scheduled
        its due scheduled rows in the order of their times, in a transaction that holds
        the topic's relay row; None while another relay holds it. The transaction
        commits when the block ends, and rolls back on an error."""
        if topic_id not in self._ensured:
            if not self.db.select(_HAS_RELAY_ROW, (topic_id,)):
                with self.db.single() as cursor:
                    cursor.execute(_ENSURE, (topic_id,))
            self._ensured.add(topic_id)
        with self.db.transaction(repeatable_read=True) as cursor:
            # Taken before the first consistent read, so the snapshot the rows are read
            # in starts after the previous relay's commit: it never sees rows moved.
            cursor.execute(_TAKE, (topic_id,))
            if not cursor.fetchall():
                yield None
                return
            cursor.execute(_DUE if scheduled else _PENDING, (topic_id, limit))
            rows = [OutboxRow(int(i), int(p), k) for i, p, k in cursor.fetchall()]
            yield RelayBatch(cursor, topic_id, rows)

    def pending(self, topic_id: int) -> int:
        """How many committed rows of the topic wait to be moved, scheduled ones included
        (tests, operators)."""
        rows = self.db.select(_COUNT, (topic_id,))
        return int(rows[0][0])

    def scheduled(self, topic_id: int, cap: int | None = None) -> Scheduled:
        """The topic's scheduled messages not yet due: how many (at most cap + 1, when a
        cap is given), and the soonest's time (a range of the outbox's index: one entry
        read per message counted)."""
        limit = _ALL if cap is None else cap + 1
        ((count, first_at),) = self.db.select(_SCHEDULED, (topic_id, limit))
        return Scheduled(count=int(count), next_at=first_at)
