"""Seeding helpers for the cleanup tests: rows written straight into the tables, with
created/updated times in the past taken from the database clock."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import redis

from ems import Consumer
from ems.config import Settings
from ems.consumer.groups import GroupOptions, ensure_group
from ems.store import Store
from ems.types import Delivery, GroupInfo, NewMessage, StartPosition, TopicInfo, placed_of
from tests import sql as db


def insert_rows(store: Store, rows: Sequence[NewMessage]) -> None:
    """Rows placed by hand, holes and all: a write per run of rows that take a partition's
    consecutive offsets (the offsets a write takes in a partition are consecutive)."""
    run: list[NewMessage] = []
    for row in rows:
        last = run[-1] if run else None
        if last is not None and (row.partition, row.offset) != (last.partition, last.offset + 1):
            store.messages.insert(placed_of(run))
            run = []
        run.append(row)
    if run:
        store.messages.insert(placed_of(run))


def options(
    ack_timeout: int | None = 300,
    *,
    broadcast: bool = False,
    ordered: bool | None = None,
    start: StartPosition = "earliest",
) -> GroupOptions:
    """A cluster group's options as the tests use them (ack_timeout None: the default)."""
    return GroupOptions.checked(
        broadcast=broadcast,
        start=start,
        ordered=ordered,
        retry_ladder=None,
        max_attempts=None,
        ack_timeout=ack_timeout,
        batch_size=100,
        lease_ttl=10,
        renew_every=3,
    )


def sql(store: Store, statement: str, params: Iterable[object] = ()) -> list[tuple[Any, ...]]:
    return db.rows(store, statement, tuple(params) or None)


def explain(store: Store, statement: str, params: Iterable[object] = ()) -> list[dict[str, Any]]:
    """EXPLAIN of a driver-level statement (%s placeholders): one dict per plan row."""
    return db.dicts(store, "EXPLAIN " + statement, tuple(params) or None)


def spread(store: Store, topic: TopicInfo, rows: int) -> None:
    """`rows` messages (body "x") dealt round robin over the topic's partitions, generated
    in the server, with the table's statistics refreshed for the optimizer."""
    db.run(
        store,
        "INSERT INTO message (topic_id, partition_no, offset_no, body) "
        f"SELECT %s, seq MOD %s, seq DIV %s, 'x' FROM seq_0_to_{rows - 1}",
        (topic.id, topic.partitions, topic.partitions),
    )
    db.rows(store, "ANALYZE TABLE message")


def messages(
    store: Store, topic: TopicInfo, partition: int, offsets: Iterable[int], age_hours: float
) -> None:
    """Messages at these offsets, created age_hours ago (body "p:o")."""
    rows = [(topic.id, partition, o, f"{partition}:{o}".encode(), age_hours) for o in offsets]
    db.run_many(
        store,
        "INSERT INTO message (topic_id, partition_no, offset_no, body, created_at) "
        "VALUES (%s, %s, %s, %s, NOW(6) - INTERVAL %s * 3600000000 MICROSECOND)",
        rows,
    )


def offsets(store: Store, topic: TopicInfo, partition: int) -> list[int]:
    rows = sql(
        store,
        "SELECT offset_no FROM message WHERE topic_id = %s AND partition_no = %s "
        "ORDER BY offset_no",
        (topic.id, partition),
    )
    return [int(r[0]) for r in rows]


def low(store: Store, topic: TopicInfo, partition: int) -> int | None:
    return store.purge.low(topic.id, partition)


def message_id(store: Store, topic: TopicInfo, partition: int, offset: int) -> int:
    rows = sql(
        store,
        "SELECT id FROM message WHERE topic_id = %s AND partition_no = %s AND offset_no = %s",
        (topic.id, partition, offset),
    )
    return int(rows[0][0])


def retry(
    store: Store, group: GroupInfo, partition: int, offset: int, *, msg_id: int, due_in: float = 60
) -> None:
    sql(
        store,
        "INSERT INTO retry_message (group_id, topic_id, partition_no, offset_no, message_id, "
        "attempts, due_at) VALUES (%s, %s, %s, %s, %s, 2, "
        "NOW(6) + INTERVAL %s * 1000000 MICROSECOND)",
        (group.id, group.topic_id, partition, offset, msg_id, due_in),
    )


def log(
    store: Store,
    group: GroupInfo,
    partition: int,
    offset: int,
    *,
    state: str,
    client: str = "c1",
    age_seconds: float = 0,
    attempts: int = 1,
) -> None:
    sql(
        store,
        "INSERT INTO topic_group_log (group_id, topic_id, partition_no, offset_no, client_id, "
        "state, attempts, started_at, updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s, "
        "NOW(6) - INTERVAL %s MICROSECOND, NOW(6) - INTERVAL %s MICROSECOND)",
        (
            group.id,
            group.topic_id,
            partition,
            offset,
            client,
            state,
            attempts,
            int(age_seconds * 1e6),
            int(age_seconds * 1e6),
        ),
    )


def group(store: Store, name: str, topic: TopicInfo, ack_timeout: int = 300) -> GroupInfo:
    return ensure_group(store, name, topic, options(ack_timeout))


def commit(store: Store, group: GroupInfo, partition: int, offset: int) -> None:
    sql(
        store,
        "UPDATE group_offset SET committed_offset = %s WHERE group_id = %s AND partition_no = %s",
        (offset, group.id, partition),
    )


def wait_until(check: Callable[[], bool], timeout: float = 15.0) -> None:
    """Poll until check() holds; fail the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.1)


def lock_waits(store: Store) -> int:
    """Sessions of this database (other lanes of the suite share the server) now waiting
    for a row lock, read live from InnoDB's monitor. Not information_schema.innodb_trx:
    InnoDB serves it from a cache it refreshes only when nobody on the server has read it
    for 0.1 s, so two sessions polling it anywhere on the server (two tests on two
    workers) freeze it, and a wait that began meanwhile is never seen."""
    status = str(sql(store, "SHOW ENGINE INNODB STATUS")[0][2])
    waiting = set()
    for block in status.split("\n---TRANSACTION ")[1:]:
        found = _WAITING_THREAD.search(block)
        if found:
            waiting.add(int(found.group(1)))
    if not waiting:
        return 0
    here = sql(store, "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = DATABASE()")
    return len(waiting & {int(i) for (i,) in here})


#: A transaction of the monitor's list waiting for a lock, and its session's id.
_WAITING_THREAD = re.compile(r"\nLOCK WAIT .*?\n(?:MariaDB|MySQL) thread id (\d+),", re.DOTALL)


def lose_redis(settings: Settings) -> int:
    """Redis forgets everything of this deployment (a restart without persistence): every
    key under its prefix goes. ems keeps all it has in Redis under that prefix, so for
    this deployment it is a FLUSHALL, and suites of other checkouts sharing the server
    keep their keys. Returns the keys deleted."""
    client = redis.Redis.from_url(settings.redis_url)
    try:
        keys = list(client.scan_iter(match=settings.redis_prefix + "*", count=1000))
        return int(client.delete(*keys)) if keys else 0
    finally:
        client.close()


def poll_until(consumer: Consumer, count: int, timeout: float = 15) -> list[Delivery]:
    """Poll until `count` deliveries came (or the timeout passed); all that came."""
    got: list[Delivery] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        got += consumer.poll(timeout=0.2)
    return got
