"""The relay's move against the real MariaDB and Redis: the rows are copied on the server,
exactly, at the places the relay gave them, and carry their partitions' fences as every
message INSERT does (a move waits for a purge raising a low watermark and for a partition
change in progress, then places its rows above the one and by the count of the other)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pymysql
import pytest

from ems import Producer, TopicAdmin
from ems.config import Settings
from ems.exceptions import DatabaseUnavailable
from ems.producer.partitioner import partition_for_key
from ems.store import Store, fences
from ems.store.outbox import OutboxItem
from ems.types import TopicInfo
from tests import sql as db
from tests.conftest import connect
from tests.integration.seed import wait_until

#: A relay that moves only when told (Producer.relay()).
SLEEPY = {"relay_interval": 3600.0}


@pytest.fixture
def admin(settings: Settings) -> Iterator[TopicAdmin]:
    with TopicAdmin(settings) as a:
        yield a


def commit_outbox(store: Store, topic: TopicInfo, items: list[OutboxItem]) -> None:
    """The rows a transactional send writes, committed in a caller's transaction."""
    conn = connect(store.settings)
    try:
        conn.autocommit(False)
        store.outbox.writer.write(conn, topic.id, items)
        conn.commit()
    finally:
        conn.close()


def messages(store: Store, topic: TopicInfo) -> list[tuple[Any, ...]]:
    """(partition, offset, key, headers, body, transactional) of the topic's messages, in
    the order of their ids."""
    return db.rows(
        store,
        "SELECT partition_no, offset_no, msg_key, headers, body, transactional FROM message "
        "WHERE topic_id = :t AND NOT tombstone ORDER BY id",
        {"t": topic.id},
    )


def inserting(conn: pymysql.Connection) -> int:
    """INSERTs into message running in this database's sessions (a wait on a lock may
    show as a running statement rather than as a LOCK WAIT: the rows may be read while
    the statement is optimized)."""
    with conn.cursor() as cursor:
        cursor.execute(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST "
            "WHERE DB = DATABASE() AND COMMAND = 'Query' AND INFO LIKE 'INSERT INTO message %%'"
        )
        row = cursor.fetchone()
        return int(row[0]) if row else 0


def relay_held_by(
    settings: Settings, producer: Producer, hold: Callable[[Any], None]
) -> list[object]:
    """Run a relay pass while another session holds what `hold` wrote in its open
    transaction; assert the pass waits for it, then commit it and return what the pass
    returned (or raised)."""
    holder = connect(settings)
    watch = connect(settings)
    done: list[object] = []

    def relay() -> None:
        try:
            done.append(producer.relay())
        except Exception as exc:  # shown by the caller's assertion
            done.append(exc)

    try:
        cursor = holder.cursor()
        cursor.execute("BEGIN")
        hold(cursor)
        mover = threading.Thread(target=relay, daemon=True)
        mover.start()
        wait_until(lambda: inserting(watch) > 0 or not mover.is_alive())
        assert not done, "the move did not wait for the guard's rows"
        cursor.execute("COMMIT")
        mover.join(timeout=30)
    finally:
        holder.close()
        watch.close()
    return done


def test_a_move_copies_every_row_exactly_at_its_place(
    admin: TopicAdmin, settings: Settings, store: Store
) -> None:
    topic = admin.create("orders", partitions=2)
    big = bytes(range(256)) * 1500  # past the hex limit of a client-side INSERT
    items: list[OutboxItem] = [
        (0, b"'; DROP TABLE message; --", '{"q":"\\u0027%s"}', b"%s%%\x00'\\"),
        (1, None, None, big),
        (0, None, '{"a": [1, 2]}', b""),
        (1, b"\x00\xff", None, b"x" * 70_000),
    ]
    commit_outbox(store, topic, items)
    with Producer(settings.with_(**SLEEPY)) as producer:
        first = producer.send("orders", b"first", key="f")
        assert producer.relay() == 4
    got = messages(store, topic)
    assert got[0][:2] == (first.partition, first.offset) == (partition_for_key(b"f", 2), 0)
    # Re-routed by the topic's count (keyed rows by their key), each partition's in the
    # order written (the move inserts them by partition, as fencers take the fences).
    want = [(partition_for_key(k, 2) if k is not None else p, k, h, b) for p, k, h, b in items]
    moved = [(p, k, h, bytes(b)) for p, _, k, h, b, _ in got[1:]]
    assert moved == sorted(want, key=lambda row: row[0])
    assert [t for *_, t in got] == [0, 1, 1, 1, 1]
    for partition in (0, 1):
        offsets = [o for p, o, *_ in got if p == partition]
        assert offsets == list(range(len(offsets)))  # gap-free, from the first
    assert store.outbox.pending(topic.id) == 0


def test_a_move_waits_for_a_purge_raising_the_low_watermark_and_lands_above_it(
    admin: TopicAdmin, settings: Settings, store: Store
) -> None:
    """A purge that raised the watermark and moved the fence (and has not committed) holds
    the move's foreign-key check of that fence; the move, refused once it commits, places
    its rows at or past the new watermark. A check that did not wait would write below
    it."""
    topic = admin.create("orders", partitions=1)
    with Producer(settings.with_(**SLEEPY)) as producer:
        producer.send("orders", b"first")  # the counter seeded: the next offset is 1
        commit_outbox(store, topic, [(0, None, None, b"moved")])

        def purge(cursor: Any) -> None:  # as a purge round does
            cursor.execute(
                "INSERT INTO partition_low (topic_id, partition_no, low_offset) VALUES (%s, 0, 50)",
                (topic.id,),
            )
            fences.move(cursor, topic.id, [0])

        assert relay_held_by(settings, producer, purge) == [1]
    (moved,) = [o for _, o, _, _, b, _ in messages(store, topic) if bytes(b) == b"moved"]
    assert moved >= 50


def test_a_move_racing_a_partition_change_goes_by_the_new_count(
    admin: TopicAdmin, settings: Settings, store: Store
) -> None:
    """The fence: rows routed by the count the relay read wait for a change in progress
    on their partitions' fences, are refused after it, and are routed again by the new
    count."""
    topic = admin.create("orders", partitions=2)
    keys = [f"k{i}".encode() for i in range(20)]
    with Producer(settings.with_(**SLEEPY)) as producer:
        producer.send("orders", b"first", key="k0")
        commit_outbox(store, topic, [(partition_for_key(k, 2), k, None, b"x") for k in keys])

        def change(cursor: Any) -> None:  # as a partition change does
            cursor.execute("SELECT id FROM topic WHERE id = %s FOR UPDATE", (topic.id,))
            cursor.executemany(
                "INSERT INTO partition_low (topic_id, partition_no, low_offset, partitions) "
                "VALUES (%s, %s, 0, 4) ON DUPLICATE KEY UPDATE partitions = VALUES(partitions)",
                [(topic.id, 0), (topic.id, 1)],
            )
            cursor.executemany(
                "INSERT INTO partition_head (topic_id, partition_no) VALUES (%s, %s)",
                [(topic.id, 2), (topic.id, 3)],
            )
            fences.move(cursor, topic.id, [0, 1])
            # Committed by relay_held_by once the move is seen waiting.
            cursor.execute("UPDATE topic SET partitions = 4 WHERE id = %s", (topic.id,))

        assert relay_held_by(settings, producer, change) == [20]
    moved = [(p, bytes(k)) for p, _, k, _, b, _ in messages(store, topic) if bytes(b) == b"x"]
    # Each partition's rows in the order written (inserted by partition).
    want = [(partition_for_key(k, 4), k) for k in keys]
    assert moved == sorted(want, key=lambda row: row[0])
    assert any(p >= 2 for p, _ in moved)


def test_a_relay_stalled_holding_a_topic_loses_it_and_another_relay_moves_the_rows(
    admin: TopicAdmin, settings: Settings, store: Store
) -> None:
    """A relay holds its topic's relay row from its first statement, a locking read, to
    its commit, and other relays skip the topic meanwhile. One stalled there (a paused
    process, a cut link) kept the topic's outbox from moving for as long as its session
    lived: the server's bound on idle transactions now ends that session, and another
    relay moves the rows; the stalled one's late commit fails, moving nothing."""
    topic = admin.create("stalled", partitions=2)
    # A bound of 3 s, so the other relay's first pass surely runs within it.
    stalled = Store(settings.with_(idle_transaction_timeout=3))
    try:
        with Producer(settings.with_(**SLEEPY)) as producer:
            commit_outbox(store, topic, [(0, None, None, b"first")])
            assert producer.relay() == 1  # it has made the topic's relay row
            commit_outbox(store, topic, [(0, b"k", None, b"one"), (1, None, None, b"two")])
            with pytest.raises(DatabaseUnavailable), stalled.outbox.relay(topic.id, 10) as batch:
                assert batch is not None and len(batch.rows) == 2
                assert producer.relay() == 0  # held: skipped
                wait_until(lambda: producer.relay() == 2)
        assert sorted(bytes(m[4]) for m in messages(store, topic)) == [b"first", b"one", b"two"]
        assert store.outbox.pending(topic.id) == 0
    finally:
        stalled.close()


def test_a_new_relays_first_pass_skips_a_topic_another_relay_holds(
    admin: TopicAdmin, settings: Settings, store: Store
) -> None:
    """A relay's first pass on a topic makes sure the topic's relay row exists. While
    another relay holds that row, the pass skips the topic as every later pass does: it
    does not wait on the row (an INSERT IGNORE of a row another session holds would)."""
    topic = admin.create("first-pass", partitions=1)
    commit_outbox(store, topic, [(0, None, None, b"one")])
    with Producer(settings.with_(**SLEEPY)) as first:
        assert first.relay() == 1  # the topic's relay row exists from here on
    commit_outbox(store, topic, [(0, None, None, b"two")])
    with store.outbox.relay(topic.id, 10) as held:  # another relay, mid-pass
        assert held is not None
        with Producer(settings.with_(**SLEEPY)) as fresh:
            passes: list[int | BaseException] = []

            def relay() -> None:
                try:
                    passes.append(fresh.relay())
                except Exception as exc:  # shown by the assertion below
                    passes.append(exc)

            mover = threading.Thread(target=relay, daemon=True)
            mover.start()
            mover.join(10)
            assert passes == [0], "the first pass waited on the held relay row"
    with Producer(settings.with_(**SLEEPY)) as later:
        assert later.relay() == 1
    assert [bytes(m[4]) for m in messages(store, topic)] == [b"one", b"two"]
