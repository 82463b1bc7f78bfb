"""The offset allocators for asyncio: the same counters, keys and scripts as
ems.offsets.allocators (INCRBY ranges in Redis, or partition_head rows in MySQL), awaited.
The rules are the same: an allocation is never sent twice (a lost reply leaves its outcome
unknown, and the producer re-seeds instead), a re-seed is set-if-greater and may repeat."""

from __future__ import annotations

from collections.abc import Mapping

import redis
import redis.asyncio
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

from ems.config import Settings
from ems.offsets.allocators import (
    _INCRBY_MANY,
    _SET_IF_GREATER,
    offset_key,
    redis_errors,
    sent_once,
)
from ems.offsets.redis_clients import async_client_for
from ems.ports import AsyncOffsetAllocator
from ems.store.aio import AsyncMessageStore


def async_redis_client(settings: Settings, *, retrying: bool = True) -> redis.asyncio.Redis:
    """As allocators.redis_client: a client that is not retrying never sends a command
    twice."""
    attempts = settings.connect_attempts if retrying else 0
    return async_client_for(
        settings,
        socket_connect_timeout=settings.connect_timeout,
        socket_timeout=settings.connect_timeout,
        retry=Retry(ExponentialBackoff(cap=1.0, base=0.05), attempts),
        retry_on_error=[redis.ConnectionError, redis.TimeoutError] if retrying else [],
    )


class AsyncRedisAllocator:
    """INCRBY ranges through `once` (never re-sent); re-seeds through `client` (retried)."""

    def __init__(self, client: redis.asyncio.Redis, once: redis.asyncio.Redis, prefix: str):
        self.client = client
        self.once = once
        self.prefix = prefix
        self._incr_many = once.register_script(_INCRBY_MANY)

    @classmethod
    def for_settings(cls, settings: Settings) -> AsyncRedisAllocator:
        return cls(
            async_redis_client(settings),
            async_redis_client(settings, retrying=False),
            settings.redis_prefix,
        )

    async def allocate(self, topic_id: int, counts: Mapping[int, int]) -> dict[int, int]:
        if len(counts) == 1:
            ((partition, n),) = counts.items()
            with sent_once():
                end = int(await self.once.incrby(offset_key(self.prefix, topic_id, partition), n))
            return {partition: end - n}
        keys = [offset_key(self.prefix, topic_id, p) for p in counts]
        with sent_once():
            ends = await self._incr_many(keys=keys, args=list(counts.values()))
        return {p: int(end) - n for (p, n), end in zip(counts.items(), ends, strict=True)}

    async def reseed(self, topic_id: int, next_offsets: Mapping[int, int]) -> None:
        if not next_offsets:  # still reach Redis: see OffsetAllocator.reseed
            with redis_errors():
                await self.client.ping()
            return
        # EVAL with the text: rare, and a Redis that lost its script cache needs no retry.
        pipe = self.client.pipeline(transaction=False)
        for partition, floor in next_offsets.items():
            key = offset_key(self.prefix, topic_id, partition)
            pipe.eval(_SET_IF_GREATER, 1, key, floor)
        with redis_errors():
            await pipe.execute()

    async def close(self) -> None:
        await self.client.aclose()
        await self.once.aclose()


class AsyncMySQLAllocator:
    """`UPDATE partition_head SET next_offset = LAST_INSERT_ID(next_offset + n)`."""

    def __init__(self, store: AsyncMessageStore) -> None:
        self.store = store

    async def allocate(self, topic_id: int, counts: Mapping[int, int]) -> dict[int, int]:
        return await self.store.allocate_heads(topic_id, counts)

    async def reseed(self, topic_id: int, next_offsets: Mapping[int, int]) -> None:
        await self.store.raise_heads(topic_id, next_offsets)

    async def close(self) -> None:
        return None


def async_allocator_for(settings: Settings, store: AsyncMessageStore) -> AsyncOffsetAllocator:
    """The allocator settings.allocator names (no connection is opened before the first
    command)."""
    if settings.allocator == "mysql":
        return AsyncMySQLAllocator(store)
    with redis_errors():
        return AsyncRedisAllocator.for_settings(settings)
