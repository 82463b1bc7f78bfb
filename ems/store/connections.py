"""Plain driver connections kept outside SQLAlchemy's pool: the hot path's statements and
the producer's INSERTs (DirectConnections), and a connection one caller keeps for a
scheduled statement (OwnConnection), all taken from the autocommit engine, so with its
session settings."""

from __future__ import annotations

import select
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

import pymysql
from pymysql.constants.SERVER_STATUS import SERVER_STATUS_IN_TRANS
from pymysql.cursors import Cursor
from sqlalchemy.pool import PoolProxiedConnection

from ems.exceptions import DatabaseUnavailable, EmsError, caused
from ems.sockets import bound_in_kernel
from ems.store.translation import connection_lost, translate

#: The attribute an idle connection's kept poller (with its socket) is stored in.
_POLLER = "_ems_idle_poller"


def idle_connection_alive(conn: Any) -> bool:
    """Whether an idle driver connection (no statement running, no reply due) may still
    be used: its socket has nothing to read. The server writes to an idle session only to
    end it (MariaDB's error packet on a KILL, a shutdown or an idle timeout; then EOF),
    so anything readable, EOF or a reset means a dead connection. A poll, no round trip:
    unlike a ping it costs the hot path nothing measurable."""
    sock = getattr(conn, "_sock", None)
    if sock is None:
        return False  # closed on the client side
    # The poller is kept with the connection (registering a new one cost more than the
    # poll): it stays valid while the connection keeps that socket.
    kept = getattr(conn, _POLLER, None)
    try:
        if kept is None or kept[0] is not sock:
            poller = select.poll()
            poller.register(sock, select.POLLIN | select.POLLPRI)
            setattr(conn, _POLLER, (sock, poller))
        else:
            poller = kept[1]
        return not poller.poll(0)
    except (OSError, ValueError):
        return False


#: Seconds after which an idle connection is replaced rather than reused, like the
#: engine's pool_recycle, so the server's wait_timeout never closes one under us.
RECYCLE = 3600.0


#: What a connection of the producer's INSERTs runs once, when made: REPEATABLE READ, the
#: level their guard was proven under. Their guard is now the foreign key's check of the
#: partitions' fences (ems.store.fences), a locking check at any level; the level stays
#: so that the locks an INSERT takes (its unique key's, its fences') stay those tested.
INSERTS_SESSION = b"SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ"
#: Seconds a caller waits for a connection when `limit` of them are in use (as long as
#: SQLAlchemy's pool would).
WAIT = 30.0


class DirectConnections:
    """Autocommit driver connections without pool bookkeeping: the hot path's statements
    (Database.single and transaction) and the producer's INSERTs.

    A single publish is one INSERT, and checking a connection out of SQLAlchemy's pool and
    back (queue, fairy, events, cursor wrapper) costs the client about a third of what the
    statement does; a consumer's fetch and ack check out three or four. These come from
    the autocommit engine (same URL, connect arguments and connect events, so the same
    session settings, and on a cluster the same node and catch-up), detached from its
    pool, and wait in a list, the last one back taken first (a few stay warm). At most
    `limit` are in use at once (the pool's bound); a caller past it waits up to WAIT. A
    connection the server dropped is closed with the idle ones, as the pool is renewed
    on a failover. Thread-safe: list pop and append are atomic.
    """

    def __init__(
        self,
        connect: Callable[[], PoolProxiedConnection],
        keep: int,
        on_lost: Callable[[], None],
        stale: Callable[[float], bool],
        *,
        session: bytes | None = INSERTS_SESSION,
        limit: int | None = None,
    ) -> None:
        self._connect = connect
        self._keep = keep
        self._on_lost = on_lost
        #: Whether a connection made then may go to a cluster node no longer current.
        self._stale = stale
        self._session = session
        self._limit = limit
        self._in_use = None if limit is None else threading.BoundedSemaphore(limit)
        self._idle: list[tuple[Any, float]] = []

    @contextmanager
    def cursor(self) -> Iterator[Cursor]:
        """A driver cursor on a connection of the list, for as long as the block runs.
        A driver error is raised translated (a lost connection renews the list and the
        pool); after any other error of the block, its connection is closed: the block
        may have left a reply unread, which no look at the socket can rule out."""
        if self._in_use is not None and not self._in_use.acquire(timeout=WAIT):
            raise DatabaseUnavailable(
                f"no database connection came free within {WAIT:.0f} s "
                f"({self._limit} in use; EMS_POOL_SIZE sets the bound)"
            )
        try:
            conn, born = self._take()
            try:
                with conn.cursor() as cursor:
                    yield cursor
            except pymysql.err.Error as exc:
                error = translate(exc)
                self._after_error(conn, born, error)
                raise caused(error, exc)  # noqa: B904 (see caused)
            except BaseException:
                # The block's own error (or an interruption), between statements or in
                # one: a statement sent whose reply has not come yet looks as idle as a
                # finished one, and handed on, its reply would answer the next caller's.
                _close(conn)
                raise
            self._give_back(conn, born)
        finally:
            if self._in_use is not None:
                self._in_use.release()

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
            self._after_error(conn, born, error)
            raise caused(error, exc)  # noqa: B904 (see caused)
        except BaseException:
            _close(conn)  # interrupted mid-statement: its state is unknown
            raise
        self._give_back(conn, born)

    def _after_error(self, conn: Any, born: float, error: EmsError) -> None:
        if connection_lost(error):
            # The server dropped this connection, and likely its idle mates and the
            # pool's too (a restart, a failover): the next ones are new.
            _close(conn)
            self.close()
            self._on_lost()
        else:
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
        bound_in_kernel(conn)  # no poll() around each statement's send and receive
        if self._session is not None:
            try:
                conn.query(self._session)
            except pymysql.err.Error as exc:
                _close(conn)
                raise caused(translate(exc), exc)  # noqa: B904 (see caused)
            except BaseException:
                _close(conn)
                raise
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
    This one is opened by open() or on first use (from the autocommit engine, so with the
    same session settings), kept, and opened again only after the server dropped it. One
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
        self.open()
        try:
            with self._conn.cursor() as cursor:
                yield cursor
        except pymysql.err.Error as exc:
            error = translate(exc)
            if connection_lost(error):
                self.close()
            raise caused(error, exc)  # noqa: B904 (see caused)
        except BaseException:
            self.close()  # interrupted mid-statement: its state is unknown
            raise

    def open(self) -> None:
        """Open the connection unless it is open: before the statement's schedule starts,
        so that its first run does not wait for the handshake."""
        if self._conn is None:
            self._conn = _detached(self._connect)
            self._born = time.monotonic()

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
