"""The gap-free reader: holes from slow or dead producers are waited for, then filled."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator, Mapping

import pymysql
import pytest

from ems import Producer, Reader, TopicAdmin
from ems.backend import mysql_backend
from ems.config import Settings
from ems.exceptions import InvalidOffset, InvalidSetting, UnknownPartition, UnknownTopic
from ems.offsets.allocators import RedisAllocator
from ems.store import Store
from ems.store.errors import DuplicateKey
from ems.types import NewMessage, TopicInfo, placed_of
from ems.validation import MAX_BATCH_BYTES
from tests.integration import seed


@pytest.fixture
def topic(settings: Settings) -> TopicInfo:
    admin = TopicAdmin(settings)
    info = admin.create("t", 1)
    admin.close()
    return info


@pytest.fixture
def reader(settings: Settings) -> Iterator[Reader]:
    r = Reader(settings)
    yield r
    r.close()


def _row(topic: TopicInfo, offset: int, body: bytes) -> NewMessage:
    return NewMessage(
        topic_id=topic.id, partition=0, offset=offset, key=None, headers=None, body=body
    )


def test_reads_back_in_order_and_continues(
    settings: Settings, topic: TopicInfo, reader: Reader
) -> None:
    with Producer(settings) as p:
        p.send_batch("t", [f"m{i}".encode() for i in range(10)])
    first = reader.read_partition("t", 0, 0, limit=4)
    assert [m.offset for m in first.messages] == [0, 1, 2, 3]
    assert first.next_offset == 4
    rest = reader.read_partition("t", 0, first.next_offset, limit=100)
    assert [m.body for m in rest.messages] == [f"m{i}".encode() for i in range(4, 10)]
    assert reader.read_partition("t", 0, 10).messages == []
    assert reader.high_watermarks("t") == {0: 10}


def test_young_hole_blocks_then_old_hole_is_tombstoned(
    settings: Settings, topic: TopicInfo, reader: Reader, store: Store
) -> None:
    seed.insert_rows(store, [_row(topic, 0, b"a"), _row(topic, 2, b"c")])  # 1 was abandoned
    batch = reader.read_partition("t", 0, 0)
    assert [m.offset for m in batch.messages] == [0] and batch.next_offset == 1
    time.sleep(settings.gap_timeout + 0.2)
    batch = reader.read_partition("t", 0, 1)
    assert [m.offset for m in batch.messages] == [2] and batch.next_offset == 3
    with pytest.raises(DuplicateKey):  # the late producer now fails on the unique key
        store.messages.insert(placed_of([_row(topic, 1, b"late")]))
    admin = TopicAdmin(settings, store=store)
    stats = admin.describe("t", exact=True)[0]
    assert (stats.messages, stats.tombstones, stats.high_watermark) == (2, 1, 3)
    stats = admin.describe("t")[0]
    assert (stats.messages, stats.tombstones, stats.low_watermark) == (3, None, 0)


def test_a_read_cut_by_the_byte_budget_is_not_taken_for_a_hole(
    settings: Settings, topic: TopicInfo, reader: Reader, store: Store
) -> None:
    # 0, 1, 2 committed, 3 still open (a young hole), 4 committed: 100 bytes each.
    seed.insert_rows(store, [_row(topic, o, b"%d" % o * 100) for o in (0, 1, 2, 4)])
    batches = []
    at = 0
    for _ in range(4):
        batch = reader.read_partition("t", 0, at, limit=10, max_bytes=150)
        batches.append(([m.offset for m in batch.messages], batch.next_offset, batch.more))
        at = batch.next_offset
    assert batches == [
        ([0], 1, True),  # 200 bytes would pass the budget: cut, more to come
        ([1], 2, True),
        ([2], 3, True),
        ([], 3, False),  # only now the hole at 3, young: wait for it
    ]
    assert seed.sql(store, "SELECT COUNT(*) FROM message WHERE tombstone")[0][0] == 0
    whole = reader.read_partition("t", 0, 0, limit=10, max_bytes=400)
    assert ([m.offset for m in whole.messages], whole.more) == ([0, 1, 2], False)


def _slow_insert_of_offset_1(
    settings: Settings, store: Store, topic: TopicInfo, body: bytes
) -> pymysql.Connection:
    """Offsets 0 and 2 committed; offset 1 inserted by a transaction left open, until
    the hole it makes is older than the gap timeout."""
    store.messages.insert(placed_of([_row(topic, 0, b"a")]))
    slow = pymysql.connect(host="127.0.0.1", user="root", database=settings.database_name)
    slow.begin()
    with slow.cursor() as cur:
        cur.execute(
            "INSERT INTO message (topic_id, partition_no, offset_no, body) VALUES (%s, 0, 1, %s)",
            (topic.id, body),
        )
    store.messages.insert(placed_of([_row(topic, 2, b"c")]))
    time.sleep(settings.gap_timeout + 0.2)
    return slow


def test_slow_transaction_is_never_skipped(
    settings: Settings, topic: TopicInfo, reader: Reader, store: Store
) -> None:
    """The reader's tombstone for offset 1 waits on the open transaction's row lock, loses
    to its commit, and the reader reads the slow row."""
    slow = _slow_insert_of_offset_1(settings, store, topic, b"slow")
    commit = threading.Timer(1.0, slow.commit)
    commit.start()
    batch = reader.read_partition("t", 0, 1)
    commit.join()  # the COMMIT's reply read before the connection closes
    slow.close()
    assert [m.body for m in batch.messages] == [b"slow", b"c"]
    assert [m.offset for m in batch.messages] == [1, 2]


def test_rolled_back_slow_transaction_becomes_a_tombstone(
    settings: Settings, topic: TopicInfo, reader: Reader, store: Store
) -> None:
    slow = _slow_insert_of_offset_1(settings, store, topic, b"never")
    rollback = threading.Timer(1.0, slow.rollback)
    rollback.start()
    batch = reader.read_partition("t", 0, 1)
    rollback.join()
    slow.close()
    assert [m.body for m in batch.messages] == [b"c"] and batch.next_offset == 3


class _StaleOnce:
    """Hands out an offset someone already filled, once, then behaves."""

    def __init__(self, inner: RedisAllocator, stale: int) -> None:
        self.inner, self.stale = inner, stale

    def allocate(self, topic_id: int, counts: Mapping[int, int]) -> dict[int, int]:
        result = self.inner.allocate(topic_id, counts)
        if self.stale >= 0:
            result, self.stale = {0: self.stale}, -1
        return result

    def reseed(self, topic_id: int, next_offsets: Mapping[int, int]) -> None:
        self.inner.reseed(topic_id, next_offsets)

    def close(self) -> None:
        self.inner.close()


def test_producer_that_lost_its_offset_to_a_tombstone_retries(
    settings: Settings, topic: TopicInfo, reader: Reader, store: Store
) -> None:
    with Producer(settings) as p:
        p.send_batch("t", [b"a", b"b"])
    store.messages.insert_tombstones(topic.id, 0, [2])
    allocator = _StaleOnce(RedisAllocator.for_settings(settings), 2)
    backend = dataclasses.replace(mysql_backend(settings), allocator=lambda: allocator)
    with Producer(backend=backend) as late:
        placed = late.send("t", b"late")
    assert placed.offset >= 3
    time.sleep(settings.gap_timeout + 0.2)
    seen = []
    cursor = 0
    for _ in range(5):
        batch = reader.read_partition("t", 0, cursor)
        seen += [m.body for m in batch.messages]
        cursor = batch.next_offset
    assert seen == [b"a", b"b", b"late"]


def test_reader_input_errors(topic: TopicInfo, reader: Reader) -> None:
    with pytest.raises(UnknownTopic):
        reader.read_partition("nope", 0, 0)
    with pytest.raises(UnknownPartition):
        reader.read_partition("t", 1, 0)
    with pytest.raises(UnknownPartition):
        reader.read_partition("t", -1, 0)
    with pytest.raises(InvalidOffset):
        reader.read_partition("t", 0, -1)
    with pytest.raises(InvalidOffset):
        reader.read_partition("t", 0, 0, limit=0)
    for bad in (0, -1, True, 1.5, "4MiB", MAX_BATCH_BYTES + 1):
        with pytest.raises(InvalidSetting):
            reader.read_partition("t", 0, 0, max_bytes=bad)  # type: ignore[arg-type]
