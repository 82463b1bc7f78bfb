"""ems in one process, with no server: for unit tests of handlers and of ems itself."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ems.aio import Producer as AsyncProducer
from ems.aio.backend import AsyncBackend
from ems.backend import Backend
from ems.config import Settings
from ems.consumer import Consumer, Handler
from ems.exceptions import UnknownGroup
from ems.producer import Producer
from ems.producer.planning import Outgoing
from ems.testing.bus import AsyncLocalNotifier, LocalBus, LocalNotifier, LocalSubscription
from ems.testing.counters import AsyncMemoryCounters, AsyncMemoryStore, MemoryCounters
from ems.testing.memory import Clock, DeadLetterRecord, LogRow, MemoryStore, RetryRow, utc_now
from ems.types import GroupInfo, PartitionsAdded, RecordMetadata, TopicInfo
from ems.validation import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_RETENTION_HOURS,
    check_name,
    check_partitions,
)


class MemoryBroker:
    """Topics, and the real producers and consumers (validation, partitioning, offset
    ranges and their conflicts; leases, the leader's sticky assignment, cooperative
    handoff, the consumption log, the retry ladder and dead letters) on in-memory tables
    and counters, with wake-ups as direct calls. What a message goes through is what it
    goes through on MySQL and Redis, minus the servers: nothing survives the process.

        broker = MemoryBroker()
        broker.create_topic("readings", partitions=2)
        broker.send("readings", b"21.5", key="project-7")
        with broker.consumer("store", "readings", start="earliest") as consumer:
            deliveries = consumer.poll(timeout=5)
    """

    def __init__(self, *, clock: Clock = utc_now, settings: Settings | None = None) -> None:
        self.settings = settings or Settings(gap_timeout=1.0)
        self.store = MemoryStore(clock)
        self.bus = LocalBus()
        #: The offset counters, one set for every producer on the broker (as one Redis).
        self.counters = MemoryCounters()
        self._producer = self.producer()

    # -- topics and publishing -----------------------------------------------------------

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        *,
        retention_hours: int = DEFAULT_RETENTION_HOURS,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> TopicInfo:
        check_name(name, "topic")
        check_partitions(partitions)
        return self.store.topics.create(name, partitions, retention_hours, max_body_bytes)

    def add_partitions(self, topic: str, partitions: int) -> PartitionsAdded:
        """Raise the topic's partition count, as ems.TopicAdmin.add_partitions does on
        MySQL: producers learn it at their next send (their rows routed by the old count
        are refused and routed again), readers with their next fetch, and the topic's
        cluster groups get the new partitions from offset 0 (their leaders are woken to
        assign them). PartitionsNotAdded unless the count grows."""
        check_name(topic, "topic")
        check_partitions(partitions)
        change, groups = self.store.topics.add_partitions(topic, partitions)
        notifier = LocalNotifier(self.bus, self.settings)
        for group_id in groups:
            notifier.group(group_id)
        return change

    def send(
        self,
        topic: str,
        body: bytes | str,
        key: str | bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> RecordMetadata:
        """Producer.send, by the broker's own Producer."""
        return self._producer.send(topic, body, key, headers)

    def send_batch(self, topic: str, records: Iterable[Outgoing]) -> Sequence[RecordMetadata]:
        """Producer.send_batch, by the broker's own Producer."""
        return self._producer.send_batch(topic, records)

    def producer(self) -> Producer:
        """An ems.Producer on this broker: the real one (validation, partitioning, offset
        ranges, the write and its conflicts), on the twin's tables and counters."""
        return Producer(backend=self.backend())

    def aio_producer(self, *, linger: float = 0.0) -> AsyncProducer:
        """An ems.aio.Producer on this broker, as producer() is."""
        return AsyncProducer(backend=self.aio_backend(), linger=linger)

    # -- backends --------------------------------------------------------------------------

    def backend(self) -> Backend:
        """What one Producer or Consumer runs on here (a backend serves one client)."""
        return Backend(
            settings=self.settings,
            store=self.store,
            owns_store=False,
            notifier=LocalNotifier(self.bus, self.settings),
            subscribe=lambda callbacks: LocalSubscription(self.bus, callbacks),
            autoscaler=lambda group: None,
            allocator=lambda: self.counters,
        )

    def aio_backend(self) -> AsyncBackend:
        """What one ems.aio Producer runs on here."""
        return AsyncBackend(
            settings=self.settings,
            store=AsyncMemoryStore(self.store),
            notifier=AsyncLocalNotifier(self.bus, self.settings),
            allocator=lambda: AsyncMemoryCounters(self.counters),
        )

    # -- consuming -----------------------------------------------------------------------

    def consumer(
        self, group: str, topic: str, handler: Handler | None = None, **options: Any
    ) -> Consumer:
        """A Consumer (every option of ems.Consumer but settings, store and backend) on
        this broker."""
        return Consumer(group, topic, handler, backend=self.backend(), **options)

    # -- what happened ---------------------------------------------------------------------

    def committed(self, group: str, topic: str) -> dict[int, int]:
        """The group's committed cursors: partition -> next offset to consume."""
        return self.store.groups.offsets(self._group(group, topic).id)

    def dead_letters(self, group: str, topic: str) -> list[DeadLetterRecord]:
        found = self._group(group, topic)
        with self.store.tables.lock:
            return [d for d in self.store.tables.dead if d.group_id == found.id]

    def retries(self, group: str, topic: str) -> dict[tuple[int, int], RetryRow]:
        """The group's waiting retries: (partition, offset) -> its retry row (attempts,
        due time, last error and traceback)."""
        found = self._group(group, topic)
        with self.store.tables.lock:
            return {
                (p, o): replace(row)
                for (g, p, o), row in self.store.tables.retries.items()
                if g == found.id
            }

    def log(self, group: str, topic: str) -> dict[tuple[int, int], LogRow]:
        """The group's consumption log: (partition, offset) -> its last delivery."""
        found = self._group(group, topic)
        with self.store.tables.lock:
            return {
                (p, o): row for (g, p, o), row in self.store.tables.log.items() if g == found.id
            }

    def _group(self, group: str, topic: str) -> GroupInfo:
        """InvalidName, UnknownTopic, or UnknownGroup when the group never consumed it."""
        info = self.store.topics.get(check_name(topic, "topic"))
        found = self.store.groups.get(check_name(group, "group"), info.id)
        if found is None:
            raise UnknownGroup(f"unknown group {group!r} on topic {topic!r}")
        return found
