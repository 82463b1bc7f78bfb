"""examples/projection.py on asyncio (docs/transactions.md, docs/aio.md): IoT readings
counted per project through the service's async engine, and an alert published for each
reading over its threshold, both in the transaction that settles the reading.

    EMS_DATABASE_URL=mysql+pymysql://root@127.0.0.1:3306/ems \\
    PROJECTION_DATABASE_URL=mysql+asyncmy://root@127.0.0.1:3306/app \\
    python -m examples.aio_projection

The projection's database lives on the server of ems's database (any schema of it); its
URL may name any driver, the async engine uses asyncmy.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable

from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker, create_async_engine

import ems
import ems.aio
from examples.projection import ALERTS, READINGS, THRESHOLD, Base, ProjectStats


def handler(producer: ems.aio.Producer) -> Callable[[ems.Delivery, AsyncSession], Awaitable[None]]:
    async def handle(delivery: ems.Delivery, session: AsyncSession) -> None:
        reading = json.loads(delivery.body)
        project, value = str(reading["project_id"]), float(reading["value"])
        stats = await session.get(ProjectStats, project, with_for_update=True)
        if stats is None:
            stats = ProjectStats(project_id=project, readings=0, total=0.0)
            session.add(stats)
        stats.readings += 1
        stats.total += value
        if value > THRESHOLD:  # consume, transform, produce: in the same transaction
            alert = json.dumps({"project_id": project, "value": value, "offset": delivery.offset})
            await producer.send(ALERTS, alert, key=project, transaction=session)

    return handle


async def main(max_messages: int | None = None) -> int:
    """Run the projection until SIGTERM (or max_messages); the number handled."""
    url = make_url(os.environ["PROJECTION_DATABASE_URL"]).set(drivername="mysql+asyncmy")
    engine = create_async_engine(url)
    async with engine.begin() as conn:
        await conn.run_sync(Base.metadata.create_all)
    admin = ems.TopicAdmin()
    try:
        admin.create(READINGS, partitions=4, exist_ok=True)
        admin.create(ALERTS, partitions=1, exist_ok=True)
    finally:
        admin.close()
    try:
        async with ems.aio.Producer() as producer:
            consumer = ems.aio.Consumer(
                "projection",
                READINGS,
                handler(producer),
                start="earliest",
                transactional=async_sessionmaker(engine),
            )
            return await consumer.run(max_messages)
    finally:
        await engine.dispose()


if __name__ == "__main__":
    asyncio.run(main())
