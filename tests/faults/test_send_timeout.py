"""A send rides out a lost server within its bound (EMS_SEND_TIMEOUT): Redis or MariaDB
unreachable through a fault proxy, a commit whose reply was lost, a server that takes no
writes. A send started during the outage returns once the server is back, and nothing is
stored twice. Bad input still fails at once."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ems import Producer, Record, RecordMetadata, TopicAdmin
from ems import aio as ems_aio
from ems.config import Settings
from ems.exceptions import (
    BodyTooLarge,
    DatabaseUnavailable,
    InvalidInput,
    InvalidKey,
    RedisUnavailable,
    SendTimeout,
    UnknownTopic,
)
from ems.store.database import Database
from tests import sql as db
from tests.faults.proxy import FaultProxy
from tests.faults.servers import PrivateMariaDB, PrivateRedis

pytestmark = pytest.mark.faults

#: How long a server stays away once a send has been seen waiting for it: the fault's
#: length, not a wait for a result.
OUTAGE = 3.0
#: A short EMS_SEND_TIMEOUT, for sends that must give up while the server stays away.
BOUND = 2.0
#: How long after its deadline a send may take to give up: the attempt under way then
#: (here a refused connection, retried EMS_CONNECT_ATTEMPTS times within a second),
#: with room for a loaded machine. Not a speed target: it tells "gives up at the bound"
#: from "gives up at a later deadline, or never".
LATE = 3.0


class Call(threading.Thread):
    """A blocking send in a thread of its own: its result or error, and how long it took."""

    def __init__(self, send: Callable[[], Any]) -> None:
        super().__init__(daemon=True)
        self._send = send
        self.result: Any = None
        self.error: BaseException | None = None
        self.took = 0.0

    def run(self) -> None:
        started = time.monotonic()
        try:
            self.result = self._send()
        except BaseException as exc:
            self.error = exc
        finally:
            self.took = time.monotonic() - started

    def outcome(self, timeout: float = 90) -> Any:
        self.join(timeout)
        assert not self.is_alive(), "the send never returned"
        if self.error is not None:
            raise AssertionError(f"the send raised {self.error!r}") from self.error
        return self.result


def until(done: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


async def async_until(done: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


def stored(settings: Settings) -> list[bytes]:
    """Every body stored, tombstones left out, in offset order."""
    database = Database(settings)
    try:
        return [
            bytes(b)
            for b in db.values(
                database,
                "SELECT body FROM message WHERE tombstone = 0 ORDER BY partition_no, offset_no",
            )
        ]
    finally:
        database.dispose()


@pytest.fixture
def redis_proxy(private_redis: PrivateRedis) -> Iterator[FaultProxy]:
    with FaultProxy("127.0.0.1", private_redis.port) as proxy:
        yield proxy


@pytest.fixture
def db_proxy(private_mariadb: PrivateMariaDB) -> Iterator[FaultProxy]:
    with FaultProxy("127.0.0.1", private_mariadb.port, protocol="mysql") as proxy:
        yield proxy


def through_redis(settings: Settings, proxy: FaultProxy) -> Settings:
    return settings.with_(redis_url=f"redis://127.0.0.1:{proxy.port}/0")


def through_db(settings: Settings, proxy: FaultProxy, port: int) -> Settings:
    return settings.with_(
        database_url=settings.database_url.replace(f":{port}/", f":{proxy.port}/")
    )


def test_a_send_during_a_redis_outage_returns_once_redis_is_back(
    fault_settings: Settings, redis_proxy: FaultProxy
) -> None:
    TopicAdmin(fault_settings).create("t", 2)
    with Producer(through_redis(fault_settings, redis_proxy)) as producer:
        producer.send("t", b"before", key="k")
        redis_proxy.refuse()
        redis_proxy.cut_all()
        tried = redis_proxy.connections
        call = Call(lambda: producer.send("t", b"during", key="k"))
        call.start()
        until(lambda: redis_proxy.connections > tried or not call.is_alive(), "a try")
        time.sleep(OUTAGE)
        redis_proxy.heal()
        placed = call.outcome()
    assert call.took >= OUTAGE
    assert placed.offset == 1
    assert stored(fault_settings) == [b"before", b"during"]


async def asyncio_send_through_an_outage(
    producer: ems_aio.Producer, proxy: FaultProxy
) -> tuple[RecordMetadata, float]:
    """Cut the proxy's connections and refuse new ones while a send starts, heal it after
    OUTAGE; the send's place and how long it took."""
    proxy.refuse()
    proxy.cut_all()
    tried = proxy.connections
    started = time.monotonic()
    sending = asyncio.ensure_future(producer.send("t", b"during", key="k"))
    await async_until(lambda: proxy.connections > tried or sending.done(), "a try")
    await asyncio.sleep(OUTAGE)  # the fault's length, not a wait for a result
    proxy.heal()
    placed = await asyncio.wait_for(sending, 90)
    return placed, time.monotonic() - started


@pytest.mark.asyncio
async def test_an_asyncio_send_during_a_redis_outage_returns_once_redis_is_back(
    fault_settings: Settings, redis_proxy: FaultProxy
) -> None:
    TopicAdmin(fault_settings).create("t", 2)
    async with ems_aio.Producer(through_redis(fault_settings, redis_proxy)) as producer:
        await producer.send("t", b"before", key="k")
        placed, took = await asyncio_send_through_an_outage(producer, redis_proxy)
    assert took >= OUTAGE
    assert placed.offset == 1
    assert stored(fault_settings) == [b"before", b"during"]


def test_a_commit_whose_reply_was_lost_in_a_database_outage_is_stored_once(
    fault_settings: Settings, db_proxy: FaultProxy, private_mariadb: PrivateMariaDB
) -> None:
    """The INSERT reaches the server, the connection is cut before its reply, and no new
    connection gets through for a while: once one does, the write token at the first
    row's place says the first attempt committed, and the send returns that place."""
    TopicAdmin(fault_settings).create("t", 1)
    local = through_db(fault_settings, db_proxy, private_mariadb.port)
    with Producer(local) as producer:
        producer.send("t", b"before")
        db_proxy.refuse()  # new connections; the producer's idle one carries the INSERT
        db_proxy.cut_after(b"INSERT INTO message")
        call = Call(lambda: producer.send("t", b"during"))
        call.start()
        until(lambda: db_proxy.cuts == 1 or not call.is_alive(), "the cut")
        tried = db_proxy.connections
        until(lambda: db_proxy.connections > tried or not call.is_alive(), "a try")
        time.sleep(OUTAGE)
        db_proxy.heal()
        placed = call.outcome()
    assert db_proxy.cuts == 1
    assert call.took >= OUTAGE
    assert placed.offset == 1
    assert stored(fault_settings) == [b"before", b"during"]


@pytest.mark.asyncio
async def test_an_asyncio_send_during_a_database_outage_returns_once_it_is_back(
    fault_settings: Settings, db_proxy: FaultProxy, private_mariadb: PrivateMariaDB
) -> None:
    TopicAdmin(fault_settings).create("t", 1)
    local = through_db(fault_settings, db_proxy, private_mariadb.port)
    async with ems_aio.Producer(local) as producer:
        await producer.send("t", b"before")
        placed, took = await asyncio_send_through_an_outage(producer, db_proxy)
    assert took >= OUTAGE
    assert placed.offset == 1
    assert stored(fault_settings) == [b"before", b"during"]


def test_a_send_waits_while_the_server_takes_no_writes(
    fault_settings: Settings, private_mariadb: PrivateMariaDB, caplog: pytest.LogCaptureFixture
) -> None:
    """read_only (a failover or a maintenance in progress): the send is refused, waits,
    and is stored once the server takes writes again. The producer connects as an
    ordinary user: read_only does not bind one with SUPER."""
    caplog.set_level(logging.WARNING, logger="ems.producer")
    TopicAdmin(fault_settings).create("t", 1)
    local = fault_settings.with_(database_url=private_mariadb.add_user("app"))
    admin = private_mariadb.connect(autocommit=True)
    try:
        with Producer(local) as producer:
            producer.send("t", b"before")
            with admin.cursor() as cursor:
                cursor.execute("SET GLOBAL read_only = 1")
            call = Call(lambda: producer.send_batch("t", [b"during-1", b"during-2"]))
            call.start()
            until(lambda: "takes no writes" in caplog.text or not call.is_alive(), "a refusal")
            time.sleep(OUTAGE)
            with admin.cursor() as cursor:
                cursor.execute("SET GLOBAL read_only = 0")
            placed = call.outcome()
    finally:
        with admin.cursor() as cursor:
            cursor.execute("SET GLOBAL read_only = 0")
        admin.close()
    assert call.took >= OUTAGE
    assert [m.offset for m in placed] == [1, 2]
    assert stored(fault_settings) == [b"before", b"during-1", b"during-2"]


def test_a_send_gives_up_at_its_bound_while_redis_stays_away(
    fault_settings: Settings, redis_proxy: FaultProxy
) -> None:
    TopicAdmin(fault_settings).create("t", 1)
    local = through_redis(fault_settings, redis_proxy).with_(send_timeout=BOUND)
    with Producer(local) as producer:
        producer.send("t", b"before")
        redis_proxy.refuse()
        redis_proxy.cut_all()
        started = time.monotonic()
        with pytest.raises(SendTimeout, match="EMS_SEND_TIMEOUT") as raised:
            producer.send_batch("t", [b"lost-1", b"lost-2"])
        took = time.monotonic() - started
        redis_proxy.heal()
        assert producer.send("t", b"after").offset >= 1
    assert isinstance(raised.value.__cause__, RedisUnavailable)
    assert BOUND <= took < BOUND + LATE
    assert stored(fault_settings) == [b"before", b"after"]


@pytest.mark.asyncio
async def test_an_asyncio_send_gives_up_at_its_bound_while_redis_stays_away(
    fault_settings: Settings, redis_proxy: FaultProxy
) -> None:
    TopicAdmin(fault_settings).create("t", 1)
    local = through_redis(fault_settings, redis_proxy).with_(send_timeout=BOUND)
    async with ems_aio.Producer(local) as producer:
        await producer.send("t", b"before")
        redis_proxy.refuse()
        redis_proxy.cut_all()
        started = time.monotonic()
        with pytest.raises(SendTimeout, match="EMS_SEND_TIMEOUT") as raised:
            await producer.send("t", b"lost")
        took = time.monotonic() - started
        redis_proxy.heal()
        assert (await producer.send("t", b"after")).offset >= 1
    assert isinstance(raised.value.__cause__, RedisUnavailable)
    assert BOUND <= took < BOUND + LATE
    assert stored(fault_settings) == [b"before", b"after"]


def test_a_send_whose_commit_is_in_doubt_at_its_bound_is_never_stored_twice(
    fault_settings: Settings, db_proxy: FaultProxy, private_mariadb: PrivateMariaDB
) -> None:
    """The INSERT reaches the server, its reply is lost, and no connection gets through
    until the bound: SendTimeout (the message may be stored: it is, here, once), and the
    producer carries on at the next offset when the database is back."""
    TopicAdmin(fault_settings).create("t", 1)
    local = through_db(fault_settings, db_proxy, private_mariadb.port).with_(send_timeout=BOUND)
    with Producer(local) as producer:
        producer.send("t", b"before")
        db_proxy.refuse()
        db_proxy.cut_after(b"INSERT INTO message")
        started = time.monotonic()
        with pytest.raises(SendTimeout) as raised:
            producer.send("t", b"in doubt")
        took = time.monotonic() - started
        db_proxy.heal()
        assert producer.send("t", b"after").offset == 2
    assert db_proxy.cuts == 1
    assert isinstance(raised.value.__cause__, DatabaseUnavailable)
    assert BOUND <= took < BOUND + LATE
    assert stored(fault_settings) == [b"before", b"in doubt", b"after"]


@pytest.mark.asyncio
async def test_an_asyncio_send_gives_up_at_its_bound_while_the_database_stays_away(
    fault_settings: Settings, db_proxy: FaultProxy, private_mariadb: PrivateMariaDB
) -> None:
    TopicAdmin(fault_settings).create("t", 1)
    local = through_db(fault_settings, db_proxy, private_mariadb.port).with_(send_timeout=BOUND)
    async with ems_aio.Producer(local) as producer:
        await producer.send("t", b"before")
        db_proxy.refuse()
        db_proxy.cut_all()
        started = time.monotonic()
        with pytest.raises(SendTimeout) as raised:
            await producer.send_batch("t", [b"lost-1", b"lost-2"])
        took = time.monotonic() - started
        db_proxy.heal()
        assert (await producer.send("t", b"after")).offset >= 1
    assert isinstance(raised.value.__cause__, DatabaseUnavailable)
    assert BOUND <= took < BOUND + LATE
    assert stored(fault_settings) == [b"before", b"after"]


def test_bad_input_fails_at_once_while_redis_is_away(
    fault_settings: Settings, redis_proxy: FaultProxy
) -> None:
    """Retrying would not make an unknown topic, a body too large or a bad key valid:
    each raises at once, within the default bound of 45 s, and nothing is stored."""
    TopicAdmin(fault_settings).create("t", 1, max_body_bytes=10)
    with Producer(through_redis(fault_settings, redis_proxy)) as producer:
        producer.send("t", b"before")
        redis_proxy.refuse()
        redis_proxy.cut_all()
        started = time.monotonic()
        with pytest.raises(UnknownTopic):
            producer.send("missing", b"x")
        with pytest.raises(BodyTooLarge):
            producer.send("t", b"x" * 11)
        with pytest.raises(InvalidKey):
            producer.send("t", b"x", key="k" * 256)
        with pytest.raises(InvalidInput):
            producer.send_batch("t", [b"ok", object()])  # type: ignore[list-item]
        took = time.monotonic() - started
    assert took < 5, f"bad input took {took:.1f} s to be refused"
    assert stored(fault_settings) == [b"before"]


@pytest.mark.asyncio
async def test_bad_input_fails_at_once_in_asyncio_while_redis_is_away(
    fault_settings: Settings, redis_proxy: FaultProxy
) -> None:
    TopicAdmin(fault_settings).create("t", 1, max_body_bytes=10)
    async with ems_aio.Producer(through_redis(fault_settings, redis_proxy)) as producer:
        await producer.send("t", b"before")
        redis_proxy.refuse()
        redis_proxy.cut_all()
        started = time.monotonic()
        with pytest.raises(UnknownTopic):
            await producer.send("missing", b"x")
        with pytest.raises(BodyTooLarge):
            await producer.send("t", b"x" * 11)
        with pytest.raises(InvalidKey):
            await producer.send_batch("t", [Record(b"x", key="k" * 256)])
        took = time.monotonic() - started
    assert took < 5, f"bad input took {took:.1f} s to be refused"
    assert stored(fault_settings) == [b"before"]
