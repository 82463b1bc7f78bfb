"""The partition reader's byte budget on the in-memory twin: how many rows it asks the
store to scan, and what it promises about the rest."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ems.offsets.budget import rows_to_scan
from ems.offsets.reader import PartitionReader
from ems.testing import MemoryStore
from ems.testing.messages import MemoryMessages
from ems.types import Fetched
from ems.values.fetch import within_budget

KIB = 1024


class Recording(MemoryMessages):
    """The twin's message table, remembering the row limit of every fetch."""

    def __init__(self, store: MemoryStore) -> None:
        super().__init__(store.tables)
        self.limits: list[int] = []

    def fetch(
        self,
        topic_id: int,
        partition: int,
        from_offset: int,
        limit: int,
        max_bytes: int,
        *,
        at_least_one: bool = True,
    ) -> Fetched:
        self.limits.append(limit)
        return super().fetch(
            topic_id, partition, from_offset, limit, max_bytes, at_least_one=at_least_one
        )


def _reader(sizes: list[int]) -> tuple[PartitionReader, Recording, int]:
    store = MemoryStore()
    topic = store.topics.create("t", 1, 24, 1 << 20)
    for offset, size in enumerate(sizes):
        store.messages.put(topic, 0, offset, b"x" * size)
    messages = Recording(store)
    return PartitionReader(messages, gap_timeout=60), messages, topic.id


def test_once_the_body_size_is_known_a_read_scans_only_what_its_budget_can_take() -> None:
    # The server reads a large body to sum its length: 500 rows scanned for the 4 that
    # fit would read the partition over a hundred times.
    reader, messages, topic = _reader([256 * KIB] * 40)
    first = reader.read(topic, 0, 0, 500, 1024 * KIB)
    second = reader.read(topic, 0, first.next_offset, 500, 1024 * KIB)
    assert [len(first.messages), len(second.messages)] == [4, 4]
    assert messages.limits == [500, 4 + 2 + 2]
    assert second.more and second.next_offset == 8


def test_a_scan_that_ends_at_its_row_limit_promises_more() -> None:
    # Sizes shrink: the scan sized for large bodies ends before the budget is spent.
    reader, messages, topic = _reader([100 * KIB] * 2 + [KIB] * 30)
    at, batches = 0, []
    while True:
        batch = reader.read(topic, 0, at, 500, 200 * KIB)
        batches.append(len(batch.messages))
        at = batch.next_offset
        if not batch.more:
            break
    # 2 of 100 KiB; then 5 rows of 1 KiB, the limit sized for 100 KiB bodies; then the
    # rest, at the limit sized for 1 KiB.
    assert (batches, at) == ([2, 5, 25], 32)
    assert messages.limits == [500, 2 + 1 + 2, 200 + 100 + 2]


def test_small_bodies_keep_the_full_row_limit() -> None:
    reader, messages, topic = _reader([256] * 1200)
    for at in (0, 500):
        assert len(reader.read(topic, 0, at, 500, 4096 * KIB).messages) == 500
    assert messages.limits == [500, 500]


@given(
    sizes=st.lists(st.integers(0, 5000), max_size=30),
    budget=st.integers(1, 20_000),
    at_least_one=st.booleans(),
)
def test_a_fetch_keeps_the_longest_prefix_within_the_budget(
    sizes: list[int], budget: int, at_least_one: bool
) -> None:
    kept = within_budget(sizes, budget, at_least_one)
    taken = sizes[:kept]
    over = sum(taken) > budget
    # Past the budget only with at_least_one, and then by its first body alone.
    assert not over or (at_least_one and sum(taken) == taken[-1])
    if kept < len(sizes):  # the next row would pass the budget, and not as the first body
        assert sum(sizes[: kept + 1]) > budget
        assert not (at_least_one and sum(taken) == 0)


@given(size=st.integers(1, 16 << 20), limit=st.integers(1, 10_000), budget=st.integers(1, 1 << 30))
def test_a_scan_covers_what_the_budget_takes_at_the_known_size(
    size: int, limit: int, budget: int
) -> None:
    scan = rows_to_scan(size, limit, budget)
    assert 1 <= scan <= limit
    assert scan == limit or scan > budget // size  # one row more than fits, to see the cut
