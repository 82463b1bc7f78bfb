"""Connections the server dropped (restart, wait_timeout, KILL) are replaced, not reused:
after the first failure the pool is renewed, so the next attempt reaches the server."""

from __future__ import annotations

import time
from contextlib import ExitStack

import pytest

from ems import Producer, Reader, TopicAdmin
from ems.backend import mysql_backend
from ems.config import Settings
from ems.exceptions import DatabaseUnavailable
from ems.store import Store
from tests.conftest import connect

_ID = "SELECT CONNECTION_ID()"
_NEW_TOPIC = "INSERT INTO topic (name, partitions) VALUES (%s, 1)"


def _kill_connections_of(settings: Settings, victim: Store) -> int:
    """Kill every server connection opened by the victim's pool and its producer's
    connections (by connection id)."""
    ids: set[int] = set()
    with ExitStack() as held:  # hold them all at once, so each is a different one
        for _ in range(victim.settings.pool_size):
            cursor = held.enter_context(victim.db.single())
            cursor.execute(_ID)
            ids.add(int(cursor.fetchone()[0]))
    ids.update(victim.db.direct.connection_ids())  # the producer's INSERT connections
    _kill(settings, ids)
    return len(ids)


def _kill(settings: Settings, ids: set[int]) -> None:
    """KILL the connections from another session, and wait until the server has closed
    them (gone from its process list), so that their sockets say so."""
    killer = connect(settings)
    try:
        with killer.cursor() as cursor:
            for conn_id in ids:
                cursor.execute(f"KILL CONNECTION {conn_id}")
            deadline = time.monotonic() + 10
            while True:
                cursor.execute("SELECT id FROM information_schema.PROCESSLIST")
                if not ids & {int(r[0]) for r in cursor.fetchall()}:
                    return
                assert time.monotonic() < deadline, f"connections {ids} were not closed"
                time.sleep(0.01)
    finally:
        killer.close()


def _write(store: Store, name: str) -> int:
    """A write on its own (single()); the id of the connection it ran on."""
    with store.db.single() as cursor:
        cursor.execute(_NEW_TOPIC, (name,))
        cursor.execute(_ID)
        return int(cursor.fetchone()[0])


def _topics(store: Store) -> list[str]:
    return [str(r[0]) for r in store.db.select("SELECT name FROM topic ORDER BY name", ())]


def test_a_write_after_its_pooled_connection_was_killed_runs_on_a_new_one(
    settings: Settings,
) -> None:
    store = Store(settings)
    try:
        first = _write(store, "a")
        _kill(settings, {first})
        second = _write(store, "b")  # checked out the killed one: replaced, not failed
        assert second != first
        assert _topics(store) == ["a", "b"]
    finally:
        store.close()


def test_an_insert_after_its_direct_connection_was_killed_runs_on_a_new_one(
    settings: Settings,
) -> None:
    store = Store(settings)
    try:
        store.db.direct.execute([b"INSERT INTO topic (name, partitions) VALUES ('a', 1)"])
        (first,) = store.db.direct.connection_ids()
        _kill(settings, {first})
        store.db.direct.execute([b"INSERT INTO topic (name, partitions) VALUES ('b', 1)"])
        assert store.db.direct.connection_ids() != [first]
        assert _topics(store) == ["a", "b"]
    finally:
        store.close()


def test_an_own_connection_killed_while_idle_is_opened_again(settings: Settings) -> None:
    store = Store(settings)
    own = store.db.own_connection()
    try:
        with own.cursor() as cursor:
            cursor.execute(_ID)
            first = int(cursor.fetchone()[0])
        _kill(settings, {first})
        with own.cursor() as cursor:
            cursor.execute(_NEW_TOPIC, ("a",))
            cursor.execute(_ID)
            assert int(cursor.fetchone()[0]) != first
        assert _topics(store) == ["a"]
    finally:
        own.close()
        store.close()


def test_a_write_whose_connection_is_lost_after_sending_is_not_repeated(
    settings: Settings,
) -> None:
    """A connection lost once checked out: a statement sent on it may have run, so the
    write fails (DatabaseUnavailable) rather than risk running twice; the next one runs
    on a new connection."""
    store = Store(settings)
    try:
        first = _write(store, "a")
        killer = connect(settings)
        try:
            with pytest.raises(DatabaseUnavailable), store.db.single() as cursor:
                cursor.execute(_ID)
                assert int(cursor.fetchone()[0]) == first
                with killer.cursor() as kill:
                    kill.execute(f"KILL CONNECTION {first}")
                cursor.execute(_NEW_TOPIC, ("b",))
        finally:
            killer.close()
        _write(store, "c")
        assert _topics(store) == ["a", "c"]
    finally:
        store.close()


def test_producer_and_reader_survive_dropped_connections(settings: Settings) -> None:
    TopicAdmin(settings).create("t", 1)
    store = Store(settings)
    producer = Producer(backend=mysql_backend(settings, store))
    reader = Reader(settings, store=store)
    producer.send("t", b"before")
    assert _kill_connections_of(settings, store) >= 2
    assert producer.send("t", b"after").offset == 1
    assert [m.body for m in reader.read_partition("t", 0, 0).messages] == [b"before", b"after"]
    assert _kill_connections_of(settings, store) >= 2
    assert [m.body for m in reader.read_partition("t", 0, 0).messages] == [b"before", b"after"]
    assert [t.name for t in TopicAdmin(settings, store=store).list()] == ["t"]
    store.close()
