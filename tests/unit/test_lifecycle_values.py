"""The producer's topic cache ages out after the metadata age; the delete fence is seen."""

from __future__ import annotations

import datetime as dt

import pytest

from ems.exceptions import TopicDeleting
from ems.producer.metadata import TopicCache
from ems.types import TopicInfo
from ems.values.lifecycle import DELETE_FENCE, check_not_fenced, chunk_rows

INFO = TopicInfo(
    id=1,
    name="t",
    partitions=2,
    retention_hours=1,
    max_body_bytes=10,
    created_at=dt.datetime(2026, 1, 1),
)


def test_a_cached_topic_is_used_until_the_metadata_age_then_looked_up_again() -> None:
    now = [100.0]
    cache = TopicCache(30.0, clock=lambda: now[0])
    assert cache.get("t") is None
    cache.put("t", INFO)
    now[0] += 29.9
    assert cache.get("t") == INFO
    now[0] += 0.1
    assert cache.get("t") is None
    assert cache.previous("t") == INFO


def test_the_fence_raises_topic_deleting_and_ordinary_watermarks_do_not() -> None:
    check_not_fenced(1, {0: 5, 1: 10**12})
    with pytest.raises(TopicDeleting):
        check_not_fenced(1, {0: 5, 1: DELETE_FENCE})


def test_chunk_rows_is_bounded() -> None:
    assert (chunk_rows(0), chunk_rows(50), chunk_rows(10**6)) == (1, 50, 10_000)
