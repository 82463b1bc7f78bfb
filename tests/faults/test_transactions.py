"""Transactional publishing under faults, on the private servers: order-service processes
killed -9 at any point of their transactions (before, during and after the commit, and
while their relay moves rows), and a transaction held open by a paused process for ten
times the gap timeout. The judge is the service's own order table: an order's messages
are delivered if and only if its row committed, each exactly once, in order."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ems import Consumer, Producer, TopicAdmin
from ems.config import Settings
from ems.store import Store
from tests import forked
from tests.faults.proxy import COMMIT, FaultProxy
from tests.faults.servers import PrivateMariaDB
from tests.faults.tx_workload import ORDERS, SHOP, shop_connection
from tests.faults.workload import TOPIC

pytestmark = pytest.mark.faults


def create_shop(settings: Settings, server: PrivateMariaDB, table: str) -> Settings:
    """The service's database `shop` on the ems server (a schema of its own) with one
    table, and the workload's topic; the settings, for chaining."""
    admin = server.connect(autocommit=True)
    with admin.cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS {SHOP}")
        cursor.execute(f"CREATE DATABASE {SHOP}")
        cursor.execute(f"USE {SHOP}")
        cursor.execute(table)
    admin.close()
    TopicAdmin(settings).create(TOPIC, 4)
    return settings


@pytest.fixture
def shop(fault_settings: Settings, private_mariadb: PrivateMariaDB) -> Iterator[Settings]:
    """The order service's database, with its orders table."""
    yield create_shop(fault_settings, private_mariadb, ORDERS)


class Services:
    """Order-service processes, each recording into its own file."""

    def __init__(self, settings: Settings, workdir: Path) -> None:
        self.settings, self.workdir = settings, workdir
        self.procs: dict[str, forked.Child] = {}

    def start(
        self, name: str, mode: str = "txproduce", database_url: str | None = None
    ) -> forked.Child:
        env = {k: v for k, v in os.environ.items() if not k.startswith("EMS_")}
        env |= {
            "EMS_DATABASE_URL": database_url or self.settings.database_url,
            "EMS_REDIS_URL": self.settings.redis_url,
            "EMS_GAP_TIMEOUT": "1",
            "EMS_RELAY_INTERVAL": "0.05",
        }
        err = (self.workdir / f"{name}.err").open("w")
        child = forked.spawn(
            "tests.faults.tx_workload",
            [mode, name, str(self.workdir / f"{name}.log")],
            env=env,
            stdout=forked.PIPE,
            stderr=err,
        )
        err.close()
        assert child.stdout is not None
        line = child.stdout.readline().strip()
        assert line in ("ready", "holding"), f"{name} exited: {child.poll()}"
        self.procs[name] = child
        return child

    def lines(self, kind: str) -> list[str]:
        found = []
        for log in self.workdir.glob("*.log"):
            for line in log.read_text().splitlines():
                if line.startswith(kind + " "):
                    found.append(line.split()[-1])
        return found

    def stop(self) -> None:
        """SIGTERM to every child still running, and wait for each. One a failed test left
        stopped (SIGSTOP) is continued first: it handles SIGTERM, and a stopped process
        handles no signal. One that has not exited after 60 s is killed and named: no child
        outlives its test with its session and the locks it holds."""
        for child in self.procs.values():
            if child.poll() is None:
                child.send_signal(signal.SIGCONT)
                child.send_signal(signal.SIGTERM)
        stuck = []
        for name, child in self.procs.items():
            try:
                child.wait(timeout=60)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait(timeout=60)
                stuck.append(name)
        assert not stuck, f"did not exit within 60 s of SIGTERM, killed: {stuck}"


def orders(settings: Settings) -> dict[str, int]:
    conn = shop_connection(settings, autocommit=True)
    try:
        with conn.cursor() as cursor:
            cursor.execute("SELECT label, messages FROM orders")
            return {str(label): int(n) for label, n in cursor.fetchall()}
    finally:
        conn.close()


def delivered(store: Store) -> list[tuple[int, int, str]]:
    """(partition, offset, body) of every message of the topic, in offset order."""
    rows = store.db.select(
        "SELECT partition_no, offset_no, body FROM message WHERE NOT tombstone "
        "ORDER BY partition_no, offset_no",
        (),
    )
    return [(int(p), int(o), bytes(b).decode()) for p, o, b in rows]


def drain(settings: Settings) -> None:
    """What dead processes committed and no relay moved yet: the scheduler's job does this."""
    with Producer(settings) as producer:
        while producer.relay():
            pass


def judge(settings: Settings, store: Store, services: Services) -> int:
    """Every committed order's messages delivered exactly once and in order, nothing of an
    order that did not commit; returns how many orders committed."""
    committed = orders(settings)
    got = delivered(store)
    bodies = [b for _, _, b in got]
    assert len(bodies) == len(set(bodies)), "a message was delivered twice"
    by_label: dict[str, list[int]] = {}
    for _, _, body in got:
        label, index = body.rsplit("/", 1)
        by_label.setdefault(label, []).append(int(index))
    assert set(by_label) == set(committed), (
        f"delivered without a commit: {sorted(set(by_label) - set(committed))[:5]}; "
        f"committed, not delivered: {sorted(set(committed) - set(by_label))[:5]}"
    )
    for label, n in committed.items():
        assert by_label[label] == list(range(n)), f"{label}: {by_label[label]}"  # send order
    assert set(services.lines("ack")) <= set(committed)
    assert not set(services.lines("rolled")) & set(by_label)
    assert store.db.select("SELECT COUNT(*) FROM message_outbox", ()) == ((0,),)
    return len(committed)


def test_order_services_killed_at_any_point_publish_exactly_what_committed(
    shop: Settings, tmp_path: Path
) -> None:
    services = Services(shop, tmp_path)
    rng = random.Random(7)
    store = Store(shop)
    try:
        for i in range(3):
            services.start(f"svc-{i}")
        generation = 3
        for _ in range(8):
            before = len(services.lines("ack"))
            deadline = time.monotonic() + 60
            while len(services.lines("ack")) < before + 15:  # progress, not a fixed sleep
                assert time.monotonic() < deadline, "the services stopped committing"
                time.sleep(0.02)
            victim = rng.choice([n for n, c in services.procs.items() if c.poll() is None])
            services.procs[victim].kill()  # SIGKILL, wherever it is
            services.start(f"svc-{generation}")
            generation += 1
        services.stop()
        drain(shop)
        assert judge(shop, store, services) > 100
    finally:
        services.stop()
        store.close()


def test_commit_replies_cut_publish_exactly_what_committed(
    shop: Settings, private_mariadb: PrivateMariaDB, tmp_path: Path
) -> None:
    """Each service's connections (its own and its producer's, relay included) go
    through a proxy that cuts the link right after a COMMIT reached the server, its reply
    lost: the service cannot know whether its order committed, and its producer's relay
    cannot know whether a move did. Whatever happened, an order's messages are delivered
    if and only if its row is there, once each."""
    proxies = [FaultProxy("127.0.0.1", private_mariadb.port, protocol="mysql") for _ in range(2)]
    services = Services(shop, tmp_path)
    store = Store(shop)
    try:
        for i, proxy in enumerate(proxies):
            proxy.start()
            url = shop.database_url.replace(f":{private_mariadb.port}/", f":{proxy.port}/")
            services.start(f"svc-{i}", database_url=url)
        for _ in range(6):
            before = len(services.lines("ack"))
            for proxy in proxies:
                proxy.cut_after(COMMIT, times=2)
            deadline = time.monotonic() + 60
            while len(services.lines("ack")) < before + 20:
                assert time.monotonic() < deadline, "the services stopped committing"
                time.sleep(0.02)
        assert sum(p.cuts for p in proxies) >= 6, "no reply was ever lost"
        services.stop()
        drain(shop)
        assert judge(shop, store, services) > 100
    finally:
        services.stop()
        for proxy in proxies:
            proxy.close()
        store.close()


def test_a_transaction_held_open_ten_gap_timeouts_holds_up_no_one(
    shop: Settings, tmp_path: Path
) -> None:
    """A process stopped (SIGSTOP) inside its transaction, its rows in the outbox, for ten
    times the gap timeout: plain sends to the same partition are consumed meanwhile, as
    they are sent; the held order is delivered once the process commits."""
    services = Services(shop, tmp_path)
    store = Store(shop)
    held = services.start("held", mode="hold")
    hold_for = 10 * shop.gap_timeout
    try:
        with (
            Producer(shop) as producer,
            Consumer(
                "g", TOPIC, settings=shop, start="earliest", lease_ttl=4.0, renew_every=1.0
            ) as consumer,
        ):
            # The member has joined and consumes before the clock starts: the bound is
            # about the hold, not about how long a join takes on a busy machine.
            producer.send(TOPIC, "warm-up", key="held")
            seen: list[bytes] = []
            deadline = time.monotonic() + 60
            while b"warm-up" not in seen:
                seen.extend(d.body for d in consumer.poll(timeout=0.5))
                assert time.monotonic() < deadline, "the consumer never started consuming"
            held.send_signal(signal.SIGSTOP)
            stopped_at = time.monotonic()
            latencies = []
            while time.monotonic() - stopped_at < hold_for:
                body = f"plain-{len(latencies)}"
                producer.send(TOPIC, body, key="held")  # the held order's partition
                sent = time.monotonic()
                got: list[bytes] = []
                while body.encode() not in got:
                    # Acked as they come: a member holds at most 5,000 unacked deliveries
                    # of a partition, and this loop sends thousands within the hold.
                    batch = consumer.poll(timeout=0.5)
                    consumer.ack(batch)
                    got.extend(d.body for d in batch)
                    assert time.monotonic() - sent < hold_for, "a plain send waited on the hold"
                latencies.append(time.monotonic() - sent)
            assert held.poll() is None  # still inside its transaction
            # A hole would have held each of them until the hold ended.
            assert len(latencies) >= 3 and max(latencies) < hold_for / 2, latencies
            held.send_signal(signal.SIGCONT)
            held.send_signal(signal.SIGTERM)  # commit now
            assert held.wait(timeout=30) == 0
            got = []
            deadline = time.monotonic() + 30
            while b"held/0" not in got:
                got.extend(d.body for d in consumer.poll(timeout=0.5))
                assert time.monotonic() < deadline, "the held order never came"
        assert "held" in orders(shop)
    finally:
        if held.poll() is None:
            held.send_signal(signal.SIGCONT)
            held.kill()
        store.close()
