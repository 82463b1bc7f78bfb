"""ems.aio's transactional sends: through a SQLAlchemy AsyncSession or AsyncConnection
(asyncmy and aiomysql), published if and only if the caller's transaction commits."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator

import pytest
import pytest_asyncio
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine

from ems import Record, TopicAdmin
from ems.aio import Producer
from ems.config import Settings
from ems.exceptions import InvalidTransaction, UnknownTopic
from ems.store import Store
from tests.conftest import BASE_URL
from tests.integration.test_transactions import bodies, stored

pytestmark = pytest.mark.asyncio


@pytest.fixture
def topics(settings: Settings) -> Iterator[TopicAdmin]:
    admin = TopicAdmin(settings)
    admin.create("orders", partitions=3)
    yield admin
    admin.close()


@pytest_asyncio.fixture(params=["asyncmy", "aiomysql"])
async def engine(request: pytest.FixtureRequest) -> AsyncIterator[AsyncEngine]:
    """The service's async engine, on its own database of the same server."""
    url = BASE_URL.replace("mysql+pymysql://", f"mysql+{request.param}://") + "test"
    made = create_async_engine(url)
    yield made
    await made.dispose()


async def eventually(check: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.05)


async def test_a_session_commit_publishes_and_a_rollback_does_not(
    settings: Settings, topics: TopicAdmin, store: Store, engine: AsyncEngine
) -> None:
    async with Producer(settings) as producer:
        async with AsyncSession(engine) as session:
            sent = await producer.send("orders", b"gone", key="k", transaction=session)
            await session.rollback()
        async with AsyncSession(engine) as session:
            batch = [Record(f"{i}".encode(), key="k") for i in range(10)]
            metas = await producer.send_batch("orders", batch, transaction=session)
            assert stored(store) == []
            await session.commit()
        assert sent.offset == -1 and {m.partition for m in metas} == {sent.partition}
        await eventually(lambda: len(stored(store)) == 10)
        assert [b for _, _, b in stored(store)] == [f"{i}".encode() for i in range(10)]


async def test_a_connection_commits_the_rows_with_its_own(
    settings: Settings, topics: TopicAdmin, store: Store, engine: AsyncEngine
) -> None:
    async with Producer(settings) as producer, engine.connect() as conn:
        await conn.execute(text("SELECT 1"))
        await producer.send("orders", b"with the order", transaction=conn)
        await conn.commit()
        await eventually(lambda: bodies(store) == [b"with the order"])


async def test_bad_transactions_and_input_write_nothing(
    settings: Settings, topics: TopicAdmin, store: Store, engine: AsyncEngine
) -> None:
    async with Producer(settings) as producer:
        with pytest.raises(InvalidTransaction, match="AsyncSession"):
            await producer.send("orders", b"x", transaction=engine)
        auto = await engine.connect()
        auto = await auto.execution_options(isolation_level="AUTOCOMMIT")
        try:
            with pytest.raises(InvalidTransaction, match="autocommit"):
                await producer.send("orders", b"x", transaction=auto)
        finally:
            await auto.close()
        async with AsyncSession(engine) as session:
            with pytest.raises(UnknownTopic):
                await producer.send("nope", b"x", transaction=session)
            await session.commit()
    assert store.db.select("SELECT COUNT(*) FROM message_outbox", ()) == ((0,),)
    assert stored(store) == []
