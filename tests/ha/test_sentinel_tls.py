"""Redis through Sentinel over TLS (rediss+sentinel://...?ssl_ca_certs=CA): the master,
its replica and the three sentinels speak TLS only, with a password. ems publishes,
consumes and gets its wake-ups across a failover; nothing plain is listening, so every
byte ems exchanged went over TLS; a CA that did not sign the servers' certificate is a
clear error, not a hang."""

from __future__ import annotations

import queue
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ems import Consumer, Delivery, Producer, TopicAdmin
from ems.config import Settings
from ems.exceptions import RedisUnavailable, SendTimeout
from ems.store import migrate
from ems.wakeups import Listener, topic_channel
from tests.conftest import reset_state
from tests.ha.servers import GaleraCluster, SentinelRedis
from tests.tls import self_signed

pytestmark = pytest.mark.ha

PASSWORD = "tls-s3cret-for-ha"


@pytest.fixture(scope="module")
def tls_sentinels(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SentinelRedis]:
    root = Path(tmp_path_factory.mktemp("tls-sentinel"))
    servers = SentinelRedis(root, PASSWORD, self_signed(root / "tls"))
    servers.start()
    yield servers
    servers.stop()


@pytest.fixture
def tls_settings(galera: GaleraCluster, tls_sentinels: SentinelRedis) -> Settings:
    tls_sentinels.ensure_running()
    settings = Settings(database_url=galera.url(), redis_url=tls_sentinels.url())
    migrate.create_database(settings)
    migrate.upgrade(settings)
    reset_state(settings.with_(database_url=galera.node(0).url()))
    return settings


def test_the_url_names_tls_and_nothing_plain_listens(tls_sentinels: SentinelRedis) -> None:
    """A plain PING to any of the five ports gets no answer: the TLS listener drops a
    connection that does not begin with a handshake."""
    assert tls_sentinels.url().startswith("rediss+sentinel://")
    ports = [s.port for s in tls_sentinels.sentinels] + [s.port for s in tls_sentinels.servers]
    for port in ports:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as plain:
            plain.sendall(b"PING\r\n")
            try:
                answer = plain.recv(64)
            except (TimeoutError, ConnectionResetError):
                answer = b""
        assert not answer.startswith((b"+", b"-")), f"port {port} answered in clear: {answer!r}"
        assert tls_sentinels.sentinels[0].client().ping()  # while TLS is answered


def test_publish_consume_and_wake_ups_over_tls_across_a_failover(
    tls_settings: Settings, tls_sentinels: SentinelRedis
) -> None:
    settings = tls_settings
    topic = TopicAdmin(settings).create("tls", 2)
    woken: queue.Queue[str] = queue.Queue()
    listener = Listener(settings, {topic_channel(settings, topic.id): woken.put})
    listener.start()
    producer = Producer(settings)
    try:
        assert listener.connected.wait(10), "the listener did not subscribe over TLS"
        before = [producer.send("tls", f"before {i}".encode(), key=str(i)) for i in range(10)]
        assert woken.get(timeout=10)  # a wake-up came through the first master
        tls_sentinels.kill9_master()
        tls_sentinels.wait_failover(timeout=15)
        after = [producer.send("tls", f"after {i}".encode(), key=str(i)) for i in range(10)]
        # The listener lost the old master; it subscribes again on the promoted one and
        # the wake-ups of later sends reach it.
        while not woken.empty():
            woken.get()
        deadline = time.monotonic() + 15
        late = []
        while True:
            late.append(producer.send("tls", b"late", key="late"))
            try:
                woken.get(timeout=1)
                break
            except queue.Empty:
                assert time.monotonic() < deadline, "no wake-up through the new master"
    finally:
        producer.close()
        listener.stop()
    bodies: list[bytes] = []

    def handle(delivery: Delivery) -> None:
        bodies.append(bytes(delivery.body))

    consumer = Consumer("tls-readers", "tls", handle, settings=settings, start="earliest")
    try:
        consumer.run(max_messages=20 + len(late), handle_signals=False)
    finally:
        consumer.close()
    assert sorted(bodies) == sorted(
        [f"before {i}".encode() for i in range(10)]
        + [f"after {i}".encode() for i in range(10)]
        + [b"late"] * len(late)
    )
    places = {(m.partition, m.offset) for m in before + after + late}
    assert len(places) == 20 + len(late)  # no offset handed out twice


def test_a_ca_that_did_not_sign_the_servers_is_a_clear_error(
    galera: GaleraCluster, tls_sentinels: SentinelRedis, tmp_path: Path
) -> None:
    stranger = self_signed(tmp_path / "stranger")
    url = tls_sentinels.url().replace(str(tls_sentinels.tls.cert), str(stranger.cert))  # type: ignore[union-attr]
    settings = Settings(
        database_url=galera.url(), redis_url=url, connect_attempts=1, send_timeout=0
    )
    migrate.create_database(settings)
    migrate.upgrade(settings)
    TopicAdmin(settings).create("tls-stranger", 1)
    producer = Producer(settings)
    started = time.monotonic()
    try:
        with pytest.raises(SendTimeout, match=r"(?i)certificate") as raised:
            producer.send("tls-stranger", b"x")
        assert isinstance(raised.value.__cause__, RedisUnavailable)
    finally:
        producer.close()
    assert time.monotonic() - started < 30
