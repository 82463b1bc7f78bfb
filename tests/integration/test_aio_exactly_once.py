"""ems.aio's exactly-once consumption against the real MariaDB and Redis, through the
service's async engine (asyncmy and aiomysql): an awaited handler's writes commit with the
message's settlement or not at all, as ems.Consumer's (tests/integration/
test_exactly_once.py proves the same for the sync one)."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import pytest_asyncio
from sqlalchemy import Engine, text
from sqlalchemy.ext.asyncio import (
    AsyncConnection,
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.orm import sessionmaker

import ems
from ems import Producer, TopicAdmin
from ems.aio import Consumer
from ems.aio import Producer as AsyncProducer
from ems.config import Settings
from ems.exceptions import InvalidHandler, InvalidSetting, InvalidTransaction
from ems.metrics import REGISTRY
from ems.store import Store
from ems.store.errors import StaleGeneration
from ems.types import Delivery
from tests.conftest import BASE_URL
from tests.integration.test_exactly_once import (
    FAST,
    SERVICE_DB,
    bump,
    counted,
    counts,
    engine,
    log_states,
    publish,
    readings,
)

pytestmark = pytest.mark.asyncio
__all__ = ["counts", "engine", "readings"]  # the sync module's fixtures, used here


@pytest_asyncio.fixture(params=["asyncmy", "aiomysql"])
async def aengine(request: pytest.FixtureRequest) -> AsyncIterator[AsyncEngine]:
    """The service's async engine, on its own database of the same server as ems's."""
    url = BASE_URL.replace("mysql+pymysql://", f"mysql+{request.param}://") + SERVICE_DB
    made = create_async_engine(url)
    yield made
    await made.dispose()


def projection(settings: Settings, factory: Any, handle: Any, **options: Any) -> Consumer:
    """An exactly-once member of group "eo" on "readings", from the earliest offset."""
    return Consumer(
        "eo",
        "readings",
        handle,
        settings=settings,
        start="earliest",
        transactional=factory,
        **{**FAST, **options},
    )


async def count(tx: AsyncSession | AsyncConnection, table: str, d: Delivery) -> None:
    await tx.execute(text(bump(table).replace("%s", ":b", 1)), {"b": d.body.decode()})


async def drain(consumer: Consumer, check: Callable[[], bool], timeout: float = 30) -> None:
    """Consume round after round until check() holds: progress, not a fixed wait."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "not drained"
        await consumer._run_once(None)


@pytest.mark.parametrize("kind", ["async_sessionmaker", "engine", "callable"])
async def test_every_message_counted_once_and_logged_as_exactly_once(
    settings: Settings,
    store: Store,
    engine: Engine,
    aengine: AsyncEngine,
    counts: str,
    readings: TopicAdmin,
    kind: str,
) -> None:
    bodies = publish(settings, 60)
    labels = {"group": "eo", "topic": "readings"}
    before = REGISTRY.get_sample_value("ems_handler_seconds_count", labels) or 0
    factory: Any = {
        "async_sessionmaker": async_sessionmaker(aengine),
        "engine": aengine,
        "callable": lambda: AsyncSession(aengine),
    }[kind]
    seen: list[type] = []

    async def handle(d: Delivery, tx: AsyncSession | AsyncConnection) -> None:
        seen.append(type(tx))
        await count(tx, counts, d)

    consumer = projection(settings, factory, handle, batch_size=25)
    assert await consumer.run(max_messages=60, handle_signals=False) == 60
    assert counted(engine, counts) == dict.fromkeys(bodies, 1)
    assert set(seen) == {AsyncConnection if kind == "engine" else AsyncSession}
    assert REGISTRY.get_sample_value("ems_handler_seconds_count", labels) == 60 + before
    assert log_states(store, "eo") == Counter({("done", 1): 60})
    offsets = store.groups.offsets(consumer.group.id)
    assert sum(offsets.values()) == 60  # every cursor committed with its handler's writes


async def test_a_failing_handler_undoes_only_its_own_writes(
    settings: Settings,
    store: Store,
    engine: Engine,
    aengine: AsyncEngine,
    counts: str,
    readings: TopicAdmin,
) -> None:
    """The handler writes, then raises for m-3 on its first delivery: that write is
    undone, m-3 goes to the retry ladder and is counted once when it passes; the others'
    writes, in the same batch, commit."""
    bodies = publish(settings, 12)
    calls: Counter[str] = Counter()

    async def handle(d: Delivery, session: AsyncSession) -> None:
        calls[d.body.decode()] += 1
        await count(session, counts, d)
        if d.body == b"m-3" and d.attempt == 1:
            raise ValueError("not yet")

    consumer = projection(settings, async_sessionmaker(aengine), handle, retry_ladder="100ms")
    async with consumer:
        await drain(consumer, lambda: counted(engine, counts).get("m-3") == 1)
    assert counted(engine, counts) == dict.fromkeys(bodies, 1)
    assert calls["m-3"] >= 2  # the first raised, a redelivery passed
    assert log_states(store, "eo") == Counter({("done", 1): 12})  # m-3's retry cleared
    assert store.db.select("SELECT COUNT(*) FROM retry_message", ()) == ((0,),)


async def test_sends_in_the_handler_commit_with_its_writes(
    settings: Settings,
    store: Store,
    engine: Engine,
    aengine: AsyncEngine,
    counts: str,
    readings: TopicAdmin,
) -> None:
    """Consume, transform, produce with ems.aio.Producer(transaction=session): a count
    written and an alert published with the reading's settlement, all or none. m-5
    always fails (one attempt): dead-lettered, no alert, no count."""
    bodies = publish(settings, 10)
    async with AsyncProducer(settings) as producer:

        async def handle(d: Delivery, session: AsyncSession) -> None:
            await count(session, counts, d)
            await producer.send("alerts", f"alert {d.body.decode()}", transaction=session)
            if d.body == b"m-5":
                raise RuntimeError("poison")

        consumer = projection(settings, async_sessionmaker(aengine), handle, max_attempts=1)
        assert await consumer.run(max_messages=10, handle_signals=False) == 10
    with Producer(settings) as relay:
        while relay.relay():
            pass
    good = [b for b in bodies if b != "m-5"]
    assert counted(engine, counts) == dict.fromkeys(good, 1)
    alerts = store.db.select(
        "SELECT body FROM message m JOIN topic t ON t.id = m.topic_id WHERE t.name = 'alerts'",
        (),
    )
    assert sorted(bytes(a).decode() for (a,) in alerts) == sorted(f"alert {b}" for b in good)
    dead = store.db.select("SELECT body, last_error FROM dead_message", ())
    assert [(bytes(b), e) for b, e in dead] == [(b"m-5", "RuntimeError: poison")]
    assert log_states(store, "eo") == Counter({("done", 1): 9, ("dead", 1): 1})


FENCES = {
    # a leader's reassignment
    "generation": "UPDATE partition_assignment SET generation = generation + 1 "
    "WHERE partition_no = %s",
    # an earlier commit of the same batch, its reply lost, that landed after all
    "cursor": "UPDATE group_offset SET committed_offset = committed_offset + 1 "
    "WHERE partition_no = %s",
    # the member's lease lapsed on the database clock (a renewal cannot revive it)
    "lease": "UPDATE consumer_client SET lease_expires_at = NOW(6) - INTERVAL 1 SECOND "
    "WHERE client_id = %s",
}


@pytest.mark.parametrize("fence", sorted(FENCES))
async def test_a_fenced_members_commit_fails_and_nothing_of_its_batch_commits(
    settings: Settings,
    store: Store,
    engine: Engine,
    aengine: AsyncEngine,
    counts: str,
    readings: TopicAdmin,
    fence: str,
) -> None:
    """While the first batch is handled, the member is fenced off its first message's
    partition: its generation moves, its stored cursor moves, or its lease lapses. The
    batch's commit is refused, its writes roll back, and the messages come again from
    the stored cursor: each counted once (the message the moved cursor passed, never)."""
    bodies = publish(settings, 9)
    first: list[Delivery] = []

    async def handle(d: Delivery, session: AsyncSession) -> None:
        await count(session, counts, d)
        if not first:
            first.append(d)
            where = consumer.client_id if fence == "lease" else d.partition
            with store.db.transaction() as cursor:
                assert cursor.execute(FENCES[fence], (where,)) == 1

    consumer = projection(settings, async_sessionmaker(aengine), handle)
    async with consumer:
        batch = await consumer.poll(timeout=5.0)
        assert batch
        runner = consumer._exactly_once
        assert runner is not None
        with pytest.raises(StaleGeneration, match="no longer owns"):
            await runner.handle(batch)
        assert counted(engine, counts) == {}  # the batch's writes rolled back
        assert log_states(store, "eo") == Counter({("start", 0): len(batch)})
        skipped = {first[0].body.decode()} if fence == "cursor" else set()
        wanted = {b: 1 for b in bodies if b not in skipped}
        await drain(consumer, lambda: len(counted(engine, counts)) == len(wanted))
    assert counted(engine, counts) == wanted


async def test_wrong_set_ups_are_refused_with_typed_errors(
    settings: Settings, engine: Engine, aengine: AsyncEngine, readings: TopicAdmin
) -> None:
    maker = async_sessionmaker(aengine)

    async def handle(d: Delivery, session: AsyncSession) -> None:
        pass

    with pytest.raises(InvalidHandler, match="needs a handler"):
        Consumer("eo", "readings", settings=settings, transactional=maker)
    with pytest.raises(InvalidSetting, match="broadcast"):
        Consumer("eo", "readings", handle, settings=settings, broadcast=True, transactional=maker)
    with pytest.raises(InvalidSetting, match="concurrency above 1"):
        Consumer("eo", "readings", handle, settings=settings, concurrency=2, transactional=maker)
    for sync in (engine, sessionmaker(engine)):
        with pytest.raises(InvalidTransaction, match="asyncio factory"):
            Consumer("eo", "readings", handle, settings=settings, transactional=sync)
    with pytest.raises(InvalidTransaction, match="not a str"):
        Consumer("eo", "readings", handle, settings=settings, transactional="mysql://x")


async def test_a_factory_of_something_else_and_pull_acks_are_refused(
    settings: Settings, store: Store, aengine: AsyncEngine, counts: str, readings: TopicAdmin
) -> None:
    publish(settings, 2)

    async def handle(d: Delivery, session: AsyncSession) -> None:
        pass

    consumer = projection(settings, lambda: 42, handle)
    with pytest.raises(InvalidTransaction, match="not a int"):
        await consumer.run(handle_signals=False)
    async with projection(settings, aengine, handle) as pulled:
        got = await pulled.poll(timeout=5.0)
        assert got
        with pytest.raises(InvalidSetting, match="in run"):
            await pulled.ack(got)
        with pytest.raises(InvalidSetting, match="in run"):
            await pulled.nack(got)
    assert store.db.select("SELECT COUNT(*) FROM topic_group_log WHERE state = 'done'", ()) == (
        (0,),
    )


async def test_a_handler_that_ends_the_transaction_is_stopped(
    settings: Settings, store: Store, aengine: AsyncEngine, counts: str, readings: TopicAdmin
) -> None:
    publish(settings, 3)

    async def commits(d: Delivery, session: AsyncSession) -> None:
        await session.commit()

    consumer = projection(settings, async_sessionmaker(aengine), commits)
    with pytest.raises(InvalidHandler, match="ended the batch's transaction"):
        await consumer.run(handle_signals=False)
    assert store.db.select("SELECT COUNT(*) FROM topic_group_log WHERE state = 'done'", ()) == (
        (0,),
    )


async def test_the_idle_bound_is_put_back_before_the_connection_goes_back_to_the_pool(
    settings: Settings, aengine: AsyncEngine, counts: str, readings: TopicAdmin
) -> None:
    """The batch's transaction carries ems's idle bound (MariaDB); the pooled connection
    the next user of the engine gets has the server's default again."""
    publish(settings, 3)
    inside: list[Any] = []
    single = create_async_engine(aengine.url, pool_size=1, max_overflow=0)

    bound = "SELECT @ems_batch, @@session.idle_transaction_timeout"

    async def handle(d: Delivery, conn: AsyncConnection) -> None:
        rows = await conn.exec_driver_sql(bound)
        inside.append(tuple(rows.one()))

    try:
        consumer = projection(settings, single, handle)
        assert await consumer.run(max_messages=3, handle_signals=False) == 3
        async with single.connect() as conn:
            after = tuple((await conn.exec_driver_sql(bound)).one())
            server = (await conn.exec_driver_sql("SELECT @@global.idle_transaction_timeout")).one()
    finally:
        await single.dispose()
    assert set(inside) == {(1, settings.idle_transaction_timeout)}
    assert after == (None, server[0])


async def test_a_member_stalled_after_a_locking_read_in_its_batch_frees_the_row(
    settings: Settings, aengine: AsyncEngine, engine: Engine, counts: str, readings: TopicAdmin
) -> None:
    """As the sync consumer's (test_exactly_once.py): the batch's bound covers its whole
    transaction, so a member stalled after a handler's locking read (no write yet) loses
    its session, the row is free, and the batch goes again."""
    with engine.begin() as conn:
        conn.execute(text(f"INSERT INTO {counts} VALUES ('held', 0)"))
    publish(settings, 1)
    waits: list[float | BaseException] = []
    locking = f"SELECT n FROM {counts} WHERE body = 'held' FOR UPDATE"

    def take_the_row() -> None:
        """Another session's locking read of the row, timed."""
        try:
            with engine.begin() as other:
                other.exec_driver_sql("SET SESSION innodb_lock_wait_timeout = 20")
                started = time.monotonic()
                other.exec_driver_sql(locking)
                waits.append(time.monotonic() - started)
        except Exception as exc:  # shown by the assertion below
            waits.append(exc)

    async def handle(d: Delivery, conn: AsyncConnection) -> None:
        await conn.exec_driver_sql(locking)
        if not waits:  # stalled here (the event loop waits on the other session)
            await asyncio.to_thread(take_the_row)

    consumer = projection(settings.with_(idle_transaction_timeout=1), aengine, handle)
    assert await consumer.run(max_messages=1, handle_signals=False) == 1
    (waited,) = waits
    assert isinstance(waited, float) and waited < 1 + 3, waited


async def test_a_cancelled_run_rolls_its_batch_back_and_it_comes_again(
    settings: Settings, engine: Engine, aengine: AsyncEngine, counts: str, readings: TopicAdmin
) -> None:
    """run() cancelled while a handler awaits: the batch's transaction rolls back (none
    of its writes commit), the member leaves, and the next member counts each once."""
    bodies = publish(settings, 6)
    entered = asyncio.Event()

    async def stuck(d: Delivery, session: AsyncSession) -> None:
        await count(session, counts, d)
        entered.set()
        await asyncio.Event().wait()  # until cancelled

    first = projection(settings, async_sessionmaker(aengine), stuck)
    task = asyncio.ensure_future(first.run(handle_signals=False))
    await asyncio.wait_for(entered.wait(), 15)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert counted(engine, counts) == {}

    async def handle(d: Delivery, session: AsyncSession) -> None:
        await count(session, counts, d)

    second = projection(settings, async_sessionmaker(aengine), handle)
    async with second:
        await drain(second, lambda: len(counted(engine, counts)) == len(bodies))
    assert counted(engine, counts) == dict.fromkeys(bodies, 1)


async def test_a_dead_letter_request_undoes_its_writes(
    settings: Settings,
    store: Store,
    engine: Engine,
    aengine: AsyncEngine,
    counts: str,
    readings: TopicAdmin,
) -> None:
    bodies = publish(settings, 8)

    async def handle(d: Delivery, session: AsyncSession) -> None:
        await count(session, counts, d)
        if d.body == b"m-3":
            raise ems.DeadLetter("m-3 cannot be counted")

    consumer = projection(settings, async_sessionmaker(aengine), handle)
    async with consumer:
        await drain(consumer, lambda: len(counted(engine, counts)) == 7)
        await drain(consumer, lambda: log_states(store, "eo")[("dead", 1)] == 1)
    assert counted(engine, counts) == {b: 1 for b in bodies if b != "m-3"}
    assert log_states(store, "eo") == Counter({("done", 1): 7, ("dead", 1): 1})
