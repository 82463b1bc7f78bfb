"""An order service: the order row and its "order.created" event in one MySQL transaction.

Run: `uvicorn examples.order_service:app` with EMS_DATABASE_URL and EMS_REDIS_URL as for
every ems program, and ORDERS_DATABASE_URL naming the service's own database on the same
server (an async URL, e.g. mysql+asyncmy://user:pw@db/shop). POST /orders stores the
order and publishes its event if and only if the transaction commits: an order that fails
its checks after the send is rolled back, event and all.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, HTTPException, Request
from pydantic import BaseModel, Field
from sqlalchemy import Integer, Numeric, String
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from ems import Settings
from ems.aio import Producer

TOPIC = "order.created"


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "orders"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    customer: Mapped[str] = mapped_column(String(64))
    total: Mapped[float] = mapped_column(Numeric(12, 2))


class OrderIn(BaseModel):
    customer: str = Field(min_length=1, max_length=64)
    total: float = Field(ge=0)


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    engine = create_async_engine(os.environ["ORDERS_DATABASE_URL"])
    async with engine.begin() as conn:
        await conn.run_sync(Base.metadata.create_all)
    app.state.sessions = async_sessionmaker(engine, expire_on_commit=False)
    async with Producer(Settings.from_env()) as producer:
        app.state.producer = producer
        yield  # on shutdown the relay moves what was committed, then closes
    await engine.dispose()


app = FastAPI(lifespan=lifespan)


@app.post("/orders", status_code=201)
async def create_order(order: OrderIn, request: Request) -> dict[str, int]:
    producer: Producer = request.app.state.producer
    session: AsyncSession
    async with request.app.state.sessions() as session:
        row = Order(customer=order.customer, total=order.total)
        session.add(row)
        await session.flush()  # the order's id
        event = json.dumps({"id": row.id, **order.model_dump()})
        await producer.send(TOPIC, event, key=str(row.id), transaction=session)
        if order.total > 10_000:  # a check that fails after the send: nothing is published
            await session.rollback()
            raise HTTPException(status_code=422, detail="orders over 10,000 need approval")
        await session.commit()
    return {"id": row.id}
