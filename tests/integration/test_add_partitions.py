"""Adding partitions to a topic against the real servers: the change's rows, refusals,
and the producers' fence (a producer that cached the old count never writes by it after
the change)."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest

from ems import Consumer, Producer, TopicAdmin
from ems.config import Settings
from ems.exceptions import (
    InvalidName,
    InvalidPartitionCount,
    PartitionsNotAdded,
    UnknownTopic,
)
from ems.producer.partitioner import partition_for_key
from ems.store import Store, fences
from tests import sql as db
from tests.conftest import connect


@pytest.fixture
def admin(settings: Settings) -> Iterator[TopicAdmin]:
    with TopicAdmin(settings) as a:
        yield a


def wait_for(check: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def stored(store: Store, topic_id: int) -> list[tuple[int, int, bytes]]:
    """(partition, offset, key) of every keyed message of the topic."""
    rows = db.rows(
        store,
        "SELECT partition_no, offset_no, msg_key FROM message WHERE topic_id = :t "
        "AND tombstone = 0 AND msg_key IS NOT NULL ORDER BY partition_no, offset_no",
        {"t": topic_id},
    )
    return [(int(p), int(o), bytes(k)) for p, o, k in rows]


def table(store: Store, sql: str, **params: Any) -> list[tuple[Any, ...]]:
    return db.rows(store, sql, params or None)


def test_adding_partitions_records_the_change_and_gives_groups_the_new_ones(
    admin: TopicAdmin, settings: Settings, store: Store
) -> None:
    info = admin.create("t", 3)
    with Producer(settings) as producer:
        producer.send_batch("t", [{"body": "x", "key": f"k{i}"} for i in range(30)])
    highs = [s.high_watermark for s in admin.describe("t")]
    Consumer("g", "t", settings=settings).close()  # a cluster group with cursors

    change = admin.add_partitions("t", 5)

    assert (change.before, change.after, change.watermarks) == (3, 5, tuple(highs))
    assert admin.get("t").partitions == 5
    assert [s.partition for s in admin.describe("t")] == [0, 1, 2, 3, 4]
    assert store.topics.partition_changes(info.id) == [store.topics.partition_changes(info.id)[0]]
    assert store.topics.partition_changes(info.id)[0].watermarks == tuple(highs)
    heads = table(store, "SELECT partition_no FROM partition_head WHERE topic_id = :t", t=info.id)
    assert sorted(h[0] for h in heads) == [0, 1, 2, 3, 4]
    cursors = table(
        store,
        "SELECT o.partition_no, o.committed_offset, a.state FROM group_offset o "
        "JOIN partition_assignment a ON a.group_id = o.group_id "
        "AND a.partition_no = o.partition_no WHERE o.partition_no >= 3 ORDER BY 1",
    )
    assert cursors == [(3, 0, "released"), (4, 0, "released")]
    # A second change is recorded apart, with its own watermarks.
    admin.add_partitions("t", 7)
    assert [(c.before, c.after) for c in store.topics.partition_changes(info.id)] == [
        (3, 5),
        (5, 7),
    ]


@pytest.mark.parametrize(
    ("name", "count", "error"),
    [
        ("t", 3, PartitionsNotAdded),
        ("t", 2, PartitionsNotAdded),
        ("t", 0, InvalidPartitionCount),
        ("t", -4, InvalidPartitionCount),
        ("t", 5000, InvalidPartitionCount),
        ("t", True, InvalidPartitionCount),
        ("t", "5", InvalidPartitionCount),
        ("t", 4.0, InvalidPartitionCount),
        ("missing", 5, UnknownTopic),
        ("bad name", 5, InvalidName),
    ],
)
def test_refusals_change_nothing(
    admin: TopicAdmin, store: Store, name: str, count: object, error: type[Exception]
) -> None:
    info = admin.create("t", 3)
    with pytest.raises(error):
        admin.add_partitions(name, count)  # type: ignore[arg-type]
    assert admin.get("t").partitions == 3
    assert store.topics.partition_changes(info.id) == []
    assert len(table(store, "SELECT * FROM partition_head")) == 3


def test_a_decrease_is_a_typed_input_error(admin: TopicAdmin) -> None:
    admin.create("t", 4)
    with pytest.raises(InvalidPartitionCount, match="only be added"):
        admin.alter("t", partitions=2)
    assert admin.alter("t", partitions=6).partitions == 6


@pytest.mark.parametrize("allocator", ["redis", "mysql"])
def test_a_producer_that_cached_the_old_count_routes_by_the_new_one(
    admin: TopicAdmin, settings: Settings, store: Store, allocator: str
) -> None:
    info = admin.create("t", 2)
    with Producer(settings.with_(allocator=allocator)) as producer:
        producer.send("t", "before", key="k0")  # caches 2 partitions
        admin.add_partitions("t", 8)
        keys = [f"k{i}" for i in range(40)]
        sent = producer.send_batch("t", [{"body": "after", "key": k} for k in keys])
        one = producer.send("t", "after", key="k1")
    assert [m.partition for m in sent] == [partition_for_key(k.encode(), 8) for k in keys]
    assert one.partition == partition_for_key(b"k1", 8)
    assert any(m.partition >= 2 for m in sent)
    change = store.topics.partition_changes(info.id)[0]
    for partition, offset, key in stored(store, info.id):
        before = partition < 2 and offset < change.watermarks[partition]
        assert partition == partition_for_key(key, 2 if before else 8)


def test_an_insert_waits_for_a_change_in_progress(
    admin: TopicAdmin, settings: Settings, store: Store
) -> None:
    """The fence: the insert holds its partition's fence under a shared lock (message's
    foreign key checks it), so it waits for a change moving the fences, and then refuses
    what it routed by the old count."""
    info = admin.create("t", 2)
    with Producer(settings) as producer:
        producer.send("t", "warm", key="k0")
        change = connect(settings)
        watch = connect(settings)
        cursor = change.cursor()
        cursor.execute("BEGIN")
        cursor.execute("SELECT id FROM topic WHERE id = %s FOR UPDATE", (info.id,))
        # The change's write of the new count, partition 0's row existing and 1's created.
        cursor.execute(
            "INSERT INTO partition_low (topic_id, partition_no, low_offset) VALUES (%s, 0, 0)",
            (info.id,),
        )
        cursor.execute("COMMIT")
        cursor.execute("BEGIN")
        cursor.execute("SELECT id FROM topic WHERE id = %s FOR UPDATE", (info.id,))
        cursor.executemany(
            "INSERT INTO partition_low (topic_id, partition_no, low_offset, partitions) "
            "VALUES (%s, %s, 0, 4) ON DUPLICATE KEY UPDATE partitions = VALUES(partitions)",
            [(info.id, 0), (info.id, 1)],
        )
        fences.move(cursor, info.id, [0, 1])
        cursor.executemany(
            "INSERT INTO partition_head (topic_id, partition_no) VALUES (%s, %s)",
            [(info.id, 2), (info.id, 3)],
        )
        done: list[object] = []

        def send() -> None:
            try:
                done.append(producer.send("t", "racing", key="k5"))
            except Exception as exc:  # shown by the assertion below
                done.append(exc)

        sender = threading.Thread(target=send)
        sender.start()
        try:
            # The send's INSERT reaches the server and stays there (this database's
            # sessions only: other lanes share the server), or the send ended meanwhile.
            # Its wait shows as a running statement, not always as a LOCK WAIT: the
            # rows may be read while the statement is optimized ("Statistics").
            wait_for(lambda: _inserting(watch) > 0 or not sender.is_alive())
            assert not done  # held behind the change
            cursor.execute("UPDATE topic SET partitions = 4 WHERE id = %s", (info.id,))
            cursor.execute("COMMIT")
        finally:
            change.close()
            watch.close()
        sender.join(timeout=20)
    (meta,) = done
    assert meta.partition == partition_for_key(b"k5", 4)  # type: ignore[attr-defined]


def test_an_insert_never_reads_the_topic_row(
    admin: TopicAdmin, settings: Settings, store: Store
) -> None:
    """Producers of a topic share no row: a send completes while another session holds
    the topic's row FOR UPDATE (the fence lives on the partitions' own rows)."""
    info = admin.create("t", 2)
    admin.add_partitions("t", 3)
    holder = connect(settings)
    try:
        cursor = holder.cursor()
        cursor.execute("BEGIN")
        cursor.execute("SELECT id FROM topic WHERE id = %s FOR UPDATE", (info.id,))
        with Producer(settings) as producer:
            metas = [producer.send("t", "x", key=f"k{i}") for i in range(12)]
            producer.send_batch("t", [{"body": "y", "key": f"k{i}"} for i in range(12)])
        assert {m.partition for m in metas} == {0, 1, 2}
        cursor.execute("ROLLBACK")
    finally:
        holder.close()


def test_the_change_writes_its_count_on_every_old_partition(
    admin: TopicAdmin, store: Store
) -> None:
    """Missing low watermark rows are created at 0; existing ones keep their watermark."""
    info = admin.create("t", 3)
    db.run(
        store,
        "INSERT INTO partition_low (topic_id, partition_no, low_offset) VALUES (:t, 1, 7)",
        {"t": info.id},
    )
    admin.add_partitions("t", 5)
    sql = "SELECT partition_no, low_offset, partitions FROM partition_low WHERE topic_id = :t"
    assert sorted(table(store, sql, t=info.id)) == [(0, 0, 5), (1, 7, 5), (2, 0, 5)]
    admin.add_partitions("t", 6)
    assert sorted(table(store, sql + " AND partitions = 6", t=info.id)) == [
        (p, 7 if p == 1 else 0, 6) for p in range(5)
    ]


def _inserting(conn: pymysql.Connection) -> int:
    """INSERTs into message running in this database's sessions."""
    with conn.cursor() as cursor:
        cursor.execute(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST "
            "WHERE DB = DATABASE() AND COMMAND = 'Query' AND INFO LIKE 'INSERT INTO message %%'"
        )
        row = cursor.fetchone()
        return int(row[0]) if row else 0


def test_producers_racing_a_change_write_every_row_by_the_count_of_its_side(
    admin: TopicAdmin, settings: Settings, store: Store
) -> None:
    """Producers that keep sending across the change, with many keys: below each old
    partition's watermark every row was routed by the old count, at or past it (and in
    the new partitions) by the new one. Without the fence a producer that cached the old
    count writes by it after the change."""
    info = admin.create("t", 3)
    stop = threading.Event()
    errors: list[BaseException] = []
    sent = [0]

    def send(seed: int) -> None:
        rng = random.Random(seed)
        try:
            with Producer(settings) as producer:
                while not stop.is_set():
                    keys = [f"key-{rng.randrange(200)}" for _ in range(rng.randrange(1, 20))]
                    producer.send_batch("t", [{"body": "x", "key": k} for k in keys])
                    sent[0] += len(keys)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=send, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    wait_for(lambda: sent[0] > 300)
    admin.add_partitions("t", 7)
    at_change = sent[0]
    wait_for(lambda: sent[0] > at_change + 300)
    stop.set()
    for t in threads:
        t.join(timeout=30)
    assert not errors
    change = store.topics.partition_changes(info.id)[0]
    rows = stored(store, info.id)
    after = 0
    for partition, offset, key in rows:
        before = partition < 3 and offset < change.watermarks[partition]
        after += not before
        assert partition == partition_for_key(key, 3 if before else 7), (partition, offset)
    assert after > 300


def test_the_docs_example_runs_as_printed(
    admin: TopicAdmin, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "partitions.md").read_text()
    code = page.split("```python\n", 1)[1].split("```", 1)[0]
    admin.create("readings", 6)
    monkeypatch.setenv("EMS_DATABASE_URL", settings.database_url)
    monkeypatch.setenv("EMS_REDIS_URL", settings.redis_url)
    printed: list[str] = []
    exec(compile(code, "docs/partitions.md", "exec"), {"print": printed.append})
    assert printed == ["6 -> 12 partitions"]
    assert admin.get("readings").partitions == 12
