"""The ems source's planning and reading against the real database, without Spark: where
a micro-batch ends (rate limit, holes, new partitions) and what happens to offsets that
retention purged before the query read them."""

from __future__ import annotations

import datetime as dt

import pytest

from ems.config import Settings
from ems.exceptions import (
    ConflictingOptions,
    InvalidName,
    InvalidOffset,
    OffsetsPurged,
    UnknownStreamQuery,
    UnknownTopic,
)
from ems.store import Store
from ems.stream_queries import StreamQueries
from spark.source import offsets_behind
from spark.source.lag import behind
from spark.source.options import SourceOptions
from spark.source.planner import Planner
from spark.source.ranges import OffsetRange
from spark.source.read import read_range
from tests.spark.conftest import execute
from tests.spark.test_source import put, topic


def planner(settings: Settings, **options: str) -> Planner:
    given = {"subscribe": "plan", "ems.gap.timeout": "3600", **options}
    return Planner(SourceOptions.parse(given, streaming=True), settings.with_(gap_timeout=3600))


def purge(store: Store, topic_id: int, partition: int, below: int) -> None:
    store.db.select(  # the purge's two steps, as the cleanup job takes them
        "INSERT INTO partition_low (topic_id, partition_no, low_offset) VALUES (%s, %s, %s)",
        (topic_id, partition, below),
    )
    store.db.select(
        "DELETE FROM message WHERE topic_id = %s AND partition_no = %s AND offset_no < %s",
        (topic_id, partition, below),
    )


def test_a_batch_ends_within_the_limit_and_before_a_hole(settings: Settings) -> None:
    t = topic(settings, "plan", 3)
    for offset in range(10):
        put(settings, t, 0, offset)
    for offset in (0, 1, 2, 4):
        put(settings, t, 1, offset)
    p = planner(settings)
    try:
        start = p.resolve("earliest", -2)
        assert start == {("plan", 0): 0, ("plan", 1): 0, ("plan", 2): 0}
        assert p.latest(start, None) == {("plan", 0): 10, ("plan", 1): 3, ("plan", 2): 0}
        limited = p.latest(start, 6)
        assert sum(limited.values()) <= 6 and limited[("plan", 0)] > limited[("plan", 1)]
        assert p.latest({("plan", 0): 10}, None) == {
            ("plan", 0): 10,
            ("plan", 1): 0,  # joins at its earliest offset, read from the next batch on
            ("plan", 2): 0,
        }
    finally:
        p.close()


def test_purged_offsets_fail_the_query_or_are_skipped(settings: Settings, store: Store) -> None:
    t = topic(settings, "plan", 1)
    for offset in range(6):
        put(settings, t, 0, offset)
    purge(store, t, 0, 4)
    failing = planner(settings)
    skipping = planner(settings, failOnDataLoss="false")
    try:
        with pytest.raises(OffsetsPurged, match=r"offsets 1\.\.3 were purged"):
            failing.latest({("plan", 0): 1}, None)
        assert skipping.latest({("plan", 0): 1}, None) == {("plan", 0): 6}
        whole = OffsetRange(topic="plan", topic_id=t, partition=0, start=1, end=6)
        rows = read_range(store, whole, fail_on_data_loss=False, include_headers=False)
        assert [r[4] for r in rows] == [4, 5]
        with pytest.raises(OffsetsPurged, match=r"offsets 1\.\.3"):
            list(read_range(store, whole, fail_on_data_loss=True, include_headers=False))
    finally:
        failing.close()
        skipping.close()


def test_bad_options_are_refused_by_name(settings: Settings) -> None:
    with pytest.raises(ConflictingOptions):
        SourceOptions.parse({"subscribe": "a", "subscribePattern": "a.*"}, streaming=True)
    with pytest.raises(InvalidOffset, match="startingOffsets"):
        SourceOptions.parse({"subscribe": "a", "startingOffsets": "{nope"}, streaming=True)
    with pytest.raises(ValueError, match="unknown option"):
        SourceOptions.parse({"subscribe": "a", "startingOffset": "earliest"}, streaming=True)
    p = planner(settings, subscribe="missing")
    try:
        with pytest.raises(UnknownTopic):
            p.resolve("earliest", -2)
    finally:
        p.close()


def millis(settings: Settings, offset: int) -> int:
    """The stored time of the message at `offset` of partition 0, as epoch milliseconds."""
    created = execute(
        settings,
        "SELECT created_at FROM message WHERE partition_no = 0 AND offset_no = %s",
        (offset,),
    )[0][0]
    return int(created.replace(tzinfo=dt.UTC).timestamp() * 1000)


def test_starting_and_ending_timestamps_find_offsets_by_time(settings: Settings) -> None:
    t = topic(settings, "plan", 2)
    for offset, age in enumerate((300, 200, 100, 50)):
        put(settings, t, 0, offset, age=age)
    put(settings, t, 1, 0, age=400)  # nothing at or after the time in partition 1
    at = millis(settings, 1)
    found = planner(settings, startingTimestamp=str(at), startingOffsets="latest")
    lenient = planner(
        settings, startingTimestamp=str(at), startingOffsetsByTimestampStrategy="latest"
    )
    batch = Planner(
        SourceOptions.parse(
            {
                "subscribe": "plan",
                "startingTimestamp": str(at),
                "endingTimestamp": str(at + 1),
                "startingOffsetsByTimestampStrategy": "latest",
            },
            streaming=False,
        ),
        settings.with_(gap_timeout=3600),
    )
    try:
        with pytest.raises(InvalidOffset, match="partition 1 holds no message"):
            found.start()
        assert lenient.start() == {("plan", 0): 1, ("plan", 1): 1}
        assert [(r.partition, r.start, r.end) for r in batch.batch()] == [(0, 1, 2)]
    finally:
        for p in (found, lenient, batch):
            p.close()
    with pytest.raises(ConflictingOptions, match="endingTimestamp"):
        SourceOptions.parse({"subscribe": "a", "endingTimestamp": "1"}, streaming=True)
    with pytest.raises(InvalidOffset, match="startingTimestamp"):
        SourceOptions.parse({"subscribe": "a", "startingTimestamp": "soon"}, streaming=True)


def test_lag_behind_the_high_watermark_and_skipped_offsets_are_counted(
    settings: Settings, store: Store
) -> None:
    t = topic(settings, "plan", 2)
    for offset in range(10):
        put(settings, t, 0, offset)
    for offset in range(4):
        put(settings, t, 1, offset)
    purge(store, t, 1, 2)
    p = planner(settings, failOnDataLoss="false")
    try:
        end = p.latest({("plan", 0): 0, ("plan", 1): 0}, 6)
        lags = behind(end, p.highs)
        assert sum(end.values()) - 2 <= 6 and sum(lags.values()) == 14 - sum(end.values())
        assert p.skipped == 2
    finally:
        p.close()
    progress = {
        "endOffset": {"plan": {"0": 4, "1": 4}},
        "latestOffset": {"plan": {"0": 10, "1": 4}},
    }
    assert offsets_behind(progress) == {
        "avgOffsetsBehindLatest": 3.0,
        "maxOffsetsBehindLatest": 6.0,
        "minOffsetsBehindLatest": 0.0,
    }
    assert offsets_behind({"endOffset": None}) == {}


def test_a_named_query_records_its_committed_position_shown_with_its_lag(
    settings: Settings,
) -> None:
    topic_id = topic(settings, "plan", 2)
    for partition, count in ((0, 6), (1, 3)):
        for offset in range(count):
            put(settings, topic_id, partition, offset)
    source = planner(settings, **{"ems.query.name": "watcher"})
    try:
        source.record("watcher", {("plan", 0): 4, ("plan", 1): 3})
        source.record("watcher", {("plan", 0): 5, ("plan", 1): 3})  # the next commit
    finally:
        source.close()

    with StreamQueries(settings) as queries:
        (described,) = queries.describe("watcher")
        assert queries.describe() == [described]
        with pytest.raises(UnknownStreamQuery, match=r"ems\.query\.name"):
            queries.describe("nobody")
        with pytest.raises(InvalidName):
            queries.describe("no such/name")
    assert [
        (p.partition, p.committed_offset, p.high_watermark, p.lag) for p in described.partitions
    ] == [
        (0, 5, 6, 1),
        (1, 3, 3, 0),
    ]
    assert described.lag == 1
    with pytest.raises(InvalidName):
        SourceOptions.parse({"subscribe": "plan", "ems.query.name": "a b"}, streaming=True)
    with pytest.raises(ConflictingOptions, match="streaming queries only"):
        SourceOptions.parse({"subscribe": "plan", "ems.query.name": "a"}, streaming=False)


def test_a_named_query_records_the_offsets_its_committed_batches_skipped(
    settings: Settings, store: Store
) -> None:
    """failOnDataLoss=false: the offsets a planned batch skips are added to its
    partitions' rows when that batch commits (after the next one is planned, as Spark
    does), once, however often the same end is committed."""
    t = topic(settings, "plan", 2)
    for offset in range(6):
        put(settings, t, 0, offset)
        put(settings, t, 1, offset)
    purge(store, t, 1, 2)
    p = planner(settings, failOnDataLoss="false", **{"ems.query.name": "lossy"})
    try:
        first = p.latest({("plan", 0): 0, ("plan", 1): 0}, 4)
        purge(store, t, 0, 5)  # past the first batch's end: the second skips some
        second = p.latest(first, None)
        p.record("lossy", first)
        p.record("lossy", first)  # committed again: nothing more
        p.record("lossy", second)
    finally:
        p.close()
    skipped_then = 5 - first[("plan", 0)]
    assert skipped_then > 0
    with StreamQueries(settings) as queries:
        (described,) = queries.describe("lossy")
    by_partition = {q.partition: q.skipped_offsets for q in described.partitions}
    assert by_partition == {0: skipped_then, 1: 2}
    assert described.skipped_offsets == skipped_then + 2
    assert {q.partition: q.committed_offset for q in described.partitions} == {0: 6, 1: 6}
