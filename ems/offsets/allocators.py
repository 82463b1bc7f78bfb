"""Offset allocators (ems.ports.OffsetAllocator). Both hand out contiguous ranges per
(topic, partition); neither is trusted alone: the message table's unique key is the final
arbiter, and a producer whose insert hits it re-seeds the allocator from MySQL
(set-if-greater) and tries again."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from ems.config import Settings
from ems.exceptions import RedisOutcomeUnknown, RedisReplyError, RedisUnavailable, caused
from ems.offsets.redis_clients import client_for, resp_for
from ems.offsets.resp import ErrorReply, Reply, RespConnection, check, pack
from ems.ports import OffsetAllocator
from ems.store.topics import HeadStore

# Raise a counter to ARGV[1] unless it is already higher; returns the value now held.
_SET_IF_GREATER = """
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
local floor = tonumber(ARGV[1])
if floor > current then
  redis.call('SET', KEYS[1], floor)
  return floor
end
return current
"""


# INCRBY several counters in one command: a batch spread over many partitions costs one
# round trip and one small command to encode, instead of a pipeline of one per partition.
_INCRBY_MANY = """
local ends = {}
for i, key in ipairs(KEYS) do
  ends[i] = redis.call('INCRBY', key, ARGV[i])
end
return ends
"""


def offset_key(prefix: str, topic_id: int, partition: int) -> str:
    """The Redis counter of a partition: it holds the partition's next offset."""
    return f"{prefix}offset:{topic_id}:{partition}"


def redis_client(settings: Settings, *, single: bool = False, retrying: bool = True) -> redis.Redis:
    """A client for settings.redis_url. A single-connection client keeps one connection
    behind a lock instead of checking one out of a pool per command (about half the
    client CPU of a command), which suits the producer's one-command hot path. A client
    that is not retrying never sends a command twice (redis-py's retry would re-send an
    INCRBY whose reply was lost)."""
    attempts = settings.connect_attempts if retrying else 0
    return client_for(
        settings,
        single_connection_client=single,
        socket_connect_timeout=settings.connect_timeout,
        socket_timeout=settings.connect_timeout,
        retry=Retry(ExponentialBackoff(cap=1.0, base=0.05), attempts),
        retry_on_error=[redis.ConnectionError, redis.TimeoutError] if retrying else [],
    )


@contextmanager
def redis_errors() -> Iterator[None]:
    try:
        yield
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise caused(RedisUnavailable(f"Redis is unreachable: {exc}"), exc)  # noqa: B904 (see caused)


def check_redis(settings: Settings) -> None:
    """RedisUnavailable unless Redis (a Sentinel service's master) answers a PING within
    the settings' connection attempts."""
    client = redis_client(settings)
    try:
        with redis_errors():
            client.ping()
    finally:
        client.close()


@contextmanager
def sent_once() -> Iterator[None]:
    """For a command that must not run twice: a failed connection leaves its outcome
    unknown, and the caller re-seeds rather than send it again."""
    try:
        yield
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise caused(RedisOutcomeUnknown(f"the connection to Redis failed: {exc}"), exc)  # noqa: B904 (see caused)


class RedisAllocator:
    """INCRBY ranges; a counter holds the next offset of its partition. Allocations go
    through `once`, a client that never re-sends a command (see redis_client); the
    idempotent re-seeds through `client`, which retries."""

    def __init__(self, client: redis.Redis, once: redis.Redis, prefix: str) -> None:
        self.client = client
        self.once = once
        self.prefix = prefix
        self._raise = client.register_script(_SET_IF_GREATER)
        self._incr_many = self.once.register_script(_INCRBY_MANY)

    @classmethod
    def for_settings(cls, settings: Settings, *, single: bool = False) -> RedisAllocator:
        return cls(
            redis_client(settings, single=single),
            redis_client(settings, single=single, retrying=False),
            settings.redis_prefix,
        )

    def key(self, topic_id: int, partition: int) -> str:
        return offset_key(self.prefix, topic_id, partition)

    def allocate(self, topic_id: int, counts: Mapping[int, int]) -> dict[int, int]:
        if len(counts) == 1:
            ((partition, n),) = counts.items()
            with sent_once():
                end = int(self.once.incrby(self.key(topic_id, partition), n))
            return {partition: end - n}
        keys = [self.key(topic_id, partition) for partition in counts]
        with sent_once():
            ends = self._incr_many(keys=keys, args=list(counts.values()))
        return {p: int(end) - n for (p, n), end in zip(counts.items(), ends, strict=True)}

    def reseed(self, topic_id: int, next_offsets: Mapping[int, int]) -> None:
        if not next_offsets:
            with redis_errors():
                self.client.ping()
            return
        pipe = self.client.pipeline(transaction=False)
        for partition, floor in next_offsets.items():
            self._raise(keys=[self.key(topic_id, partition)], args=[floor], client=pipe)
        with redis_errors():
            pipe.execute()

    def close(self) -> None:
        self.client.close()
        self.once.close()


class RespAllocator:
    """RedisAllocator's keys and scripts over a RespConnection: the same counters at about
    a third of the client CPU per allocation, as single sends pay one per message."""

    def __init__(self, conn: RespConnection, prefix: str) -> None:
        self.conn = conn
        self.prefix = prefix
        self._incr_heads: dict[tuple[int, int], bytes] = {}
        self._many_sha = hashlib.sha1(_INCRBY_MANY.encode()).hexdigest()
        self._many_head = _bulk(b"EVALSHA") + _bulk(self._many_sha.encode())
        #: Per topic id and partition, its counter's key as a packed bulk string.
        self._key_bulks: dict[int, dict[int, bytes]] = {}

    def key(self, topic_id: int, partition: int) -> str:
        return offset_key(self.prefix, topic_id, partition)

    def allocate(self, topic_id: int, counts: Mapping[int, int]) -> dict[int, int]:
        if len(counts) == 1:
            ((partition, n),) = counts.items()
            head = self._incr_heads.get((topic_id, partition))
            if head is None:
                head = self._incr_head(topic_id, partition)
            digits = b"%d" % n
            command = b"%b$%d\r\n%b\r\n" % (head, len(digits), digits)
            (end,) = self.conn.execute(command, 1, idempotent=False)
            return {partition: _integer(end) - n}
        ends = self._incr_many(topic_id, counts)
        return {p: end - n for (p, n), end in zip(counts.items(), ends, strict=True)}

    def reseed(self, topic_id: int, next_offsets: Mapping[int, int]) -> None:
        if not next_offsets:
            check(self.conn.execute(pack("PING"), 1)[0])
            return
        # Rare (start, duplicate key): EVAL with the text, so a restarted Redis that lost
        # its script cache needs no second round trip.
        packed = b"".join(
            pack("EVAL", _SET_IF_GREATER, 1, self.key(topic_id, p), floor)
            for p, floor in next_offsets.items()
        )
        for reply in self.conn.execute(packed, len(next_offsets)):
            check(reply)

    def close(self) -> None:
        self.conn.close()

    def _incr_head(self, topic_id: int, partition: int) -> bytes:
        """INCRBY and its key packed, to which only the count is added per call."""
        key = self.key(topic_id, partition).encode()
        head = b"*3\r\n$6\r\nINCRBY\r\n$%d\r\n%b\r\n" % (len(key), key)
        self._incr_heads[(topic_id, partition)] = head
        return head

    def _incr_many(self, topic_id: int, counts: Mapping[int, int]) -> list[int]:
        """The counters' ends after INCRBY of each partition's count, in counts' order."""
        reply = self.conn.execute(self._many_command(topic_id, counts), 1, idempotent=False)[0]
        if isinstance(reply, ErrorReply) and reply.code == "NOSCRIPT":
            # Redis restarted or flushed its script cache; EVAL loads the script again.
            keys = [self.key(topic_id, p) for p in counts]
            command = pack("EVAL", _INCRBY_MANY, len(keys), *keys, *counts.values())
            reply = self.conn.execute(command, 1, idempotent=False)[0]
        ends = check(reply)
        if not isinstance(ends, list) or len(ends) != len(counts):
            raise RedisReplyError(f"Redis answered the offset script with {ends!r}")
        if set(map(type, ends)) != {int}:
            return [_integer(end) for end in ends]  # raises for the first that is none
        return ends  # type: ignore[return-value]

    def _many_command(self, topic_id: int, counts: Mapping[int, int]) -> bytes:
        """pack("EVALSHA", sha, len(counts), *keys, *counts), each key's part packed once
        per producer: a batch over many partitions sends one per partition."""
        bulks = self._key_bulks.get(topic_id)
        if bulks is None:
            bulks = self._key_bulks[topic_id] = {}
        parts = [b"*%d\r\n" % (3 + 2 * len(counts)), self._many_head, _bulk(b"%d" % len(counts))]
        for p in counts:
            bulk = bulks.get(p)
            if bulk is None:
                bulk = bulks[p] = _bulk(self.key(topic_id, p).encode())
            parts.append(bulk)
        parts.extend([_bulk(b"%d" % n) for n in counts.values()])
        return b"".join(parts)


def _bulk(data: bytes) -> bytes:
    return b"$%d\r\n%b\r\n" % (len(data), data)


def _integer(reply: Reply) -> int:
    if type(reply) is int:  # the usual reply: not an error, so no check()
        return reply
    if isinstance(check(reply), int):
        return reply  # type: ignore[return-value]
    raise RedisReplyError(f"Redis answered INCRBY with {reply!r}")


class MySQLAllocator:
    """`UPDATE partition_head SET next_offset = LAST_INSERT_ID(next_offset + n)`."""

    def __init__(self, heads: HeadStore) -> None:
        self.heads = heads

    def allocate(self, topic_id: int, counts: Mapping[int, int]) -> dict[int, int]:
        return {p: self.heads.allocate(topic_id, p, n) for p, n in counts.items()}

    def reseed(self, topic_id: int, next_offsets: Mapping[int, int]) -> None:
        if next_offsets:
            self.heads.raise_to(topic_id, dict(next_offsets))

    def close(self) -> None:
        pass  # the producer's store, closed with it


def allocator_for(settings: Settings, heads: HeadStore) -> OffsetAllocator:
    """The allocator settings.allocator names: partition_head rows, or Redis counters
    over a RespConnection (redis-py's client where that speaks what RESP here does not:
    TLS, a unix socket). RedisUnavailable when Redis cannot be reached."""
    if settings.allocator == "mysql":
        return MySQLAllocator(heads)
    with redis_errors():
        conn = resp_for(
            settings, timeout=settings.connect_timeout, retries=settings.connect_attempts
        )
        if conn is None:
            return RedisAllocator.for_settings(settings, single=True)
    return RespAllocator(conn, settings.redis_prefix)
