"""A settlement that was not written never lets a cursor pass its message: the partition's
state is dropped and read again from the stored cursor, so the message comes again. And a
member never stalls or lingers: past a lost local lease deadline it takes its partitions
anew, and close() always leaves the group."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from ems import Consumer, Producer, TopicAdmin
from ems.config import Settings
from ems.consumer.state import Outcome
from ems.exceptions import DatabaseUnavailable
from ems.offsets.allocators import offset_key
from ems.store import Store
from ems.store.leases import LeaseHeartbeat
from ems.types import Delivery
from tests.integration import seed

FAST: dict[str, Any] = {"lease_ttl": 2.0, "renew_every": 0.5}
#: Failures injected "for ever": more than any writer tries.
ALWAYS = 10**6


@pytest.fixture
def topic(settings: Settings, store: Store) -> Iterator[str]:
    TopicAdmin(settings, store=store).create("t", 1)
    with Producer(settings) as producer:
        for i in range(3):
            producer.send("t", f"m{i}")
    yield "t"


def test_a_nack_lost_to_a_regrant_is_delivered_again(
    settings: Settings, store: Store, topic: str
) -> None:
    """The leader took a revocation back and granted the partition to the same member at
    a newer generation: the nack's retry row, written under the old one, is refused."""
    with Consumer("g", topic, settings=settings, start="earliest", **FAST) as consumer:
        got = seed.poll_until(consumer, 3)
        assert [d.offset for d in got] == [0, 1, 2]
        seed.sql(store, "UPDATE partition_assignment SET generation = generation + 1")
        consumer.nack(got[0], "boom", delay=0)
        consumer.ack(got[1:])
        again = seed.poll_until(consumer, 1)
        assert again and again[0].offset == 0
        consumer.ack(seed.poll_until(consumer, 2, timeout=5) + again)
    committed = seed.sql(store, "SELECT committed_offset FROM group_offset")
    assert committed == [(3,)]


def test_an_ack_batch_the_writer_gave_up_on_is_delivered_again(
    settings: Settings, store: Store, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ack writer tries a batch for PATIENCE seconds (half a second here); after that
    the batch is dropped while the lease may still hold, and the messages it settled must
    come again."""
    monkeypatch.setattr("ems.consumer.ack_writer.PATIENCE", 0.5)
    settle = store.consumption.settle
    failures = {"left": 0}

    def flaky(*args: Any) -> None:
        if failures["left"]:
            failures["left"] -= 1
            raise DatabaseUnavailable("MySQL is unreachable: injected")
        settle(*args)

    monkeypatch.setattr(store.consumption, "settle", flaky)
    consumer = Consumer("g", topic, settings=settings, start="earliest", store=store, **FAST)
    with consumer:
        got = seed.poll_until(consumer, 3)
        failures["left"] = ALWAYS
        # As run() settles a handler's outcomes: on the ack writer, not waiting.
        consumer.settle([Outcome(d) for d in got[:2]], wait=False)
        consumer.session.writer.flush()
        assert ALWAYS - failures["left"] >= 2  # tried again before it gave up
        failures["left"] = 0
        again = seed.poll_until(consumer, 2)
        assert [d.offset for d in again[:2]] == [0, 1]
        consumer.ack(again + got[2:])
    assert seed.sql(store, "SELECT committed_offset FROM group_offset") == [(3,)]


def test_a_settlement_skipped_as_the_lease_lapsed_counts_as_not_written(
    settings: Settings, store: Store, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lease deadline passes between the ack writer's check and the write: the write
    commits nothing, and the writer must take that as a failed write (the partition read
    again from its stored cursor), never as written, or a later cursor commit, once the
    lease is valid again, would pass a failed message whose retry row was never written."""
    consumer = Consumer("g", topic, settings=settings, start="earliest", store=store, **FAST)
    with consumer:
        got = seed.poll_until(consumer, 3)
        consumer.session.writer.flush()  # their start rows are written
        membership = consumer.membership
        valid = membership.lease_valid
        # On the ack writer's thread, until it is done with the settlement below: its
        # check sees the lease valid, the write's own check just after it sees it lapsed,
        # and so does every later check; then the lease is valid again (a renewal
        # answered late), as the real deadline says. The consume loop's checks and the
        # heartbeat's keep the real deadline.
        answers = iter([True, False])
        done = threading.Event()

        def lease_valid() -> bool:
            if done.is_set() or threading.current_thread().name != "ems-acks":
                return valid()
            return next(answers, False)

        monkeypatch.setattr(membership, "lease_valid", lease_valid)
        monkeypatch.setattr(consumer.session.writer, "_alive", lease_valid)
        consumer.settle(
            [Outcome(got[0], "boom", 0.0), Outcome(got[1]), Outcome(got[2])], wait=False
        )
        consumer.session.writer.flush()
        done.set()
        assert next(answers, None) is None  # the write's check was reached
        again = seed.poll_until(consumer, 3)
        assert sorted(d.offset for d in again) == [0, 1, 2]
        consumer.ack(again)
    assert seed.sql(store, "SELECT committed_offset FROM group_offset") == [(3,)]
    assert seed.sql(store, "SELECT COUNT(*) FROM retry_message") == [(0,)]


def test_a_member_past_its_local_deadline_consumes_again_once_renewed(
    settings: Settings, store: Store, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A renewal that reached the server answers late, after the local deadline: the
    member drops its partitions, and when the answer makes the lease valid again (the
    server never let it lapse, so nothing is reassigned) it must take them up again."""
    renew = LeaseHeartbeat.renew
    armed, stalled, release = threading.Event(), threading.Event(), threading.Event()

    def late_answer(heartbeat: LeaseHeartbeat, *args: Any, **kwargs: Any) -> bool:
        renewed = renew(heartbeat, *args, **kwargs)
        if armed.is_set():
            armed.clear()
            stalled.set()
            release.wait(15)
        return renewed

    monkeypatch.setattr(LeaseHeartbeat, "renew", late_answer)
    consumer = Consumer("g", topic, settings=settings, start="earliest", store=store, **FAST)
    with consumer:
        consumer.ack(seed.poll_until(consumer, 3))
        armed.set()
        assert stalled.wait(10)
        seed.wait_until(lambda: not consumer.poll(timeout=0.1) and not consumer.session.states)
        release.set()
        with Producer(settings) as producer:
            producer.send("t", "later")
        (got,) = seed.poll_until(consumer, 1)
        assert got.body == b"later"
        consumer.ack(got)


def test_close_leaves_the_group_whatever_the_last_commit_met(
    settings: Settings, store: Store, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    consumer = Consumer("g", topic, settings=settings, start="earliest", store=store, **FAST)
    consumer.start()
    consumer.ack(seed.poll_until(consumer, 3))
    # A producer that took offset 3 and died: the reader tombstones the hole after the gap
    # timeout, and the cursor moves past it to the unacked offset 4, which only close()
    # commits.
    client = redis.Redis.from_url(settings.redis_url)
    client.incr(offset_key(settings.redis_prefix, store.topics.get(topic).id, 0))
    client.close()
    with Producer(settings) as producer:
        assert producer.send(topic, "m4").offset == 4
    assert [d.offset for d in seed.poll_until(consumer, 1)] == [4]

    def unreachable(*args: Any) -> None:
        raise DatabaseUnavailable("MySQL is unreachable: injected")

    monkeypatch.setattr(store.groups, "commit", unreachable)
    client_id = consumer.membership.client_id
    with pytest.raises(DatabaseUnavailable):
        consumer.close()
    assert not consumer.membership.renewing()
    sql = "SELECT COUNT(*) FROM consumer_client WHERE client_id = %s"
    assert seed.sql(store, sql, (client_id,)) == [(0,)]


def test_a_member_that_rejoined_unseen_takes_its_partitions_from_the_stored_cursor(
    settings: Settings, store: Store, topic: str
) -> None:
    """The lease lapsed and the membership rejoined under a new client id while the
    consume loop was away (blocked in a handler or a statement), and the leader granted
    the same partition to the new id. Meanwhile another member owned it and committed past
    this one's position: the state taken under the old id must not carry on, or the
    messages between its position and the stored cursor come again."""
    consumer = Consumer("g", topic, settings=settings, start="earliest", store=store, **FAST)
    with consumer:
        first: list[Delivery] = []

        def one() -> bool:
            first.extend(consumer.poll(0.1, max_messages=1))
            return bool(first)

        seed.wait_until(one)
        assert [d.offset for d in first] == [0]  # the position is 1, the cursor 0
        membership = consumer.membership
        old = membership.client_id
        # The old lease and leadership lapse on the server; the consume loop does not
        # look (no poll) until the membership has joined again and owns the partition.
        seed.sql(
            store,
            "UPDATE consumer_client SET lease_expires_at = NOW(6) - INTERVAL 1 SECOND "
            "WHERE client_id = %s",
            (old,),
        )
        seed.sql(store, "UPDATE group_leader SET lease_expires_at = NOW(6)")

        def regranted() -> bool:
            _, owned = membership.ownership()
            return membership.client_id != old and 0 in owned and owned[0].client_id != old

        seed.wait_until(regranted, timeout=30)
        # Another member held the partition in between and acked everything.
        seed.sql(store, "UPDATE group_offset SET committed_offset = 3")
        with Producer(settings) as producer:
            producer.send(topic, "later")
        got = seed.poll_until(consumer, 1)
        assert [(d.offset, d.body) for d in got] == [(3, b"later")]
        consumer.ack(got)
    assert seed.sql(store, "SELECT committed_offset FROM group_offset") == [(4,)]
