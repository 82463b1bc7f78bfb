"""Wake-up publishing for asyncio: the same channels and payloads as ems.wakeups.Publisher,
on a redis.asyncio connection switched to CLIENT REPLY OFF (one write, no round trip).
A wake-up is a hint: one that cannot be sent is dropped, and readers poll."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

import redis
import redis.asyncio

from ems.config import Settings
from ems.exceptions import EmsError
from ems.offsets.redis_clients import async_pool_for
from ems.wakeups import messages_commands, publish_command, topic_channel

log = logging.getLogger(__name__)


class AsyncPublisher:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._pool = async_pool_for(
            settings,
            socket_connect_timeout=settings.connect_timeout,
            socket_timeout=settings.connect_timeout,
        )
        self._conn: Any = None
        self._lock = asyncio.Lock()
        self._channels: dict[int, str] = {}

    async def messages(self, topic_id: int, last_offsets: Mapping[int, int]) -> None:
        """New messages up to last_offsets[p] in partition p."""
        channel = self._channels.get(topic_id)
        if channel is None:
            channel = self._channels[topic_id] = topic_channel(self.settings, topic_id)
        await self._send(messages_commands(channel, last_offsets))

    async def publish(self, channel: str, payload: str) -> None:
        await self._send(publish_command(channel, payload))

    async def _send(self, packed: bytes) -> None:
        async with self._lock:  # one writer at a time on the one connection
            try:
                if self._conn is None:
                    conn = self._pool.make_connection()
                    await conn.connect()
                    await conn.send_command("CLIENT", "REPLY", "OFF")
                    self._conn = conn
                await self._conn.send_packed_command([packed], check_health=False)
            except (redis.RedisError, OSError, EmsError) as exc:
                log.debug("wake-up not sent (%s); readers will poll", exc)
                await self._drop()

    async def _drop(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await conn.disconnect()

    async def close(self) -> None:
        async with self._lock:
            await self._drop()
        await self._pool.disconnect()
