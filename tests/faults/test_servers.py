"""The private servers really crash, pause and come back, and keep what they promise."""

from __future__ import annotations

import time

import pymysql
import pytest

from ems import Producer, Reader
from ems.config import Settings
from tests.faults.servers import PrivateMariaDB, PrivateRedis, free_port, port_range

pytestmark = pytest.mark.faults


def test_a_free_port_is_never_handed_out_twice_in_a_process() -> None:
    """A server killed for a restart leaves its port free until it comes back: no other
    server of this process may get it meanwhile."""
    ports = [free_port() for _ in range(500)]
    assert len(set(ports)) == len(ports)


@pytest.mark.parametrize("workers", [1, 2, 4, 8])
def test_each_xdist_worker_draws_ports_from_a_range_of_its_own(workers: int) -> None:
    """The lanes run side by side on their own workers: their servers' ports never meet."""
    ranges = [port_range(f"gw{i}", workers) for i in range(workers)]
    taken = [p for r in ranges for p in r]
    assert len(taken) == len(set(taken))
    assert all(len(r) >= 1000 for r in ranges)
    assert min(taken) >= 20_000 and max(taken) < 32_768
    assert port_range(None, 0) == range(20_000, 32_768)


def test_private_servers_are_not_the_shared_ones(
    private_mariadb: PrivateMariaDB, private_redis: PrivateRedis
) -> None:
    assert {private_mariadb.port, private_redis.port}.isdisjoint({3306, 6379})


def test_an_acknowledged_message_survives_kill_9_of_mariadb(
    fault_settings: Settings, private_mariadb: PrivateMariaDB
) -> None:
    from ems import TopicAdmin

    TopicAdmin(fault_settings).create("t", 1)
    with Producer(fault_settings) as producer:
        placed = producer.send("t", b"durable")
    private_mariadb.kill9()
    started = time.monotonic()
    private_mariadb.restart()  # InnoDB crash recovery
    recovered = time.monotonic() - started
    batch = Reader(fault_settings).read_partition("t", placed.partition, 0)
    assert [m.body for m in batch.messages] == [b"durable"]
    assert recovered < 30


def test_a_paused_mariadb_answers_nothing_until_resumed(
    fault_settings: Settings, private_mariadb: PrivateMariaDB
) -> None:
    conn = private_mariadb.connect(read_timeout=1)
    private_mariadb.pause()
    try:
        with pytest.raises(pymysql.err.OperationalError), conn.cursor() as cursor:
            cursor.execute("SELECT 1")
    finally:
        private_mariadb.resume()
    fresh = private_mariadb.connect(read_timeout=5)
    with fresh.cursor() as cursor:
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)
    fresh.close()


def test_only_the_append_only_redis_remembers_after_kill_9(
    private_redis: PrivateRedis, private_redis_aof: PrivateRedis
) -> None:
    for server in (private_redis, private_redis_aof):
        server.ensure_running()
        client = server.client()
        client.set("k", "v")
        client.close()
        server.kill9()
        server.restart()
    plain, aof = private_redis.client(), private_redis_aof.client()
    assert plain.get("k") is None
    assert aof.get("k") == b"v"
    plain.close()
    aof.close()
