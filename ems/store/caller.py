"""The caller's own transaction, as ems writes through it: a SQLAlchemy Session or
Connection, or a PyMySQL connection; and the check that it reaches this ems database.

A transactional send (the outbox) and an exactly-once settlement both write ems's rows
inside a transaction that the service opened on its own connection, perhaps to another
schema of the same server. Their statements name ems's tables with the ems database's
name, and the first write through a connection reads ems's installation row through it:
a connection to another server (or to a copy of the database) is refused before anything
is written, rather than found out at commit.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import pymysql
from sqlalchemy import Connection, Engine, event
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, scoped_session

from ems.exceptions import ForeignTransaction, InvalidTransaction, StoreError
from ems.store.database import Database
from ems.store.translation import translate

#: What a transactional send or settlement writes through: the caller's transaction.
CallerTransaction = Session | scoped_session[Session] | Connection | pymysql.connections.Connection

_INSTALLATION = "SELECT uuid FROM {schema}.installation ORDER BY id LIMIT 1"
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
    when the driver does not tell its session id: checked at every write then)."""
    thread_id = getattr(driver_connection, "thread_id", None)
    return (id(driver_connection), int(thread_id())) if callable(thread_id) else None


def refuse_autocommit(dbapi: Any) -> None:
    """InvalidTransaction when the driver connection commits each statement alone."""
    get_autocommit = getattr(dbapi, "get_autocommit", None)
    if get_autocommit is not None and get_autocommit():
        raise InvalidTransaction(
            "the connection is in autocommit: each statement would commit alone, so a "
            "transactional write needs a connection inside a transaction"
        )


def quoted_schema(name: str) -> str:
    """The database name as an identifier, safe inside a statement that the driver
    formats (its % doubled)."""
    return "`" + name.replace("`", "``").replace("%", "%%") + "`"


def identity_query(schema: str) -> str:
    """The read of the installation row of the ems database `schema` (quoted_schema's
    form), through a caller's connection."""
    return _INSTALLATION.format(schema=schema)


#: Where a statement of ems names a table: after FROM, JOIN, INTO or UPDATE (not the
#: UPDATE of ON DUPLICATE KEY UPDATE, nor FOR UPDATE). Tables are lowercase, keywords not.
_TABLE_REF = re.compile(r"\b(FROM|JOIN|INTO|(?<!KEY )UPDATE)\s+(?=[a-z_]+\b)")


@lru_cache(maxsize=256)
def qualified(sql: str, schema: str) -> str:
    """One of ems's statements with every table it names in `schema` (quoted_schema's
    form), to run through a caller's connection whose default database is its own."""
    return _TABLE_REF.sub(lambda m: f"{m.group(1)} {schema}.", sql)


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
            # The driver's own connection, which tells its session id: an asyncio
            # driver's (reached through run_sync) is wrapped by SQLAlchemy's adapter.
            self._driver: Any = tx.connection.driver_connection
        elif isinstance(tx, pymysql.connections.Connection):
            self._sa, self.dbapi, self._driver = None, tx, tx
        else:
            raise InvalidTransaction(
                "a transactional write takes a SQLAlchemy Session or Connection or a "
                f"PyMySQL connection, not a {type(tx).__name__}"
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

    def cursor(self) -> Any:
        """A driver cursor on the caller's connection, inside its transaction."""
        return self.dbapi.cursor()

    def on_commit(self, wake: Callable[[], None]) -> None:
        """Have wake called when the caller commits (SQLAlchemy only: a PyMySQL
        connection says nothing, and its rows are found by the relay's next pass)."""
        if self._sa is not None:
            self._sa.info.setdefault(ON_COMMIT, set()).add(wake)

    def identity(self) -> Identity | None:
        return identity_of(self._driver)


class Installation:
    """This ems database's installation UUID, and which caller connections were found to
    reach it (once per connection: a reconnect is checked again)."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self.schema = quoted_schema(db.settings.database_name)
        self._uuid: str | None = None
        #: Identities of the connections found to reach this database.
        self._checked: OrderedDict[Identity, None] = OrderedDict()

    def uuid(self) -> str:
        """This ems database's installation UUID (read once)."""
        if self._uuid is None:
            rows = self._db.select(_INSTALLATION_HERE, ())
            if not rows:
                raise StoreError("the installation row is missing: run `ems db upgrade`")
            self._uuid = str(rows[0][0])
        return self._uuid

    @property
    def identity_sql(self) -> str:
        """Reads, through the caller's connection, the installation it reaches."""
        return identity_query(self.schema)

    def checked(self, identity: Identity | None) -> bool:
        """Whether this connection was found to reach this database (and has not
        reconnected since)."""
        if identity is None or identity not in self._checked:
            return False
        self._checked.move_to_end(identity)
        return True

    def confirm(self, rows: Sequence[tuple[Any, ...]], identity: Identity | None) -> None:
        """Judge what identity_sql read: ForeignTransaction unless this installation."""
        if not rows or str(rows[0][0]) != self.uuid():
            raise ForeignTransaction(
                f"the transaction's connection reaches another ems database than {self.schema} "
                "of this client (another server, or a copy): its commit would not hold ems's "
                "rows"
            )
        if identity is not None:
            self._checked[identity] = None
            if len(self._checked) > _CHECKED_KEPT:
                self._checked.popitem(last=False)

    def unreachable(self, error: StoreError) -> ForeignTransaction:
        """identity_sql failed: the caller's server has no such database or table."""
        return ForeignTransaction(
            f"the transaction's connection does not reach the ems database {self.schema} "
            f"({error}): a transactional write needs the server that holds it"
        )

    def check(self, conn: CallerConnection) -> None:
        """ForeignTransaction unless conn reaches this ems database."""
        identity = conn.identity()
        if self.checked(identity):
            return
        self.uuid()  # read first: a failure here is ems's, not the caller's
        try:
            rows = conn.execute(self.identity_sql, ())
        except StoreError as exc:
            raise self.unreachable(exc) from None
        self.confirm(rows, identity)
