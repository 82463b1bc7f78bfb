"""Forget a deleted topic's offset counters in Redis."""

from __future__ import annotations

from ems.config import Settings
from ems.offsets.allocators import offset_key, redis_client, redis_errors


def forget_counters(settings: Settings, topic_id: int, partitions: int) -> int:
    """Delete the Redis counters of the topic's partitions (none with the MySQL
    allocator); how many there were. A topic made later starts from nothing, even one
    given the same id. RedisUnavailable when Redis does not answer."""
    if settings.allocator != "redis" or partitions < 1:
        return 0
    keys = [offset_key(settings.redis_prefix, topic_id, p) for p in range(partitions)]
    client = redis_client(settings)
    try:
        with redis_errors():
            return sum(int(client.delete(*keys[i : i + 1000])) for i in range(0, len(keys), 1000))
    finally:
        client.close()
