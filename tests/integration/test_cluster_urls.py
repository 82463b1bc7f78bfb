"""A database URL with several hosts names the nodes of a Galera cluster: against a
server that is no Galera node (the shared MariaDB, wsrep off), ems refuses with a typed
error naming what is missing, before any statement runs; nodes that do not answer are
named one by one."""

from __future__ import annotations

import pytest

from ems import Producer
from ems.config import Settings
from ems.exceptions import ClusterMisconfigured, DatabaseUnavailable, SendTimeout
from ems.store import Store, migrate
from tests.conftest import connect
from tests.faults.servers import free_port


def test_a_server_without_galera_is_refused_as_a_cluster_node(settings: Settings) -> None:
    url = settings.database_url.replace("127.0.0.1:3306", "127.0.0.1:3306,localhost:3306")
    store = Store(settings.with_(database_url=url))
    try:
        with pytest.raises(ClusterMisconfigured, match="wsrep_on is OFF, needs ON"):
            store.topics.all()
    finally:
        store.close()


def test_migrations_refuse_a_server_without_galera_as_a_cluster_node(settings: Settings) -> None:
    url = settings.database_url.replace("127.0.0.1:3306", "127.0.0.1:3306,localhost:3306")
    with pytest.raises(ClusterMisconfigured, match=r"127\.0\.0\.1:3306 cannot serve ems"):
        migrate.current_revision(settings.with_(database_url=url))


def test_when_no_node_answers_each_is_named(settings: Settings) -> None:
    dead = [free_port(), free_port()]
    url = f"mysql+pymysql://root@127.0.0.1:{dead[0]},127.0.0.1:{dead[1]}/ems"
    producer = Producer(settings.with_(database_url=url, connect_attempts=1, send_timeout=0))
    try:
        with pytest.raises(SendTimeout) as raised:
            producer.send("t", b"x")
    finally:
        producer.close()
    assert isinstance(raised.value.__cause__, DatabaseUnavailable)
    assert all(f"127.0.0.1:{port}" in str(raised.value) for port in dead)


def test_every_table_is_innodb_with_a_primary_key(settings: Settings) -> None:
    """Galera replicates InnoDB only, and certifies a row change by its primary key."""
    sql = (
        "SELECT t.table_name, t.engine, "
        "EXISTS (SELECT 1 FROM information_schema.table_constraints c "
        "WHERE c.table_schema = t.table_schema AND c.table_name = t.table_name "
        "AND c.constraint_type = 'PRIMARY KEY') "
        "FROM information_schema.tables t "
        "WHERE t.table_schema = %s AND t.table_type = 'BASE TABLE'"
    )
    conn = connect(settings)
    try:
        with conn.cursor() as cursor:
            cursor.execute(sql, (settings.database_name,))
            tables = cursor.fetchall()
    finally:
        conn.close()
    assert len(tables) >= 20
    assert [
        (name, engine, bool(pk)) for name, engine, pk in tables if engine != "InnoDB" or not pk
    ] == []
