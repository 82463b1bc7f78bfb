"""Failover scenarios on a 3-node Galera cluster and a Redis master under Sentinel:
streaming producers and a cluster group of 3 members reach the database through one
cluster URL (nodes 0, 1, 2 in that order) and Redis through the sentinels, while a node,
the whole cluster or the Redis master fails. Each run must keep every promise of the fault
suite (tests/faults/checks.py): nothing acknowledged lost, nothing stored twice, every
partition gap-free, no cursor past an unhandled message, redeliveries bounded by one batch
per incident; publishing and consuming resume within a stated time; and every node ends
with the same rows."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ems.config import Settings
from tests.faults.checks import first_after
from tests.faults.scenario import Scenario, running
from tests.ha.servers import GaleraCluster, SentinelRedis

pytestmark = pytest.mark.ha

#: After a fault ends, producers and members make progress again within this long.
RECOVERY_SECONDS = 15.0


@pytest.fixture
def scenario(ha_settings: Settings, tmp_path: Path) -> Iterator[Scenario]:
    with running(Scenario(ha_settings, tmp_path)) as s:
        yield s


def _handling_since(moment: float) -> object:
    return lambda r: first_after((at for at, _, _ in r.handled), moment) is not None


def _assert_kept(s: Scenario, galera: GaleraCluster, since: float) -> None:
    """Every promise kept, progress back within RECOVERY_SECONDS of `since`, and the
    three nodes agree on the messages."""
    s.stop()
    verdict = s.verdict()
    assert verdict.problems(max_redelivered=s.max_redelivered()) == [], s.stderr_tails()
    assert verdict.acknowledged > 0
    recorded = s.recorded()
    resumed = first_after((a.at for a in recorded.acks), since)
    assert resumed is not None, "no message was acknowledged after the fault"
    assert resumed - since < RECOVERY_SECONDS, s.stderr_tails()
    assert first_after((at for at, _, _ in recorded.handled), since) is not None
    galera.wait_size(3)
    counts = [_count(galera, i, "SELECT COUNT(*) FROM message") for i in range(3)]
    assert len(set(counts)) == 1 and counts[0] >= verdict.acknowledged, counts


def _assert_no_send_failed(s: Scenario) -> None:
    """The fault was shorter than a send's bound (EMS_SEND_TIMEOUT, 45 s by default, which
    the processes keep): every send waited it out, none raised."""
    assert s.recorded().failed == 0, s.stderr_tails()


def _count(galera: GaleraCluster, i: int, sql: str, *, dirty: bool = False) -> int:
    """One number read on node i; dirty: even outside the primary component (which
    refuses reads otherwise)."""
    conn = galera.node(i).connect(database="ems")
    try:
        with conn.cursor() as cursor:
            if dirty:
                cursor.execute("SET SESSION wsrep_dirty_reads = 1")
            cursor.execute(sql)
            return int(cursor.fetchone()[0])
    finally:
        conn.close()


#: The processes' sessions on a node: those with the ems database open, but for this
#: query's own and Galera's applier threads ('system user'), which show the database of
#: the write set they apply: they are the cluster replicating to the node, not a client.
_CLIENTS = (
    "FROM information_schema.PROCESSLIST "
    "WHERE DB = 'ems' AND ID <> CONNECTION_ID() AND USER <> 'system user'"
)
#: Milliseconds since the latest statement of any process's session on a node.
_LAST_ACTIVE = f"SELECT COALESCE(MIN(TIME_MS), 1e12) {_CLIENTS}"


def _ems_sessions(galera: GaleraCluster, i: int) -> int:
    """Connections to node i that have the ems database open (the processes')."""
    return _count(galera, i, f"SELECT COUNT(*) {_CLIENTS}")


def test_the_node_ems_writes_through_killed(scenario: Scenario, galera: GaleraCluster) -> None:
    """a. kill -9 of node 0, which every process writes through, mid-stream: they all
    move to node 1 and carry on, every member keeping its lease (4 s, renewed each second)
    and every send waiting through the cluster's stall; node 0 comes back by state
    transfer with every row."""
    scenario.wait_acks(200)
    assert _ems_sessions(galera, 0) > 0 and _ems_sessions(galera, 1) == 0
    galera.node(0).kill9()
    killed = time.time()
    scenario.wait_acks(200, timeout=60)
    scenario.wait("members handling on node 1", _handling_since(time.time()))
    assert _ems_sessions(galera, 1) > 0 and _ems_sessions(galera, 2) == 0
    galera.node(0).restart()
    _assert_kept(scenario, galera, killed)
    assert not any(scenario.fencings().values()), scenario.stderr_tails()
    _assert_no_send_failed(scenario)


def test_the_writer_cut_off_from_the_others(scenario: Scenario, galera: GaleraCluster) -> None:
    """b. node 0 (the writer) isolated: it falls out of the primary component and refuses
    statements; every process moves to node 1. Nothing is written to node 0 while it is
    cut off, nobody uses it once it is back (a second writer would meet the first in
    certification), and it catches up with what the others took meanwhile."""
    scenario.wait_acks(200)
    galera.isolate(0)
    cut = time.time()
    held = _count(galera, 0, "SELECT COUNT(*) FROM message", dirty=True)
    scenario.wait_acks(200, timeout=60)
    scenario.wait("members handling on node 1", _handling_since(time.time()))
    assert _count(galera, 0, "SELECT COUNT(*) FROM message", dirty=True) == held
    galera.heal(0)
    healed = time.time()
    scenario.wait_acks(200, timeout=60)
    idle_ms = _count(galera, 0, _LAST_ACTIVE)
    assert idle_ms >= (time.time() - healed) * 1000, "a process used node 0 after it healed"
    _assert_kept(scenario, galera, cut)


def test_the_whole_cluster_down_and_bootstrapped(scenario: Scenario, galera: GaleraCluster) -> None:
    """c. kill -9 of all three nodes, then the cluster bootstrapped again from the most
    advanced node, the others joining it: calls fail while it is down (never
    acknowledged) and everything resumes after."""
    scenario.wait_acks(200)
    for i in (2, 1, 0):
        galera.node(i).kill9()
    time.sleep(2)  # the outage, not a wait for a result
    galera.bootstrap_from_most_advanced()
    back = time.time()
    scenario.wait_acks(200, timeout=60)
    scenario.wait("members handling again", _handling_since(back))
    _assert_kept(scenario, galera, back)


def test_the_redis_master_killed(
    scenario: Scenario, galera: GaleraCluster, sentinels: SentinelRedis
) -> None:
    """d. kill -9 of the Redis master: sends wait (none fails) until Sentinel promotes the
    replica, whose counters may be behind (asynchronous replication); producers meet the
    stored offsets on the unique key, re-seed and go on; members get wake-ups from the new
    master."""
    scenario.wait_acks(200)
    old = sentinels.kill9_master()
    sentinels.wait_failover(timeout=15)
    failed_over = time.time()
    scenario.wait_acks(200, timeout=60)
    scenario.wait("members handling again", _handling_since(failed_over))
    sentinels.restart(old)
    _assert_kept(scenario, galera, failed_over)
    _assert_no_send_failed(scenario)


def test_a_rolling_restart_of_every_node(scenario: Scenario, galera: GaleraCluster) -> None:
    """e. each node in turn stopped cleanly and started again, waiting until it is Synced
    before the next, while the stream runs."""
    scenario.wait_acks(200)
    started = time.time()
    for i in range(3):
        galera.node(i).stop()
        scenario.wait_acks(100, timeout=60)
        galera.node(i).restart()
        galera.wait_size(3)
    scenario.wait("members handling after the restarts", _handling_since(time.time()))
    _assert_kept(scenario, galera, started)
