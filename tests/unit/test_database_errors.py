"""Connection failures on every checkout path become DatabaseUnavailable (no server
needed: port 1 refuses the connection)."""

from __future__ import annotations

import pymysql
import pytest

from ems.config import Settings
from ems.exceptions import (
    DatabaseReadOnly,
    DatabaseUnavailable,
    InvalidInput,
    LockConflict,
    UnknownDatabase,
)
from ems.exit_codes import exit_code_for
from ems.store import Database
from ems.store.translation import translate

UNREACHABLE = Settings(database_url="mysql+pymysql://root@127.0.0.1:1/ems", connect_attempts=2)


def test_single_statement_path_raises_database_unavailable() -> None:
    db = Database(UNREACHABLE)
    try:
        with pytest.raises(DatabaseUnavailable, match="MySQL is unreachable"):
            db.select("SELECT 1", ())
    finally:
        db.dispose()


def test_transaction_path_raises_database_unavailable() -> None:
    db = Database(UNREACHABLE)
    try:
        with pytest.raises(DatabaseUnavailable, match="MySQL is unreachable"), db.transaction():
            pass
    finally:
        db.dispose()


@pytest.mark.parametrize("code", [1290, 1792, 1836])
def test_a_server_taking_no_writes_is_read_only_not_a_lost_connection(code: int) -> None:
    error = translate(pymysql.err.OperationalError(code, "read only"))
    assert isinstance(error, DatabaseReadOnly)
    assert isinstance(error, DatabaseUnavailable)  # callers that retry on unavailable do


def test_a_cluster_node_out_of_the_primary_component_counts_as_lost() -> None:
    """Error 1047: the node keeps its connections open but runs nothing; callers treat it
    as a lost connection, so the pools are renewed on another node."""
    error = translate(pymysql.err.OperationalError(1047, "WSREP has not yet prepared node"))
    assert isinstance(error, DatabaseUnavailable)
    assert not isinstance(error, DatabaseReadOnly)


def test_an_unknown_database_is_bad_input_not_an_unreachable_server() -> None:
    """Error 1049: the server answered, and the URL names a database it does not have.
    Retrying cannot help; the operator runs `ems db create`."""
    error = translate(pymysql.err.OperationalError(1049, "Unknown database 'nope'"))
    assert isinstance(error, UnknownDatabase)
    assert isinstance(error, InvalidInput)
    assert not isinstance(error, DatabaseUnavailable)
    assert "does not exist" in str(error) and "ems db create" in str(error)
    assert exit_code_for(error) == 2


@pytest.mark.parametrize(
    ("code", "text"),
    [
        (4031, "The client was disconnected by the server because of inactivity"),
        (1927, "Connection was killed"),
        (1180, 'Got error 6 "No such device or address" during COMMIT'),
    ],
)
def test_a_session_the_server_ended_or_a_failed_commit_is_passing(code: int, text: str) -> None:
    """4031: MariaDB ended a session idle inside a write transaction (the idle write
    transaction bound) or past its wait_timeout; 1927: the session was killed; 1180: the
    commit failed (a Galera node that left the primary component during it). Nothing of
    the transaction stayed, the session or the node is gone: a send tries again (the
    same write token tells an earlier attempt that did commit), as after a dropped
    connection, and never gives up on its first failure."""
    error = translate(pymysql.err.OperationalError(code, text))
    assert isinstance(error, DatabaseUnavailable)
    assert not isinstance(error, DatabaseReadOnly)


def test_a_connection_used_again_after_it_was_lost_in_a_transaction_is_unavailable() -> None:
    """SQLAlchemy refuses a connection lost inside a transaction until it is rolled back
    ("Can't reconnect until invalid transaction is rolled back"): the server's side of it
    is gone, as after any lost connection, and the caller tries again on a new one."""
    from sqlalchemy.exc import PendingRollbackError

    error = translate(
        PendingRollbackError("Can't reconnect until invalid transaction is rolled back")
    )
    assert isinstance(error, DatabaseUnavailable)


def test_asyncmy_errors_are_translated_as_pymysql_ones() -> None:
    """An exactly-once settlement written through an asyncio connection (asyncmy, its
    cursor reached by run_sync) meets asyncmy's own errors: the same table applies."""
    import asyncmy.errors

    assert isinstance(translate(asyncmy.errors.OperationalError(1213, "deadlock")), LockConflict)
    lost = translate(asyncmy.errors.InterfaceError(0, "closed"))
    assert isinstance(lost, DatabaseUnavailable)
    ended = translate(asyncmy.errors.OperationalError(4031, "idle transaction timeout"))
    assert isinstance(ended, DatabaseUnavailable) and "ended the session" in str(ended)
