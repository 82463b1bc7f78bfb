"""The partitions' time index against the real schema: segments stop at a hole and go on
once it is filled, tombstones carry no time, and the first offset at or after a time is
exact (the same as a scan of the whole partition) however late producers committed."""

from __future__ import annotations

import datetime as dt
import random

import pytest

from ems import TopicAdmin
from ems.config import Settings
from ems.maintenance.housekeeping import time_index
from ems.store import Store
from ems.store.resets import FIRST_BY_OFFSET
from ems.store.time_index import SEGMENT_AT, SEGMENT_ROWS
from ems.types import TopicInfo
from tests import sql as db
from tests.integration import seed

T0 = dt.datetime(2026, 11, 1, 12, 0)


@pytest.fixture
def topic(settings: Settings, store: Store) -> TopicInfo:
    return TopicAdmin(settings, store=store).create("t", 2)


def insert(store: Store, topic: TopicInfo, rows: list[tuple[int, dt.datetime, bool]]) -> None:
    """Rows (offset, created_at, tombstone) of partition 0."""
    db.run_many(
        store,
        "INSERT INTO message (topic_id, partition_no, offset_no, body, tombstone, created_at) "
        "VALUES (%s, 0, %s, 'x', %s, %s)",
        [(topic.id, o, t, c) for o, c, t in rows],
    )


def late_commits(offsets: range, seed_: int) -> list[tuple[int, dt.datetime, bool]]:
    """Times that mostly grow with the offset, but one row in ten committed up to 30 s
    late (a later time at a lower offset), many rows sharing a timestamp, and a tombstone
    now and then."""
    rng = random.Random(seed_)
    rows = []
    for o in offsets:
        at = T0 + dt.timedelta(seconds=o // 4)  # four rows a second: shared timestamps
        if rng.random() < 0.1:
            at += dt.timedelta(seconds=rng.randint(1, 30))
        rows.append((o, at, rng.random() < 0.02))
    return rows


def scan(rows: list[tuple[int, dt.datetime, bool]], at: dt.datetime, earliest: int) -> int | None:
    found = [o for o, c, t in rows if not t and c >= at and o >= earliest]
    return min(found) if found else None


def first_at(store: Store, topic: TopicInfo, at: dt.datetime, earliest: int = 0) -> int | None:
    high = store.messages.high_watermarks(topic)[0]
    return store.resets.first_at(topic.id, 0, at, earliest, high)


def times(rows: list[tuple[int, dt.datetime, bool]]) -> list[dt.datetime]:
    """Every distinct time, a microsecond either side of some, and times past the end."""
    found = sorted({c for _, c, _ in rows})
    return [
        T0 - dt.timedelta(seconds=1),
        *found[::7],
        *(c + dt.timedelta(microseconds=1) for c in found[::11]),
        found[-1],
        found[-1] + dt.timedelta(seconds=1),
    ]


def test_the_first_offset_at_a_time_is_exact_with_and_without_the_index(
    store: Store, topic: TopicInfo
) -> None:
    rows = late_commits(range(3500), 1)
    insert(store, topic, rows)
    without = {at: first_at(store, topic, at) for at in times(rows)}
    assert store.time_index.extend(topic.id, 0, None, 10_000) == 3 * SEGMENT_ROWS
    assert store.time_index.end(topic.id, 0) == 3 * SEGMENT_ROWS
    for at in times(rows):
        expected = scan(rows, at, 0)
        assert without[at] == expected, at
        assert first_at(store, topic, at) == expected, at
        assert first_at(store, topic, at, earliest=1234) == scan(rows, at, 1234), at


def test_the_index_stops_at_a_hole_and_goes_on_once_it_is_filled(
    store: Store, topic: TopicInfo
) -> None:
    rows = late_commits(range(3000), 2)
    hole = 1500
    insert(store, topic, [r for r in rows if r[0] != hole])
    assert store.time_index.extend(topic.id, 0, None, 10_000) == SEGMENT_ROWS
    assert store.time_index.extend(topic.id, 0, None, 10_000) == 0  # nothing new yet
    # A row may still come at 1500: the answer there must not come from a stale index.
    late = (hole, rows[-1][1] + dt.timedelta(seconds=60), False)
    insert(store, topic, [late])
    assert store.time_index.extend(topic.id, 0, None, 10_000) == 2 * SEGMENT_ROWS
    everything = [r for r in rows if r[0] != hole] + [late]
    for at in times(everything):
        assert first_at(store, topic, at) == scan(everything, at, 0), at


def test_the_time_index_job_extends_the_index_and_a_purge_moves_it_on(
    settings: Settings, store: Store, topic: TopicInfo
) -> None:
    rows = late_commits(range(2500), 3)
    insert(store, topic, rows)
    assert time_index(store, settings) == {"offsets_indexed": 2 * SEGMENT_ROWS}
    # Retention purged the first 2,300 offsets: the index goes on from the low watermark.
    seed.sql(store, "DELETE FROM message WHERE topic_id = %s AND offset_no < 2300", (topic.id,))
    seed.sql(
        store,
        "INSERT INTO partition_low (topic_id, partition_no, low_offset) VALUES (%s, 0, 2300)",
        (topic.id,),
    )
    more = late_commits(range(2500, 4300), 4)
    insert(store, topic, more)
    assert time_index(store, settings) == {"offsets_indexed": 2 * SEGMENT_ROWS}
    assert store.time_index.end(topic.id, 0) == 4300
    assert seed.sql(store, "SELECT MIN(end_offset) FROM message_time_index")[0][0] == 3300
    kept = [r for r in rows + more if r[0] >= 2300]
    for at in times(kept):
        assert first_at(store, topic, at, earliest=2300) == scan(kept, at, 2300), at


def test_a_lookup_is_an_index_dive_and_one_segment_read(store: Store, topic: TopicInfo) -> None:
    rows = late_commits(range(6000), 5)
    insert(store, topic, rows)
    store.time_index.extend(topic.id, 0, None, 10_000)
    seed.sql(store, "ANALYZE TABLE message_time_index, message")
    (dive,) = seed.explain(store, SEGMENT_AT, (topic.id, 0, T0 + dt.timedelta(minutes=10)))
    assert dive["key"] == "ix_message_time_index_prefix_max", dive
    start, end = store.time_index.segment_at(topic.id, 0, T0 + dt.timedelta(minutes=10)) or (0, 0)
    assert end - start == SEGMENT_ROWS
    (read,) = seed.explain(store, FIRST_BY_OFFSET, (topic.id, 0, start, end - 1, T0))
    assert read["key"] == "PRIMARY", read
    assert int(read["rows"]) <= 2 * SEGMENT_ROWS, read
