"""Transactional processes for the fault tests.

txproduce: an order service that, in each transaction of its own database (`shop` on the
ems server), inserts an order row and publishes that order's messages with
`transaction=`, then commits or, now and then, rolls back. It records "ack LABEL" after a
commit returned and "rolled LABEL" after a rollback; a process killed in between records
neither, and the order table says what committed.

eoconsume: an exactly-once projection: a member of group "eo" whose handler increments
the message's row of `shop.counts` through the batch's transaction. Whatever kills it or
cuts its connections, each message's row ends at exactly 1.

aioeoconsume: the same projection as an ems.aio.Consumer, its awaited handler writing
through an AsyncConnection of an asyncmy engine.

    python -m tests.faults.tx_workload MODE NAME OUTFILE
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
import threading
import time

import pymysql
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from ems import Consumer, Producer, Record, aio
from ems.config import Settings
from ems.exceptions import EmsError
from ems.types import Delivery
from tests.faults.workload import TOPIC, _stop_on_term, _writer

SHOP = "shop"
ORDERS = (
    "CREATE TABLE IF NOT EXISTS orders ("
    " label VARCHAR(64) PRIMARY KEY, messages INT NOT NULL) ENGINE=InnoDB"
)
COUNTS = (
    "CREATE TABLE IF NOT EXISTS counts ("
    " body VARCHAR(64) PRIMARY KEY, n INT NOT NULL) ENGINE=InnoDB"
)
#: The exactly-once members' group, lease and batch: small batches commit often, so that
#: kills and cuts land before, during and after commits.
EO_GROUP = "eo"
EO_LEASE = {"lease_ttl": 2.0, "renew_every": 0.5}
EO_BATCH = 20


def shop_connection(settings: Settings, *, autocommit: bool = False) -> pymysql.Connection:
    url = make_url(settings.database_url)
    return pymysql.connect(
        host=url.host or "127.0.0.1",
        port=url.port or 3306,
        user=url.username or "root",
        password=url.password or "",
        database=SHOP,
        autocommit=autocommit,
    )


def reconnect(settings: Settings, stopping: threading.Event) -> pymysql.Connection:
    """A new connection to `shop`, tried until one opens (a cut may land on the connect
    itself) or SIGTERM."""
    while True:
        try:
            return shop_connection(settings)
        except pymysql.err.Error as exc:
            print(f"reconnect failed: {exc}", file=sys.stderr)
            if stopping.wait(0.05):
                raise


def txproduce(name: str, outfile: str) -> None:
    out = _writer(outfile)
    settings = Settings.from_env()
    stopping = _stop_on_term()
    rng = random.Random(f"{name}-{os.getpid()}")
    conn = shop_connection(settings)
    try:
        with Producer(settings) as producer:
            print("ready", flush=True)
            i = 0
            while not stopping.is_set():
                label, i = f"{name}-{i}", i + 1
                n = rng.choice([1, 1, 2, 5])
                try:
                    with conn.cursor() as cursor:
                        cursor.execute("INSERT INTO orders VALUES (%s, %s)", (label, n))
                    records = [Record(f"{label}/{j}", key=label) for j in range(n)]
                    producer.send_batch(TOPIC, records, transaction=conn)
                    if rng.random() < 0.15:
                        conn.rollback()
                        os.write(out, f"rolled {label}\n".encode())
                    else:
                        conn.commit()
                        os.write(out, f"ack {time.time():.6f} {label}\n".encode())
                except (EmsError, pymysql.err.Error) as exc:
                    print(f"{label} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
                    conn.close()
                    conn = reconnect(settings, stopping)
    finally:
        conn.close()
        os.close(out)


def hold(name: str, outfile: str) -> None:
    """Open a transaction with one order and its message, say "holding", and commit only
    when told by SIGTERM (the harness pauses the process meanwhile)."""
    out = _writer(outfile)
    settings = Settings.from_env()
    stopping = _stop_on_term()
    conn = shop_connection(settings)
    with Producer(settings) as producer:
        with conn.cursor() as cursor:
            cursor.execute("INSERT INTO orders VALUES (%s, 1)", (name,))
        producer.send(TOPIC, f"{name}/0", key="held", transaction=conn)
        print("holding", flush=True)
        # Never an untimed wait: SIGTERM may reach another thread (the relay's), and the
        # main thread runs Python's handler only once it wakes.
        while not stopping.wait(0.05):
            pass
        conn.commit()
        os.write(out, f"ack {time.time():.6f} {name}\n".encode())
    conn.close()
    os.close(out)


def eoconsume(name: str, outfile: str) -> None:
    """Count each message once, exactly: the handler's UPDATE and the settlement commit
    together, through the member's own PyMySQL connection to `shop`."""
    settings = Settings.from_env()

    def handle(d: Delivery, conn: pymysql.Connection) -> None:
        with conn.cursor() as cursor:
            cursor.execute(
                "INSERT INTO counts VALUES (%s, 1) ON DUPLICATE KEY UPDATE n = n + 1",
                (d.body.decode(),),
            )

    consumer = Consumer(
        EO_GROUP,
        TOPIC,
        handle,
        settings=settings,
        start="earliest",
        batch_size=EO_BATCH,
        transactional=lambda: shop_connection(settings),
        **EO_LEASE,
    )
    consumer.start()
    print("ready", flush=True)
    consumer.run()  # until SIGTERM


def aioeoconsume(name: str, outfile: str) -> None:
    """eoconsume's projection on ems.aio: the handler's UPDATE awaited through the
    batch's AsyncConnection (asyncmy), committed with the settlement."""
    asyncio.run(_aioeoconsume())


async def _aioeoconsume() -> None:
    settings = Settings.from_env()
    url = make_url(settings.database_url).set(drivername="mysql+asyncmy", database=SHOP)
    # A connection cut under a batch is found dead when next taken from the pool.
    engine = create_async_engine(url, pool_pre_ping=True)

    async def handle(d: Delivery, conn: AsyncConnection) -> None:
        await conn.exec_driver_sql(
            "INSERT INTO counts VALUES (%s, 1) ON DUPLICATE KEY UPDATE n = n + 1",
            (d.body.decode(),),
        )

    consumer = aio.Consumer(
        EO_GROUP,
        TOPIC,
        handle,
        settings=settings,
        start="earliest",
        batch_size=EO_BATCH,
        transactional=engine,
        **EO_LEASE,
    )
    await consumer.start()
    print("ready", flush=True)
    try:
        await consumer.run()  # until SIGTERM
    finally:
        await engine.dispose()


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    modes = {"txproduce": txproduce, "hold": hold, "eoconsume": eoconsume}
    {**modes, "aioeoconsume": aioeoconsume}[mode](*args)
