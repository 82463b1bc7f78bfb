"""The Database: the store's connections, with bounded retries on unreachable servers.
Its engine is ems.store.engine's, its driver errors are translated by
ems.store.translation, and the plain driver connections it keeps outside the pool are
ems.store.connections's.

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

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from typing import Any, TypeVar

import pymysql
from pymysql.cursors import Cursor
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import PoolProxiedConnection

from ems.config import Settings
from ems.exceptions import DatabaseUnavailable
from ems.store.connections import DirectConnections, OwnConnection
from ems.store.engine import make_engine, pool_bound
from ems.store.nodes import NodeSet
from ems.store.translation import translate

T = TypeVar("T")

_NEXT_REPEATABLE_READ = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"
# The session's bound on idle transactions, set with a marker variable in one statement
# (a /*M! comment: MySQL has no such bound, skips it and runs the plain SET).
_IDLE_BOUND = "SET {marker} = 1 /*M!100300 , SESSION idle_transaction_timeout = {seconds} */"
#: The server's largest idle_transaction_timeout (a year).
MAX_IDLE_BOUND = 31_536_000


def idle_bound_statement(seconds: int, marker: str = "@ems_idle") -> str:
    """The statement that bounds this session's idle transactions at `seconds` (at most
    the server's largest), setting the user variable `marker` to 1: what set the bound
    (ems's own transactions, or an exactly-once batch on the service's connection)."""
    return _IDLE_BOUND.format(marker=marker, seconds=min(int(seconds), MAX_IDLE_BOUND))


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
            self._checkout_raw, settings.pool_size, self._lost, self.nodes.stale
        )
        #: The hot path's connections (single, transaction, select): READ COMMITTED, as
        #: the engine's; at most the pool's bound in use at once.
        self.hot = DirectConnections(
            self._checkout_raw,
            settings.pool_size,
            self._lost,
            self.nodes.stale,
            session=None,
            limit=pool_bound(settings),
        )

    def single(self) -> AbstractContextManager[Cursor]:
        """A driver cursor on an autocommit connection, for the hot single-statement path:
        each statement is its own transaction, with no BEGIN, COMMIT or reset round trip."""
        return self.hot.cursor()

    def _lost(self) -> None:
        """The server dropped a connection, so it likely dropped its mates too (a
        restart, a failover): every list and the pool start afresh rather than try each."""
        self.hot.close()
        self.direct.close()
        self._engine.dispose(close=False)

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

    @contextmanager
    def idle_bound(self, cursor: Cursor, seconds: int) -> Iterator[None]:
        """Within a transaction: let it sit idle up to `seconds` for the block (a
        transaction that waits on work outside the database between its statements), and
        the session's own bound again after. Nothing when the bound is off."""
        usual = self.settings.idle_transaction_timeout
        if not usual:
            yield
            return
        cursor.execute(idle_bound_statement(seconds))
        try:
            yield
        finally:
            with suppress(pymysql.err.Error):  # a lost session's bound went with it
                cursor.execute(idle_bound_statement(usual))

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
        self.hot.close()
        self.direct.close()
        self._engine.dispose()
