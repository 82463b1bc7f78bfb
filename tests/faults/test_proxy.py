"""The fault proxy does to real connections what it says: latency, stall, cut, refuse,
and the ambiguous commit (the statement done, its reply lost)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pymysql
import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from tests.faults.proxy import FaultProxy
from tests.faults.servers import PrivateMariaDB, PrivateRedis

pytestmark = pytest.mark.faults


@pytest.fixture
def db_proxy(private_mariadb: PrivateMariaDB) -> Iterator[FaultProxy]:
    private_mariadb.ensure_running()
    with FaultProxy("127.0.0.1", private_mariadb.port, protocol="mysql") as proxy:
        yield proxy


def _connect(proxy: FaultProxy, **options: object) -> pymysql.Connection:
    return pymysql.connect(  # type: ignore[call-overload, no-any-return]
        host="127.0.0.1", port=proxy.port, user="root", autocommit=True, **options
    )


def _scratch(private_mariadb: PrivateMariaDB) -> None:
    conn = private_mariadb.connect(autocommit=True)
    with conn.cursor() as cursor:
        cursor.execute("CREATE DATABASE IF NOT EXISTS proxy_test")
        cursor.execute("CREATE OR REPLACE TABLE proxy_test.t (id INT PRIMARY KEY)")
    conn.close()


def _ids(private_mariadb: PrivateMariaDB) -> list[int]:
    conn = private_mariadb.connect()
    with conn.cursor() as cursor:
        cursor.execute("SELECT id FROM proxy_test.t ORDER BY id")
        found = [int(r[0]) for r in cursor.fetchall()]
    conn.close()
    return found


def test_latency_slows_every_round_trip(db_proxy: FaultProxy) -> None:
    conn = _connect(db_proxy)
    db_proxy.set_latency(0.1)
    started = time.monotonic()
    with conn.cursor() as cursor:
        cursor.execute("SELECT 1")
    took = time.monotonic() - started
    conn.close()
    assert 0.2 <= took < 2


def test_a_stall_holds_bytes_until_healed(db_proxy: FaultProxy) -> None:
    conn = _connect(db_proxy, read_timeout=1)
    db_proxy.stall()
    with pytest.raises(pymysql.err.OperationalError), conn.cursor() as cursor:
        cursor.execute("SELECT 1")
    db_proxy.heal()
    fresh = _connect(db_proxy, read_timeout=5)
    with fresh.cursor() as cursor:
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)
    fresh.close()


def test_cut_all_resets_live_connections_and_refuse_keeps_new_ones_out(
    db_proxy: FaultProxy,
) -> None:
    conn = _connect(db_proxy, read_timeout=5)
    db_proxy.cut_all()
    with pytest.raises(pymysql.err.OperationalError), conn.cursor() as cursor:
        cursor.execute("SELECT 1")
    db_proxy.refuse()
    with pytest.raises(pymysql.err.OperationalError):
        _connect(db_proxy, connect_timeout=2)
    db_proxy.heal()
    _connect(db_proxy).close()


@pytest.mark.parametrize("explicit", [False, True], ids=["autocommit INSERT", "COMMIT"])
def test_a_lost_reply_leaves_the_statement_done(
    db_proxy: FaultProxy, private_mariadb: PrivateMariaDB, explicit: bool
) -> None:
    _scratch(private_mariadb)
    conn = _connect(db_proxy, read_timeout=5)
    db_proxy.cut_after(b"COMMIT" if explicit else b"INSERT INTO")
    with pytest.raises(pymysql.err.OperationalError), conn.cursor() as cursor:
        if explicit:
            conn.begin()
        cursor.execute("INSERT INTO proxy_test.t VALUES (7)")
        if explicit:
            conn.commit()
    assert db_proxy.cuts == 1
    assert _ids(private_mariadb) == [7]


def test_a_lost_incrby_reply_leaves_the_counter_raised(private_redis: PrivateRedis) -> None:
    private_redis.ensure_running()
    with FaultProxy("127.0.0.1", private_redis.port) as proxy:
        # redis-py re-sends a command after a dropped connection unless told not to: the
        # very double INCRBY ems's own client never does.
        client = redis.Redis(
            host="127.0.0.1", port=proxy.port, socket_timeout=5, retry=Retry(NoBackoff(), 0)
        )
        client.set("counter", 10)
        proxy.cut_after(b"INCRBY")
        with pytest.raises(redis.ConnectionError):
            client.incrby("counter", 5)
        client.close()
        assert proxy.cuts == 1
    direct = private_redis.client()
    assert direct.get("counter") == b"15"
    direct.close()
