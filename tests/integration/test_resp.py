"""The producer's own RESP client against real Redis servers: it must behave like the
redis-py allocator it replaces on the hot path, including when Redis restarts empty or
cannot be reached. Restarts use a private redis-server on a free port, so the shared one
is never disturbed."""

from __future__ import annotations

import queue
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import suppress
from pathlib import Path

import pytest
import redis

from ems import Consumer, Producer, TopicAdmin
from ems.config import Settings
from ems.exceptions import RedisOutcomeUnknown, RedisReplyError, RedisUnavailable, SendTimeout
from ems.offsets.allocators import RedisAllocator, RespAllocator, offset_key
from ems.offsets.resp import RespConnection
from ems.store import Store
from ems.wakeups import Listener, Publisher, topic_channel
from tests import sql as db


class PrivateRedis:
    """A redis-server without persistence that a test may stop and start again."""

    def __init__(self, workdir: Path, password: str | None = None) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.workdir = workdir
        self.password = password
        self.proc: subprocess.Popen[bytes] | None = None

    def url(self, db: int = 0, password: str | None = None) -> str:
        secret = password if password is not None else self.password
        auth = f":{secret}@" if secret else ""
        return f"redis://{auth}127.0.0.1:{self.port}/{db}"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        assert binary, "redis-server is needed (scripts/setup.sh installs it)"
        args = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
        args += ["--appendonly", "no", "--dir", str(self.workdir)]
        if self.password:
            args += ["--requirepass", self.password]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    server = PrivateRedis(tmp_path)
    server.start()
    yield server
    server.stop()


def resp_allocator(settings: Settings) -> RespAllocator:
    conn = RespConnection.from_url(
        settings.redis_url, timeout=settings.connect_timeout, retries=settings.connect_attempts
    )
    assert conn is not None
    return RespAllocator(conn, settings.redis_prefix)


def test_resp_and_redis_py_allocators_share_the_same_counters(settings: Settings) -> None:
    fast = resp_allocator(settings)
    slow = RedisAllocator.for_settings(settings)
    assert fast.allocate(7, {0: 1}) == {0: 0}
    assert slow.allocate(7, {0: 2}) == {0: 1}
    assert fast.allocate(7, {0: 3, 1: 4, 5: 1}) == {0: 3, 1: 0, 5: 0}
    assert slow.allocate(7, {1: 1, 5: 2}) == {1: 4, 5: 1}
    # set-if-greater: a floor below the counter changes nothing, one above raises it
    fast.reseed(7, {0: 2, 1: 100})
    assert slow.allocate(7, {0: 1, 1: 1}) == {0: 6, 1: 100}
    slow.reseed(7, {5: 50})
    assert fast.allocate(7, {5: 1}) == {5: 50}
    fast.close()


def test_an_error_reply_is_a_typed_error(settings: Settings) -> None:
    fast = resp_allocator(settings)
    client = redis.Redis.from_url(settings.redis_url)
    client.set(fast.key(3, 0), "not a number")
    with pytest.raises(RedisReplyError, match="not an integer"):
        fast.allocate(3, {0: 1})
    with pytest.raises(RedisReplyError, match="not an integer"):
        fast.allocate(3, {0: 1, 1: 1})
    with pytest.raises(redis.ResponseError):  # what redis-py raised here
        RedisAllocator.for_settings(settings).allocate(3, {0: 1})
    assert fast.allocate(3, {1: 2}) == {1: 0}  # the connection is still usable
    client.close()
    fast.close()


def test_a_killed_connection_is_replaced_and_counting_goes_on(settings: Settings) -> None:
    fast = resp_allocator(settings)
    assert fast.allocate(1, {0: 5}) == {0: 0}
    conn_id = fast.conn.call("CLIENT", "ID")
    client = redis.Redis.from_url(settings.redis_url)
    assert client.client_kill_filter(_id=str(conn_id)) == 1
    assert fast.allocate(1, {0: 1}) == {0: 5}
    assert fast.conn.call("CLIENT", "ID") != conn_id
    client.close()
    fast.close()


def test_lost_scripts_are_loaded_again(private_redis: PrivateRedis, settings: Settings) -> None:
    fast = resp_allocator(settings.with_(redis_url=private_redis.url()))
    assert fast.allocate(1, {0: 1, 1: 1}) == {0: 0, 1: 0}
    assert fast.conn.call("SCRIPT", "FLUSH") == b"OK"
    assert fast.allocate(1, {0: 1, 1: 1}) == {0: 1, 1: 1}
    fast.close()


def test_password_and_database_from_the_url(tmp_path: Path, settings: Settings) -> None:
    server = PrivateRedis(tmp_path, password="s3cret")
    server.start()
    try:
        fast = resp_allocator(settings.with_(redis_url=server.url(db=2)))
        assert fast.allocate(1, {0: 4}) == {0: 0}
        client = redis.Redis.from_url(server.url(db=2))
        assert client.get(fast.key(1, 0)) == b"4"
        assert redis.Redis.from_url(server.url(db=0)).get(fast.key(1, 0)) is None
        client.close()
        fast.close()
        wrong = resp_allocator(settings.with_(redis_url=server.url(password="nope")))
        with pytest.raises(RedisReplyError, match="refused"):
            wrong.allocate(1, {0: 1})
    finally:
        server.stop()


def test_unreachable_redis_is_a_typed_error_after_bounded_retries(settings: Settings) -> None:
    fast = resp_allocator(settings.with_(redis_url="redis://127.0.0.1:1/0", connect_timeout=0.5))
    started = time.monotonic()
    with pytest.raises(RedisUnavailable):
        fast.allocate(1, {0: 1})
    with pytest.raises(RedisUnavailable):
        fast.reseed(1, {0: 1})
    assert time.monotonic() - started < 5  # 3 retries: 0.1 + 0.2 + 0.4 s of backoff each


def test_a_redis_that_never_answers_ends_each_call_within_the_timeout() -> None:
    """The socket blocks (no poll() around each call) and the kernel bounds its reads: a
    server that accepts and never answers costs a call its timeout, not forever."""
    silent = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    threading.Thread(target=lambda: accepted.append(silent.accept()[0]), daemon=True).start()
    conn = RespConnection("127.0.0.1", silent.getsockname()[1], timeout=0.5, retries=0)
    try:
        started = time.monotonic()
        with pytest.raises(RedisUnavailable):
            conn.call("PING")
        assert time.monotonic() - started < 5
        assert conn._sock is None  # the timed-out connection was dropped

        ready = RespConnection("127.0.0.1", silent.getsockname()[1], timeout=0.5, retries=0)
        sock = ready._connect()
        assert sock.gettimeout() is None
        ready.close()
    finally:
        conn.close()
        silent.close()
        for s in accepted:
            s.close()


def _stored(settings: Settings) -> list[tuple[int, bytes]]:
    store = Store(settings)
    found = db.rows(store, "SELECT offset_no, body FROM message ORDER BY offset_no")
    result = [(int(o), bytes(b)) for o, b in found]
    store.close()
    return result


def test_a_producer_rides_through_a_redis_restart(
    private_redis: PrivateRedis, settings: Settings
) -> None:
    """Redis dies (sends give up at their bound, here one attempt, and write nothing),
    then comes back empty: the producer reconnects, re-seeds from MySQL and duplicates no
    offset."""
    TopicAdmin(settings).create("t", 1)
    local = settings.with_(redis_url=private_redis.url(), connect_timeout=0.5, send_timeout=0)
    with Producer(local) as producer:
        assert [producer.send("t", f"a{i}").offset for i in range(3)] == [0, 1, 2]
        private_redis.stop()
        with pytest.raises(SendTimeout) as raised:
            producer.send("t", b"lost")
        assert isinstance(raised.value.__cause__, RedisUnavailable)
        private_redis.start()
        assert [producer.send("t", f"b{i}").offset for i in range(2)] == [3, 4]
    assert _stored(settings) == [
        (0, b"a0"),
        (1, b"a1"),
        (2, b"a2"),
        (3, b"b0"),
        (4, b"b1"),
    ]


def test_wake_ups_reach_listeners_and_survive_a_restart(
    private_redis: PrivateRedis, settings: Settings
) -> None:
    """The publisher's plain socket (replies off) delivers; after Redis restarts, a lost
    wake-up or two is allowed (they are hints), then they flow again."""
    topic = TopicAdmin(settings).create("t", 1)
    local = settings.with_(redis_url=private_redis.url(), connect_timeout=0.5)
    got: queue.Queue[str] = queue.Queue()
    listener = Listener(local, {topic_channel(local, topic.id): got.put})
    listener.start()
    try:
        assert listener.connected.wait(5)
        with Producer(local) as producer:
            producer.send("t", b"a")
            assert got.get(timeout=5) == "0:0"
            private_redis.stop()
            private_redis.start()
            deadline = time.monotonic() + 15
            seen: list[str] = []
            while not seen and time.monotonic() < deadline:
                offset = producer.send("t", b"b").offset
                try:
                    seen.append(got.get(timeout=0.3))
                except queue.Empty:
                    continue
            assert seen and seen[0].startswith("0:") and int(seen[0][2:]) <= offset
    finally:
        listener.stop()


def test_a_subscribed_connection_reads_every_push_that_arrived_at_once(
    settings: Settings,
) -> None:
    conn = RespConnection.from_url(settings.redis_url, timeout=2.0, retries=0)
    assert conn is not None
    channel = f"{settings.redis_prefix}test:subscribe"
    client = redis.Redis.from_url(settings.redis_url)
    try:
        conn.subscribe([channel, channel + ":other"])
        assert conn.pushes(0.05) == []  # nothing published yet: waits, then none
        for i in range(50):
            client.publish(channel, f"m{i}")
        got: list[object] = []
        deadline = time.monotonic() + 10
        while len(got) < 50 and time.monotonic() < deadline:
            got += conn.pushes(0.5)
        assert got == [[b"message", channel.encode(), f"m{i}".encode()] for i in range(50)]
        # Killed by the server: the next look says the connection is lost.
        client.client_kill_filter(_type="pubsub")
        with pytest.raises(OSError):
            for _ in range(20):
                conn.pushes(0.5)
    finally:
        conn.close()
        client.close()


def test_the_wake_up_listener_subscribes_through_ems_own_connection(
    private_redis: PrivateRedis, settings: Settings
) -> None:
    """Not through redis-py's pub/sub, which cost the listener thread about 1.5 times
    the CPU per wake-up (every member receives every wake-up of its topic). A Redis of
    the test's own: no other test's subscribers in its client list."""
    local = settings.with_(redis_url=private_redis.url())
    channel = f"{settings.redis_prefix}test:listener"
    got: queue.Queue[str] = queue.Queue()
    listener = Listener(local, {channel: got.put})
    listener.start()
    client = redis.Redis.from_url(local.redis_url)
    try:
        assert listener.connected.wait(5)
        client.publish(channel, "3:7")
        assert got.get(timeout=5) == "3:7"
        # ems's connection speaks RESP2; redis-py's pub/sub here speaks RESP3.
        subscribers = [c for c in client.client_list(_type="pubsub") if c["sub"] == "1"]
        assert subscribers and all(c["resp"] == "2" for c in subscribers)
    finally:
        listener.stop()
        client.close()


def _channels(client: redis.Redis, channel: str) -> set[str]:
    """The channels of `channel`'s family with a subscriber now."""
    return {c.decode() for c in client.pubsub_channels(f"{channel}*")}


def _until(check: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_a_listener_following_partitions_hears_only_theirs_and_follows_changes(
    private_redis: PrivateRedis, settings: Settings
) -> None:
    """A member hears the wake-ups of the partitions it holds, not every wake-up of its
    topic: a wake-up of another partition never reaches it; a change of partitions takes
    effect on the live connection; None goes back to the topic's channel."""
    local = settings.with_(redis_url=private_redis.url())
    topic = TopicAdmin(local).create("t", 4)
    channel = topic_channel(local, topic.id)
    got: queue.Queue[str] = queue.Queue()
    listener = Listener(local, {channel: got.put})
    listener.follow(channel, {1})  # before the start: the first subscription is narrowed
    listener.start()
    publisher = Publisher(local)
    client = redis.Redis.from_url(local.redis_url)
    try:
        assert listener.connected.wait(5)
        assert _channels(client, channel) == {f"{channel}:1"}
        publisher.messages(topic.id, {0: 5})
        publisher.messages(topic.id, {1: 7})
        publisher.messages(topic.id, {0: 6, 1: 8, 2: 1})
        assert [got.get(timeout=5), got.get(timeout=5)] == ["1:7", "1:8"]
        listener.follow(channel, {2, 3})
        _until(lambda: _channels(client, channel) == {f"{channel}:2", f"{channel}:3"}, "2, 3")
        publisher.messages(topic.id, {1: 9, 3: 4})
        assert got.get(timeout=5) == "3:4"
        listener.follow(channel, None)
        _until(lambda: _channels(client, channel) == {channel}, "the topic's channel")
        publisher.messages(topic.id, {0: 10, 1: 11})
        assert got.get(timeout=5) == "0:10,1:11"
        assert got.empty()
    finally:
        listener.stop()
        publisher.close()
        client.close()


def test_members_subscribe_to_the_wake_ups_of_the_partitions_they_hold(
    private_redis: PrivateRedis, settings: Settings
) -> None:
    local = settings.with_(redis_url=private_redis.url())
    topic = TopicAdmin(local).create("t", 4)
    channel = topic_channel(local, topic.id)
    members = [Consumer("g", "t", settings=local) for _ in range(2)]
    client = redis.Redis.from_url(local.redis_url)
    every = {f"{channel}:{p}" for p in range(4)}

    def split() -> bool:
        for member in members:
            member.poll(0.05)
        held = [set(m.session.interest() or ()) for m in members]
        heard = []
        for m in members:
            assert isinstance(m.listener, Listener)
            heard.append({c for c in m.listener.channels if c.startswith(channel)})
        subscribed = dict(client.pubsub_numsub(*every, channel))
        own = [{f"{channel}:{p}" for p in mine} for mine in held]
        return (
            all(len(h) == 2 for h in held)
            and heard == own
            and all(subscribed[c.encode()] == 1 for c in every)
            and subscribed[channel.encode()] == 0
        )

    try:
        _until(split, "the partitions split 2 and 2, each member on its own two", 60)
    finally:
        for member in members:
            member.close()
        client.close()


class ReplyDropper:
    """A TCP proxy in front of Redis that, when armed, forwards the next command and then
    cuts the connection before Redis's reply comes back: the command ran, its client
    cannot know."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.armed = threading.Event()
        self.cuts = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            threading.Thread(target=self._up, args=(client, server), daemon=True).start()
            threading.Thread(target=self._down, args=(server, client), daemon=True).start()

    def _up(self, client: socket.socket, server: socket.socket) -> None:
        with suppress(OSError):
            while data := client.recv(65536):
                server.sendall(data)
        server.close()

    def _down(self, server: socket.socket, client: socket.socket) -> None:
        with suppress(OSError):
            while data := server.recv(65536):
                if self.armed.is_set():
                    self.armed.clear()
                    self.cuts += 1
                    break
                client.sendall(data)
        client.shutdown(socket.SHUT_RDWR)
        client.close()
        server.close()

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def dropper() -> Iterator[ReplyDropper]:
    proxy = ReplyDropper(("127.0.0.1", 6379))
    yield proxy
    proxy.close()


def _counter(settings: Settings, topic_id: int, partition: int) -> int:
    client = redis.Redis.from_url(settings.redis_url)
    try:
        return int(client.get(offset_key(settings.redis_prefix, topic_id, partition)) or 0)
    finally:
        client.close()


@pytest.mark.parametrize("partitions", [{0: 5}, {0: 5, 1: 2}])
def test_an_allocation_whose_reply_is_lost_is_never_sent_again(
    settings: Settings, dropper: ReplyDropper, partitions: dict[int, int]
) -> None:
    fast = resp_allocator(settings.with_(redis_url=dropper.url()))
    assert fast.allocate(9, {0: 1}) == {0: 0}
    dropper.armed.set()
    with pytest.raises(RedisOutcomeUnknown):
        fast.allocate(9, partitions)
    assert dropper.cuts == 1
    assert _counter(settings, 9, 0) == 1 + partitions[0]  # INCRBY ran once
    # Idempotent commands still ride through a lost reply.
    dropper.armed.set()
    fast.reseed(9, {0: 100})
    assert _counter(settings, 9, 0) == 100
    fast.close()


def test_the_redis_py_allocator_never_sends_an_allocation_twice(
    settings: Settings, dropper: ReplyDropper
) -> None:
    slow = RedisAllocator.for_settings(settings.with_(redis_url=dropper.url()))
    assert slow.allocate(9, {0: 1}) == {0: 0}
    dropper.armed.set()
    with pytest.raises(RedisOutcomeUnknown):
        slow.allocate(9, {0: 5})
    assert _counter(settings, 9, 0) == 6


def test_a_producer_whose_allocation_reply_is_lost_reseeds_and_sends_once(
    settings: Settings, store: Store, dropper: ReplyDropper
) -> None:
    TopicAdmin(settings, store=store).create("t", 1)
    with Producer(settings.with_(redis_url=dropper.url())) as producer:
        assert producer.send("t", "a").offset == 0
        dropper.armed.set()
        second = producer.send("t", "b")
    assert dropper.cuts == 1
    stored = db.rows(store, "SELECT offset_no, body FROM message ORDER BY offset_no")
    assert [(int(o), bytes(b)) for o, b in stored] == [(0, b"a"), (second.offset, b"b")]
