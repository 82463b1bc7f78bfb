"""The suite's own eye on lock waits (seed.lock_waits): it must see a wait while other
sessions of the server poll InnoDB's transaction tables, as the suite's other lanes do."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pymysql
import pytest

from ems.config import Settings
from ems.store import Store
from tests.conftest import connect
from tests.integration import seed

#: What another worker's lock-wait check read before: InnoDB serves it from a cache.
_CACHED = "SELECT COUNT(*) FROM information_schema.innodb_trx WHERE trx_state = 'LOCK WAIT'"


@pytest.fixture
def table(store: Store) -> Iterator[str]:
    seed.sql(store, "CREATE TABLE waited (id INT PRIMARY KEY, n INT NOT NULL)")
    seed.sql(store, "INSERT INTO waited VALUES (1, 0)")
    yield "waited"
    seed.sql(store, "DROP TABLE waited")


def _poll_cache(settings: Settings, stop: threading.Event, reads: list[int]) -> None:
    """Read the cached table every 20 ms, as two tests' checks together do."""
    conn = connect(settings)
    try:
        with conn.cursor() as cursor:
            while not stop.wait(0.02):
                cursor.execute(_CACHED)
                reads.append(1)
    finally:
        conn.close()


def test_a_lock_wait_is_seen_while_other_sessions_poll_the_cached_tables(
    settings: Settings, store: Store, table: str
) -> None:
    stop = threading.Event()
    reads: list[int] = []
    poller = threading.Thread(target=_poll_cache, args=(settings, stop, reads))
    holder, waiter = connect(settings), connect(settings)
    outcome: list[BaseException | None] = []

    def wait() -> None:
        try:
            with waiter.cursor() as cursor:
                waiter.begin()
                cursor.execute(f"UPDATE {table} SET n = n + 1 WHERE id = 1")
                waiter.commit()
            outcome.append(None)
        except pymysql.err.Error as exc:  # shown by the assertion below
            outcome.append(exc)

    poller.start()
    try:
        seed.wait_until(lambda: len(reads) > 5)  # the cache is being read
        assert seed.lock_waits(store) == 0
        holder.begin()
        with holder.cursor() as cursor:
            cursor.execute(f"UPDATE {table} SET n = n + 1 WHERE id = 1")
        waiting = threading.Thread(target=wait)
        waiting.start()
        seed.wait_until(lambda: seed.lock_waits(store) == 1 or not waiting.is_alive())
        assert not outcome  # still waiting on the holder's row
        holder.commit()
        waiting.join(30)
        assert outcome == [None]
        assert seed.lock_waits(store) == 0
    finally:
        stop.set()
        poller.join()
        holder.close()
        waiter.close()
