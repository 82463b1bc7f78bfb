"""ems.aio's scheduled sends: delay= and deliver_at= alone and in an AsyncSession's
transaction, at their time and not before; bad schedules write nothing."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine

from ems import TopicAdmin
from ems.aio import Producer
from ems.config import Settings
from ems.exceptions import InvalidSchedule
from ems.store import Store
from ems.testing import MemoryBroker
from tests.conftest import BASE_URL
from tests.integration.test_aio_transactions import eventually
from tests.integration.test_scheduled import bodies, outbox_count, outbox_times, stored

pytestmark = pytest.mark.asyncio


@pytest.fixture
def topics(settings: Settings) -> Iterator[TopicAdmin]:
    admin = TopicAdmin(settings)
    admin.create("jobs", partitions=2)
    yield admin
    admin.close()


@pytest_asyncio.fixture
async def engine() -> AsyncIterator[AsyncEngine]:
    made = create_async_engine(BASE_URL.replace("mysql+pymysql://", "mysql+asyncmy://") + "test")
    yield made
    await made.dispose()


async def test_scheduled_sends_arrive_at_their_time(
    settings: Settings, topics: TopicAdmin, store: Store, engine: AsyncEngine
) -> None:
    async with Producer(settings.with_(relay_interval=3600.0)) as producer:
        meta = await producer.send("jobs", b"later", key="k", delay=0.4)
        assert meta.offset == -1
        at = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=0.6)
        await producer.send_batch("jobs", [b"b1", b"b2"], deliver_at=at)
        async with AsyncSession(engine) as session:
            await producer.send("jobs", b"in tx", delay=0.2, transaction=session)
            await session.rollback()
        async with AsyncSession(engine) as session:
            await producer.send("jobs", b"tx", delay=0.2, transaction=session)
            await session.commit()
        times = outbox_times(store)  # those not moved yet (a slow machine moves some)
        await eventually(lambda: sorted(bodies(store)) == [b"b1", b"b2", b"later", b"tx"])
    assert all(created >= times[b] for _, _, b, created in stored(store) if b in times)
    assert outbox_count(store) == 0


async def test_bad_schedules_write_nothing(
    settings: Settings, topics: TopicAdmin, store: Store
) -> None:
    async with Producer(settings) as producer:
        with pytest.raises(InvalidSchedule, match="time zone"):
            await producer.send("jobs", b"x", deliver_at=dt.datetime(2030, 1, 1))
        with pytest.raises(InvalidSchedule, match="0 or more"):
            await producer.send_batch("jobs", [b"x"], delay=-0.1)
        with pytest.raises(InvalidSchedule, match="EMS_MAX_DELAY"):
            await producer.send("jobs", b"x", delay=dt.timedelta(days=8))
    assert outbox_count(store) == 0 and bodies(store) == []


async def test_the_twin_takes_no_scheduled_send() -> None:
    broker = MemoryBroker()
    broker.create_topic("jobs")
    async with Producer(backend=broker.aio_backend()) as p:
        with pytest.raises(InvalidSchedule):
            await p.send("jobs", b"x", delay=1)
