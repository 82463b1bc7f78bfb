"""The autocommit engine under the store's pool, and the events that keep its connections
sound: the cluster node each goes to, READ COMMITTED sessions, and a connection the server
already closed refused at checkout (no ping: a poll of its socket)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine, ExceptionContext
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.pool import ConnectionPoolEntry

from ems.config import Settings
from ems.store import driver
from ems.store.connections import idle_connection_alive
from ems.store.nodes import NodeSet
from ems.store.translation import NODE_NOT_READY, error_number

_SESSION_READ_COMMITTED = "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"


def pool_bound(settings: Settings) -> int:
    """Most connections of one kind (the pool's, the hot path's) in use at once."""
    return settings.pool_size * 3


def make_engine(settings: Settings, nodes: NodeSet) -> Engine:
    """The autocommit engine of the store's pool: one round trip per statement, no
    BEGIN/COMMIT/reset; explicit transactions (Database.transaction) run READ COMMITTED,
    so every statement sees the newest committed rows (the gap-free reader relies on it).
    Connections go to the node `nodes` picks (one, or a cluster's current node)."""
    engine = create_engine(
        settings.database_nodes[0],
        pool_size=settings.pool_size,
        max_overflow=pool_bound(settings) - settings.pool_size,
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


def _node_gone(context: ExceptionContext) -> None:
    """A node that left the primary component keeps its connections open but runs
    nothing: to the pool they are lost, so it renews itself on the next node."""
    if error_number(context.original_exception) in NODE_NOT_READY:
        context.is_disconnect = True


def _read_committed(dbapi_connection: Any, record: object) -> None:
    with dbapi_connection.cursor() as cursor:
        cursor.execute(_SESSION_READ_COMMITTED)
