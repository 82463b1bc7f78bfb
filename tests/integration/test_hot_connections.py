"""The hot path's connections (Database.single, transaction, select): kept in a list of
their own, reused without a checkout from SQLAlchemy's pool, bounded as the pool is, and
never handed on in the middle of a reply."""

from __future__ import annotations

import dataclasses
import socket
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack

import pytest
from pymysql.constants import COMMAND
from sqlalchemy import event

from ems.config import Settings
from ems.exceptions import DatabaseUnavailable
from ems.store import connections
from ems.store.database import Database
from ems.store.engine import pool_bound

_ID = "SELECT CONNECTION_ID()"


@pytest.fixture
def db(settings: Settings) -> Iterator[Database]:
    made = Database(dataclasses.replace(settings, pool_size=1))
    yield made
    made.dispose()


def connection_id(db: Database) -> int:
    with db.single() as cursor:
        cursor.execute(_ID)
        return int(cursor.fetchone()[0])


def hold_all(db: Database, held: ExitStack) -> set[int]:
    """Take every connection the bound allows, held until `held` closes; their ids."""
    ids = set()
    for _ in range(pool_bound(db.settings)):
        cursor = held.enter_context(db.single())
        cursor.execute(_ID)
        ids.add(int(cursor.fetchone()[0]))
    return ids


def test_statements_reuse_one_connection_without_a_checkout_from_the_pool(
    db: Database,
) -> None:
    first = connection_id(db)
    checkouts: list[object] = []
    event.listen(db._engine, "checkout", lambda *args: checkouts.append(args))
    assert {connection_id(db) for _ in range(20)} == {first}
    with db.transaction() as cursor:
        cursor.execute(_ID)
        assert int(cursor.fetchone()[0]) == first
    assert db.select(_ID, ()) == ((first,),)
    assert checkouts == []


def test_a_caller_past_the_bound_waits_then_gets_a_typed_error(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(connections, "WAIT", 0.2)
    with ExitStack() as held:
        ids = hold_all(db, held)
        assert len(ids) == pool_bound(db.settings)
        with pytest.raises(DatabaseUnavailable, match="no database connection came free"):
            connection_id(db)
    assert connection_id(db) in ids  # given back, all of them, and the bound with them


def test_a_waiting_caller_gets_a_connection_given_back(db: Database) -> None:
    got: list[int] = []
    with ExitStack() as held:
        ids = hold_all(db, held)
        waiter = threading.Thread(target=lambda: got.append(connection_id(db)))
        waiter.start()
    waiter.join(30)
    assert not waiter.is_alive() and got[0] in ids


def test_the_blocks_own_error_closes_its_connection(db: Database) -> None:
    first = connection_id(db)
    with pytest.raises(ValueError), db.single() as cursor:
        cursor.execute("SELECT 1")
        raise ValueError("the caller's own")
    assert connection_id(db) != first
    assert db.hot.connection_ids() == [connection_id(db)]  # one kept, the new one


def test_a_connection_left_in_the_middle_of_a_reply_is_not_handed_on(db: Database) -> None:
    for _ in range(20):  # the reply comes at once or a little later: either way
        first = connection_id(db)
        with pytest.raises(ValueError), db.single() as cursor:
            # A statement sent and its reply never read: the next caller would read it.
            cursor.connection._execute_command(COMMAND.COM_QUERY, "SELECT SLEEP(0.01)")
            raise ValueError("interrupted before the reply")
        assert connection_id(db) != first
        with db.single() as cursor:
            cursor.execute("SELECT 2")
            assert cursor.fetchall() == ((2,),)


def test_a_hot_connection_is_bounded_by_the_kernel_not_by_polls(settings: Settings) -> None:
    """Its socket blocks (CPython polls before each send and receive of a socket with a
    timeout), and the kernel holds the read and write bounds instead: a read past the
    bound still ends, as a lost connection."""
    db = Database(dataclasses.replace(settings, read_timeout=1.0, write_timeout=2.0))
    try:
        began = time.monotonic()
        with pytest.raises(DatabaseUnavailable, match="timed out"), db.single() as cursor:
            sock = cursor.connection._sock
            assert sock.gettimeout() is None
            assert received_bound(sock) == (1, 0)
            assert sent_bound(sock) == (2, 0)
            cursor.execute("SELECT SLEEP(30)")
        assert time.monotonic() - began < 10
        assert db.select("SELECT 1", ()) == ((1,),)  # the lost one was not handed on
    finally:
        db.dispose()


def received_bound(sock: socket.socket) -> tuple[int, int]:
    return struct.unpack("@ll", sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, 16))


def sent_bound(sock: socket.socket) -> tuple[int, int]:
    return struct.unpack("@ll", sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, 16))
