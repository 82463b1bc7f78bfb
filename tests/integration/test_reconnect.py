"""Connections the server dropped (restart, wait_timeout, KILL) are replaced, not reused:
after the first failure the pool is renewed, so the next attempt reaches the server."""

from __future__ import annotations

from sqlalchemy import text

from ems import Producer, Reader, TopicAdmin
from ems.backend import mysql_backend
from ems.config import Settings
from ems.store import Store


def _kill_connections_of(settings: Settings, victim: Store) -> int:
    """Kill every server connection opened by the victim's pools (by connection id)."""
    ids: set[int] = set()
    for engine in (victim.db.engine, victim.db.autocommit_engine):
        pool = engine.pool
        raws = [pool.connect() for _ in range(pool.size())]  # type: ignore[attr-defined]
        for raw in raws:
            cursor = raw.cursor()
            cursor.execute("SELECT CONNECTION_ID()")
            ids.add(int(cursor.fetchone()[0]))
            cursor.close()
        for raw in raws:
            raw.close()
    ids.update(victim.db.direct.connection_ids())  # the producer's INSERT connections
    killer = Store(settings)
    with killer.db.connect() as conn:
        for conn_id in ids:
            conn.execute(text(f"KILL CONNECTION {conn_id}"))
    killer.close()
    return len(ids)


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
