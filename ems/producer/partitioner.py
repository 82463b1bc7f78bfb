"""Key partitioning, compatible with Kafka's default partitioner.

partition = (murmur2(key_bytes) & 0x7fffffff) % partitions, where murmur2 is the 32-bit
MurmurHash2 with seed 0x9747b28c that Kafka's Java client uses. A key therefore lands on
the same partition number here as it would in a Kafka topic of the same size. Keys given
as str are hashed as their UTF-8 bytes. Messages without a key are spread round robin.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterator

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's murmur2, returned as a signed 32-bit int like the Java implementation."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    tail = length & ~3
    for i in range(0, tail, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length & 3
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


@functools.lru_cache(maxsize=65_536)
def partition_for_key(key: bytes, partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % partitions


class RoundRobin:
    """Spreads keyless messages over partitions; one counter per topic."""

    def __init__(self) -> None:
        self._counters: dict[int, Iterator[int]] = {}

    def next(self, topic_id: int, partitions: int) -> int:
        counter = self._counters.setdefault(topic_id, itertools.count())
        return next(counter) % partitions
