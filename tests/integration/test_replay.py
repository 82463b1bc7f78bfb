"""Replay against the real servers: a range goes to one group's retry path and is
delivered to it once more, while its cursor and every other group stay untouched."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator

import pytest

from ems import Consumer, Producer, TopicAdmin
from ems.config import Settings
from ems.consumer.groups import ensure_group
from ems.exceptions import (
    ConflictingOptions,
    EmsError,
    OffsetOutOfRange,
    UnknownGroup,
    UnknownPartition,
    UnsupportedGroup,
)
from ems.ops.replay import Replayer, ReplayRange
from ems.store import Store
from ems.types import TopicInfo
from tests import sql as db
from tests.integration import seed
from tests.integration.offsets_data import T0, T1, T2, insert, options


@pytest.fixture
def replayer(settings: Settings, store: Store) -> Iterator[Replayer]:
    r = Replayer(settings, store=store)
    yield r
    r.close()


def consume(
    settings: Settings, group: str, until: int, *, grace: float = 0.0
) -> list[tuple[int, int, int]]:
    """(partition, offset, attempt) of what one member of `group` gets, acking each, until
    `until` deliveries came and then for `grace` seconds more."""
    got: list[tuple[int, int, int]] = []
    with Consumer(group, "r", settings=settings, start="earliest", lease_ttl=3, renew_every=1) as c:
        deadline = time.monotonic() + 30
        while len(got) < until:
            assert time.monotonic() < deadline, f"got only {len(got)} of {until}"
            batch = c.poll(timeout=0.5)
            c.ack(batch)
            got += [(d.partition, d.offset, d.attempt) for d in batch]
        ends = time.monotonic() + grace
        while time.monotonic() < ends:
            batch = c.poll(timeout=0.2)
            c.ack(batch)
            got += [(d.partition, d.offset, d.attempt) for d in batch]
    return got


def rows_of(store: Store, sql: str, **params: object) -> list[tuple[object, ...]]:
    return db.rows(store, sql, params or None)


def group_state(store: Store, group_id: int) -> tuple[object, ...]:
    return (
        rows_of(
            store,
            "SELECT partition_no, committed_offset FROM group_offset WHERE group_id = :g",
            g=group_id,
        ),
        rows_of(
            store,
            "SELECT partition_no, offset_no, client_id, state, attempts, started_at, "
            "finished_at FROM topic_group_log WHERE group_id = :g ORDER BY id",
            g=group_id,
        ),
        rows_of(store, "SELECT * FROM retry_message WHERE group_id = :g", g=group_id),
    )


def test_a_replay_is_delivered_once_more_to_its_group_only(
    settings: Settings, store: Store, replayer: Replayer
) -> None:
    topic = TopicAdmin(settings, store=store).create("r", 2)
    producer = Producer(settings)
    producer.send_batch("r", [f"m{i}" for i in range(40)])  # round robin: 20 each
    producer.close()
    assert len(consume(settings, "a", 40)) == 40
    assert len(consume(settings, "b", 40)) == 40
    a = store.groups.get("a", topic.id)
    b = store.groups.get("b", topic.id)
    assert a is not None and b is not None
    cursors_a = store.groups.offsets(a.id)
    other = group_state(store, b.id)

    done = replayer.replay("a", replayer.range(from_offset=5, to_offset=9), partition=1)
    assert done.messages == 5 and [p.partition for p in done.partitions] == [1]
    assert store.groups.offsets(a.id) == cursors_a

    again = consume(settings, "a", 5, grace=1.5)
    assert sorted(again) == [(1, o, 2) for o in range(5, 10)]  # once each, second attempt
    assert store.groups.offsets(a.id) == cursors_a
    assert rows_of(store, "SELECT * FROM retry_message") == []
    logged = rows_of(
        store,
        "SELECT offset_no, attempts, state FROM topic_group_log WHERE group_id = :g "
        "AND partition_no = 1 AND attempts > 1 ORDER BY offset_no",
        g=a.id,
    )
    assert logged == [(o, 2, "done") for o in range(5, 10)]
    assert group_state(store, b.id) == other


@pytest.fixture
def topic(settings: Settings, store: Store) -> TopicInfo:
    """Partition 0: 0-49 at T0, 50-99 at T1 but offset 30 committed late at T2 and offset
    31 a tombstone; partition 1: 0-9 at T2. Group "a" consumed everything but partition
    0's last 10 offsets."""
    info = TopicAdmin(settings, store=store).create("r", 2)
    rows = [(o, T1 if o >= 50 else T2 if o == 30 else T0) for o in range(100)]
    insert(store, info, 0, rows, tombstones=[31])
    insert(store, info, 1, [(o, T2) for o in range(10)])
    group = ensure_group(store, "a", info, options())
    db.run(store, "UPDATE group_offset SET committed_offset = IF(partition_no = 0, 90, 10)")
    assert store.groups.offsets(group.id) == {0: 90, 1: 10}
    return info


def queued(store: Store) -> list[tuple[object, ...]]:
    return rows_of(
        store,
        "SELECT partition_no, offset_no FROM retry_message WHERE due_at <= NOW(6) "
        "ORDER BY partition_no, offset_no",
    )


def test_a_time_range_queues_exactly_the_messages_created_in_it(
    store: Store, topic: TopicInfo, replayer: Replayer
) -> None:
    span = ReplayRange(since=T1, until=T2)
    counted = replayer.replay("a", span, dry_run=True)
    assert counted.messages == 40 and queued(store) == []  # 50-89: 90-99 are not consumed yet
    assert replayer.replay("a", span).messages == 40
    assert queued(store) == [(0, o) for o in range(50, 90)]
    late = replayer.replay("a", ReplayRange(since=T2, until=T2 + dt.timedelta(seconds=1)))
    assert late.messages == 11  # offset 30 of partition 0, all of partition 1
    assert [(p.partition, p.messages) for p in late.partitions] == [(0, 1), (1, 10)]


def test_an_offset_range_skips_tombstones_and_what_the_group_has_not_consumed(
    store: Store, topic: TopicInfo, replayer: Replayer
) -> None:
    done = replayer.replay("a", replayer.range(from_offset=28, to_offset=33), partition=0)
    assert done.messages == 5
    assert queued(store) == [(0, o) for o in (28, 29, 30, 32, 33)]
    assert replayer.replay("a", replayer.range(from_offset=85), partition=0).messages == 5
    assert replayer.replay("a", replayer.range(from_offset=95), partition=0).messages == 0
    # Queued twice is queued once.
    assert replayer.replay("a", replayer.range(from_offset=28, to_offset=29), partition=0)
    assert len(queued(store)) == 10


def test_a_large_range_is_queued_in_chunks(
    store: Store, settings: Settings, replayer: Replayer, monkeypatch: pytest.MonkeyPatch
) -> None:
    info = TopicAdmin(settings, store=store).create("big", 1)
    insert(store, info, 0, [(o, T0) for o in range(250)])
    ensure_group(store, "a", info, options())
    db.run(store, "UPDATE group_offset SET committed_offset = 250")
    monkeypatch.setattr("ems.ops.replay.CHUNK", 40)
    assert replayer.replay("a", replayer.range(from_offset=0)).messages == 250
    assert replayer.replay("a", ReplayRange(since=T0, until=T1)).messages == 250
    assert queued(store) == [(0, o) for o in range(250)]


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda r: r.replay("nope", r.range(from_offset=1), partition=0), UnknownGroup),
        (lambda r: r.replay("a", r.range(from_offset=1), partition=2), UnknownPartition),
        (lambda r: r.replay("a", r.range(from_offset=1)), ConflictingOptions),
        (
            lambda r: r.replay("a", r.range(from_offset=1, to_offset=100), partition=0),
            OffsetOutOfRange,
        ),
        (lambda r: r.replay("a", r.range(from_offset=10), partition=1), OffsetOutOfRange),
        (lambda r: r.replay("o", r.range(since="1h")), UnsupportedGroup),
        (lambda r: r.replay("b", r.range(since="1h")), UnsupportedGroup),
    ],
)
def test_bad_input_queues_nothing(
    store: Store, topic: TopicInfo, replayer: Replayer, call: object, error: type[EmsError]
) -> None:
    ordered = seed.options(None, ordered=True)
    ensure_group(store, "o", topic, ordered)
    ensure_group(store, "b", topic, options(broadcast=True))
    with pytest.raises(error):
        call(replayer)  # type: ignore[operator]
    assert rows_of(store, "SELECT * FROM retry_message") == []
