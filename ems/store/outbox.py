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
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pymysql
from sqlalchemy import Connection, Engine, event
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, scoped_session

from ems.exceptions import (
    BelowLowWatermark,
    ForeignTransaction,
    InvalidTransaction,
    StoreError,
)
from ems.store.database import _GUARD_REFUSED, Database, _errno, translate
from ems.store.messages import (
    _HEX_ROW_BYTES,
    _INSERT,
    _LOCK_LOWS,
    _STATEMENT_BYTES,
    below_low,
    insert_statements,
    key_headers,
)
from ems.types import NewMessage, OutboxRow, TopicInfo

#: (partition, key, headers JSON, body) of a validated message (ems.producer.planning).
OutboxItem = tuple[int, bytes | None, str | None, bytes]  # as ems.ports.OutboxItem
#: What a transactional send writes through: the caller's transaction.
CallerTransaction = Session | scoped_session[Session] | Connection | pymysql.connections.Connection

_HEAD = (
    "INSERT INTO {schema}.message_outbox (topic_id, partition_no, msg_key, headers, body) VALUES "
)
_ROW = "(%d,%d,%s,%s,X'%s')"
_PARAMS_ROW = "(%s,%s,%s,%s,%s)"
_INSTALLATION = "SELECT uuid FROM {schema}.installation ORDER BY id LIMIT 1"

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
_INSTALLATION_HERE = "SELECT uuid FROM installation ORDER BY id LIMIT 1"


#: Key, in the caller's connection's info, of what to wake when its transaction ends.
ON_COMMIT = "ems.on_commit"


def _committing(conn: Connection) -> None:
    for wake in conn.info.pop(ON_COMMIT, ()):
        wake()


def _rolling_back(conn: Connection) -> None:
    conn.info.pop(ON_COMMIT, None)


# SQLAlchemy tells of a commit as it sends it, not after: a relay woken here may look
# before the rows are visible, and so looks again shortly (ems.producer.relay.RelayLoop).
event.listen(Engine, "commit", _committing)
event.listen(Engine, "rollback", _rolling_back)


#: A connection as the installation check remembers it: the driver object's id and the
#: server's id of its session. Neither alone would do: an object's id is reused once it is
#: gone, a reconnect keeps the object, and session ids restart with the server.
Identity = tuple[int, int]
#: Connections remembered as checked (the least recently used are forgotten).
_CHECKED_KEPT = 4096


def identity_of(driver_connection: Any) -> Identity | None:
    """The identity of a PyMySQL, mysqlclient, asyncmy or aiomysql connection (None
    when the driver does not tell its session id: checked at every send then)."""
    thread_id = getattr(driver_connection, "thread_id", None)
    return (id(driver_connection), int(thread_id())) if callable(thread_id) else None


def refuse_autocommit(dbapi: Any) -> None:
    """InvalidTransaction when the driver connection commits each statement alone."""
    get_autocommit = getattr(dbapi, "get_autocommit", None)
    if get_autocommit is not None and get_autocommit():
        raise InvalidTransaction(
            "the connection is in autocommit: each statement would commit alone, so a "
            "transactional send needs a connection inside a transaction"
        )


def quoted_schema(name: str) -> str:
    """The database name as an identifier, safe inside a statement that the driver
    formats (its % doubled)."""
    return "`" + name.replace("`", "``").replace("%", "%%") + "`"


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


class CallerConnection:
    """The caller's transaction, reached through what they gave: a SQLAlchemy Session or
    scoped_session (its connection, which begins its transaction), Connection (which
    begins one, so that its commit() commits these rows) or a PyMySQL connection (not in
    autocommit)."""

    def __init__(self, tx: object) -> None:
        if isinstance(tx, scoped_session):  # Flask-SQLAlchemy's db.session, for one
            tx = tx()
        if isinstance(tx, Session):
            tx = tx.connection()
        if isinstance(tx, Connection):
            self._sa: Connection | None = tx
            self.dbapi: Any = tx.connection.dbapi_connection
        elif isinstance(tx, pymysql.connections.Connection):
            self._sa, self.dbapi = None, tx
        else:
            raise InvalidTransaction(
                "a transactional send takes a SQLAlchemy Session or Connection or a PyMySQL "
                f"connection, not a {type(tx).__name__}"
            )
        refuse_autocommit(self.dbapi)

    def execute(self, sql: str, params: tuple[object, ...]) -> list[tuple[Any, ...]]:
        """Run one statement in the caller's transaction; driver errors as ems's."""
        try:
            if self._sa is not None:
                result = self._sa.exec_driver_sql(sql, params)
                return [tuple(r) for r in result] if result.returns_rows else []
            with self.dbapi.cursor() as cursor:
                cursor.execute(sql, params)
                return list(cursor.fetchall() or ())
        except (SQLAlchemyError, pymysql.err.Error) as exc:
            raise translate(exc) from exc

    def on_commit(self, wake: Callable[[], None]) -> None:
        """Have wake called when the caller commits (SQLAlchemy only: a PyMySQL
        connection says nothing, and its rows are found by the relay's next pass)."""
        if self._sa is not None:
            self._sa.info.setdefault(ON_COMMIT, set()).add(wake)

    def identity(self) -> Identity | None:
        return identity_of(self.dbapi)


class OutboxWriter:
    """Writes a transactional send's rows through the caller's connection, having checked
    once per connection that it reaches this ems database (its installation row)."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self.schema = quoted_schema(db.settings.database_name)
        self._installation: str | None = None
        #: DBAPI connection -> the server connection id it was checked under.
        self._checked: OrderedDict[Identity, None] = OrderedDict()

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
        self._check(conn)
        for sql, params in outbox_statements(self.schema, topic_id, items):
            conn.execute(sql, params)
        if on_commit is not None:
            conn.on_commit(on_commit)

    def installation(self) -> str:
        """This ems database's installation UUID (read once)."""
        if self._installation is None:
            rows = self._db.select(_INSTALLATION_HERE, ())
            if not rows:
                raise StoreError("the installation row is missing: run `ems db upgrade`")
            self._installation = str(rows[0][0])
        return self._installation

    @property
    def identity_sql(self) -> str:
        """Reads, through the caller's connection, the installation it reaches."""
        return _INSTALLATION.format(schema=self.schema)

    def checked(self, identity: Identity | None) -> bool:
        """Whether this connection was found to reach this database (and has not
        reconnected since)."""
        if identity is None or identity not in self._checked:
            return False
        self._checked.move_to_end(identity)
        return True

    def confirm(self, rows: Sequence[tuple[Any, ...]], identity: Identity | None) -> None:
        """Judge what identity_sql read: ForeignTransaction unless this installation."""
        if not rows or str(rows[0][0]) != self.installation():
            raise ForeignTransaction(
                f"the transaction's connection reaches another ems database than {self.schema} "
                "of this producer (another server, or a copy): its commit would not publish"
            )
        if identity is not None:
            self._checked[identity] = None
            if len(self._checked) > _CHECKED_KEPT:
                self._checked.popitem(last=False)

    def unreachable(self, error: StoreError) -> ForeignTransaction:
        """identity_sql failed: the caller's server has no such database or table."""
        return ForeignTransaction(
            f"the transaction's connection does not reach the ems database {self.schema} "
            f"({error}): a transactional send needs the server that holds it"
        )

    def _check(self, conn: CallerConnection) -> None:
        identity = conn.identity()
        if self.checked(identity):
            return
        self.installation()  # read first: a failure here is ems's, not the caller's
        try:
            rows = conn.execute(self.identity_sql, ())
        except StoreError as exc:
            raise self.unreachable(exc) from None
        self.confirm(rows, identity)


class RelayBatch:
    """A topic's committed outbox rows, oldest first, taken by one relay inside its
    transaction; move() inserts them at their offsets and deletes them, all at commit."""

    def __init__(self, cursor: Any, topic_id: int, rows: list[OutboxRow]) -> None:
        self._cursor = cursor
        self.topic_id = topic_id
        self.rows = rows

    def move(self, messages: Sequence[NewMessage]) -> None:
        """Insert the messages (the rows, placed) and delete the rows: DuplicateKey when
        an offset is taken, BelowLowWatermark when one lies below its partition's low
        watermark (the caller's transaction then rolls back, the rows stay)."""
        statements = insert_statements(messages)
        try:
            if statements is None:
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
        params = [
            (m.topic_id, m.partition, m.offset, m.key, m.headers, m.body, None) for m in messages
        ]
        self._cursor.executemany(_INSERT, params)


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
