"""Broadcast consumption: every live client reads every partition from an in-memory
cursor. No log, no ack, no commit: a restarted client starts over at its start position."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ems.consumer.cluster import delivery
from ems.types import Delivery, StartPosition, TopicInfo

if TYPE_CHECKING:
    from ems.offsets.reader import PartitionReader
    from ems.store import Store


class BroadcastSession:
    def __init__(
        self, store: Store, reader: PartitionReader, topic: TopicInfo, start: StartPosition
    ) -> None:
        self.reader = reader
        self.topic = topic
        stats = store.topics.partition_stats(topic)
        if start == "earliest":
            self.positions = {s.partition: s.low_watermark or 0 for s in stats}
        else:
            self.positions = {s.partition: s.high_watermark for s in stats}
        self.dirty = set(self.positions)
        self._turn = 0

    def mark(self, news: Mapping[int, int] | None = None) -> None:
        """As ClusterSession.mark."""
        if news is None:
            self.dirty.update(self.positions)
        else:
            self.dirty.update(
                p for p, last in news.items() if p in self.positions and self.positions[p] <= last
            )

    def fetch(self, limit: int) -> list[Delivery]:
        batch: list[Delivery] = []
        order = sorted(self.positions)
        self._turn += 1
        for i in range(len(order)):
            p = order[(self._turn + i) % len(order)]
            if len(batch) >= limit:
                break
            if p not in self.dirty:
                continue
            room = limit - len(batch)
            read = self.reader.read(self.topic.id, p, self.positions[p], room)
            if read.next_offset - self.positions[p] < room:
                self.dirty.discard(p)
            self.positions[p] = read.next_offset
            batch.extend(delivery(self.topic.name, m, 1) for m in read.messages)
        return batch
