"""Which partitions a fetch reads together, and a read cut to the batch's bounds."""

from __future__ import annotations

import datetime as dt

from hypothesis import given
from hypothesis import strategies as st

from ems.consumer.reads import SLACK, read_together, within
from ems.consumer.state import PartitionState
from ems.types import DeliveryBatch, delivery
from ems.values.fetch import within_budget

T0 = dt.datetime(2026, 1, 1)


def state(partition: int, position: int, announced: int = -1) -> PartitionState:
    return PartitionState(
        partition=partition,
        generation=1,
        position=position,
        committed=position,
        announced=announced,
    )


def test_partitions_whose_news_fit_the_room_are_read_together() -> None:
    states = [state(0, 10, 12), state(1, 0, 0), state(2, 5), state(3, 7, 6), state(4, 0, 4)]
    # 2 knows nothing, 3 has read what was announced; 0, 1 and 4 hold 3 + 1 + 5.
    assert read_together(states, 100) == {0: 3 + SLACK, 1: 1 + SLACK, 4: 5 + SLACK}
    # Room for 4 messages: 0 and 1 fit, 4 does not.
    assert read_together(states, 4) == {0: 3 + SLACK, 1: 1 + SLACK}


def test_one_partition_alone_is_no_read_together() -> None:
    assert read_together([state(0, 0, 3), state(1, 0)], 100) == {}
    assert read_together([state(0, 0, 3), state(1, 0, 300)], 100) == {}
    assert read_together([], 100) == {}


def _batch(sizes: list[int], first: int = 10, more: bool = False) -> DeliveryBatch:
    found = [
        delivery("t", 0, first + i, None, {}, b"x" * size, T0, 1, first + i)
        for i, size in enumerate(sizes)
    ]
    return DeliveryBatch(deliveries=found, next_offset=first + len(sizes) + 2, more=more)


def test_a_read_within_its_bounds_is_kept_whole() -> None:
    read = _batch([10, 10, 10])
    assert within(read, 3, 30, False) is read


def test_a_read_cut_by_room_or_bytes_ends_at_the_first_left_out() -> None:
    cut = within(_batch([10, 10, 10]), 2, 1000, False)
    assert [d.offset for d in cut.deliveries] == [10, 11]
    assert (cut.next_offset, cut.more) == (12, True)
    cut = within(_batch([10, 10, 10]), 5, 25, False)
    assert [d.offset for d in cut.deliveries] == [10, 11] and cut.next_offset == 12
    none = within(_batch([100, 10]), 5, 50, False)
    assert none.deliveries == [] and (none.next_offset, none.more) == (10, True)
    first = within(_batch([100, 10]), 5, 50, True)  # the batch's first comes whatever its size
    assert [d.offset for d in first.deliveries] == [10] and first.next_offset == 11


@given(
    st.lists(st.integers(0, 50), max_size=8),
    st.integers(0, 10),
    st.integers(1, 200),
    st.booleans(),
)
def test_a_cut_keeps_the_longest_prefix_within_both_bounds(
    sizes: list[int], room: int, max_bytes: int, first: bool
) -> None:
    read = _batch(sizes)
    cut = within(read, room, max_bytes, first)
    kept = len(cut.deliveries)
    assert cut.deliveries == read.deliveries[:kept]
    assert kept == min(room, within_budget(sizes, max_bytes, first))
    if kept < len(sizes):
        assert cut.next_offset == read.deliveries[kept].offset and cut.more
    else:
        assert (cut.next_offset, cut.more) == (read.next_offset, read.more)
