"""Reads the gap-free prefix of a partition and resolves old holes with tombstones."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import suppress
from operator import itemgetter
from typing import NamedTuple

from ems.config import Settings
from ems.exceptions import InvalidOffset, UnknownPartition
from ems.offsets.budget import mean_size, rows_to_scan
from ems.offsets.gaps import plan_read
from ems.ports import MessageLog
from ems.store import Store
from ems.store.client import StoreClient
from ems.store.errors import DuplicateKey
from ems.types import (
    ROW_BODY,
    ROW_CREATED_AT,
    ROW_HEADERS,
    ROW_OFFSET,
    ROW_TOMBSTONE,
    DeliveryBatch,
    FetchedRows,
    MessageRow,
    PartitionBatch,
    TopicInfo,
    deliveries,
    stored_messages,
)
from ems.validation import (
    DEFAULT_BATCH_BYTES,
    MAX_BATCH_BYTES,
    check_name,
    check_positive_int,
)
from ems.values.fetch import decode_headers

#: Fetch, fill, fetch again: a hole needs at most a couple of rounds before data shows.
_ROUNDS = 4
_BODY = itemgetter(ROW_BODY)
_TOMBSTONE = itemgetter(ROW_TOMBSTONE)


class _Prefix(NamedTuple):
    """The gap-free prefix of a read, tombstones dropped, before it becomes messages."""

    rows: Sequence[MessageRow]
    next_offset: int
    more: bool = False
    partitions: int | None = None


def _delivery_batch(topic: TopicInfo, partition: int, found: _Prefix) -> DeliveryBatch:
    """A read's prefix as first deliveries."""
    headers = decode_headers([r[ROW_HEADERS] for r in found.rows])
    return DeliveryBatch(
        deliveries=deliveries(topic.name, partition, found.rows, headers),
        next_offset=found.next_offset,
        more=found.more,
        partitions=found.partitions,
    )


class PartitionReader:
    def __init__(self, messages: MessageLog, gap_timeout: float) -> None:
        self.messages = messages
        self.gap_timeout = gap_timeout
        #: (topic id, partition) -> mean body size of the messages its last read returned.
        self._sizes: dict[tuple[int, int], int] = {}

    def read(
        self,
        topic_id: int,
        partition: int,
        from_offset: int,
        limit: int,
        max_bytes: int = DEFAULT_BATCH_BYTES,
        *,
        at_least_one: bool = True,
    ) -> PartitionBatch:
        """Messages from from_offset on, stopping at the first hole younger than the gap
        timeout, after `limit` rows, or once their bodies would pass max_bytes (with
        at_least_one, the first message comes whatever its size). next_offset moves past
        tombstones as well as messages; a read cut by the budget is no hole: it ends
        before the first offset it did not return, and says there is more."""
        found = self._prefix(topic_id, partition, from_offset, limit, max_bytes, at_least_one)
        headers = decode_headers([r[ROW_HEADERS] for r in found.rows])
        return PartitionBatch(
            partition=partition,
            messages=stored_messages(topic_id, partition, found.rows, headers),
            next_offset=found.next_offset,
            more=found.more,
            partitions=found.partitions,
        )

    def read_deliveries(
        self,
        topic: TopicInfo,
        partition: int,
        from_offset: int,
        limit: int,
        max_bytes: int = DEFAULT_BATCH_BYTES,
        *,
        at_least_one: bool = True,
    ) -> DeliveryBatch:
        """read(), its messages as first deliveries: the consume path's read."""
        found = self._prefix(topic.id, partition, from_offset, limit, max_bytes, at_least_one)
        return _delivery_batch(topic, partition, found)

    def read_deliveries_many(
        self,
        topic: TopicInfo,
        reads: Sequence[tuple[int, int, int]],
        max_bytes: int = DEFAULT_BATCH_BYTES,
        *,
        at_least_one: bool = True,
    ) -> dict[int, DeliveryBatch]:
        """read_deliveries() of each (partition, from_offset, limit), each with the whole
        budget of max_bytes, in one statement: a partition whose rows are not one run
        from its offset (a hole) goes on by read()'s rule from the rows this statement
        read, and is read again only where that rule reads again."""
        scans = [(p, at, self._rows_to_scan((topic.id, p), n, max_bytes)) for p, at, n in reads]
        fetched = self.messages.fetch_rows_many(
            topic.id, scans, max_bytes, at_least_one=at_least_one
        )
        out = {}
        for (partition, at, scan), (_, _, limit) in zip(scans, reads, strict=True):
            found = self._run(topic.id, partition, at, scan, fetched[partition])
            if found is None:  # a hole: by read()'s rule, from the rows read
                found = self._prefix(
                    topic.id, partition, at, limit, max_bytes, at_least_one, fetched[partition]
                )
            out[partition] = _delivery_batch(topic, partition, found)
        return out

    def _run(
        self, topic_id: int, partition: int, at: int, scan: int, fetched: FetchedRows
    ) -> _Prefix | None:
        """The prefix of rows that are one run from `at` (or none at all); None when they
        are not: a hole, which only _prefix resolves."""
        rows = fetched.rows
        if rows and rows[-1][ROW_OFFSET] - at != len(rows) - 1:
            return None
        tombstones = any(map(_TOMBSTONE, rows))
        self._learn((topic_id, partition), rows, tombstones)
        return _Prefix(
            rows=[r for r in rows if not r[ROW_TOMBSTONE]] if tombstones else rows,
            next_offset=at + len(rows),
            more=fetched.cut or len(rows) >= scan,
            partitions=fetched.partitions,
        )

    def _prefix(
        self,
        topic_id: int,
        partition: int,
        from_offset: int,
        limit: int,
        max_bytes: int,
        at_least_one: bool,
        read: FetchedRows | None = None,
    ) -> _Prefix:
        """The gap-free prefix from from_offset. `read`: this read's first fetch, made
        already (by read_deliveries_many, with the same scan and budget)."""
        if isinstance(from_offset, bool) or not isinstance(from_offset, int) or from_offset < 0:
            raise InvalidOffset(f"offset must be a non-negative integer, not {from_offset!r}")
        if limit < 1:
            raise InvalidOffset(f"limit must be at least 1, not {limit!r}")
        if max_bytes < 1:
            raise InvalidOffset(f"max_bytes must be at least 1, not {max_bytes!r}")
        key = (topic_id, partition)
        scan = self._rows_to_scan(key, limit, max_bytes)
        for _ in range(_ROUNDS):
            if read is None:
                fetched = self.messages.fetch_rows(
                    topic_id, partition, from_offset, scan, max_bytes, at_least_one=at_least_one
                )
            else:
                fetched, read = read, None
            run = self._run(topic_id, partition, from_offset, scan, fetched)
            if run is not None:
                return run
            rows = fetched.rows
            tombstones = any(map(_TOMBSTONE, rows))
            self._learn(key, rows, tombstones)
            keys = [(r[ROW_OFFSET], r[ROW_CREATED_AT]) for r in rows]
            plan = plan_read(keys, from_offset, None, self.gap_timeout)
            if not plan.ready:
                # A hole right at the position. If a purge removed it, jump to the low
                # watermark rather than fill the purged range with tombstones; only
                # this path reads the watermark, so the hot path pays nothing for it.
                low = self.messages.low_offset(topic_id, partition)
                if low is not None and low > from_offset:
                    from_offset = low
                    continue
                # Only now does the hole's age matter, so only now is the clock read.
                plan = plan_read(keys, from_offset, self.messages.now(), self.gap_timeout)
            if plan.ready or plan.fill is None:
                prefix = rows[: plan.ready]
                return _Prefix(
                    rows=[r for r in prefix if not r[ROW_TOMBSTONE]] if tombstones else prefix,
                    next_offset=from_offset + plan.ready,
                    # Rows with a hole: it is where the read stopped, not at a bound.
                    more=False,
                    partitions=fetched.partitions,
                )
            first, end = plan.fill
            # A late producer (or another reader) may get there first; then read again.
            with suppress(DuplicateKey):
                self.messages.insert_tombstones(topic_id, partition, range(first, end))
        return _Prefix(rows=[], next_offset=from_offset)

    def _rows_to_scan(self, key: tuple[int, int], limit: int, max_bytes: int) -> int:
        return rows_to_scan(self._sizes.get(key), limit, max_bytes)

    def _learn(self, key: tuple[int, int], rows: Sequence[MessageRow], tombstones: bool) -> None:
        if tombstones:
            bodies = [r[ROW_BODY] for r in rows if not r[ROW_TOMBSTONE]]
        else:
            bodies = list(map(_BODY, rows))
        size = mean_size(bodies)
        if size is not None:
            self._sizes[key] = size


class Reader(StoreClient):
    """Reads partitions of topics by name; the primitive consumers are built on."""

    def __init__(self, settings: Settings | None = None, *, store: Store | None = None) -> None:
        super().__init__(settings, store=store)
        self._partitions = PartitionReader(self.store.messages, self.settings.gap_timeout)
        self._topics: dict[str, TopicInfo] = {}

    def topic(self, name: str) -> TopicInfo:
        info = self._topics.get(name)
        if info is None:
            info = self._topics[name] = self.store.topics.get(check_name(name, "topic"))
        return info

    def read_partition(
        self,
        topic: str,
        partition: int,
        from_offset: int,
        limit: int = 500,
        max_bytes: int = DEFAULT_BATCH_BYTES,
    ) -> PartitionBatch:
        """The gap-free run of messages at from_offset and after (Kafka position semantics:
        from_offset is the next offset to read): at most `limit` of them, and only while
        their bodies total at most max_bytes (the first message comes whatever its
        size). Continue from batch.next_offset."""
        info = self.check_partition(topic, partition)
        check_positive_int(max_bytes, "max_bytes", MAX_BATCH_BYTES)
        return self._partitions.read(info.id, partition, from_offset, limit, max_bytes)

    def check_partition(self, topic: str, partition: object) -> TopicInfo:
        """The topic, if it has this partition; UnknownTopic or UnknownPartition if not."""
        info = self.topic(topic)
        if (
            isinstance(partition, bool)
            or not isinstance(partition, int)
            or not (0 <= partition < info.partitions)
        ):
            raise UnknownPartition(f"topic {topic!r} has no partition {partition!r}")
        return info

    def high_watermarks(self, topic: str) -> dict[int, int]:
        return self.store.messages.high_watermarks(self.topic(topic))
