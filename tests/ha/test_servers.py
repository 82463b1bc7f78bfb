"""The ha suite's servers really replicate, fail and come back: a Galera node killed,
cut off or the whole cluster down, a Redis master killed under Sentinel."""

from __future__ import annotations

from pathlib import Path

import pymysql
import pytest
from redis.sentinel import Sentinel

from tests.ha.servers import (
    GaleraArbitrator,
    GaleraCluster,
    GaleraNode,
    LogWatch,
    SentinelRedis,
)

pytestmark = pytest.mark.ha

#: MariaDB's error for a query on a node outside the Primary component.
ER_UNKNOWN_COM_ERROR = 1047


def _execute(node: GaleraNode, statement: str, *args: object) -> list[tuple[object, ...]]:
    """One statement on a node, in a session that first waits for the node to apply
    every write the cluster committed before (wsrep_sync_wait): Galera commits on the
    writer and applies on the others a moment later, so a read elsewhere could miss it."""
    conn = node.connect(autocommit=True, read_timeout=30)
    try:
        with conn.cursor() as cursor:
            cursor.execute("SET SESSION wsrep_sync_wait = 1")
            cursor.execute(statement, args or None)
            return list(cursor.fetchall())
    finally:
        conn.close()


def _write(node: GaleraNode, note: str) -> None:
    _execute(node, "INSERT INTO ha.notes (note) VALUES (%s)", note)


def _notes(node: GaleraNode) -> list[object]:
    """The notes a node holds, sorted: which writes reached it, not their order (the ids
    of rows written on different nodes do not follow the order of the writes: each node
    hands out auto-increment values from an offset of its own, as Galera sets them)."""
    return sorted(row[0] for row in _execute(node, "SELECT note FROM ha.notes"))


@pytest.fixture
def cluster(galera: GaleraCluster) -> GaleraCluster:
    """The cluster, with an empty table ha.notes."""
    _execute(galera.node(0), "CREATE DATABASE IF NOT EXISTS ha")
    _execute(
        galera.node(0),
        "CREATE OR REPLACE TABLE ha.notes (id INT AUTO_INCREMENT PRIMARY KEY, note VARCHAR(40))",
    )
    return galera


def test_a_row_written_on_one_node_is_read_on_another(cluster: GaleraCluster) -> None:
    assert {cluster.node(i).status()["wsrep_cluster_size"] for i in range(3)} == {"3"}
    _write(cluster.node(0), "on node 0")
    assert _notes(cluster.node(2)) == ["on node 0"]
    hosts = ",".join(f"127.0.0.1:{cluster.node(i).port}" for i in range(3))
    assert cluster.url() == f"mysql+pymysql://root@{hosts}/ems"


def test_a_killed_node_leaves_two_primary_and_rejoins_with_what_it_missed(
    cluster: GaleraCluster,
) -> None:
    _write(cluster.node(0), "before")
    cluster.node(0).kill9()
    cluster.wait_size(2, [1, 2])
    status = cluster.node(1).status()
    assert (status["wsrep_ready"], status["wsrep_cluster_status"]) == ("ON", "Primary")
    _write(cluster.node(1), "while node 0 was down")
    cluster.node(0).restart()
    cluster.wait_size(3)
    assert _notes(cluster.node(0)) == ["before", "while node 0 was down"]


def test_a_node_that_left_a_running_cluster_may_not_start_a_new_one(
    cluster: GaleraCluster,
) -> None:
    """Why docker/compose.yaml's nodes decide at each start whether to bootstrap: a node
    started with --wsrep-new-cluster after it left a cluster that still runs (restart or
    crash) refuses to start; without the option it rejoins."""
    node = cluster.node(0)
    for leave in (node.stop, node.kill9):
        leave()
        cluster.wait_size(2, [1, 2])
        node.bootstrap = True
        with pytest.raises(AssertionError, match="not be safe to bootstrap the cluster"):
            node.start(timeout=30)
        node.start()
        cluster.wait_size(3)


def test_an_isolated_node_refuses_writes_until_healed(cluster: GaleraCluster) -> None:
    assert cluster.stragglers() == []
    cluster.isolate(2)
    status = cluster.node(2).status()
    assert (status["wsrep_ready"], status["wsrep_cluster_status"]) == ("OFF", "non-Primary")
    assert cluster.stragglers() == [cluster.node(2)]
    with pytest.raises(pymysql.err.OperationalError) as refused:
        _write(cluster.node(2), "on the isolated node")
    assert refused.value.args[0] == ER_UNKNOWN_COM_ERROR
    _write(cluster.node(0), "on node 0")
    _write(cluster.node(1), "on node 1")
    cluster.heal(2)
    assert _notes(cluster.node(2)) == ["on node 0", "on node 1"]
    assert cluster.stragglers() == []


def test_a_node_stuck_out_of_the_group_is_restarted_by_the_wait(cluster: GaleraCluster) -> None:
    """A running node that stays out of the Primary component (here cut off behind the
    harness's back) is restarted once by wait_size, which then finds all three Synced."""
    stuck = cluster.node(1)
    stuck.set_provider_option("gmcast.isolate=1")
    stuck.wait(lambda s: s["wsrep_cluster_status"] == "non-Primary", 30, "non-Primary")
    pid = stuck.pid
    cluster.wait_size(3, timeout=5)
    assert stuck.pid != pid
    assert cluster.stragglers() == []
    _write(cluster.node(1), "after the restart")
    assert _notes(cluster.node(0)) == ["after the restart"]


def test_a_cluster_down_whole_comes_back_from_its_most_advanced_node(
    cluster: GaleraCluster,
) -> None:
    _write(cluster.node(0), "on three nodes")
    cluster.node(2).stop()
    cluster.wait_size(2, [0, 1])
    _write(cluster.node(0), "on two nodes")
    cluster.node(0).kill9()
    cluster.node(1).kill9()
    first = cluster.bootstrap_from_most_advanced()
    assert first is not cluster.node(2)  # it stopped before the last write
    for i in range(3):
        assert _notes(cluster.node(i)) == ["on three nodes", "on two nodes"]


def test_an_arbitrator_joins_the_group_and_writes_go_on(
    cluster: GaleraCluster, tmp_path: Path
) -> None:
    """garbd, which the HA report uses to tell the group's share of a commit from the
    appliers': every node counts it, and the cluster commits with it as before."""
    arbitrator = GaleraArbitrator(tmp_path / "garbd", cluster.nodes)
    arbitrator.start()
    try:
        for node in cluster.nodes:
            node.wait(lambda s: s["wsrep_cluster_size"] == "4", 10, "4 members")
        _write(cluster.node(0), "with an arbitrator")
        assert _notes(cluster.node(2)) == ["with an arbitrator"]
    finally:
        arbitrator.stop()
    cluster.wait_size(3)


def test_get_lock_holds_on_one_node_only(cluster: GaleraCluster) -> None:
    """GET_LOCK is not replicated: two nodes grant the same lock to two sessions at once."""
    sessions = [cluster.node(i).connect(autocommit=True) for i in (0, 1)]
    try:
        granted = []
        for session in sessions:
            with session.cursor() as cursor:
                cursor.execute("SELECT GET_LOCK('ha-lock', 0)")
                granted.append(cursor.fetchone())
    finally:
        for session in sessions:
            session.close()
    assert granted == [(1,), (1,)]


def test_sentinels_fail_over_to_the_replica_which_kept_every_write(
    sentinels: SentinelRedis,
) -> None:
    master = sentinels.master()
    client = master.client()
    client.set("written before the kill", "kept")
    assert client.wait(1, 0) == 1  # the replica has it
    client.close()
    sentinels.kill9_master()
    assert sentinels.wait_failover(timeout=10) < 10
    assert sentinels.master() is not master
    found = Sentinel(sentinels.sentinel_addresses(), socket_timeout=1)
    assert found.master_for(sentinels.service_name).get("written before the kill") == b"kept"
    hosts = ",".join(f"127.0.0.1:{port}" for _, port in sentinels.sentinel_addresses())
    assert sentinels.url() == f"redis+sentinel://{hosts}/ems/0"


def test_a_killed_master_comes_back_as_the_new_masters_replica(sentinels: SentinelRedis) -> None:
    old = sentinels.kill9_master()
    sentinels.wait_failover()
    sentinels.restart(old)
    replication = old.replication()
    assert (replication["role"], replication["master_port"]) == ("slave", sentinels.master().port)


def test_the_log_watch_tells_a_joiner_hung_in_the_state_exchange(tmp_path: Path) -> None:
    """What GaleraNode.start reads to restart a joiner that missed the state UUID: the
    last telling line, past the write sets it drops."""
    log = tmp_path / "error.log"
    log.write_text("earlier start: STATE EXCHANGE: Waiting for state UUID.\n")
    watch = LogWatch(log)  # from the end: an earlier start's lines do not count
    assert not watch.waits_for_state_uuid()
    with log.open("a") as f:
        f.write("[Note] WSREP: New COMPONENT: primary = yes, bootstrap = no, my_idx = 2\n")
        f.write("[Note] WSREP: STATE EXCHANGE: Waiting for state UUID.\n")
        f.write("[Note] WSREP: Action message in non-primary configuration from member 0\n" * 3)
        f.write("[Note] WSREP: Starting applier thread 2\n")
        f.write("[Note] WSREP: (cd1a, 'tcp://127.0.0.1:1') turning message relay requesting off\n")
        f.write("[Note] WSREP: STATE EXCHANGE: sent state m")  # a line being written
    assert watch.waits_for_state_uuid()
    with log.open("a") as f:
        f.write("sg: 48f92234\n[Note] WSREP: Starting rollbacker thread 1\n")
    assert not watch.waits_for_state_uuid()
