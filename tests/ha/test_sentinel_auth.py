"""Redis through Sentinel with passwords on the servers and on the sentinels themselves
(redis+sentinel://:PW@.../ems/0?sentinel_password=PW): ems publishes and consumes across a
failover, and a wrong password is a clear error, not a hang."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ems import Consumer, Delivery, Producer, TopicAdmin
from ems.config import Settings
from ems.exceptions import EmsError
from ems.store import migrate
from tests.conftest import reset_state
from tests.ha.servers import GaleraCluster, SentinelRedis

pytestmark = pytest.mark.ha

PASSWORD = "s3cret-for-ha"


@pytest.fixture(scope="module")
def locked_sentinels(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SentinelRedis]:
    servers = SentinelRedis(Path(tmp_path_factory.mktemp("locked-sentinel")), PASSWORD)
    servers.start()
    yield servers
    servers.stop()


def test_publish_and_consume_through_a_password_protected_service_across_a_failover(
    galera: GaleraCluster, locked_sentinels: SentinelRedis
) -> None:
    settings = Settings(database_url=galera.url(), redis_url=locked_sentinels.url())
    migrate.create_database(settings)
    migrate.upgrade(settings)
    reset_state(settings.with_(database_url=galera.node(0).url()))
    TopicAdmin(settings).create("locked", 2)
    producer = Producer(settings)
    try:
        before = [producer.send("locked", f"before {i}".encode()) for i in range(10)]
        locked_sentinels.kill9_master()
        locked_sentinels.wait_failover(timeout=15)
        after = [producer.send("locked", f"after {i}".encode()) for i in range(10)]
    finally:
        producer.close()
    bodies: list[bytes] = []

    def handle(delivery: Delivery) -> None:
        bodies.append(bytes(delivery.body))

    consumer = Consumer("locked-readers", "locked", handle, settings=settings, start="earliest")
    try:
        consumer.run(max_messages=20, handle_signals=False)
    finally:
        consumer.close()
    assert sorted(bodies) == sorted(
        [f"before {i}".encode() for i in range(10)] + [f"after {i}".encode() for i in range(10)]
    )
    places = {(m.partition, m.offset) for m in before + after}
    assert len(places) == 20  # no offset handed out twice across the failover


def test_a_wrong_password_is_a_clear_error(
    galera: GaleraCluster, locked_sentinels: SentinelRedis
) -> None:
    url = locked_sentinels.url().replace(f":{PASSWORD}@", ":wrong@")
    settings = Settings(database_url=galera.url(), redis_url=url, connect_attempts=1)
    migrate.upgrade(settings)
    TopicAdmin(settings).create("locked-wrong", 1)
    producer = Producer(settings)
    try:
        with pytest.raises(EmsError, match=r"(?i)auth|password|refused"):
            producer.send("locked-wrong", b"x")
    finally:
        producer.close()
