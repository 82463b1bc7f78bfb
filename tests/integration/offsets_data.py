"""Data for the offset reset and replay tests: messages written with chosen times, a small
topic and a group that has consumed part of it, and a snapshot of what a reset writes."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from ems import TopicAdmin
from ems.config import Settings
from ems.consumer.groups import GroupOptions, ensure_group
from ems.store import Store
from ems.types import GroupInfo, TopicInfo
from tests import sql as db
from tests.integration import seed

T0 = dt.datetime(2026, 11, 20, 8, 0, 0)
T1 = T0 + dt.timedelta(minutes=10)
T2 = T0 + dt.timedelta(minutes=20)


def options(*, broadcast: bool = False) -> GroupOptions:
    """The offset suites' groups: no ack timeout of their own."""
    return seed.options(None, broadcast=broadcast)


def insert(
    store: Store,
    topic: TopicInfo,
    partition: int,
    rows: Sequence[tuple[int, dt.datetime]],
    *,
    tombstones: Sequence[int] = (),
) -> None:
    """Messages (offset, created_at) written directly, so times can repeat and run
    against offset order as an out-of-order commit leaves them."""
    values = [
        {
            "t": topic.id,
            "p": partition,
            "o": o,
            "c": at,
            "b": b"" if o in tombstones else f"m{partition}-{o}".encode(),
            "ts": o in tombstones,
        }
        for o, at in rows
    ]
    db.run_many(
        store,
        "INSERT INTO message (topic_id, partition_no, offset_no, body, tombstone, "
        "created_at) VALUES (:t, :p, :o, :b, :ts, :c)",
        values,
    )


def snapshot(store: Store, group_id: int) -> tuple[object, ...]:
    """Everything a reset may write."""
    return tuple(
        tuple(db.rows(store, sql, {"g": group_id}))
        for sql in (
            "SELECT partition_no, committed_offset, generation FROM group_offset "
            "WHERE group_id = :g ORDER BY partition_no",
            "SELECT generation, paused_until FROM consumer_group WHERE id = :g",
            "SELECT partition_no, client_id, generation, state FROM partition_assignment "
            "WHERE group_id = :g ORDER BY partition_no",
            "SELECT partition_no, offset_no, due_at FROM retry_message WHERE group_id = :g "
            "ORDER BY partition_no, offset_no",
        )
    )


def small_topic(settings: Settings, store: Store) -> TopicInfo:
    """Topic t: partition 0 holds offsets 0-19, partition 1 0-4 (all at T0), 2 is empty."""
    info = TopicAdmin(settings, store=store).create("t", 3)
    insert(store, info, 0, [(o, T0) for o in range(20)])
    insert(store, info, 1, [(o, T0) for o in range(5)])
    return info


def consumed_group(store: Store, topic: TopicInfo) -> GroupInfo:
    """Cluster group g on the topic, its cursors at 3 as if it had consumed some."""
    info = ensure_group(store, "g", topic, options())
    db.run(
        store, "UPDATE group_offset SET committed_offset = 3 WHERE group_id = :g", {"g": info.id}
    )
    return info
