"""Wake-ups over Redis pub/sub: a new message or a group change is noticed at once.

Wake-ups are hints, never the source of truth: a lost one only delays a reader until its
next poll, so publishing is fire-and-forget and a listener that loses Redis falls back to
polling until it reconnects.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Collection, Mapping

import redis
from redis.connection import ConnectionInterface

from ems.config import Settings
from ems.exceptions import EmsError
from ems.offsets.redis_clients import client_for, pool_for, resp_for
from ems.offsets.resp import RespConnection, pack
from ems.service import Service
from ems.urls import redacted

log = logging.getLogger(__name__)

#: Seconds between reconnection attempts of a listener that lost Redis.
RECONNECT_EVERY = 1.0


def topic_channel(settings: Settings, topic_id: int) -> str:
    return f"{settings.redis_prefix}wake:topic:{topic_id}"


def partition_channel(channel: str, partition: int) -> str:
    """The channel of one partition's message wake-ups under a topic's channel: a member
    subscribes to those of the partitions it holds, not to every wake-up of the topic."""
    return f"{channel}:{partition}"


def group_channel(settings: Settings, group_id: int) -> str:
    return f"{settings.redis_prefix}wake:group:{group_id}"


def parse_messages(payload: str) -> dict[int, int]:
    """`p:last,...` -> {partition: last offset written}; malformed parts are skipped."""
    found: dict[int, int] = {}
    for part in payload.split(","):
        partition, _, offset = part.partition(":")
        if partition.isdigit() and offset.isdigit():
            p, o = int(partition), int(offset)
            found[p] = max(o, found.get(p, o))
    return found


def messages_payload(last_offsets: Mapping[int, int]) -> str:
    """{partition: last offset written} -> `p:last,...` (parse_messages reads it)."""
    if len(last_offsets) == 1:  # a single send: no generator, no join
        ((p, o),) = last_offsets.items()
        return f"{p}:{o}"
    return ",".join(f"{p}:{o}" for p, o in last_offsets.items())


def publish_command(channel: str, payload: str) -> bytes:
    """PUBLISH packed directly: cheaper than the generic encoder on a path taken once per
    insert."""
    return _publish_head(channel, None) + _bulk(payload.encode())


def messages_commands(channel: str, last_offsets: Mapping[int, int]) -> bytes:
    """The PUBLISHes of one write's wake-ups, packed for one socket write: all of it on
    the topic's channel (broadcast readers, members behind the redis-py listener, older
    members), and each partition's on its own channel (the members that hold it)."""
    if len(last_offsets) == 1:  # a single send: the same payload on both
        ((p, o),) = last_offsets.items()
        payload = b"%d:%d" % (p, o)
        return (
            _publish_head(channel, None)
            + _bulk(payload)
            + _publish_head(channel, p)
            + _bulk(payload)
        )
    payloads = [(p, b"%d:%d" % (p, o)) for p, o in last_offsets.items()]
    out = [_publish_head(channel, None), _bulk(b",".join([d for _, d in payloads]))]
    for p, d in payloads:
        out += (_publish_head(channel, p), _bulk(d))
    return b"".join(out)


@functools.lru_cache(maxsize=4096)
def _publish_head(channel: str, partition: int | None) -> bytes:
    """A PUBLISH up to its payload, on a topic's channel or on one partition's."""
    name = (channel if partition is None else partition_channel(channel, partition)).encode()
    return b"*3\r\n$7\r\nPUBLISH\r\n$%d\r\n%b\r\n" % (len(name), name)


def _bulk(data: bytes) -> bytes:
    return b"$%d\r\n%b\r\n" % (len(data), data)


class Publisher:
    """PUBLISH without waiting for replies: the connection is switched to CLIENT REPLY
    OFF, so a wake-up costs one socket write and no round trip on the publish path."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._conn: ConnectionInterface | None = None
        self._lock = threading.Lock()
        self._channels: dict[int, str] = {}
        # A plain socket where the URL allows (redis://); redis-py's connection otherwise.
        self._plain = resp_for(settings, timeout=settings.connect_timeout, retries=0, quiet=True)
        self._pool = pool_for(
            settings,
            socket_connect_timeout=settings.connect_timeout,
            socket_timeout=settings.connect_timeout,
        )

    def messages(self, topic_id: int, last_offsets: Mapping[int, int]) -> None:
        """New messages up to last_offsets[p] in partition p."""
        channel = self._channels.get(topic_id)
        if channel is None:
            channel = self._channels[topic_id] = topic_channel(self.settings, topic_id)
        self._send(messages_commands(channel, last_offsets))

    def group(self, group_id: int) -> None:
        self.publish(group_channel(self.settings, group_id), "changed")

    def publish(self, channel: str, payload: str) -> None:
        self._send(publish_command(channel, payload))

    def _send(self, packed: bytes) -> None:
        if self._plain is not None:
            try:
                self._plain.send_only(packed)
            except (OSError, EmsError) as exc:  # EmsError: Redis refused the password
                log.debug("wake-up not sent (%s); readers will poll", exc)
            return
        with self._lock:
            try:
                self._connection().send_packed_command([packed], check_health=False)
            except (redis.RedisError, OSError) as exc:
                log.debug("wake-up not sent (%s); readers will poll", exc)
                self._drop()

    def _connection(self) -> ConnectionInterface:
        if self._conn is None:
            # redis-py's own choice of connection for the URL: TLS for rediss:// (the
            # password never goes over a plain socket), unix sockets, username and db.
            conn = self._pool.make_connection()
            conn.connect()
            conn.send_command("CLIENT", "REPLY", "OFF")
            self._conn = conn
        return self._conn

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.disconnect()
            self._conn = None

    def close(self) -> None:
        if self._plain is not None:
            self._plain.close()
        with self._lock:
            self._drop()
        self._pool.disconnect()


class Listener:
    """A daemon thread subscribed to channels; each message calls its channel's callback
    with the payload. `connected` tells readers whether to rely on it or poll.

    follow(channel, partitions) narrows a topic's channel to the channels of those
    partitions (partition_channel): a member hears the wake-ups of the partitions it
    holds, not every wake-up of its topic. Through redis-py (TLS, unix sockets) the
    listener stays on the topic's channel, whose wake-ups include every partition's."""

    def __init__(self, settings: Settings, callbacks: Mapping[str, Callable[[str], None]]):
        self.settings = settings
        self.callbacks = dict(callbacks)
        self.connected = threading.Event()
        self._service = Service("ems-wakeups", self._run)
        self._stop = self._service.stopping
        #: The loss of Redis was logged at WARNING, and its return not yet.
        self._warned = False
        #: Channel -> the partitions whose channels stand for it (None: the channel).
        self._follow: dict[str, frozenset[int] | None] = {}
        #: The subscribed connection, the channels it is subscribed to, and the callback
        #: of each (a partition's channel has its topic channel's).
        self._conn: RespConnection | None = None
        self._routes: dict[str, Callable[[str], None]] = {}
        self._lock = threading.Lock()

    def start(self) -> None:
        self._service.start()

    def stop(self) -> None:
        self._service.stop_and_join(timeout=2 * RECONNECT_EVERY)

    @property
    def channels(self) -> frozenset[str]:
        """The channels the live connection is subscribed to (none while there is none)."""
        return frozenset(self._routes)

    def follow(self, channel: str, partitions: Collection[int] | None) -> None:
        """Hear `channel`'s wake-ups through the channels of these partitions only (None:
        the channel itself, every partition's). Cheap when nothing changes; a change is
        one SUBSCRIBE and one UNSUBSCRIBE on the live connection, or waits for the
        next one."""
        wanted = None if partitions is None else frozenset(partitions)
        if channel in self._follow and self._follow[channel] == wanted:
            return
        with self._lock:
            self._follow[channel] = wanted
            if self._conn is not None:
                self._apply(self._conn)

    def _channels(self) -> dict[str, Callable[[str], None]]:
        """The channels to be subscribed to now, each with its callback."""
        out: dict[str, Callable[[str], None]] = {}
        for channel, callback in self.callbacks.items():
            partitions = self._follow.get(channel)
            if partitions is None:
                out[channel] = callback
            else:
                out.update({partition_channel(channel, p): callback for p in partitions})
        return out

    def _apply(self, conn: RespConnection) -> None:
        """Subscribe the connection to what is wanted now and from what is not (under
        the lock); a write that fails leaves it to the next connection."""
        wanted = self._channels()
        add = [c for c in wanted if c not in self._routes]
        drop = [c for c in self._routes if c not in wanted]
        try:
            if add:
                conn.command_subscribed(pack("SUBSCRIBE", *add))
            if drop:
                conn.command_subscribed(pack("UNSUBSCRIBE", *drop))
        except OSError as exc:
            log.debug("wake-up subscription not changed (%s); it is on reconnection", exc)
            return
        self._routes = wanted

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._listen()
            except (redis.RedisError, OSError, EmsError) as exc:
                self._lost(exc)
            except Exception:  # a wake-up is a hint: never let one end the listener
                log.exception("wake-up listener failed; polling until it restarts")
            self.connected.clear()
            self._stop.wait(RECONNECT_EVERY)

    def _lost(self, exc: BaseException) -> None:
        """Said once per outage at WARNING: without Redis every new message waits for
        the next poll, which an operator should know; each retry after it only at DEBUG."""
        where = redacted(self.settings.redis_url)
        if self._warned:
            log.debug("wake-up listener still cannot reach Redis at %s (%s)", where, exc)
            return
        self._warned = True
        log.warning(
            "wake-up listener cannot reach Redis at %s (%s): polling for new messages "
            "until it answers",
            where,
            exc,
        )

    def _listen(self) -> None:
        """Through ems's own RESP connection where it serves the URL: the listener thread
        spent about 1.5 times this CPU in redis-py's pub/sub (0.61 s against 0.41 s per
        member over the same 8.5 s at 1,000 sends a second, 4 members)."""
        conn = resp_for(self.settings, timeout=self.settings.connect_timeout, retries=0)
        if conn is None:
            self._listen_redis_py()
            return
        try:
            with self._lock:
                routes = self._channels()
            conn.subscribe(list(routes))
            with self._lock:
                self._conn, self._routes = conn, routes
                self._apply(conn)  # what follow() changed while it connected
            self._reached()
            while not self._stop.is_set():
                for push in conn.pushes(0.5):
                    match push:
                        case [b"message", bytes(channel), bytes(payload)]:
                            # A channel just left may still bring one: it is dropped.
                            callback = self._routes.get(channel.decode())
                            if callback is not None:
                                callback(payload.decode())
        finally:
            with self._lock:
                self._conn, self._routes = None, {}
            conn.close()

    def _listen_redis_py(self) -> None:
        client = client_for(self.settings, socket_connect_timeout=self.settings.connect_timeout)
        pubsub = client.pubsub(ignore_subscribe_messages=True)
        try:
            pubsub.subscribe(*self.callbacks)
            self._reached()
            while not self._stop.is_set():
                message = pubsub.get_message(timeout=0.5)
                if message is not None:
                    channel = message["channel"].decode()
                    self.callbacks[channel](message["data"].decode())
        finally:
            pubsub.close()
            client.close()

    def _reached(self) -> None:
        self.connected.set()
        if self._warned:
            self._warned = False
            where = redacted(self.settings.redis_url)
            log.info("wake-up listener reached Redis at %s again", where)
