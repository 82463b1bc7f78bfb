"""Broadcast consumption: every live client reads every partition from an in-memory
cursor. No log, no ack, no commit: a restarted client starts over at its start position."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ems.consumer.cluster import body_bytes
from ems.consumer.state import Acks, Outcome, Settled
from ems.types import Delivery, StartPosition, TopicInfo

if TYPE_CHECKING:
    from ems.metrics import ConsumerMetrics
    from ems.offsets.reader import PartitionReader
    from ems.ports import Topics


class BroadcastSession:
    def __init__(
        self,
        topics: Topics,
        reader: PartitionReader,
        topic: TopicInfo,
        start: StartPosition,
        metrics: ConsumerMetrics,
    ) -> None:
        self.reader = reader
        self.topics = topics
        self.topic = topic
        self.metrics = metrics
        if start == "earliest":
            # The start of each partition's log, not its lowest stored offset: sends given
            # lower offsets may still be in flight, and the reader waits on them as on any
            # hole (ems.store.groups.start_offsets says the same for cluster groups).
            lows = reader.messages.low_offsets(topic.id)
            self.positions = {p: lows.get(p, 0) for p in range(topic.partitions)}
        else:
            stats = topics.partition_stats(topic)
            self.positions = {s.partition: s.high_watermark for s in stats}
        self.dirty = set(self.positions)
        self._turn = 0

    # -- the Session protocol: nothing to own, expire, commit or measure -----------------

    def sync(self) -> None:
        pass

    def expire(self) -> list[Outcome]:
        return []

    def settle(self, outcomes: Settled, *, wait: bool = True) -> None:
        if isinstance(outcomes, Acks):
            self.metrics.broadcast(len(outcomes))
        else:
            self.metrics.broadcast(sum(1 for o in outcomes if o.error is None))

    def lag(self, known_high: Mapping[int, int]) -> None:
        return None

    def close(self) -> None:
        pass

    def interest(self) -> frozenset[int] | None:
        return None  # every partition

    def mark(self, news: Mapping[int, int] | None = None) -> None:
        """As ClusterSession.mark."""
        if news is None:
            self.dirty.update(self.positions)
        else:
            if any(p not in self.positions for p in news):
                self._partitions_added()
            self.dirty.update(
                p for p, last in news.items() if p in self.positions and self.positions[p] <= last
            )

    def _partitions_added(self) -> None:
        """News of a partition not known: partitions were added to the topic. Every
        message of a new partition was written after this client started: read from its
        first offset."""
        self.topic = self.topics.get(self.topic.name)
        for p in range(len(self.positions), self.topic.partitions):
            self.positions.setdefault(p, 0)
            self.dirty.add(p)

    def fetch(self, limit: int, max_bytes: int) -> list[Delivery]:
        """As ClusterSession.fetch: up to `limit` messages and max_bytes of bodies (the
        first message whatever its size)."""
        batch: list[Delivery] = []
        left = max_bytes
        order = sorted(self.positions)
        self._turn += 1
        for i in range(len(order)):
            p = order[(self._turn + i) % len(order)]
            if len(batch) >= limit or left <= 0:
                break
            if p not in self.dirty:
                continue
            read = self.reader.read_deliveries(
                self.topic,
                p,
                self.positions[p],
                limit - len(batch),
                left,
                at_least_one=not batch,
            )
            if read.partitions is not None and read.partitions > self.topic.partitions:
                self._partitions_added()
            if not read.more:
                self.dirty.discard(p)
            self.positions[p] = read.next_offset
            got = read.deliveries
            left -= body_bytes(got)
            batch.extend(got)
        return batch
