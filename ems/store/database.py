"""The engine, bounded connection retries, the one place driver errors are translated,
and the plain driver connections of the insert path.

How the store runs its (named, module-level) statements, on the autocommit pool's driver
connections:

- ``select(sql, params)``: one read, its rows; retried once on a dropped connection.
- ``single()``: a cursor for one write (or a few independent ones): each statement is its
  own transaction, with its rowcount and lastrowid.
- ``transaction()``: a cursor in BEGIN ... COMMIT, for several statements that must hold
  together, or a lock (SELECT ... FOR UPDATE) that must span statements;
  ``repeatable_read=True`` for locking reads that must lock gaps.
- ``direct``: the producer's INSERTs, on connections kept outside the pool.
- ``own_connection()``: a connection one caller keeps, for a statement on a schedule
  that must never wait for the pool (a member's lease renewal).

These are the only ways in: the SQLAlchemy engine under the pool is the Database's own.

Nothing pings a pooled connection before use (a round trip per statement). Instead, at
checkout, a connection the server already closed or wrote to unasked (a KILL, a restart,
an idle timeout: MariaDB then sends an error and closes) is seen on its socket without a
round trip, and replaced by a new one: so a write after a server restart or a killed
session runs on a live connection, not on the dead one. A connection lost after its
statement was sent is not retried by a write (the statement may have run), only by a
read (select)."""

from __future__ import annotations

import re
import select
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any, TypeVar

import pymysql
from pymysql.constants.SERVER_STATUS import SERVER_STATUS_IN_TRANS
from pymysql.cursors import Cursor
from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine, ExceptionContext
from sqlalchemy.exc import DBAPIError, DisconnectionError, PendingRollbackError, SQLAlchemyError
from sqlalchemy.pool import ConnectionPoolEntry, PoolProxiedConnection

from ems.config import Settings
from ems.exceptions import (
    DatabaseAccessDenied,
    DatabaseReadOnly,
    DatabaseUnavailable,
    EmsError,
    LockConflict,
    StoreError,
    UnknownDatabase,
)
from ems.store import driver
from ems.store.errors import BelowLowWatermark, DuplicateKey
from ems.store.nodes import NodeSet

T = TypeVar("T")

# MySQL / MariaDB error numbers, grouped by what the caller can do about them.
_UNREACHABLE = {1040, 1053, 1077, 2002, 2003, 2005, 2006, 2013, 2055}
#: The server ended the session: MariaDB's idle bounds (4031, ER_CLIENT_INTERACTION_TIMEOUT:
#: idle_write_transaction_timeout or wait_timeout passed, as a process stalled between the
#: statements of a transaction on a busy machine), or a KILL (1927). Its transaction went
#: with it: as a dropped connection, the caller tries again on a new one.
_SESSION_ENDED = {1927, 4031}
#: ER_ERROR_DURING_COMMIT: the commit failed and nothing of the transaction stayed (a
#: Galera node that left the primary component meanwhile): try again, on another node.
_COMMIT_FAILED = {1180}
#: ER_ACCESS_DENIED_ERROR, ER_DBACCESS_DENIED_ERROR: the server answered and refused the
#: user. It will not pass by itself, so it is bad input, never waited for.
_ACCESS_DENIED = {1044, 1045}
#: ER_BAD_DB_ERROR: the server answered, and has no database of the URL's name. Bad
#: input, not a lost server: retrying cannot help, `ems db create` does.
_NO_DATABASE = {1049}
#: A Galera node that left the primary component answers every statement with 1047
#: ("WSREP has not yet prepared node for application use"): its connections are as good
#: as lost, and the next ones go to another node (ems.store.nodes).
_NODE_NOT_READY = {1047}
_DUPLICATE = {1062}
_LOCK = {1205, 1213}
_NO_SCHEMA = {1146}
#: The server takes no writes: --read-only (1290), a read-only transaction (1792), MySQL 8's
#: read-only mode (1836).
_READ_ONLY = {1290, 1792, 1836}
#: "Subquery returns more than 1 row": the message INSERTs' low-watermark guard refused.
_GUARD_REFUSED = {1242}


_SESSION_READ_COMMITTED = "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"
_NEXT_REPEATABLE_READ = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"


def _errno(exc: BaseException | None) -> int | None:
    args = getattr(exc, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


def _connection_lost(error: EmsError) -> bool:
    """Whether the connection is gone (a read-only refusal leaves it usable)."""
    return isinstance(error, DatabaseUnavailable) and not isinstance(error, DatabaseReadOnly)


def translate(exc: SQLAlchemyError | pymysql.err.Error) -> EmsError:
    """Turn a driver error into the ems exception a caller can act on."""
    orig: BaseException | None
    if isinstance(exc, PendingRollbackError):
        # The connection was lost inside a transaction, and was used again before the
        # rollback: the server side of that transaction is gone with the connection.
        return DatabaseUnavailable(f"MySQL is unreachable: the connection was lost ({exc})")
    if isinstance(exc, pymysql.err.Error):
        orig, invalidated = exc, False
    elif isinstance(exc, DBAPIError):
        orig, invalidated = exc.orig, exc.connection_invalidated
    else:
        return StoreError(str(exc))
    lost = invalidated or isinstance(orig, pymysql.err.InterfaceError)
    return translate_code(_errno(orig), str(orig), lost=lost)


def translate_code(code: int | None, detail: str, *, lost: bool) -> EmsError:
    """The ems exception for a MySQL error number, whichever driver reported it; lost:
    the driver says the connection is gone."""
    if code in _DUPLICATE:
        return DuplicateKey(detail)
    if code in _LOCK:
        return LockConflict(detail)
    if code in _READ_ONLY:
        return DatabaseReadOnly(f"MySQL takes no writes: {detail}")
    if code in _NODE_NOT_READY:
        return DatabaseUnavailable(f"the MySQL node takes no statements: {detail}")
    if code in _NO_DATABASE:
        return unknown_database(detail)
    if code in _ACCESS_DENIED:
        return access_denied(detail)
    if code in _UNREACHABLE or lost:
        return DatabaseUnavailable(f"MySQL is unreachable: {detail}")
    if code in _SESSION_ENDED:
        return DatabaseUnavailable(f"MySQL ended the session: {detail}")
    if code in _COMMIT_FAILED:
        return DatabaseUnavailable(f"MySQL could not commit: {detail}")
    if code in _NO_SCHEMA:
        return StoreError(f"{detail}; run `ems db upgrade` to create the schema")
    return StoreError(detail)


def unknown_database(detail: str) -> UnknownDatabase:
    found = re.search(r"Unknown database '([^']*)'", detail)
    name = repr(found.group(1)) if found else "named by EMS_DATABASE_URL"
    return UnknownDatabase(
        f"the database {name} does not exist on the server: run `ems db create` to create "
        "it, then `ems db upgrade`"
    )


def access_denied(detail: str) -> DatabaseAccessDenied:
    found = re.search(r"for user '([^']*)'", detail)
    user = repr(found.group(1)) if found else "of EMS_DATABASE_URL"
    return DatabaseAccessDenied(
        f"MySQL refused the user {user}: check the user and password of EMS_DATABASE_URL "
        f"and the user's grants ({detail})"
    )


@contextmanager
def wrap_errors() -> Iterator[None]:
    try:
        yield
    except (SQLAlchemyError, pymysql.err.Error) as exc:
        raise translate(exc) from exc


def make_engine(settings: Settings, nodes: NodeSet) -> Engine:
    """The autocommit engine of the store's pool: one round trip per statement, no
    BEGIN/COMMIT/reset; explicit transactions (Database.transaction) run READ COMMITTED,
    so every statement sees the newest committed rows (the gap-free reader relies on it).
    Connections go to the node `nodes` picks (one, or a cluster's current node)."""
    engine = create_engine(
        settings.database_nodes[0],
        pool_size=settings.pool_size,
        max_overflow=settings.pool_size * 2,
        pool_recycle=3600,
        pool_reset_on_return=None,
        # No ping: a connection the server dropped is refused at checkout instead (_refuse_dead).
        pool_pre_ping=False,
        isolation_level="AUTOCOMMIT",
        connect_args={
            "connect_timeout": max(1, int(settings.connect_timeout)),
            "read_timeout": settings.read_timeout,
            "write_timeout": settings.write_timeout,
            # Expiries and created_at compare with NOW(6): every session runs in UTC;
            # and a session stalled in a write transaction is ended by the server.
            "init_command": settings.session_init,
        },
    )
    if not nodes.cluster:
        driver.open_through_driver(engine)
    else:
        event.listen(engine, "do_connect", _node_connect(nodes))
        event.listen(engine, "handle_error", _node_gone)
        event.listen(engine, "connect", _note_birth)
        event.listen(engine, "checkout", _refuse_stale(nodes))
    event.listen(engine, "checkout", _refuse_dead)
    # Explicit transactions on this pool (Database.transaction) run READ COMMITTED: under
    # REPEATABLE READ their range UPDATEs would take gap locks, and consumers of
    # neighbouring partitions would deadlock on the log's index.
    event.listen(engine, "connect", _read_committed)
    return engine


def _node_connect(nodes: NodeSet) -> Callable[..., Any]:
    """The pool's connect, sent to the cluster node `nodes` picks."""

    def connect(dialect: Any, record: object, cargs: list[Any], cparams: dict[str, Any]) -> Any:
        return nodes.connect(
            lambda host, port: driver.connect(*cargs, **{**cparams, "host": host, "port": port})
        )

    return connect


def _note_birth(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
    record.info["born"] = time.monotonic()


def _refuse_stale(nodes: NodeSet) -> Callable[..., None]:
    """A pooled connection made before the cluster's current node changed is discarded
    at checkout (the pool then makes a new one, to the current node)."""

    def checkout(dbapi_connection: Any, record: ConnectionPoolEntry, proxy: object) -> None:
        if nodes.stale(record.info.get("born", 0.0)):
            raise DisconnectionError("made for another cluster node")

    return checkout


def _refuse_dead(dbapi_connection: Any, record: ConnectionPoolEntry, proxy: object) -> None:
    """A pooled connection that is already dead is discarded at checkout, before a
    statement is sent on it; the pool then opens a new one in its place (once: a second
    failure is the caller's, as a lost server is)."""
    if not idle_connection_alive(dbapi_connection):
        raise DisconnectionError("the server closed the connection while it was idle")


def idle_connection_alive(conn: Any) -> bool:
    """Whether an idle driver connection (no statement running, no reply due) may still
    be used: its socket has nothing to read. The server writes to an idle session only to
    end it (MariaDB's error packet on a KILL, a shutdown or an idle timeout; then EOF),
    so anything readable, EOF or a reset means a dead connection. A poll, no round trip:
    unlike a ping it costs the hot path nothing measurable."""
    sock = getattr(conn, "_sock", None)
    if sock is None:
        return False  # closed on the client side
    poller = select.poll()
    try:
        poller.register(sock, select.POLLIN | select.POLLPRI)
        return not poller.poll(0)
    except (OSError, ValueError):
        return False


def _node_gone(context: ExceptionContext) -> None:
    """A node that left the primary component keeps its connections open but runs
    nothing: to the pool they are lost, so it renews itself on the next node."""
    if _errno(context.original_exception) in _NODE_NOT_READY:
        context.is_disconnect = True


def _read_committed(dbapi_connection: Any, record: object) -> None:
    with dbapi_connection.cursor() as cursor:
        cursor.execute(_SESSION_READ_COMMITTED)


#: Seconds after which an idle connection is replaced rather than reused, like the
#: engine's pool_recycle, so the server's wait_timeout never closes one under us.
RECYCLE = 3600.0


class DirectConnections:
    """Autocommit driver connections for the producer's INSERTs, without pool bookkeeping.

    A single publish is one INSERT, and checking a connection out of SQLAlchemy's pool and
    back (queue, fairy, events, cursor wrapper) costs the client about a third of what the
    statement does. These come from the autocommit engine (same URL, connect arguments and
    connect events, so the same session settings), detached from its pool, and wait in a
    list. A connection the server dropped is closed with the idle ones, as the pool is
    renewed on a failover. Thread-safe: list pop and append are atomic.
    """

    def __init__(
        self,
        connect: Callable[[], PoolProxiedConnection],
        keep: int,
        on_lost: Callable[[], None],
        stale: Callable[[float], bool],
    ) -> None:
        self._connect = connect
        self._keep = keep
        self._on_lost = on_lost
        #: Whether a connection made then may go to a cluster node no longer current.
        self._stale = stale
        self._idle: list[tuple[Any, float]] = []

    def execute(self, statements: Sequence[bytes]) -> None:
        """Run the statements: one alone in autocommit, several in one transaction."""
        conn, born = self._take()
        try:
            if len(statements) == 1:
                conn.query(statements[0])
            else:
                self._transaction(conn, statements)
        except pymysql.err.Error as exc:
            error = translate(exc)
            if _connection_lost(error):
                # The server dropped this connection, and likely its idle mates and the
                # pool's too (a restart, a failover): the next ones are new.
                _close(conn)
                self.close()
                self._on_lost()
            else:
                self._give_back(conn, born)
            if _errno(exc) in _GUARD_REFUSED:
                # The statements' guard (see ems.store.messages) and nothing else here
                # runs a scalar subquery that can return two rows.
                error = BelowLowWatermark(
                    "an offset lies below its partition's low watermark; nothing was inserted"
                )
            raise error from exc
        except BaseException:
            _close(conn)  # interrupted mid-statement: its state is unknown
            raise
        self._give_back(conn, born)

    def connection_ids(self) -> list[int]:
        """Server connection ids of the idle connections (for tests that kill them)."""
        return [conn.thread_id() for conn, _ in list(self._idle)]

    def close(self) -> None:
        while self._idle:
            try:
                conn, _ = self._idle.pop()
            except IndexError:
                break
            _close(conn)

    def _take(self) -> tuple[Any, float]:
        now = time.monotonic()
        while True:
            try:
                conn, born = self._idle.pop()
            except IndexError:
                conn = self._new()
                return conn, time.monotonic()
            if now - born < RECYCLE and not self._stale(born) and idle_connection_alive(conn):
                return conn, born
            _close(conn)

    def _new(self) -> Any:
        conn = _detached(self._connect)
        # The guarded INSERTs read partition_low in their SELECT part; only under
        # REPEATABLE READ is that a locking read, which makes a purge's raise of the
        # watermark and this insert take turns (READ COMMITTED would read around it).
        conn.query(b"SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        return conn

    def _give_back(self, conn: Any, born: float) -> None:
        # The list, not each caller, makes sure no connection waits in it inside a
        # transaction: the next statement on it would run in that transaction, and its
        # autocommit would then commit or lose what the earlier one left.
        if in_transaction(conn):
            try:
                conn.rollback()
            except pymysql.err.Error:
                _close(conn)
                return
        if len(self._idle) < self._keep:
            self._idle.append((conn, born))
        else:
            _close(conn)

    @staticmethod
    def _transaction(conn: Any, statements: Sequence[bytes]) -> None:
        conn.begin()
        try:
            for statement in statements:
                conn.query(statement)
            conn.commit()
        except BaseException:
            with suppress(pymysql.err.Error):
                conn.rollback()
            raise


class OwnConnection:
    """One autocommit driver connection kept by one caller, for a statement that runs on
    a schedule and must never wait for a connection (a member's lease renewal).

    From the pool, such a statement finds no idle connection whenever the other threads
    hold them all, and the pool then opens one: over a 200 ms link the handshake,
    authentication and session settings took 1.5 s, and a 2 s lease lapsed.
    This one is opened on first use (from the autocommit engine, so with the same
    session settings), kept, and opened again only after the server dropped it. One
    thread at a time.
    """

    def __init__(
        self,
        connect: Callable[[], PoolProxiedConnection],
        stale: Callable[[float], bool],
    ) -> None:
        self._connect = connect
        #: Whether a connection made then may go to a cluster node no longer current.
        self._stale = stale
        self._conn: Any = None
        self._born = 0.0

    @contextmanager
    def cursor(self) -> Iterator[Cursor]:
        if self._conn is not None and (
            self._stale(self._born) or not idle_connection_alive(self._conn)
        ):
            self.close()  # dropped by the server, or made for a node no longer current
        if self._conn is None:
            self._conn = _detached(self._connect)
            self._born = time.monotonic()
        try:
            with self._conn.cursor() as cursor:
                yield cursor
        except pymysql.err.Error as exc:
            error = translate(exc)
            if _connection_lost(error):
                self.close()
            raise error from exc
        except BaseException:
            self.close()  # interrupted mid-statement: its state is unknown
            raise

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            _close(conn)


def _detached(connect: Callable[[], PoolProxiedConnection]) -> Any:
    """A driver connection taken from the pool for good (the pool forgets it)."""
    proxied = connect()
    proxied.detach()
    conn = proxied.dbapi_connection
    assert conn is not None
    return conn


def in_transaction(conn: Any) -> bool:
    """Whether the server's last reply on this driver connection (PyMySQL or asyncmy:
    both keep its status flags) said a transaction is open. After an error reply the flag
    is the one before it, so a transaction the error ended may still read as open: a
    rollback then costs a round trip and changes nothing."""
    return bool(conn.server_status & SERVER_STATUS_IN_TRANS)


def _close(conn: Any) -> None:
    with suppress(Exception):
        conn.close()


class Database:
    """The store's connections (select, single, transaction, direct, own_connection), with
    bounded retries on unreachable servers. The engine and its pool stay inside."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        #: The node connections go to: the only one, or a cluster's current node.
        self.nodes = NodeSet(settings.database_nodes, settings.node_failback)
        self._engine = make_engine(settings, self.nodes)
        #: Plain driver connections for the producer's INSERTs (see DirectConnections).
        self.direct = DirectConnections(
            self._checkout_raw,
            settings.pool_size,
            lambda: self._engine.dispose(close=False),
            self.nodes.stale,
        )

    @contextmanager
    def single(self) -> Iterator[Cursor]:
        """A driver cursor on an autocommit connection, for the hot single-statement path:
        each statement is its own transaction, with no BEGIN, COMMIT or reset round trip."""
        raw = self._checkout_raw()
        try:
            cursor = raw.cursor()
            try:
                yield cursor
            finally:
                cursor.close()
        except pymysql.err.Error as exc:
            error = translate(exc)
            if _connection_lost(error):
                # The server dropped this connection, so it likely dropped its pool-mates
                # too (a restart, a failover): start a fresh pool rather than try each.
                raw.invalidate()
                self._engine.dispose(close=False)
            raise error from exc
        finally:
            raw.close()

    @contextmanager
    def transaction(self, *, repeatable_read: bool = False) -> Iterator[Cursor]:
        """A driver cursor in an explicit transaction on the hot-path pool: BEGIN, the
        statements, COMMIT; no ping before and no reset round trip after. The pool's
        sessions run READ COMMITTED; repeatable_read sets this transaction apart (its
        locking reads then lock the gaps they find, absent rows included)."""
        with self.single() as cursor:
            conn = cursor.connection
            if repeatable_read:
                cursor.execute(_NEXT_REPEATABLE_READ)
            conn.begin()
            try:
                yield cursor
                conn.commit()
            except BaseException:
                with suppress(pymysql.err.Error):
                    conn.rollback()
                raise

    def select(self, sql: str, params: tuple[object, ...]) -> tuple[tuple[Any, ...], ...]:
        """One read-only statement on the hot path. Reads are safe to repeat, so a
        connection the server dropped is retried once on the renewed pool."""
        try:
            return self._select(sql, params)
        except DatabaseUnavailable:
            return self._select(sql, params)

    def _select(self, sql: str, params: tuple[object, ...]) -> tuple[tuple[Any, ...], ...]:
        with self.single() as cursor:
            cursor.execute(sql, params)
            return tuple(cursor.fetchall())

    def own_connection(self) -> OwnConnection:
        """An autocommit connection of the caller's own, opened on first use: the lease
        renewal's. On a cluster it is opened without the catch-up (a causal read) that
        other connections wait for: see NodeSet.without_catch_up."""
        return OwnConnection(self._checkout_blind, self.nodes.stale)

    def _checkout_blind(self) -> PoolProxiedConnection:
        with self.nodes.without_catch_up():
            return self._checkout_raw()

    def _checkout_raw(self) -> PoolProxiedConnection:
        return self._retrying(self._engine.raw_connection)

    def _retrying(self, connect: Callable[[], T]) -> T:
        attempts = self.settings.connect_attempts
        delay = 0.1
        for attempt in range(1, attempts + 1):
            try:
                return connect()
            # engine.raw_connection() raises the driver's own error, not SQLAlchemy's.
            except (SQLAlchemyError, pymysql.err.Error) as exc:
                error = translate(exc)
                if not isinstance(error, DatabaseUnavailable) or attempt == attempts:
                    raise error from exc
            time.sleep(delay)
            delay *= 2
        raise DatabaseUnavailable()  # pragma: no cover - the loop always returns or raises

    def dispose(self) -> None:
        self.direct.close()
        self._engine.dispose()
