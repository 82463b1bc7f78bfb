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
from typing import Any

import pymysql

from ems.exceptions import BelowLowWatermark
from ems.store.caller import CallerConnection, Installation
from ems.store.database import _GUARD_REFUSED, Database, _errno
from ems.store.messages import (
    _HEX_ROW_BYTES,
    _INSERT_TRANSACTIONAL,
    _LOCK_LOWS,
    _STATEMENT_BYTES,
    below_low,
    check_routed,
    insert_statements,
    key_headers,
)
from ems.types import NewMessage, OutboxRow, TopicInfo

#: (partition, key, headers JSON, body) of a validated message (ems.producer.planning).
OutboxItem = tuple[int, bytes | None, str | None, bytes]  # as ems.ports.OutboxItem

_HEAD = (
    "INSERT INTO {schema}.message_outbox (topic_id, partition_no, msg_key, headers, body) VALUES "
)
_ROW = "(%d,%d,%s,%s,X'%s')"
_PARAMS_ROW = "(%s,%s,%s,%s,%s)"

# The topics whose outbox holds committed rows: an index scan of the outbox's topic ids
# (rows of a topic since deleted are left where they are).
_WAITING = (
    "SELECT id, name, partitions, retention_hours, max_body_bytes, created_at FROM topic "
    "WHERE id IN (SELECT DISTINCT topic_id FROM message_outbox) ORDER BY id"
)
_ENSURE = "INSERT IGNORE INTO outbox_relay (topic_id) VALUES (%s)"
# One relay per topic at a time keeps a transaction's rows in order; the others skip the
# topic rather than wait for it.
_TAKE = "SELECT topic_id FROM outbox_relay WHERE topic_id = %s FOR UPDATE SKIP LOCKED"
# A consistent read: rows of transactions still open are not seen and not waited for.
_PENDING = (
    "SELECT id, partition_no, msg_key, headers, body FROM message_outbox "
    "WHERE topic_id = %s ORDER BY id LIMIT %s"
)
_DELETE = "DELETE FROM message_outbox WHERE id IN ({ids})"
_MOVED = "UPDATE outbox_relay SET moved = moved + %s, moved_at = NOW(6) WHERE topic_id = %s"


def outbox_statements(
    schema: str, topic_id: int, items: Sequence[OutboxItem]
) -> list[tuple[str, tuple[object, ...]]]:
    """The INSERTs of the items into the outbox, in order, with their parameters: hex
    literals in multi-row statements under the producer's statement size, and a row too
    large for hex alone with the driver's escaping. Every statement is formatted by the
    driver (so a % in the schema's name is written %%)."""
    head = _HEAD.format(schema=schema)
    statements: list[tuple[str, tuple[object, ...]]] = []
    rows: list[str] = []
    size = len(head)
    for partition, key, headers, body in items:
        if len(body) + len(key or b"") + len(headers or "") > _HEX_ROW_BYTES:
            if rows:
                statements.append((head + ",".join(rows), ()))
                rows, size = [], len(head)
            statements.append((head + _PARAMS_ROW, (topic_id, partition, key, headers, body)))
            continue
        key_sql, headers_sql = key_headers(key, headers)
        row = _ROW % (
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
    ) -> None:
        """Insert the items into the outbox inside the caller's transaction, and have
        on_commit called when it commits (where the caller's library tells):
        InvalidTransaction when tx cannot carry them, ForeignTransaction when it runs on
        a server that does not hold this ems database."""
        conn = CallerConnection(tx)
        self.installation.check(conn)
        for sql, params in outbox_statements(self.schema, topic_id, items):
            conn.execute(sql, params)
        if on_commit is not None:
            conn.on_commit(on_commit)


class RelayBatch:
    """A topic's committed outbox rows, oldest first, taken by one relay inside its
    transaction; move() inserts them at their offsets and deletes them, all at commit."""

    def __init__(self, cursor: Any, topic_id: int, rows: list[OutboxRow]) -> None:
        self._cursor = cursor
        self.topic_id = topic_id
        self.rows = rows

    def move(self, messages: Sequence[NewMessage], *, partitions: int | None = None) -> None:
        """Insert the messages (the rows, placed) and delete the rows: DuplicateKey when
        an offset is taken, BelowLowWatermark when one lies below its partition's low
        watermark or when the topic no longer has the `partitions` the messages were
        routed by (the caller's transaction then rolls back, the rows stay)."""
        statements = insert_statements(messages, transactional=True, partitions=partitions)
        try:
            if statements is None:
                if partitions is not None:
                    check_routed(self._cursor, self.topic_id, partitions)
                self._insert_escaped(messages)
            else:
                for statement in statements:
                    self._cursor.execute(statement)
        except pymysql.err.Error as exc:
            if _errno(exc) in _GUARD_REFUSED:
                raise BelowLowWatermark("an offset lies below its low watermark") from exc
            raise
        ids = [r.id for r in self.rows]
        self._cursor.execute(_DELETE.format(ids=",".join(["%s"] * len(ids))), ids)
        self._cursor.execute(_MOVED, (len(ids), self.topic_id))

    def _insert_escaped(self, messages: Sequence[NewMessage]) -> None:
        """Rows too large for hex literals: the lows read with a locking read first, as
        MessageStore does."""
        partitions = sorted({m.partition for m in messages})
        lock = _LOCK_LOWS.format(",".join(["%s"] * len(partitions)))
        self._cursor.execute(lock, (self.topic_id, *partitions))
        lows = {int(p): int(low) for p, low in self._cursor.fetchall()}
        if below_low(lows, messages):
            raise BelowLowWatermark("an offset lies below its partition's low watermark")
        params = [(m.topic_id, m.partition, m.offset, m.key, m.headers, m.body) for m in messages]
        self._cursor.executemany(_INSERT_TRANSACTIONAL, params)


class OutboxStore:
    """The relay's side: which topics have committed rows waiting, and their move."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.writer = OutboxWriter(db)
        self._ensured: set[int] = set()

    def waiting(self) -> list[TopicInfo]:
        """The topics with committed outbox rows."""
        return [
            TopicInfo(
                id=int(i),
                name=n,
                partitions=int(p),
                retention_hours=int(r),
                max_body_bytes=int(m),
                created_at=c,
            )
            for i, n, p, r, m, c in self.db.select(_WAITING, ())
        ]

    @contextmanager
    def relay(self, topic_id: int, limit: int) -> Iterator[RelayBatch | None]:
        """The topic's oldest committed rows (up to limit) in a transaction that holds
        the topic's relay row; None while another relay holds it. The transaction
        commits when the block ends, and rolls back on an error."""
        if topic_id not in self._ensured:
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
            cursor.execute(_PENDING, (topic_id, limit))
            rows = [OutboxRow(int(i), int(p), k, h, b) for i, p, k, h, b in cursor.fetchall()]
            yield RelayBatch(cursor, topic_id, rows)

    def pending(self, topic_id: int) -> int:
        """How many committed rows of the topic wait to be moved (tests, operators)."""
        rows = self.db.select(
            "SELECT COUNT(*) FROM message_outbox WHERE topic_id = %s", (topic_id,)
        )
        return int(rows[0][0])
