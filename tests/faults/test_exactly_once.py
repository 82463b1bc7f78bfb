"""Exactly-once consumption under faults, on the private servers: members of a projection
(a handler that increments a counter row per message, through the batch's transaction)
killed -9 or paused past their lease at any point (before, during and after their
commits), and connections cut right after a COMMIT reached the server, its reply lost.
The judge is the service's own counter table: every message's row ends at exactly 1."""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ems import Producer, Record
from ems.config import Settings
from tests.faults.proxy import COMMIT, FaultProxy
from tests.faults.servers import PrivateMariaDB
from tests.faults.test_transactions import Services, create_shop
from tests.faults.tx_workload import COUNTS, shop_connection
from tests.faults.workload import TOPIC

pytestmark = pytest.mark.faults

#: Messages published per round, between two faults.
ROUND = 300
#: The projection's process: ems.Consumer's, or ems.aio.Consumer's (tx_workload).
MEMBERS = pytest.mark.parametrize("member", ["eoconsume", "aioeoconsume"])


@pytest.fixture
def shop(fault_settings: Settings, private_mariadb: PrivateMariaDB) -> Iterator[Settings]:
    """The projection's database, with its counter table."""
    yield create_shop(fault_settings, private_mariadb, COUNTS)


def counts(settings: Settings) -> dict[str, int]:
    conn = shop_connection(settings, autocommit=True)
    try:
        with conn.cursor() as cursor:
            cursor.execute("SELECT body, n FROM counts")
            return {str(body): int(n) for body, n in cursor.fetchall()}
    finally:
        conn.close()


class Readings:
    """The messages published so far (bodies unique), a round at a time."""

    def __init__(self, settings: Settings) -> None:
        self.producer = Producer(settings)
        self.sent: list[str] = []

    def publish(self, n: int = ROUND) -> None:
        bodies = [f"r-{len(self.sent) + i}" for i in range(n)]
        self.producer.send_batch(TOPIC, [Record(b, key=f"d{i % 13}") for i, b in enumerate(bodies)])
        self.sent.extend(bodies)

    def wait_counted(self, settings: Settings, at_least: int, timeout: float = 90) -> None:
        """Until at least `at_least` messages are counted: progress, not a fixed sleep."""
        deadline = time.monotonic() + timeout
        while len(counts(settings)) < at_least:
            assert time.monotonic() < deadline, f"stuck at {len(counts(settings))}/{at_least}"
            time.sleep(0.05)

    def close(self) -> None:
        self.producer.close()


def judge(settings: Settings, sent: list[str]) -> None:
    got = counts(settings)
    twice = {b: n for b, n in got.items() if n != 1}
    assert not twice, f"counted more than once: {sorted(twice.items())[:10]}"
    assert set(got) == set(sent), f"never counted: {sorted(set(sent) - set(got))[:10]}"


@MEMBERS
def test_members_killed_or_paused_at_any_point_count_every_message_once(
    shop: Settings, tmp_path: Path, member: str
) -> None:
    """Eight faults, each on a random live member while messages flow: kill -9, or
    SIGSTOP for three lease lengths then SIGCONT (its lease lapsed meanwhile and its
    partitions moved: the batch it held must fail its commit, not settle)."""
    services = Services(shop, tmp_path)
    readings = Readings(shop)
    rng = random.Random(11)
    try:
        for i in range(3):
            services.start(f"eo-{i}", mode=member)
        generation = 3
        for fault in range(8):
            readings.publish()
            # Faults land while the round is being counted.
            readings.wait_counted(shop, len(readings.sent) - ROUND + ROUND // 3)
            name = rng.choice([n for n, c in services.procs.items() if c.poll() is None])
            victim = services.procs[name]
            if fault % 2 == 0:
                victim.kill()  # SIGKILL, wherever it is
                services.start(f"eo-{generation}", mode=member)
                generation += 1
            else:
                victim.send_signal(signal.SIGSTOP)
                # Everything counted means the others took its partitions, its lease
                # having lapsed: progress, not a fixed wait, is the clock.
                readings.publish()
                readings.wait_counted(shop, len(readings.sent))
                victim.send_signal(signal.SIGCONT)
        readings.publish()
        readings.wait_counted(shop, len(readings.sent))
        services.stop()
        judge(shop, readings.sent)
    finally:
        services.stop()
        readings.close()


@MEMBERS
def test_commit_replies_cut_count_every_message_once(
    shop: Settings, private_mariadb: PrivateMariaDB, tmp_path: Path, member: str
) -> None:
    """Each member's connections (ems's and its handler's transaction) go through a proxy
    that cuts the link right after a COMMIT reached the server, its reply lost, or cuts
    it and delivers the COMMIT a second later: the member cannot know whether its batch
    committed. The stored cursor, read again, says so, or the fence refuses the second
    handling of a batch whose commit landed late: none is counted twice."""
    proxies = [FaultProxy("127.0.0.1", private_mariadb.port, protocol="mysql") for _ in range(2)]
    services = Services(shop, tmp_path)
    readings = Readings(shop)
    try:
        for i, proxy in enumerate(proxies):
            proxy.start()
            url = shop.database_url.replace(f":{private_mariadb.port}/", f":{proxy.port}/")
            services.start(f"eo-{i}", mode=member, database_url=url)
        for round_no in range(6):
            readings.publish()
            for proxy in proxies:
                # Every other round, the COMMIT reaches the server a second after the
                # member saw its connection drop: it reads its cursor again before the
                # commit lands, handles the batch again, and must be refused then.
                proxy.cut_after(COMMIT, times=2, late=1.0 if round_no % 2 else 0.0)
            readings.wait_counted(shop, len(readings.sent))
        assert sum(p.cuts for p in proxies) >= 6, "no reply was ever lost"
        services.stop()
        judge(shop, readings.sent)
    finally:
        services.stop()
        for proxy in proxies:
            proxy.close()
        readings.close()
