"""Scenarios: streaming producers and a cluster group of 3 members, on private servers,
through a fault. Each run must keep every promise (see checks.py): nothing acknowledged
lost, nothing stored twice, every partition gap-free, redeliveries bounded by one
in-flight batch per crashed member, no cursor past an unhandled message; and progress must
resume within a stated time after the fault ends."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from ems.config import Settings
from tests.faults.checks import first_after
from tests.faults.proxy import FaultProxy
from tests.faults.scenario import Scenario, running
from tests.faults.servers import PrivateMariaDB, PrivateRedis

pytestmark = pytest.mark.faults

#: After a server is back, producers and members make progress again within this long.
RECOVERY_SECONDS = 15.0


@pytest.fixture
def scenario(fault_settings: Settings, tmp_path: Path) -> Iterator[Scenario]:
    with running(Scenario(fault_settings, tmp_path)) as s:
        yield s


def _assert_kept(s: Scenario, since: float) -> None:
    s.stop()
    verdict = s.verdict()
    assert verdict.problems(max_redelivered=s.max_redelivered()) == []
    assert verdict.acknowledged > 0
    resumed = first_after((a.at for a in s.recorded().acks), since)
    assert resumed is not None, "no message was acknowledged after the fault ended"
    assert resumed - since < RECOVERY_SECONDS


def test_mariadb_killed_and_restarted(scenario: Scenario, private_mariadb: PrivateMariaDB) -> None:
    """kill -9 of the server mid-stream, back after 5 s: InnoDB crash recovery keeps every
    committed row; calls in flight fail (never acknowledged) and the rest go on."""
    scenario.wait_acks(200)
    private_mariadb.kill9()
    time.sleep(5)  # the fault's length, not a wait for a result
    private_mariadb.restart()
    back = time.time()
    scenario.wait_acks(200, timeout=60)
    scenario.wait("every member handling again", lambda r: len(r.handled) > 0)
    _assert_kept(scenario, back)


def test_redis_killed_and_restarted_empty(scenario: Scenario, private_redis: PrivateRedis) -> None:
    """kill -9 of Redis without persistence: counters and pub/sub are gone. Producers
    re-seed from MySQL; members fall back to polling, then pick wake-ups up again."""
    scenario.wait_acks(200)
    private_redis.kill9()
    time.sleep(2)
    private_redis.restart()
    back = time.time()
    scenario.wait_acks(200, timeout=60)
    _assert_kept(scenario, back)


def test_lost_commit_replies_with_identical_messages_after_a_redis_loss(
    fault_settings: Settings,
    private_mariadb: PrivateMariaDB,
    private_redis: PrivateRedis,
    tmp_path: Path,
) -> None:
    """Producers of identical heartbeats, each behind its own proxy that cuts the
    connection right after an INSERT has gone to the server (its reply lost), many times,
    while Redis forgets its counters so producers are handed offsets another one took.
    Each acknowledgement must be a place of its own, stored."""
    proxies = [FaultProxy("127.0.0.1", private_mariadb.port, protocol="mysql") for _ in range(3)]
    for proxy in proxies:
        proxy.start()
    try:
        routes = {
            f"producer-{i}": (
                fault_settings.database_url.replace(f":{private_mariadb.port}/", f":{proxy.port}/"),
                fault_settings.redis_url,
            )
            for i, proxy in enumerate(proxies)
        }
        s = Scenario(fault_settings, tmp_path, identical=True, routes=routes)
        with running(s):
            s.wait_acks(100)
            for round_no in range(5):
                for proxy in proxies:
                    proxy.cut_after(b"INSERT INTO message", times=2)
                client = redis.Redis.from_url(fault_settings.redis_url)
                client.flushall()
                client.close()
                s.wait_acks(60)
                assert round_no < 5
            back = time.time()
            assert sum(p.cuts for p in proxies) >= 10, "the replies were never lost"
            s.wait_acks(50)
            _assert_kept(s, back)
    finally:
        for proxy in proxies:
            proxy.close()
