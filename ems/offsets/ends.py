"""Where a range of a partition may end, planned ahead of the read and without bodies.

A reader that plans ranges for others to read later (Spark's driver plans, its executors
read) must end each range where a partition reader would stop: at the gap-free prefix,
never past a hole a late commit may still fill. The rule is PartitionReader's own, run
here over the keys of the rows only (MessageStore.fetch_keys), so planning moves no body;
old holes are closed with tombstones on the way, as every reader closes them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence

from ems.offsets.reader import PartitionReader
from ems.store.messages import MessageStore
from ems.types import FetchedRows, TopicInfo
from ems.validation import MAX_BATCH_BYTES

#: Keys read per statement while planning a range.
PLAN_ROWS = 10_000


class KeysOnly:
    """The message log a partition reader needs, whose fetch returns keys without bodies."""

    def __init__(self, messages: MessageStore) -> None:
        self.messages = messages

    def fetch_rows(
        self,
        topic_id: int,
        partition: int,
        from_offset: int,
        limit: int,
        max_bytes: int,
        *,
        at_least_one: bool = True,
    ) -> FetchedRows:
        keys = self.messages.fetch_keys(topic_id, partition, from_offset, limit)
        return FetchedRows(
            rows=[(m.id, m.offset, None, None, b"", m.created_at, m.tombstone) for m in keys]
        )

    def fetch_rows_many(
        self,
        topic_id: int,
        reads: Sequence[tuple[int, int, int]],
        max_bytes: int,
        *,
        at_least_one: bool = True,
    ) -> dict[int, FetchedRows]:
        return {p: self.fetch_rows(topic_id, p, at, limit, max_bytes) for p, at, limit in reads}

    def low_offset(self, topic_id: int, partition: int) -> int | None:
        return self.messages.low_offset(topic_id, partition)

    def low_offsets(self, topic_id: int) -> dict[int, int]:
        return self.messages.low_offsets(topic_id)

    def now(self) -> dt.datetime:
        return self.messages.now()

    def insert_tombstones(self, topic_id: int, partition: int, offsets: Iterable[int]) -> None:
        self.messages.insert_tombstones(topic_id, partition, offsets)

    def high_watermarks(self, topic: TopicInfo) -> dict[int, int]:
        return self.messages.high_watermarks(topic)


class RangePlanner:
    """The gap-free ends of partition ranges, by the partition reader's rule."""

    def __init__(self, messages: MessageStore, gap_timeout: float) -> None:
        self._reader = PartitionReader(KeysOnly(messages), gap_timeout)

    def gap_free_end(self, topic_id: int, partition: int, start: int, bound: int) -> int:
        """The end of the gap-free run of offsets at `start`, at most `bound` (exclusive),
        tombstones counted in. A range a purge removed at `start` is jumped over as a
        partition reader jumps it (callers that must report a loss check the low
        watermark first)."""
        position = start
        while position < bound:
            limit = min(PLAN_ROWS, bound - position)
            batch = self._reader.read(
                topic_id, partition, position, limit, MAX_BATCH_BYTES, at_least_one=True
            )
            if batch.next_offset == position:
                break
            # Also when the read ended early: at a hole it saw only after the rows before
            # it, which the next read from there closes if it is old enough.
            position = batch.next_offset
        return position
