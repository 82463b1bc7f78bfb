"""The ems source's planning and reading against the real database, without Spark: where
a micro-batch ends (rate limit, holes, new partitions) and what happens to offsets that
retention purged before the query read them."""

from __future__ import annotations

import pytest

from ems.config import Settings
from ems.exceptions import ConflictingOptions, InvalidOffset, OffsetsPurged, UnknownTopic
from ems.store import Store
from spark.source.options import SourceOptions
from spark.source.planner import Planner
from spark.source.ranges import OffsetRange
from spark.source.read import read_range
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
