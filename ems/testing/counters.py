"""The twin of what a producer runs on besides the tables: Redis's offset counters as a
dict (ems.ports.OffsetAllocator), and the awaited forms of the twin's store and counters
that ems.aio's Producer takes (ems.ports.AsyncPublishStore, AsyncOffsetAllocator)."""

from __future__ import annotations

import threading
from collections.abc import Mapping

from ems.testing.memory import MemoryStore
from ems.types import Placed, TopicInfo


class MemoryCounters:
    """Per (topic, partition), the next offset to hand out: INCRBY ranges and
    set-if-greater re-seeds, each atomic, as Redis runs them. One per broker, shared by
    its producers as one Redis is; like Redis, it is not the arbiter (the message table's
    unique key is), and forget() loses every counter as a Redis restarted without
    persistence does."""

    def __init__(self) -> None:
        self._next: dict[tuple[int, int], int] = {}
        self._lock = threading.Lock()

    def allocate(self, topic_id: int, counts: Mapping[int, int]) -> dict[int, int]:
        firsts = {}
        with self._lock:
            for p, n in counts.items():
                first = firsts[p] = self._next.get((topic_id, p), 0)
                self._next[(topic_id, p)] = first + n
        return firsts

    def reseed(self, topic_id: int, next_offsets: Mapping[int, int]) -> None:
        with self._lock:
            for p, floor in next_offsets.items():
                if floor > self._next.get((topic_id, p), 0):
                    self._next[(topic_id, p)] = floor

    def forget(self) -> None:
        with self._lock:
            self._next.clear()

    def close(self) -> None:
        pass  # the broker's, shared by its producers


class AsyncMemoryCounters:
    """MemoryCounters, awaited."""

    def __init__(self, counters: MemoryCounters) -> None:
        self.counters = counters

    async def allocate(self, topic_id: int, counts: Mapping[int, int]) -> dict[int, int]:
        return self.counters.allocate(topic_id, counts)

    async def reseed(self, topic_id: int, next_offsets: Mapping[int, int]) -> None:
        self.counters.reseed(topic_id, next_offsets)

    async def close(self) -> None:
        pass


class AsyncMemoryStore:
    """A MemoryStore's topic lookup and message writes, awaited: each step is atomic
    under the tables' lock and never waits long, so it runs on the event loop."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    async def topic(self, name: str) -> TopicInfo:
        return self.store.topics.get(name)

    async def insert(
        self, placed: Placed, token: int | None, *, partitions: int | None = None
    ) -> None:
        self.store.messages.insert(placed, token, partitions=partitions)

    async def write_token_at(self, topic_id: int, partition: int, offset: int) -> int | None:
        return self.store.messages.write_token_at(topic_id, partition, offset)

    async def seed_offsets(self, topic_id: int) -> dict[int, int]:
        return self.store.messages.seed_offsets(topic_id)

    async def close(self) -> None:
        pass  # the broker's tables outlive its producers
