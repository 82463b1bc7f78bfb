"""Seeding helpers for the read-model tests: offset snapshots, watermark captures and lag
reports written straight into their tables, at times counted back from the database clock,
and a counter of the statements the store sends."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import pymysql
import pymysql.cursors

from ems.store import Store
from ems.types import GroupInfo, TopicInfo
from tests import sql as db
from tests.integration import seed


def snapshots(
    store: Store, group: GroupInfo, captures: Sequence[tuple[float, Mapping[int, tuple[int, int]]]]
) -> None:
    """Offset snapshot rows: per capture (seconds ago, {partition: (committed, high)})."""
    rows = [
        (age, group.id, group.topic_id, p, committed, high)
        for age, parts in captures
        for p, (committed, high) in parts.items()
    ]
    db.run_many(
        store,
        "INSERT INTO offset_snapshot (captured_at, group_id, topic_id, partition_no, "
        "committed_offset, high_watermark, committed_at) "
        "VALUES (NOW(6) - INTERVAL %s MICROSECOND, %s, %s, %s, %s, %s, NOW(6))",
        [(int(age * 1e6), *rest) for age, *rest in rows],
    )


def series_snapshots(
    store: Store,
    group: GroupInfo,
    partitions: int,
    captures: int,
    every: float,
    now: dt.datetime,
) -> None:
    """`captures` snapshots `every` seconds apart, the newest at `now`: at capture i (0 the
    oldest) each partition has committed i and high watermark 2 * i, so lag i."""
    rows = [
        (
            now - dt.timedelta(seconds=(captures - 1 - i) * every),
            group.id,
            group.topic_id,
            p,
            i,
            2 * i,
        )
        for i in range(captures)
        for p in range(partitions)
    ]
    db.run_many(
        store,
        "INSERT INTO offset_snapshot (captured_at, group_id, topic_id, partition_no, "
        "committed_offset, high_watermark, committed_at) "
        "VALUES (%s, %s, %s, %s, %s, %s, NOW(6))",
        rows,
    )


def series_watermarks(
    store: Store, topic: TopicInfo, partitions: int, captures: int, every: float, now: dt.datetime
) -> None:
    """`captures` watermark captures `every` seconds apart, the newest at `now`: at capture
    i (0 the oldest) each partition's high watermark is 10 * i."""
    rows = [
        (now - dt.timedelta(seconds=(captures - 1 - i) * every), topic.id, p, 10 * i)
        for i in range(captures)
        for p in range(partitions)
    ]
    db.run_many(
        store,
        "INSERT INTO topic_watermark (captured_at, topic_id, partition_no, high_watermark) "
        "VALUES (%s, %s, %s, %s)",
        rows,
    )


def report(
    store: Store,
    group: GroupInfo,
    statuses: Mapping[int, str],
    group_status: str,
    *,
    run_status: str = "done",
    age_seconds: float = 60,
) -> int:
    """A lag report run covering the group, with one row per partition; its id."""
    run = db.insert(
        store,
        "INSERT INTO lag_report_run (status, as_of, window_seconds, partitions) "
        "VALUES (%s, NOW(6) - INTERVAL %s MICROSECOND, 600, %s)",
        (run_status, int(age_seconds * 1e6), len(statuses)),
    )
    db.run_many(
        store,
        "INSERT INTO lag_report (report_id, group_id, partition_no, topic_id, "
        "high_watermark, committed_offset, lag, snapshots, status, group_status, "
        "last_captured_at) VALUES (%s, %s, %s, %s, 0, 0, 0, 2, %s, %s, NOW(6))",
        [
            (run, group.id, p, group.topic_id, status, group_status)
            for p, status in statuses.items()
        ],
    )
    return run


class Statements:
    """The statements PyMySQL sent while counting, with their parameters."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, Any]] = []

    def __len__(self) -> int:
        return len(self.sent)

    def clear(self) -> None:
        self.sent.clear()


@contextmanager
def counting() -> Iterator[Statements]:
    """Count the statements this process sends, where PyMySQL sends them (the store runs
    them on driver cursors): an executemany counts once."""
    seen = Statements()
    execute = pymysql.cursors.Cursor.execute
    executemany = pymysql.cursors.Cursor.executemany
    inside_many = False

    def recording(cursor: pymysql.cursors.Cursor, query: str, args: Any = None) -> int:
        if not inside_many:
            seen.sent.append((query, args))
        return execute(cursor, query, args)

    def recording_many(cursor: pymysql.cursors.Cursor, query: str, args: Any) -> int | None:
        nonlocal inside_many
        seen.sent.append((query, args))
        inside_many = True
        try:
            return executemany(cursor, query, args)
        finally:
            inside_many = False

    pymysql.cursors.Cursor.execute = recording  # type: ignore[method-assign]
    pymysql.cursors.Cursor.executemany = recording_many  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        pymysql.cursors.Cursor.execute = execute  # type: ignore[method-assign]
        pymysql.cursors.Cursor.executemany = executemany  # type: ignore[method-assign]


def handler_reads(conn: pymysql.Connection, statement: str, parameters: Any) -> int:
    """Index and row reads (Handler_read_*) the server makes to run the statement."""

    def total() -> int:
        with conn.cursor() as cursor:
            cursor.execute("SHOW SESSION STATUS LIKE 'Handler_read%%'")
            return sum(int(value) for _, value in cursor.fetchall())

    before = total()
    with conn.cursor() as cursor:
        cursor.execute(statement, parameters or None)
        cursor.fetchall()
    # SHOW STATUS itself reads no handler rows.
    return total() - before


def topics(store: Store, names: Sequence[str], partitions: int = 2) -> list[TopicInfo]:
    """Topics with a few messages each in partition 0 (offsets 0-2)."""
    from ems.topics import TopicAdmin

    admin = TopicAdmin(store=store)
    made = [admin.create(name, partitions) for name in names]
    for topic in made:
        seed.messages(store, topic, 0, range(3), age_hours=0.01)
    return made
