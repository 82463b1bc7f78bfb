"""ems in one process, with no server: for unit tests of handlers and of ems itself."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

from ems.config import Settings
from ems.consumer import Consumer, Handler
from ems.consumer.builder import Backend
from ems.exceptions import UnknownGroup
from ems.producer.partitioner import RoundRobin, partition_for_key
from ems.testing.bus import LocalBus, LocalNotifier, LocalSubscription
from ems.testing.memory import Clock, DeadLetter, LogRow, MemoryStore, utc_now
from ems.types import GroupInfo, Record, RecordMetadata, TopicInfo
from ems.validation import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_RETENTION_HOURS,
    check_name,
    check_partitions,
    encode_body,
    encode_headers,
    encode_key,
)


class MemoryBroker:
    """Topics, a producer's send and consumers that run the real group protocol
    (leases, the leader's sticky assignment, cooperative handoff, the consumption log,
    the retry ladder and dead letters) on in-memory tables, with wake-ups as direct
    calls. What a message goes through is what it goes through on MySQL and Redis,
    minus the servers: nothing survives the process.

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
        self._notifier = LocalNotifier(self.bus, self.settings)
        self._round_robin = RoundRobin()
        self._sending = threading.Lock()

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

    def send(
        self,
        topic: str,
        body: bytes | str,
        key: str | bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> RecordMetadata:
        """As Producer.send: the same validation and partitioning (by key, else round
        robin), offsets without gaps, and the wake-up."""
        (placed,) = self.send_batch(topic, [Record(body, key, headers)])
        return placed

    def send_batch(self, topic: str, records: Iterable[Record]) -> list[RecordMetadata]:
        info = self.store.topics.get(check_name(topic, "topic"))
        prepared = []
        for r in records:
            body = encode_body(r.body, info.max_body_bytes)
            key = encode_key(r.key)
            encode_headers(r.headers)  # the producer's checks
            partition = (
                self._round_robin.next(info.id, info.partitions)
                if key is None
                else partition_for_key(key, info.partitions)
            )
            prepared.append((partition, key, r.headers, body))
        placed: list[RecordMetadata] = []
        last: dict[int, int] = {}
        with self._sending:
            for partition, key, headers, body in prepared:
                offset = self.store.messages.next_offset(info.id, partition)
                self.store.messages.put(info, partition, offset, body, key, headers)
                placed.append(RecordMetadata(info.name, partition, offset))
                last[partition] = offset
        if last:
            self._notifier.messages(info.id, last)
        return placed

    # -- consuming -----------------------------------------------------------------------

    def backend(self) -> Backend:
        return Backend(
            settings=self.settings,
            store=self.store,
            owns_store=False,
            notifier=LocalNotifier(self.bus, self.settings),
            subscribe=lambda callbacks: LocalSubscription(self.bus, callbacks),
            autoscaler=lambda group: None,
        )

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

    def dead_letters(self, group: str, topic: str) -> list[DeadLetter]:
        found = self._group(group, topic)
        with self.store.tables.lock:
            return [d for d in self.store.tables.dead if d.group_id == found.id]

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
