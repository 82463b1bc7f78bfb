"""The producer: validate, partition, allocate a range, insert in one statement."""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Iterable, Mapping, Sequence

from ems.config import Settings
from ems.exceptions import (
    BelowLowWatermark,
    DatabaseUnavailable,
    DuplicateKey,
    LockConflict,
    RedisOutcomeUnknown,
)
from ems.metrics import published
from ems.offsets.allocators import (
    MySQLAllocator,
    OffsetAllocator,
    RedisAllocator,
    RespAllocator,
    redis_errors,
)
from ems.offsets.redis_clients import resp_for
from ems.offsets.resp import RespConnection
from ems.producer.group_commit import GroupCommit
from ems.producer.partitioner import RoundRobin
from ems.producer.planning import (
    AMBIGUOUS_ATTEMPTS,
    CONFLICT_ATTEMPTS,
    GROUP_MAX,
    MAX_BATCH,
    Outgoing,
    Prepared,
    RangeEnds,
    offset_conflict,
    partition_counts,
    place,
    prepare,
    prepare_batch,
    went_back,
)
from ems.store import Store
from ems.store.client import StoreClient
from ems.types import NewMessage, Record, RecordMetadata, TopicInfo
from ems.validation import check_name
from ems.wakeups import Publisher

__all__ = ["GROUP_MAX", "MAX_BATCH", "Outgoing", "Producer", "went_back"]


class Producer(StoreClient):
    """Publishes messages to topics. Thread-safe; share one per process.

    `send` and `send_batch` return only after the rows are committed in MySQL. Calls made
    at the same time from several threads are committed together (one offset range per
    partition, one INSERT), so many threads sending single messages cost about what one
    thread sending batches does.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        store: Store | None = None,
        allocator: OffsetAllocator | None = None,
    ) -> None:
        super().__init__(settings, store=store)
        self._allocator = allocator
        self._own_redis: RespConnection | None = None
        self._topics: dict[str, TopicInfo] = {}
        self._round_robin = RoundRobin()
        self._committers: dict[int, GroupCommit[Prepared, NewMessage]] = {}
        self._committers_lock = threading.Lock()
        self._wakeups = Publisher(self.settings)
        #: Per topic id and partition, the end of the last range its counter handed out.
        self._ends = RangeEnds()
        self._allocating = threading.Lock()

    @property
    def allocator(self) -> OffsetAllocator:
        """Created on first use, so a producer can be built while Redis is down: its
        sends raise RedisUnavailable until Redis answers."""
        if self._allocator is None:
            with redis_errors():
                self._allocator = self._default_allocator()
        return self._allocator

    def _default_allocator(self) -> OffsetAllocator:
        if self.settings.allocator == "mysql":
            return MySQLAllocator(self.store.heads)
        prefix = self.settings.redis_prefix
        conn = resp_for(
            self.settings,
            timeout=self.settings.connect_timeout,
            retries=self.settings.connect_attempts,
        )
        if conn is None:  # TLS or a unix socket: redis-py speaks those
            return RedisAllocator.for_settings(self.settings, single=True)
        self._own_redis = conn
        return RespAllocator(conn, prefix)

    # -- public API ------------------------------------------------------------------

    def send(
        self,
        topic: str,
        body: bytes | str,
        key: str | bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> RecordMetadata:
        """Publish one message; returns its partition and offset once committed."""
        info = self._topic(topic)
        prepared = prepare(info, Record(body, key, headers), {}, self._round_robin)
        (placed,) = self._committer(info).submit((prepared,))
        return RecordMetadata(info.name, placed.partition, placed.offset)

    def send_batch(self, topic: str, messages: Iterable[Outgoing]) -> list[RecordMetadata]:
        """Publish messages with one allocation per partition and one multi-row INSERT.
        All or none are committed. Results are in input order."""
        info = self._topic(topic)
        prepared = prepare_batch(info, messages, self._round_robin)
        if not prepared:
            return []
        placed = self._committer(info).submit(prepared)
        name = info.name
        return [RecordMetadata(name, m.partition, m.offset) for m in placed]

    def close(self) -> None:
        self._wakeups.close()
        if self._own_redis is not None:
            self._own_redis.close()
        super().close()

    # -- steps -----------------------------------------------------------------------

    def _topic(self, name: str) -> TopicInfo:
        info = self._topics.get(name)
        if info is None:
            check_name(name, "topic")
            info = self.store.topics.get(name)
            # Redis is not trusted to remember: seed the counters from MySQL first.
            self._reseed(info)
            self._topics[name] = info
        return info

    def _committer(self, info: TopicInfo) -> GroupCommit[Prepared, NewMessage]:
        committer = self._committers.get(info.id)
        if committer is None:
            with self._committers_lock:
                committer = self._committers.get(info.id)
                if committer is None:
                    committer = GroupCommit(lambda items: self._insert(info, items), GROUP_MAX)
                    self._committers[info.id] = committer
        return committer

    def _insert(self, info: TopicInfo, prepared: Sequence[Prepared]) -> list[NewMessage]:
        counts = partition_counts(prepared)
        for _ in range(CONFLICT_ATTEMPTS):
            firsts = self._allocate(info, counts)
            if firsts is not None:
                rows = place(info.id, prepared, firsts)
                if self._commit(rows):
                    self._wakeups.messages(info.id, {r.partition: r.offset for r in rows})
                    published(info.name).inc(len(rows))  # once per group commit
                    return rows
            self._reseed(info)
        raise offset_conflict(info, len(prepared))

    def _allocate(self, info: TopicInfo, counts: Mapping[int, int]) -> dict[int, int] | None:
        """The first offset of a fresh range per partition; None when a counter handed out
        a range ending at or below one it handed out before: Redis lost writes (a restart
        without persistence, a failover to a lagging replica), and the range may lie among
        stored or purged offsets. Ranges are taken under a lock so that the ends of one
        partition are seen in the order Redis gave them."""
        with self._allocating:
            try:
                firsts = self.allocator.allocate(info.id, counts)
            except RedisOutcomeUnknown:
                # Not sent again: it may have run. A lost connection may also mean a
                # Redis restarted empty, so the counters are re-seeded first.
                return None
            if not self._ends.accept(info.id, firsts, counts):
                return None
        return firsts

    def _reseed(self, info: TopicInfo) -> None:
        """Raise the counters to where each partition goes on: past its highest stored
        offset, never below its low watermark, and past every range this producer was
        handed (whose offsets may be in flight or holes), so no range repeats one."""
        seeds = self.store.messages.seed_offsets(info.id)
        with self._allocating:
            seeds = self._ends.floors(info.id, seeds)
        self.allocator.reseed(info.id, seeds)

    def _commit(self, rows: list[NewMessage]) -> bool:
        """Insert the rows; False if an offset was taken or lies below its partition's low
        watermark. A dropped connection leaves the outcome unknown, so the same rows are
        sent again with the same random write token, stored on the write's first row; on
        a duplicate-key answer, that row holding our token means the first attempt
        committed (all of it: a write is atomic), and any other row there, however alike,
        means none of it did. A deadlock rolled the statement back, so the same rows go
        again."""
        token = secrets.randbits(63)
        delay = 0.1
        for attempt in range(AMBIGUOUS_ATTEMPTS + 1):
            try:
                self.store.messages.insert(rows, token)
                return True
            except DuplicateKey:
                if attempt == 0:
                    return False
                first = rows[0]
                stored = self.store.messages.write_token_at(
                    first.topic_id, first.partition, first.offset
                )
                return stored == token
            except BelowLowWatermark:
                return False
            except (DatabaseUnavailable, LockConflict):
                if attempt == AMBIGUOUS_ATTEMPTS:
                    raise
                time.sleep(delay)
                delay *= 2
        return False  # pragma: no cover
