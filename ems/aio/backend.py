"""What ems.aio's Producer runs on: ems.backend's seam in its awaited form.

MySQL over asyncmy and Redis over redis.asyncio (mysql_aio_backend), or the in-memory twin
of ems.testing. The producer reaches them through the async ports of ems.ports only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ems.aio.wakeups import AsyncPublisher
from ems.config import Settings
from ems.offsets.aio import async_allocator_for
from ems.ports import AsyncNotifier, AsyncOffsetAllocator, AsyncPublishStore
from ems.producer import Producer
from ems.store.aio import AsyncMessageStore


@dataclass(frozen=True)
class AsyncBackend:
    """What one asyncio producer runs on, all of it closed with the producer: its
    storage, its wake-ups, and the offset counters it opens on first use."""

    settings: Settings
    store: AsyncPublishStore
    notifier: AsyncNotifier
    allocator: Callable[[], AsyncOffsetAllocator]
    #: The thread-based producer whose relay moves this one's transactional sends,
    #: opened at the first (None: this backend takes none).
    relay: Callable[[], Producer] | None = None


def mysql_aio_backend(settings: Settings) -> AsyncBackend:
    """MySQL and Redis, with the offset allocator settings.allocator names. Nothing
    connects before the first command."""
    store = AsyncMessageStore(settings)
    return AsyncBackend(
        settings=settings,
        store=store,
        notifier=AsyncPublisher(settings),
        allocator=lambda: async_allocator_for(settings, store),
        relay=lambda: Producer(settings),
    )
