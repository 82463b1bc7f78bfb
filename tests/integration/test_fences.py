"""The partitions' fences (ems.store.fences): a producer's rows carry the fence they were
checked against, every change a row must be checked against again moves it, and the
message table's foreign key refuses a row whose fence moved on."""

from __future__ import annotations

import threading
from typing import Any

import pymysql
import pytest

from ems import TopicAdmin
from ems.config import Settings
from ems.store import Store, fences
from ems.store.errors import BelowLowWatermark, ParentMissing
from ems.store.inserts import insert_statements
from ems.types import NewMessage, TopicInfo, placed_of
from ems.values.lifecycle import DELETE_FENCE
from tests.conftest import connect
from tests.integration import seed


@pytest.fixture
def topic(settings: Settings, store: Store) -> TopicInfo:
    return TopicAdmin(settings, store=store).create("fenced", 2, retention_hours=1)


def _counted_reads(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The topic ids of the fence reads the store makes from now on."""
    reads: list[int] = []
    read = store.messages.fences

    def counted(topic_id: int) -> fences.Fences:
        reads.append(topic_id)
        return read(topic_id)

    monkeypatch.setattr(store.messages, "fences", counted)
    return reads


def _row(topic: TopicInfo, partition: int, offset: int, big: bool = False) -> NewMessage:
    """A row; big: too large for a hex literal (the driver-escaped path)."""
    body = b"%d:%d" % (partition, offset) + (b"x" * 300_000 if big else b"")
    return NewMessage(topic.id, partition, offset, None, None, body)


#: Both insert paths carry the fences: hex literals, and the driver's escaping.
BOTH_PATHS = pytest.mark.parametrize("big", [False, True], ids=["hex", "driver-escaped"])


@BOTH_PATHS
def test_rows_checked_before_a_purge_go_again_at_their_own_offsets(
    store: Store, topic: TopicInfo, monkeypatch: pytest.MonkeyPatch, big: bool
) -> None:
    """A purge below the rows moves the fence their producer read: the INSERT is refused
    once, the fences are read again, and the rows are stored at the offsets they were
    given (no hole for readers to wait on)."""
    seed.messages(store, topic, 0, range(10), 48)
    store.messages.insert(placed_of([_row(topic, 0, 10)]))  # reads and keeps the fences
    reads = _counted_reads(store, monkeypatch)
    store.purge.delete(topic.id, [(0, 0, 5)])
    store.messages.insert(placed_of([_row(topic, 0, 11, big), _row(topic, 1, 0, big)]))
    assert reads == [topic.id]  # one refusal, one read
    assert seed.offsets(store, topic, 0) == list(range(5, 12))
    assert seed.offsets(store, topic, 1) == [0]
    store.messages.insert(placed_of([_row(topic, 0, 12)]))
    assert reads == [topic.id]  # the fences read are kept


@BOTH_PATHS
def test_rows_below_a_watermark_raised_since_their_check_are_refused(
    store: Store, topic: TopicInfo, monkeypatch: pytest.MonkeyPatch, big: bool
) -> None:
    seed.messages(store, topic, 0, range(10), 48)
    store.messages.insert(placed_of([_row(topic, 0, 10)]))
    reads = _counted_reads(store, monkeypatch)
    store.purge.delete(topic.id, [(0, 0, 9)])
    with pytest.raises(BelowLowWatermark, match="below its partition's low watermark"):
        store.messages.insert(placed_of([_row(topic, 1, 0, big), _row(topic, 0, 4, big)]))
    assert reads == [topic.id]
    assert (seed.offsets(store, topic, 0), seed.offsets(store, topic, 1)) == ([9, 10], [])


def test_a_partition_change_moves_every_old_partitions_fence(
    settings: Settings, store: Store, topic: TopicInfo
) -> None:
    store.messages.insert(placed_of([_row(topic, 0, 0)]), partitions=2)
    before = store.messages.fences(topic.id)
    TopicAdmin(settings, store=store).add_partitions("fenced", 3)
    with pytest.raises(BelowLowWatermark, match="partitions changed"):
        store.messages.insert(placed_of([_row(topic, 1, 0)]), partitions=2)
    after = store.messages.fences(topic.id)
    assert (before.partitions, after.partitions) == (2, 3)
    assert [a - b for a, b in zip(after.fences, before.fences, strict=False)] == [1, 1]
    assert after.fences[2] == 0 and after.lows == (0, 0, 0)
    store.messages.insert(placed_of([_row(topic, 1, 0), _row(topic, 2, 0)]), partitions=3)
    assert seed.offsets(store, topic, 2) == [0]


def test_a_delete_fence_refuses_the_rows_of_producers_that_read_the_fences_before(
    store: Store, topic: TopicInfo
) -> None:
    store.messages.insert(placed_of([_row(topic, 0, 0)]))
    store.lifecycle.fence(topic.id, topic.partitions)
    with pytest.raises(BelowLowWatermark):
        store.messages.insert(placed_of([_row(topic, 1, 0)]))
    assert store.messages.fences(topic.id).lows == (DELETE_FENCE, DELETE_FENCE)
    assert seed.offsets(store, topic, 1) == []


def test_a_deleted_topics_rows_are_refused(store: Store, topic: TopicInfo) -> None:
    store.messages.insert(placed_of([_row(topic, 0, 0)]))
    store.lifecycle.fence(topic.id, topic.partitions)
    seed.sql(store, "DELETE FROM message WHERE topic_id = %s", (topic.id,))
    store.lifecycle.remove_topic(topic.id)
    with pytest.raises(BelowLowWatermark, match="no partitions"):
        store.messages.insert(placed_of([_row(topic, 0, 1)]))


def test_a_failed_move_leaves_the_connections_foreign_key_checks_on(
    settings: Settings, store: Store, topic: TopicInfo
) -> None:
    """Moving a fence turns the session's checks off for one statement: when that
    statement fails (here a lock wait timeout), the session must not keep them off, or
    rows with any fence would be stored unchecked on that connection later."""
    holder = connect(settings)
    mover = connect(settings)
    try:
        holder.begin()
        with holder.cursor() as held:
            held.execute(
                "SELECT fence FROM partition_head WHERE topic_id = %s AND partition_no = 1 "
                "FOR UPDATE",
                (topic.id,),
            )
        cursor: Any
        with mover.cursor() as cursor:
            cursor.execute("SET SESSION innodb_lock_wait_timeout = 1")
            mover.begin()
            with pytest.raises(pymysql.err.OperationalError):
                fences.move(cursor, topic.id, [0, 1])
            mover.rollback()
            cursor.execute("SELECT @@SESSION.foreign_key_checks")
            assert cursor.fetchone() == (1,)
    finally:
        holder.rollback()
        holder.close()
        mover.close()
    assert store.messages.fences(topic.id).fences == (0, 0)


def test_the_foreign_key_refuses_a_moved_fence_and_takes_no_fence_unchecked(
    settings: Settings, store: Store, topic: TopicInfo
) -> None:
    insert = (
        "INSERT INTO message (topic_id, partition_no, offset_no, body, fence) "
        "VALUES (%s, 0, %s, 'x', %s)"
    )
    seed.sql(store, insert, (topic.id, 0, 0))
    with store.db.transaction() as cursor:
        fences.move(cursor, topic.id, [0])
    with pytest.raises(ParentMissing):
        seed.sql(store, insert, (topic.id, 1, 0))
    seed.sql(store, insert, (topic.id, 1, 1))
    seed.sql(store, insert, (topic.id, 2, None))  # the escaped path's and tombstones' rows
    assert seed.offsets(store, topic, 0) == [0, 1, 2]


@BOTH_PATHS
def test_a_batch_takes_its_fences_in_the_order_fencers_do(
    settings: Settings, store: Store, big: bool
) -> None:
    """A fencer moves fences in partition order, and each row's fence is held from its
    check to the commit: a batch whose rows came in another order must still take them in
    partition order, or it would hold partition 3's while waiting for partition 1's, which
    the fencer holds while it waits for 3's (a deadlock, one side rolled back)."""
    topic = TopicAdmin(settings, store=store).create("ordered", 4)
    store.messages.insert(placed_of([_row(topic, 0, 0)]))  # reads and keeps the fences
    move = "UPDATE partition_head SET fence = fence + 1 WHERE topic_id = %s AND partition_no = %s"
    fencer = connect(settings)
    outcome: list[BaseException | None] = []

    def insert() -> None:
        try:
            store.messages.insert(placed_of([_row(topic, 3, 0, big), _row(topic, 1, 0, big)]))
            outcome.append(None)
        except BaseException as exc:  # shown by the assertion below
            outcome.append(exc)

    try:
        with fencer.cursor() as cursor:
            fencer.begin()
            cursor.execute("SET SESSION foreign_key_checks = 0")
            cursor.execute(move, (topic.id, 1))
            inserter = threading.Thread(target=insert)
            inserter.start()
            seed.wait_until(lambda: seed.lock_waits(store) > 0 or not inserter.is_alive())
            cursor.execute(move, (topic.id, 3))  # waits for nothing the batch holds
            cursor.execute("SET SESSION foreign_key_checks = 1")
            fencer.commit()
        inserter.join(30)
    finally:
        fencer.close()
    assert outcome == [None]
    assert (seed.offsets(store, topic, 1), seed.offsets(store, topic, 3)) == ([0], [0])


@BOTH_PATHS
def test_a_moved_fence_refuses_every_row_of_its_partition_in_a_write(
    store: Store, topic: TopicInfo, monkeypatch: pytest.MonkeyPatch, big: bool
) -> None:
    """Only a partition's first row in a write names the fence (on the hex path): its
    refusal refuses the write's other rows of that partition too, and the rest of the
    write, all of it going again once the fences are read again."""
    seed.messages(store, topic, 0, range(10), 48)
    store.messages.insert(placed_of([_row(topic, 0, 10)]))  # reads and keeps the fences
    reads = _counted_reads(store, monkeypatch)
    store.purge.delete(topic.id, [(0, 0, 5)])
    rows = [_row(topic, 0, 11, big), _row(topic, 1, 0), _row(topic, 0, 12), _row(topic, 0, 13)]
    store.messages.insert(placed_of(rows))
    assert reads == [topic.id]  # refused once (by partition 0's first row), read again
    assert seed.offsets(store, topic, 0) == list(range(5, 14))
    assert seed.offsets(store, topic, 1) == [0]
    store.purge.delete(topic.id, [(0, 0, 13)])
    with pytest.raises(BelowLowWatermark):  # checked again: 0@12 now lies below
        store.messages.insert(placed_of([_row(topic, 1, 1), _row(topic, 0, 12, big)]))
    assert (seed.offsets(store, topic, 0), seed.offsets(store, topic, 1)) == ([13], [0])


def test_a_fence_move_waits_for_a_writes_rows_that_do_not_name_the_fence(
    settings: Settings, store: Store, topic: TopicInfo
) -> None:
    """The lock the first row's check takes holds until the write commits, so a move of
    the fence waits for the write's later rows of the partition, which carry no fence."""
    fenced = store.messages.fences(topic.id).fences
    rows = [_row(topic, 0, 0), _row(topic, 0, 1), _row(topic, 0, 2)]
    (statement,) = insert_statements(placed_of(rows), 7, fenced) or [b""]
    assert statement.count(b",NULL,NULL)") == 2  # the rows after the first name no fence
    writer, fencer = connect(settings), connect(settings)
    moved = threading.Event()

    def move() -> None:
        with fencer.cursor() as cursor:
            fencer.begin()
            fences.move(cursor, topic.id, [0])
            fencer.commit()
        moved.set()

    try:
        writer.begin()
        with writer.cursor() as cursor:
            cursor.execute(statement)
        mover = threading.Thread(target=move)
        mover.start()
        seed.wait_until(lambda: seed.lock_waits(store) > 0)
        assert not moved.is_set()
        writer.commit()
        mover.join(30)
    finally:
        writer.close()
        fencer.close()
    assert moved.is_set()
    assert seed.offsets(store, topic, 0) == [0, 1, 2]
    later = [_row(topic, 0, 3), _row(topic, 0, 4)]
    (stale,) = insert_statements(placed_of(later), 8, fenced) or [b""]
    with pytest.raises(ParentMissing):  # the fence the write named has moved on since
        seed.sql(store, stale.decode())
    assert seed.offsets(store, topic, 0) == [0, 1, 2]
