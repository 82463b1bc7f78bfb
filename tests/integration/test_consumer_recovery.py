"""Consumers whose writes do not land or whose close fails, against the real servers:
nothing settled-but-unwritten is skipped, and a closed consumer leaves its group.

Failures are real: another connection holds row locks, and a watcher KILLs the consumer's
connections that wait on them."""

from __future__ import annotations

import logging
import threading
from contextlib import suppress
from typing import Any

import pytest

from ems import Consumer, Delivery, Producer, Record, TopicAdmin
from ems.config import Settings
from ems.consumer import ack_writer
from ems.consumer.state import Acks
from ems.exceptions import DatabaseUnavailable
from ems.maintenance.purge import purge_retention
from ems.store import Store
from ems.types import TopicInfo
from tests.integration import seed
from tests.integration.test_consumer import (
    FAST,
    Running,
    bodies,
    holding,
    poll_until,
    produce,
    wait_for,
)

#: The statement that commits cursors (ack batches, releases, leaving).
CURSOR_COMMIT = "UPDATE group_offset%"


@pytest.fixture
def topic(settings: Settings, store: Store) -> TopicInfo:
    """One partition, so that every message of a test meets the same cursor."""
    return TopicAdmin(settings, store=store).create("t", 1, retention_hours=1)


class Killer:
    """KILLs every connection of this test database whose running statement matches a
    LIKE pattern (one waiting on a held lock), and counts the connections it killed."""

    def __init__(self, settings: Settings, pattern: str) -> None:
        self.settings = settings
        self.pattern = pattern
        self.killed: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Killer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        store = Store(self.settings)
        try:
            while not self._stop.wait(0.02):
                found = seed.sql(
                    store,
                    "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = %s "
                    "AND INFO LIKE %s AND ID <> CONNECTION_ID()",
                    (self.settings.database_name, self.pattern),
                )
                for (conn_id,) in found:
                    if conn_id not in self.killed:
                        self.killed.add(conn_id)  # first: the victim's error may come first
                        with suppress(Exception):  # it may have gone by itself
                            seed.sql(store, f"KILL CONNECTION {int(conn_id)}")
        finally:
            store.close()


def cursor(store: Store, group_id: int) -> int:
    return store.groups.offsets(group_id)[0]


def unsettled_below_cursor(store: Store, group_id: int) -> list[int]:
    """Offsets the stored cursor has passed that were never settled: not done in the log,
    not waiting in the retry table, not dead."""
    rows = seed.sql(
        store,
        "SELECT m.offset_no FROM message m JOIN group_offset o "
        "ON o.group_id = %s AND o.partition_no = m.partition_no "
        "LEFT JOIN topic_group_log l ON l.group_id = o.group_id "
        "AND l.partition_no = m.partition_no AND l.offset_no = m.offset_no "
        "LEFT JOIN retry_message r ON r.group_id = o.group_id "
        "AND r.partition_no = m.partition_no AND r.offset_no = m.offset_no "
        "LEFT JOIN dead_message d ON d.group_id = o.group_id "
        "AND d.partition_no = m.partition_no AND d.offset_no = m.offset_no "
        "WHERE m.topic_id = (SELECT topic_id FROM consumer_group WHERE id = o.group_id) "
        "AND m.offset_no < o.committed_offset AND m.tombstone = 0 "
        "AND COALESCE(l.state, '') <> 'done' AND r.id IS NULL AND d.id IS NULL "
        "ORDER BY m.offset_no",
        (group_id,),
    )
    return [int(r[0]) for r in rows]


# -- a settlement that was not written ---------------------------------------------------


def test_a_nack_fenced_by_a_newer_generation_of_the_same_owner_is_delivered_again(
    settings: Settings, store: Store, topic: TopicInfo
) -> None:
    produce(settings, 3, keys=1)
    with Consumer("g", "t", settings=settings, start="earliest", **FAST) as c:
        got = poll_until(c, 3)
        assert bodies(got) == ["m0", "m1", "m2"]
        wait_for(lambda: c.membership.epoch is not None)
        before = c.membership.ownership()[1][0].generation
        # The leader asks for the partition back; as this member is the only one, its next
        # round grants it again: same owner, newer generation. The consume loop has not
        # looked since, so its deliveries still carry the old generation.
        epoch = c.membership.epoch
        assert epoch is not None
        store.assignments.apply(c.group.id, (c.client_id, epoch), {}, [0])
        wait_for(lambda: c.membership.ownership()[1][0].generation > before)
        c.nack(got[1], "boom")  # its retry row meets StaleGeneration and is not written
        c.ack([got[0], got[2]])
        again = poll_until(c, 3, timeout=5)
        assert bodies(again) == ["m0", "m1", "m2"]  # nothing unwritten is skipped
        c.ack(again)
        wait_for(lambda: cursor(store, c.group.id) == 3)
        assert unsettled_below_cursor(store, c.group.id) == []


def test_acks_the_writer_gave_up_on_are_delivered_again_and_the_cursor_waits_for_them(
    settings: Settings,
    store: Store,
    topic: TopicInfo,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    failed: list[Delivery] = []
    seen: list[Delivery] = []

    def handler(d: Delivery) -> None:
        seen.append(d)
        if d.body == b"m7" and not failed:
            failed.append(d)
            raise ValueError("first try fails")

    # A long lease and a short patience: the writer gives up while the lease holds. A
    # short first rung of the retry ladder: m7's second try comes after half a second,
    # not the default 10 s.
    monkeypatch.setattr(ack_writer, "PATIENCE", 2.0)
    caplog.set_level(logging.ERROR, logger=ack_writer.__name__)
    options: dict[str, Any] = {"lease_ttl": 30.0, "renew_every": 1.0, "retry_ladder": "0.5s"}
    consumer = Consumer("g", "t", handler, settings=settings, start="earliest", **options)
    r = Running(consumer, seen)
    try:
        group_id = consumer.group.id
        produce(settings, 5, keys=1)
        wait_for(lambda: cursor(store, group_id) == 5)
        lock = "SELECT * FROM group_offset WHERE group_id = %s FOR UPDATE"
        with holding(store, lock, (group_id,)), Killer(settings, CURSOR_COMMIT) as killer:
            produce(settings, 5, keys=1, first=5)
            wait_for(lambda: "dropped after" in caplog.text, timeout=30)
            # Each try's cursor commit was killed: four tries in 2 s (at 0, 0.2, 0.6 and
            # 1.4 s; the next would come after 2.4 s), three at least on a loaded machine.
            assert len(killer.killed) >= 3
            assert cursor(store, group_id) == 5
        # The writer gave up on m5..m9 (m7's retry row among them): they come again.
        wait_for(lambda: bodies(seen).count("m7") >= 2)
        wait_for(lambda: cursor(store, group_id) == 10)
        assert unsettled_below_cursor(store, group_id) == []
        assert set(bodies(seen)) == {f"m{i}" for i in range(10)}
        # m5's ack is the first the writer gave up on, and m7's retry row was among them.
        # Which of m6, m8, m9 came again depends on how the loop batched them: a new batch
        # waits until the acks of the last are written, so the writer's backlog (and what
        # comes again) stops at one batch.
        assert {b for b in bodies(seen) if bodies(seen).count(b) > 1} >= {"m5", "m7"}
    finally:
        r.stop()


@pytest.mark.parametrize("empty_look_first", [False, True], ids=["news-first", "empty-look-first"])
def test_the_next_batch_is_read_while_the_last_acks_commit_and_handed_out_once_written(
    settings: Settings,
    store: Store,
    topic: TopicInfo,
    monkeypatch: pytest.MonkeyPatch,
    empty_look_first: bool,
) -> None:
    """The read of a batch overlaps the commit of the last batch's acks (two round trips
    at once, not one after the other), and the batch still waits for that commit before
    it is handed out: a crash costs at most the batch in hand. So it does when the poll's
    first look found nothing (empty_look_first): an empty fetch hands nothing out, so it
    has nothing to wait for (it waited, and the read came only after the commit)."""
    produce(settings, 3, keys=1)
    reads: list[list[int]] = []
    with Consumer("g", "t", settings=settings, start="earliest", lease_ttl=30.0) as c:
        # Start rows handed to the writer at once, as a large batch's are: a small batch's
        # held start rows are settled on the settling thread when the writer is idle,
        # which would wait here for the lock below (for the lock wait timeout).
        c.session.writer.hold = 0  # type: ignore[attr-defined]
        read = c.session._read_batch  # type: ignore[attr-defined]

        def recording(*args: Any, **kwargs: Any) -> Any:
            batch = read(*args, **kwargs)
            reads.append([d.offset for d in batch])
            return batch

        monkeypatch.setattr(c.session, "_read_batch", recording)
        got = poll_until(c, 3)
        polled: list[list[Delivery]] = []
        lock = "SELECT * FROM group_offset WHERE group_id = %s FOR UPDATE"
        with holding(store, lock, (c.group.id,)):
            c.settle(Acks(got), wait=False)  # its cursor commit waits on the lock
            if not empty_look_first:
                produce(settings, 3, keys=1, first=3)
            poller = threading.Thread(target=lambda: polled.append(c.poll(timeout=30)))
            poller.start()
            if empty_look_first:
                wait_for(lambda: [] in reads)  # a look that found nothing
                with Producer(settings) as producer:  # one write: read in one look
                    producer.send_batch("t", [Record(f"m{i}", "k0") for i in (3, 4, 5)])
                wait_for(lambda: [3, 4, 5] in reads)  # read meanwhile,
            else:
                wait_for(lambda: {3, 4, 5} <= {o for r in reads for o in r})  # read meanwhile,
            assert poller.is_alive() and not polled  # but not handed out
            assert cursor(store, c.group.id) == 0
        poller.join(timeout=30)
        assert [bodies(batch) for batch in polled] == [["m3", "m4", "m5"]]
        assert cursor(store, c.group.id) == 3
        c.ack(polled[0])
        assert cursor(store, c.group.id) == 6
        assert unsettled_below_cursor(store, c.group.id) == []


def test_a_pull_ack_whose_write_fails_raises_and_its_messages_come_again(
    settings: Settings, store: Store, topic: TopicInfo
) -> None:
    produce(settings, 3, keys=1)
    with Consumer("g", "t", settings=settings, start="earliest", **FAST) as c:
        got = poll_until(c, 3)
        lock = "SELECT * FROM group_offset WHERE group_id = %s FOR UPDATE"
        with (
            holding(store, lock, (c.group.id,)),
            Killer(settings, CURSOR_COMMIT),
            pytest.raises(DatabaseUnavailable),
        ):
            c.ack(got)
        assert cursor(store, c.group.id) == 0
        again = poll_until(c, 3, timeout=5)
        assert bodies(again) == ["m0", "m1", "m2"]
        c.ack(again)
        assert cursor(store, c.group.id) == 3
        assert unsettled_below_cursor(store, c.group.id) == []


# -- the local lease deadline ------------------------------------------------------------


# -- leaving -----------------------------------------------------------------------------


def test_close_leaves_the_group_even_when_its_last_commit_fails(
    settings: Settings, store: Store, topic: TopicInfo
) -> None:
    group = seed.group(store, "g", topic)
    seed.messages(store, topic, 0, range(10), 3.0)
    purge_retention(store, settings)  # 0..8 go; the reader jumps to the low watermark
    c = Consumer("g", "t", settings=settings, **FAST)
    (d,) = poll_until(c, 1)
    assert d.offset == 9  # the cursor moved past the purged range and is not committed
    lock = "SELECT * FROM group_offset WHERE group_id = %s FOR UPDATE"
    with holding(store, lock, (group.id,)), Killer(settings, CURSOR_COMMIT) as killer:
        with pytest.raises(DatabaseUnavailable):
            c.close()  # the cursor commit on leaving loses its connection
        assert killer.killed
    assert seed.sql(store, "SELECT COUNT(*) FROM consumer_client") == [(0,)]
    assert not c.membership.renewing()
    assert cursor(store, group.id) == 0


def test_a_stale_generation_at_close_is_logged_and_the_group_is_left(
    settings: Settings, store: Store, topic: TopicInfo, caplog: pytest.LogCaptureFixture
) -> None:
    group = seed.group(store, "g", topic)
    seed.messages(store, topic, 0, range(10), 3.0)
    purge_retention(store, settings)
    c = Consumer("g", "t", settings=settings, **FAST)
    (d,) = poll_until(c, 1)
    assert d.offset == 9
    wait_for(lambda: c.membership.epoch is not None)
    epoch = c.membership.epoch
    assert epoch is not None
    # Granted again at a newer generation: the cursor commit on leaving is fenced off.
    store.assignments.apply(group.id, (c.client_id, epoch), {0: c.client_id}, [])
    caplog.set_level(logging.INFO, logger="ems.consumer.cluster")
    c.close()
    assert "cursor commit on leave skipped" in caplog.text
    assert seed.sql(store, "SELECT COUNT(*) FROM consumer_client") == [(0,)]
    assert not c.membership.renewing()
    assert cursor(store, group.id) == 0
