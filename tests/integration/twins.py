"""The two implementations test_twin_conformance.py holds to one set of rules: MySQL and
Redis, and the in-memory twin of ems.testing. Each comes with what the ports do not
cover (seeding rows, reading back what the ports keep to themselves, losing Redis) and
with the backends its real producers run on."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from ems.aio import Producer as AsyncProducer
from ems.aio.backend import AsyncBackend, mysql_aio_backend
from ems.backend import Backend, mysql_backend
from ems.partitions import add_partitions
from ems.ports import Storage
from ems.producer import Producer
from ems.producer.planning import Outgoing
from ems.store import Store, fences
from ems.testing import MemoryBroker
from ems.types import GroupInfo, NewMessage, PartitionsAdded, RecordMetadata, TopicInfo, placed_of
from tests.integration import seed


@dataclasses.dataclass
class Twin:
    """One of the two implementations, and what the ports do not cover."""

    name: str
    store: Storage
    create_topic: Callable[[str, int], TopicInfo]
    #: A topic with its largest body (bytes) given.
    create_sized: Callable[[str, int, int], TopicInfo]
    #: Raise a topic's partition count (ems.partitions.add_partitions, or the twin's).
    add_partitions: Callable[[str, int], PartitionsAdded]
    put: Callable[[TopicInfo, int, int, bytes], None]
    log_state: Callable[[GroupInfo, int, int], tuple[str, int] | None]
    dead: Callable[[GroupInfo], list[tuple[int, int, bytes]]]
    #: (attempts, last error, last traceback) of a message's retry row, or None.
    retry_row: Callable[[GroupInfo, int, int], tuple[int, str | None, str | None] | None]
    #: (offset, attempts, last error, last traceback) of the group's dead letters.
    dead_failures: Callable[[GroupInfo], list[tuple[int, int, str | None, str | None]]]
    #: A purge that emptied a partition below a low watermark.
    empty: Callable[[TopicInfo, int, int], None]
    #: The offset counters forget everything (Redis restarted without persistence).
    lose_counters: Callable[[], None]
    #: What a Producer runs on, with the offset allocator settings.allocator names
    #: (the twin has one kind of counters).
    backend: Callable[[str], Backend]
    aio_backend: Callable[[str], AsyncBackend]


def mysql(store: Store) -> Twin:
    settings = store.settings

    def put(topic: TopicInfo, partition: int, offset: int, body: bytes) -> None:
        store.messages.insert(
            placed_of([NewMessage(topic.id, partition, offset, None, None, body)])
        )

    def log_state(group: GroupInfo, partition: int, offset: int) -> tuple[str, int] | None:
        rows = seed.sql(
            store,
            "SELECT state, attempts FROM topic_group_log "
            "WHERE group_id = %s AND partition_no = %s AND offset_no = %s",
            (group.id, partition, offset),
        )
        return (str(rows[0][0]), int(rows[0][1])) if rows else None

    def dead(group: GroupInfo) -> list[tuple[int, int, bytes]]:
        rows = seed.sql(
            store,
            "SELECT partition_no, offset_no, body FROM dead_message WHERE group_id = %s "
            "ORDER BY partition_no, offset_no",
            (group.id,),
        )
        return [(int(p), int(o), bytes(b)) for p, o, b in rows]

    def retry_row(
        group: GroupInfo, partition: int, offset: int
    ) -> tuple[int, str | None, str | None] | None:
        rows = seed.sql(
            store,
            "SELECT attempts, last_error, last_traceback FROM retry_message "
            "WHERE group_id = %s AND partition_no = %s AND offset_no = %s",
            (group.id, partition, offset),
        )
        return (int(rows[0][0]), rows[0][1], rows[0][2]) if rows else None

    def dead_failures(group: GroupInfo) -> list[tuple[int, int, str | None, str | None]]:
        rows = seed.sql(
            store,
            "SELECT offset_no, attempts, last_error, last_traceback FROM dead_message "
            "WHERE group_id = %s ORDER BY id",
            (group.id,),
        )
        return [(int(o), int(a), e, t) for o, a, e, t in rows]

    def empty(topic: TopicInfo, partition: int, low: int) -> None:
        """What a purge does: the watermark raised and the fence moved (ems.store.fences),
        then the rows gone, in one transaction."""
        where = (topic.id, partition)
        with store.db.transaction() as cursor:
            cursor.execute(
                "INSERT INTO partition_low (topic_id, partition_no, low_offset) "
                "VALUES (%s, %s, %s)",
                (*where, low),
            )
            fences.move(cursor, topic.id, [partition])
            cursor.execute("DELETE FROM message WHERE topic_id = %s AND partition_no = %s", where)

    return Twin(
        name="mysql",
        store=store,
        create_topic=lambda name, n: store.topics.create(name, n, 24, 1 << 20),
        create_sized=lambda name, n, size: store.topics.create(name, n, 24, size),
        add_partitions=lambda name, n: add_partitions(store, name, n),
        put=put,
        log_state=log_state,
        dead=dead,
        retry_row=retry_row,
        dead_failures=dead_failures,
        empty=empty,
        lose_counters=lambda: seed.lose_redis(settings) and None,
        backend=lambda kind: mysql_backend(settings.with_(allocator=kind), store),
        aio_backend=lambda kind: mysql_aio_backend(settings.with_(allocator=kind)),
    )


def memory() -> Twin:
    broker = MemoryBroker()
    store = broker.store

    def log_state(group: GroupInfo, partition: int, offset: int) -> tuple[str, int] | None:
        row = store.tables.log.get((group.id, partition, offset))
        return None if row is None else (row.state, row.attempts)

    def retry_row(
        group: GroupInfo, partition: int, offset: int
    ) -> tuple[int, str | None, str | None] | None:
        row = store.tables.retries.get((group.id, partition, offset))
        return None if row is None else (row.attempts, row.error, row.traceback)

    return Twin(
        name="memory",
        store=store,
        create_topic=lambda name, n: store.topics.create(name, n, 24, 1 << 20),
        create_sized=lambda name, n, size: store.topics.create(name, n, 24, size),
        add_partitions=broker.add_partitions,
        put=lambda topic, p, o, body: store.messages.put(topic, p, o, body) and None,
        log_state=log_state,
        dead=lambda group: [
            (d.partition, d.offset, d.message.body)
            for d in store.tables.dead
            if d.group_id == group.id
        ],
        retry_row=retry_row,
        dead_failures=lambda group: [
            (d.offset, d.attempts, d.error, d.traceback)
            for d in store.tables.dead
            if d.group_id == group.id
        ],
        empty=store.messages.empty,
        lose_counters=broker.counters.forget,
        backend=lambda kind: broker.backend(),
        aio_backend=lambda kind: broker.aio_backend(),
    )


class Sender(Protocol):
    """A producer as the tests drive it: ems.Producer, or ems.aio.Producer on a loop."""

    def send(
        self,
        topic: str,
        body: bytes | str,
        key: str | bytes | None = None,
        headers: Mapping[str, str] | None = None,
        *,
        delay: float | None = None,
    ) -> RecordMetadata: ...

    def send_batch(
        self, topic: str, messages: Iterable[Outgoing], *, delay: float | None = None
    ) -> list[RecordMetadata]: ...

    def close(self) -> None: ...


class AioSender:
    """ems.aio.Producer driven from the test's thread, on an event loop of its own."""

    def __init__(self, backend: Callable[[], AsyncBackend]) -> None:
        self.loop = asyncio.new_event_loop()

        async def make() -> AsyncProducer:
            return AsyncProducer(backend=backend())

        self.producer = self.loop.run_until_complete(make())

    def send(
        self,
        topic: str,
        body: bytes | str,
        key: str | bytes | None = None,
        headers: Mapping[str, str] | None = None,
        *,
        delay: float | None = None,
    ) -> RecordMetadata:
        sent = self.producer.send(topic, body, key, headers, delay=delay)
        return self.loop.run_until_complete(sent)

    def send_batch(
        self, topic: str, messages: Iterable[Outgoing], *, delay: float | None = None
    ) -> list[RecordMetadata]:
        sent = self.producer.send_batch(topic, messages, delay=delay)
        return self.loop.run_until_complete(sent)

    def close(self) -> None:
        self.loop.run_until_complete(self.producer.close())
        self.loop.close()


def sender(twin: Twin, flavour: str) -> Sender:
    """A producer of that flavour ("sync" or "aio") on the twin, allocating from Redis
    on MySQL."""
    if flavour == "sync":
        return Producer(backend=twin.backend("redis"))
    return AioSender(lambda: twin.aio_backend("redis"))
