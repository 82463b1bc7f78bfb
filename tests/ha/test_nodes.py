"""ems on a Galera cluster, one process's view: which node its connections go to. It
writes through the first usable node in the URL's order; when that node leaves the
primary component, its next connection goes to the next node; and a connection it made
for the old node is never used again, even once that node is back (it would make a second
writer on the cluster)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from ems import TopicAdmin
from ems.aio import Producer as AsyncProducer
from ems.config import Settings
from ems.consumer.groups import ensure_group
from ems.exceptions import DatabaseUnavailable
from ems.store import Store
from ems.store.database import Database
from tests.ha.servers import GaleraCluster
from tests.integration import seed

pytestmark = pytest.mark.ha


@pytest.fixture
def db(ha_settings: Settings) -> Iterator[Database]:
    database = Database(ha_settings)
    yield database
    database.dispose()


#: The port of the node a statement ran on. It reads a table (installation's one row):
#: a node outside the Primary component refuses that (1047), as it refuses every ems
#: statement, while it still answers a bare SELECT @@port.
_PORT = "SELECT @@port FROM installation"


def _port(db: Database) -> int:
    return int(db.select(_PORT, ())[0][0])


def test_connections_go_to_the_first_node_then_the_next_usable_one(
    db: Database, galera: GaleraCluster
) -> None:
    assert _port(db) == galera.node(0).port
    galera.isolate(0)
    assert _port(db) == galera.node(1).port
    assert _port(db) == galera.node(1).port


def test_connections_made_for_the_old_node_are_not_used_once_it_is_back(
    db: Database, galera: GaleraCluster
) -> None:
    own = db.own_connection()
    with own.cursor() as cursor:  # the lease renewal's own connection, on node 0
        cursor.execute("SELECT @@port")
        assert cursor.fetchone()[0] == galera.node(0).port
    db.direct.execute([b"DO 1"])  # an idle connection of the insert path, on node 0
    (direct_id,) = db.direct.connection_ids()
    assert _port(db) == galera.node(0).port  # one in the transactional pool

    galera.isolate(0)
    assert _port(db) == galera.node(1).port
    galera.heal(0)

    with own.cursor() as cursor:
        cursor.execute("SELECT @@port")
        assert cursor.fetchone()[0] == galera.node(1).port
    assert _port(db) == galera.node(1).port
    db.direct.execute([b"DO 1"])
    assert direct_id not in db.direct.connection_ids()
    assert len(db.direct.connection_ids()) == 1


def test_once_the_first_node_is_back_every_connection_returns_to_it(
    ha_settings: Settings, galera: GaleraCluster
) -> None:
    db = Database(ha_settings.with_(node_failback=1.0))
    own = db.own_connection()
    try:
        galera.isolate(0)
        assert _port(db) == galera.node(1).port
        with own.cursor() as cursor:
            cursor.execute("SELECT @@port")
            assert cursor.fetchone()[0] == galera.node(1).port
        galera.heal(0)
        time.sleep(1.1)  # the fail-back period
        assert _port(db) == galera.node(0).port
        with own.cursor() as cursor:
            cursor.execute("SELECT @@port")
            assert cursor.fetchone()[0] == galera.node(0).port
    finally:
        own.close()
        db.dispose()


@pytest.mark.asyncio
async def test_the_asyncio_producer_moves_to_the_next_node_too(
    ha_settings: Settings, galera: GaleraCluster
) -> None:
    TopicAdmin(ha_settings).create("readings", 2)
    producer = AsyncProducer(ha_settings)
    try:
        before = await producer.send("readings", b"on node 0")
        galera.isolate(0)
        after = await producer.send("readings", b"on node 1")
    finally:
        await producer.close()
    galera.heal(0)
    stored = _rows(galera, 1, "SELECT partition_no, offset_no, body FROM message ORDER BY body")
    assert stored == [
        (before.partition, before.offset, b"on node 0"),
        (after.partition, after.offset, b"on node 1"),
    ]


def _rows(galera: GaleraCluster, i: int, sql: str) -> list[tuple[object, ...]]:
    conn = galera.node(i).connect(database="ems")
    try:
        with conn.cursor() as cursor:
            cursor.execute(sql)
            return [tuple(row) for row in cursor.fetchall()]
    finally:
        conn.close()


def test_a_lease_renewed_while_the_cluster_evicts_its_killed_writer_holds(
    ha_settings: Settings, galera: GaleraCluster
) -> None:
    """After a kill -9 of the node ems writes through, the cluster commits nothing until
    it has evicted that node (about 3 s here). A lease renewal sent meanwhile through the
    next node must be judged when it was sent: if it first waited for that node to catch
    up (a causal read waits for the same eviction), a lease whose last renewal left less
    than the stall would be found expired, and the member would drop its partitions and
    rejoin under a new identity, though its lease is longer than the stall."""
    store = Store(ha_settings)
    try:
        topic = TopicAdmin(ha_settings, store=store).create("lease-failover", 1)
        group = ensure_group(store, "g", topic, seed.options(None))
        store.leases.register(group.id, "member", "h", 1, ttl=10)
        heartbeat = store.leases.heartbeat()
        try:
            assert heartbeat.renew("member", ttl=2.0)  # on node 0: left 2 s, less than the stall
            renewed = time.monotonic()  # the lease ends 2 s after this at the latest
            galera.node(0).kill9()
            try:
                # Its connection went with the node: seen closed before the renewal is
                # sent, it is replaced at once; seen only after, the renewal fails and
                # the next one goes through the next node.
                kept = heartbeat.renew("member", ttl=4.0)
            except DatabaseUnavailable:
                kept = heartbeat.renew("member", ttl=4.0)
            assert kept, "the lease was found expired"
            committed = time.monotonic() - renewed
        finally:
            heartbeat.close()
        # The renewal waited in its commit for the eviction, past the lease's old expiry
        # (however long the kill and the failed renewal took on a busy machine).
        assert committed > 2.0, (
            f"the renewal committed before the old lease ended ({committed:.2f} s)"
        )
        (member,) = store.leases.members(group.id)
        assert member.expires_in > 0
    finally:
        store.db.dispose()
