"""The ems source's pure planning: rate limits and splits of offset ranges."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from spark.source.ranges import OffsetRange, from_json, rate_limit, split, to_json


@given(
    st.dictionaries(st.integers(0, 7), st.tuples(st.integers(0, 50), st.integers(0, 500))),
    st.integers(1, 400),
)
def test_a_rate_limit_keeps_within_the_limit_and_the_high_watermarks(
    parts: dict[int, tuple[int, int]], limit: int
) -> None:
    starts = {("t", p): s for p, (s, _) in parts.items()}
    highs = {("t", p): s + n for p, (s, n) in parts.items()}
    ends = rate_limit(starts, highs, limit)
    assert all(starts[p] <= ends[p] <= highs[p] for p in starts)
    available = sum(highs[p] - starts[p] for p in starts)
    assert sum(ends[p] - starts[p] for p in starts) == min(limit, available)


def test_split_cuts_ranges_in_proportion_for_min_partitions() -> None:
    big = OffsetRange(topic="t", topic_id=1, partition=0, start=0, end=90)
    small = OffsetRange(topic="t", topic_id=1, partition=1, start=5, end=15)
    empty = OffsetRange(topic="t", topic_id=1, partition=2, start=3, end=3)
    parts = split([big, small, empty], 4)
    assert [(r.partition, r.start, r.end) for r in parts] == [
        (0, 0, 22),
        (0, 22, 45),
        (0, 45, 67),
        (0, 67, 90),
        (1, 5, 15),
    ]
    assert split([big, small, empty], None) == [big, small]


def test_positions_round_trip_through_kafkas_json() -> None:
    positions = {("b", 1): 7, ("a", 0): 3}
    assert to_json(positions) == {"a": {"0": 3}, "b": {"1": 7}}
    assert from_json(to_json(positions)) == positions
