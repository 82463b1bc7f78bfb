"""The ems_ views of migration 0005 on the real server: each returns what the seeded tables
hold and agrees with what ems itself reports (group describe, topic describe), whatever
the session's time zone, and the lag and volume views cost index dives per partition
however many messages are stored."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pymysql
import pytest

from ems.config import Settings
from ems.groups import GroupAdmin
from ems.store import Store
from ems.store.readonly import VIEW_NAMES
from ems.topics import TopicAdmin
from tests.conftest import connect
from tests.integration import seed
from tests.integration.sql_seed import LEADER_EPOCH, Seeded, seed_all


@pytest.fixture
def seeded(store: Store) -> Seeded:
    return seed_all(store)


@pytest.fixture
def conn(settings: Settings) -> Iterator[pymysql.Connection]:
    connection = connect(settings)
    yield connection
    connection.close()


def rows(conn: pymysql.Connection, sql: str, *params: object) -> list[dict[str, Any]]:
    with conn.cursor(pymysql.cursors.DictCursor) as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall())


def test_the_migration_creates_exactly_the_listed_views_as_definer(
    settings: Settings, conn: pymysql.Connection
) -> None:
    found = rows(
        conn,
        "SELECT table_name AS name, security_type FROM information_schema.views "
        "WHERE table_schema = %s",
        settings.database_name,
    )
    assert {r["name"] for r in found} == set(VIEW_NAMES)
    assert {r["security_type"] for r in found} == {"DEFINER"}


def test_group_lag_is_the_high_watermark_minus_the_cursor_per_partition(
    store: Store, seeded: Seeded, conn: pymysql.Connection
) -> None:
    got = rows(conn, "SELECT * FROM ems_group_lag WHERE group_name = 'billing'")
    assert [
        (
            r["partition_no"],
            r["committed_offset"],
            r["high_watermark"],
            r["lag_messages"],
            r["owner_client_id"],
            r["owner_live"],
            r["assignment_state"],
        )
        for r in sorted(got, key=lambda r: r["partition_no"])
    ] == [
        (0, 7, 10, 3, "c-dead", 0, "assigned"),
        (1, 3, 8, 5, "c-live", 1, "assigned"),
        # The cursor may pass the watermark (retention took the tail): no negative lag.
        (2, 6, 6, 0, "c-live", 1, "revoking"),
        # Emptied by a purge: the high watermark is the low watermark, not 0.
        (3, 4, 4, 0, "c-live", 1, "assigned"),
    ]
    assert {r["topic"] for r in got} == {"orders"}
    assert {r["group_id"] for r in got} == {seeded.billing.id}
    # The broadcast group keeps no cursor and has no rows.
    assert rows(conn, "SELECT * FROM ems_group_lag WHERE group_name = 'audit'") == []
    (described,) = GroupAdmin(store=store).describe("billing")
    assert [
        (p.partition, p.committed_offset, p.lag, p.owner, p.owner_live, p.state)
        for p in described.partitions
    ] == [
        (
            r["partition_no"],
            r["committed_offset"],
            r["lag_messages"],
            r["owner_client_id"],
            bool(r["owner_live"]),
            r["assignment_state"],
        )
        for r in sorted(got, key=lambda r: r["partition_no"])
    ]
    assert described.total_lag == sum(r["lag_messages"] for r in got) == 8


def test_group_lag_counts_retries_waiting_and_dead_letters_beside_the_lag(
    store: Store, seeded: Seeded, conn: pymysql.Connection
) -> None:
    """Migration 0019: per partition, the messages in the retry table and the dead letters
    not resent (a resent one no longer counts), summed per group as describe counts them."""
    got = rows(
        conn,
        "SELECT partition_no, lag_messages, retries_waiting, dead_letters FROM ems_group_lag "
        "WHERE group_name = 'billing' ORDER BY partition_no",
    )
    assert [tuple(r.values()) for r in got] == [
        (0, 3, 1, 1),
        (1, 5, 1, 0),
        (2, 0, 0, 0),
        (3, 0, 0, 0),
    ]
    seed.sql(
        store,
        "UPDATE dead_message SET resent_at = NOW(6) WHERE group_id = %s",
        (seeded.billing.id,),
    )
    seed.sql(store, "DELETE FROM retry_message WHERE partition_no = 1", ())
    (described,) = GroupAdmin(store=store).describe("billing")
    summed = rows(
        conn,
        "SELECT SUM(lag_messages) AS lag, SUM(retries_waiting) AS retries, "
        "SUM(dead_letters) AS dead FROM ems_group_lag WHERE group_name = 'billing'",
    )
    assert [tuple(int(v) for v in r.values()) for r in summed] == [
        (described.total_lag, described.retries_waiting, described.dead_letters)
    ]
    assert (described.retries_waiting, described.dead_letters) == (1, 0)


def test_topic_volume_per_partition_matches_topic_describe(
    store: Store, seeded: Seeded, conn: pymysql.Connection
) -> None:
    got = rows(conn, "SELECT * FROM ems_topic_volume ORDER BY topic, partition_no")
    assert [
        (
            r["topic"],
            r["partition_no"],
            r["low_watermark"],
            r["high_watermark"],
            r["stored_offsets"],
            r["purged_below"],
        )
        for r in got
    ] == [
        ("orders", 0, 0, 10, 10, None),
        ("orders", 1, 0, 8, 8, None),
        ("orders", 2, 2, 6, 4, 2),
        ("orders", 3, 4, 4, 0, 4),
        ("payments", 0, 0, 0, 0, None),
        ("payments", 1, 0, 0, 0, None),
    ]
    newest = {r["partition_no"]: r["newest_message_at"] for r in got if r["topic"] == "orders"}
    assert newest[3] is None
    stored = seed.sql(
        store,
        "SELECT partition_no, MAX(created_at) FROM message WHERE topic_id = %s "
        "GROUP BY partition_no",
        (seeded.orders.id,),
    )
    assert {p: at for p, at in stored} == {p: at for p, at in newest.items() if at is not None}
    stats = TopicAdmin(store=store).describe("orders")
    by_partition = {r["partition_no"]: r for r in got if r["topic"] == "orders"}
    for s in stats:
        view = by_partition[s.partition]
        assert view["high_watermark"] == s.high_watermark
        assert view["stored_offsets"] == s.messages
        if s.low_watermark is not None:
            assert view["low_watermark"] == s.low_watermark


def test_dead_letters_per_group(seeded: Seeded, conn: pymysql.Connection) -> None:
    got = rows(conn, "SELECT * FROM ems_dead_letters")
    assert len(got) == 1
    (row,) = got
    assert (row["group_name"], row["topic"], row["dead_letters"], row["not_resent"]) == (
        "billing",
        "orders",
        2,
        1,
    )
    assert row["newest_error"] == "ValueError: bad reading"
    assert row["oldest_at"] < row["newest_at"]


def test_in_flight_and_retries_waiting(seeded: Seeded, conn: pymysql.Connection) -> None:
    flight = rows(conn, "SELECT * FROM ems_in_flight ORDER BY partition_no")
    assert [
        (r["group_name"], r["partition_no"], r["in_flight"], r["overdue"], r["clients"])
        for r in flight
    ] == [("billing", 0, 1, 1, 1), ("billing", 1, 2, 0, 1)]
    assert 599 < flight[0]["oldest_age_seconds"] < 700
    assert 9 < flight[1]["oldest_age_seconds"] < 100
    assert {r["ack_timeout_seconds"] for r in flight} == {300}
    retries = rows(conn, "SELECT * FROM ems_retries_waiting ORDER BY partition_no")
    assert [
        (r["group_name"], r["partition_no"], r["waiting"], r["due_now"], r["most_attempts"])
        for r in retries
    ] == [("billing", 0, 1, 0, 2), ("billing", 1, 1, 1, 2)]


def test_members_show_leases_the_leader_and_held_partitions(
    store: Store, seeded: Seeded, conn: pymysql.Connection
) -> None:
    got = {r["client_id"]: r for r in rows(conn, "SELECT * FROM ems_members")}
    assert {
        c: (
            r["group_name"],
            r["live"],
            r["is_leader"],
            r["leader_epoch"],
            r["partitions_held"],
            r["partitions"],
        )
        for c, r in got.items()
    } == {
        "c-live": ("billing", 1, 1, LEADER_EPOCH, 3, "1,2,3"),
        "c-dead": ("billing", 0, 0, None, 1, "0"),
        "c-audit": ("audit", 1, 0, None, 0, None),
    }
    assert 25 < got["c-live"]["seconds_left"] <= 30
    assert -40 < got["c-dead"]["seconds_left"] < -29
    assert (got["c-live"]["host"], got["c-live"]["pid"]) == ("host-a", 101)
    (described,) = GroupAdmin(store=store).describe("billing")
    assert described.leader is not None
    assert (described.leader.client_id, described.leader.epoch) == ("c-live", LEADER_EPOCH)
    assert {m.client_id: (m.live, m.partitions) for m in described.members} == {
        c: (bool(got[c]["live"]), tuple(int(p) for p in got[c]["partitions"].split(",")))
        for c in ("c-live", "c-dead")
    }


def test_ages_and_liveness_do_not_depend_on_the_session_time_zone(
    seeded: Seeded, settings: Settings
) -> None:
    """ems writes UTC; an analyst's session may run in another zone."""
    utc = connect(settings)
    away = connect(settings)
    try:
        with away.cursor() as cursor:
            cursor.execute("SET time_zone = '+05:00'")
        queries = (
            "SELECT client_id, live, is_leader, ROUND(seconds_left) FROM ems_members",
            "SELECT partition_no, overdue, ROUND(oldest_age_seconds) FROM ems_in_flight",
            "SELECT partition_no, due_now FROM ems_retries_waiting",
            "SELECT partition_no, owner_live FROM ems_group_lag",
        )
        for sql in queries:
            assert sorted(rows(utc, sql), key=str) == sorted(rows(away, sql), key=str), sql
    finally:
        utc.close()
        away.close()


def _handler_reads(conn: pymysql.Connection) -> int:
    with conn.cursor() as cursor:
        cursor.execute("SHOW SESSION STATUS LIKE 'Handler_read%'")
        return sum(int(value) for _, value in cursor.fetchall())


@pytest.mark.parametrize("view", ["ems_group_lag", "ems_topic_volume"])
def test_watermark_views_read_a_few_index_entries_per_partition_not_the_messages(
    store: Store, conn: pymysql.Connection, view: str
) -> None:
    topic = TopicAdmin(store=store).create("big", 16)
    seed.spread(store, topic, 50_000)
    group = seed.group(store, "readers", topic)
    seed.commit(store, group, 0, 1000)
    before = _handler_reads(conn)
    got = rows(conn, f"SELECT * FROM {view}")
    reads = _handler_reads(conn) - before
    assert len(got) == 16
    assert {r["high_watermark"] for r in got} == {3125}
    # A handful of index dives per partition: a scan would read 50,000 rows.
    assert reads < 16 * 20, reads
    plan = rows(conn, f"EXPLAIN SELECT * FROM {view}")
    # The watermark dives read the message table's primary key (topic, partition, offset).
    assert "PRIMARY" in {r["key"] for r in plan if r["table"] == "m"}, plan
    if view == "ems_group_lag":
        lag = {r["partition_no"]: r["lag_messages"] for r in got}
        assert lag[0] == 3125 - 1000 and lag[1] == 3125
