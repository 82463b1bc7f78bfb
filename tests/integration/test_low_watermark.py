"""No message is ever stored below its partition's low watermark: a purge removed that
range, readers jump over it, so a row there would be acknowledged and never delivered.
The insert itself refuses such offsets, and the producer re-seeds its counters from
max(high watermark, low watermark) and tries again."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import redis

from ems import Consumer, Producer, Record, TopicAdmin
from ems.backend import mysql_backend
from ems.config import Settings
from ems.exceptions import DatabaseUnavailable
from ems.maintenance.purge import delete_consumed, purge_retention
from ems.offsets.allocators import offset_key
from ems.store import Store, fences
from ems.store.errors import BelowLowWatermark
from ems.types import NewMessage, Placed, TopicInfo, placed_messages, placed_of
from tests.integration import seed

FAST: dict[str, Any] = {"lease_ttl": 2.0, "renew_every": 0.5}


@pytest.fixture
def topic(settings: Settings, store: Store) -> TopicInfo:
    return TopicAdmin(settings, store=store).create("t", 1, retention_hours=1)


def age_all(store: Store, hours: float) -> None:
    seed.sql(store, "UPDATE message SET created_at = NOW(6) - INTERVAL %s HOUR", (hours,))


def test_a_send_after_redis_loss_lands_above_a_purged_range(
    settings: Settings, store: Store, topic: TopicInfo
) -> None:
    with Producer(settings) as producer:
        sent = [producer.send("t", f"m{i}") for i in range(100)]
        assert [m.offset for m in sent] == list(range(100))
        age_all(store, 48)
        assert purge_retention(store, settings)["deleted"] == 99
        assert seed.low(store, topic, 0) == 99
        with Consumer("g", "t", settings=settings, start="latest", **FAST) as consumer:
            assert consumer.poll(timeout=0.5) == []  # joined: its cursor is at 100
            seed.lose_redis(settings)
            placed = producer.send("t", "after-flush")
            assert placed.offset >= 100
            (got,) = seed.poll_until(consumer, 1)
            assert got.body == b"after-flush"
            consumer.ack(got)
    assert seed.offsets(store, topic, 0) == [99, placed.offset]


def test_the_insert_refuses_offsets_below_the_low_watermark(
    settings: Settings, store: Store
) -> None:
    topic = TopicAdmin(settings, store=store).create("two", 2, retention_hours=1)
    seed.messages(store, topic, 0, range(10), 48)
    purge_retention(store, store.settings)
    assert seed.low(store, topic, 0) == 9
    below = NewMessage(topic.id, 0, 4, None, None, b"late")
    elsewhere = NewMessage(topic.id, 1, 0, None, None, b"fine")  # partition 1: no purge
    for rows in ([below], [elsewhere, below], [below, elsewhere]):
        with pytest.raises(BelowLowWatermark):
            store.messages.insert(placed_of(rows))
    # A row too large for a hex literal takes the driver's escaping in a transaction.
    big = NewMessage(topic.id, 0, 5, None, None, b"x" * 300_000)
    with pytest.raises(BelowLowWatermark):
        store.messages.insert(placed_of([elsewhere, big]))
    assert seed.offsets(store, topic, 0) == [9] and seed.offsets(store, topic, 1) == []
    store.messages.insert(placed_of([NewMessage(topic.id, 0, 10, None, None, b"fine")]))
    assert seed.offsets(store, topic, 0) == [9, 10]


def test_an_all_purged_partition_seeds_from_its_low_watermark(
    settings: Settings, store: Store, topic: TopicInfo
) -> None:
    seed.messages(store, topic, 0, range(20), 48)
    purge_retention(store, settings)
    seed.sql(store, "DELETE FROM message")  # the last row too, as an operator may
    seed.lose_redis(settings)
    with Producer(settings) as producer:
        assert producer.send("t", "first").offset == 19


class _Recording:
    """The real message store's insert, with every offset it was asked to insert."""

    def __init__(self, store: Store) -> None:
        self.insert = store.messages.insert
        self.offsets: list[int] = []

    def __call__(self, placed: Placed, *token: int, **routed: Any) -> None:
        self.offsets += [r.offset for r in placed_messages(placed)]
        self.insert(placed, *token, **routed)


def test_a_counter_that_went_back_is_reseeded_before_any_insert(
    settings: Settings, store: Store, topic: TopicInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Producer(backend=mysql_backend(settings, store)) as producer:
        producer.send_batch("t", [Record(f"m{i}") for i in range(10)])
        recording = _Recording(store)
        monkeypatch.setattr(store.messages, "insert", recording)
        # A failover to a replica that had not seen the last INCRBYs.
        client = redis.Redis.from_url(settings.redis_url)
        client.set(offset_key(settings.redis_prefix, topic.id, 0), 3)
        client.close()
        assert producer.send("t", "after").offset == 10
    assert recording.offsets == [10]


def test_a_stalled_producer_does_not_land_below_consumed_and_purged_offsets(
    settings: Settings, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A producer takes an offset and stalls; readers tombstone the hole, the group moves
    past it and delete-consumed purges the tombstone. When the producer wakes, its old
    offset is below the low watermark: it must be placed anew, and delivered."""
    TopicAdmin(settings, store=store).create("d", 1)
    seed.sql(store, "UPDATE topic SET delete_consumed = 1 WHERE name = 'd'")
    stalled, release = threading.Event(), threading.Event()
    insert = store.messages.insert

    def stall_first(placed: Placed, *token: int, **routed: Any) -> None:
        if not stalled.is_set():
            stalled.set()
            release.wait(30)
        insert(placed, *token, **routed)

    monkeypatch.setattr(store.messages, "insert", stall_first)
    slow = Producer(backend=mysql_backend(settings, store))
    outcome: list[Any] = []
    sender = threading.Thread(target=lambda: outcome.append(slow.send("d", "slow")))
    consumer = Consumer("g", "d", settings=settings, start="earliest", **FAST)
    try:
        sender.start()
        assert stalled.wait(10)
        with Producer(settings) as fast:
            fast.send_batch("d", [Record(f"f{i}") for i in range(5)])
        got = seed.poll_until(consumer, 5)  # the hole at 0 is tombstoned after the gap timeout
        assert [d.body for d in got] == [f"f{i}".encode() for i in range(5)]
        consumer.ack(got)
        consumer.poll(timeout=0.2)  # flushes the cursor commit
        seed.wait_until(lambda: delete_consumed(store, settings)["deleted"] > 0)
        release.set()
        sender.join(30)
        (placed,) = outcome
        assert placed.offset >= 6
        (late,) = seed.poll_until(consumer, 1)
        assert late.body == b"slow"
        consumer.ack(late)
    finally:
        release.set()
        consumer.close()
        slow.close()


def test_a_read_that_never_answers_ends_within_the_read_timeout(settings: Settings) -> None:
    store = Store(settings.with_(read_timeout=1.0))
    try:
        started = time.monotonic()
        with pytest.raises(DatabaseUnavailable):
            store.db.select("SELECT SLEEP(30)", ())
        # select() retries a dropped read once on a fresh connection.
        assert time.monotonic() - started < 6
    finally:
        store.close()


def test_an_insert_racing_a_purge_waits_for_it_and_is_refused(
    store: Store, topic: TopicInfo
) -> None:
    """The fence is a locking read: while a purge's transaction holds the raised watermark
    and the moved fence, an insert checked against the fence before (read before the purge
    committed) waits, then is refused, reads the fences again and sees the committed
    watermark (a plain read would see the old one and store the row in the range being
    purged)."""
    seed.messages(store, topic, 0, range(10), 48)
    outcome: list[BaseException | None] = []
    with store.db.transaction() as purge:
        purge.execute(
            "INSERT INTO partition_low (topic_id, partition_no, low_offset) VALUES (%s, 0, 9)",
            (topic.id,),
        )
        fences.move(purge, topic.id, [0])
        purge.execute("DELETE FROM message WHERE offset_no < 9")

        def insert() -> None:
            try:
                store.messages.insert(placed_of([NewMessage(topic.id, 0, 4, None, None, b"late")]))
                outcome.append(None)
            except BelowLowWatermark as exc:
                outcome.append(exc)

        inserter = threading.Thread(target=insert)
        inserter.start()
        seed.wait_until(lambda: seed.lock_waits(store) > 0)
    inserter.join(10)
    assert len(outcome) == 1 and isinstance(outcome[0], BelowLowWatermark)
    assert seed.offsets(store, topic, 0) == [9]


def test_one_guard_covers_every_partition_of_a_statement(settings: Settings, store: Store) -> None:
    topic = TopicAdmin(settings, store=store).create("two", 2, retention_hours=1)
    seed.messages(store, topic, 1, range(10), 48)
    purge_retention(store, settings)
    assert seed.low(store, topic, 1) == 9
    fine = NewMessage(topic.id, 0, 0, None, None, b"fine")
    late = NewMessage(topic.id, 1, 4, None, None, b"late")
    with pytest.raises(BelowLowWatermark):
        store.messages.insert(
            placed_of([fine, late])
        )  # the guard sits on the first row, partition 0
    assert seed.offsets(store, topic, 0) == []
    store.messages.insert(placed_of([fine, NewMessage(topic.id, 1, 10, None, None, b"on time")]))
    assert (seed.offsets(store, topic, 0), seed.offsets(store, topic, 1)) == ([0], [9, 10])


def test_an_earliest_group_made_while_the_first_sends_are_in_flight_gets_them(
    settings: Settings, store: Store, topic: TopicInfo
) -> None:
    """Offsets are handed out before their rows commit: a group made from the earliest
    offset while the sends of offsets 0-4 are still in flight and offset 5 has committed
    starts at the log's start, not at 5, and gets all six once the late ones land."""
    store.messages.insert(placed_of([NewMessage(topic.id, 0, 5, None, None, b"first to commit")]))
    consumer = Consumer("g", "t", settings=settings, start="earliest", **FAST)
    try:
        consumer.start()
        assert store.groups.offsets(consumer.group.id) == {0: 0}
        late = [NewMessage(topic.id, 0, o, None, None, f"late {o}".encode()) for o in range(5)]
        store.messages.insert(placed_of(late))
        got = seed.poll_until(consumer, 6)
        assert [d.offset for d in got] == [0, 1, 2, 3, 4, 5]
        consumer.ack(got)
    finally:
        consumer.close()


def test_an_earliest_broadcast_member_started_while_the_first_sends_are_in_flight_gets_them(
    settings: Settings, store: Store, topic: TopicInfo
) -> None:
    """The same for a broadcast member: its in-memory cursors start at the log's start,
    not at the lowest stored offset, so the late sends of offsets 0-4 reach it."""
    store.messages.insert(placed_of([NewMessage(topic.id, 0, 5, None, None, b"first to commit")]))
    consumer = Consumer("b", "t", settings=settings, start="earliest", broadcast=True, **FAST)
    try:
        consumer.start()
        late = [NewMessage(topic.id, 0, o, None, None, f"late {o}".encode()) for o in range(5)]
        store.messages.insert(placed_of(late))
        got = seed.poll_until(consumer, 6)
        assert [d.offset for d in got] == [0, 1, 2, 3, 4, 5]
    finally:
        consumer.close()
