"""Statements on topics and partition heads."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ems.exceptions import TopicDeleting, TopicExists, UnknownPartition, UnknownTopic
from ems.store.database import Database
from ems.store.errors import DuplicateKey
from ems.store.partitions import PartitionStore
from ems.types import PartitionsAdded, PartitionStats, TopicInfo

_FIELDS = ("id", "name", "partitions", "retention_hours", "max_body_bytes", "created_at")
_COLUMNS = ", ".join(_FIELDS)
_INSERT = (
    "INSERT INTO topic (name, partitions, retention_hours, max_body_bytes) VALUES (%s, %s, %s, %s)"
)
_INSERT_HEAD = "INSERT INTO partition_head (topic_id, partition_no) VALUES (%s, %s)"
_GET = f"SELECT {_COLUMNS}, deleting_at FROM topic WHERE name = %s"
_BY_IDS = f"SELECT {_COLUMNS} FROM topic WHERE id IN ({{ids}})"
# A topic being deleted is gone for its users (its delete, run again, finishes).
_ALL = f"SELECT {_COLUMNS} FROM topic WHERE deleting_at IS NULL ORDER BY name"
# Grouping by the full key prefix lets MySQL use a loose index scan.
_BOUNDS = (
    "SELECT partition_no, MIN(offset_no), MAX(offset_no) FROM message WHERE topic_id = %s "
    "GROUP BY topic_id, partition_no"
)
_COUNTS = (
    "SELECT partition_no, COUNT(*), COALESCE(SUM(tombstone), 0) FROM message "
    "WHERE topic_id = %s GROUP BY topic_id, partition_no"
)
_LOWS = "SELECT partition_no, low_offset FROM partition_low WHERE topic_id = %s"
_ALLOCATE = (
    "UPDATE partition_head SET next_offset = LAST_INSERT_ID(next_offset + %s) "
    "WHERE topic_id = %s AND partition_no = %s"
)
_RAISE_HEAD = (
    "UPDATE partition_head SET next_offset = GREATEST(next_offset, %s) "
    "WHERE topic_id = %s AND partition_no = %s"
)


def by_ids_query(ids: Sequence[int]) -> tuple[str, tuple[object, ...]]:
    return _BY_IDS.format(ids=", ".join(["%s"] * len(ids))), tuple(ids)


def _topic(row: Sequence[Any]) -> TopicInfo:
    return TopicInfo(**dict(zip(_FIELDS, row, strict=True)))


class TopicStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def create(
        self, name: str, partitions: int, retention_hours: int, max_body_bytes: int
    ) -> TopicInfo:
        try:
            with self.db.transaction() as cursor:
                cursor.execute(_INSERT, (name, partitions, retention_hours, max_body_bytes))
                topic_id = cursor.lastrowid
                cursor.executemany(_INSERT_HEAD, [(topic_id, p) for p in range(partitions)])
        except DuplicateKey:
            raise TopicExists(f"topic {name!r} already exists") from None
        return self.get(name)

    def get(self, name: str) -> TopicInfo:
        """UnknownTopic, or TopicDeleting while a delete of it is under way."""
        rows = self.db.select(_GET, (name,))
        if not rows:
            raise UnknownTopic(f"unknown topic {name!r}")
        if rows[0][-1] is not None:
            raise TopicDeleting(f"topic {name!r} is being deleted")
        return _topic(rows[0][: len(_FIELDS)])

    def by_ids(self, topic_ids: Iterable[int]) -> dict[int, TopicInfo]:
        """The topics with these ids (ids of deleted topics are left out)."""
        ids = sorted(set(topic_ids))
        if not ids:
            return {}
        return {info.id: info for info in map(_topic, self.db.select(*by_ids_query(ids)))}

    def all(self) -> list[TopicInfo]:
        return [_topic(r) for r in self.db.select(_ALL, ())]

    def partition_changes(self, topic_id: int) -> list[PartitionsAdded]:
        """The topic's partition changes, oldest first (see ems.store.partitions)."""
        return PartitionStore(self.db).changes(topic_id)

    def partition_stats(self, topic: TopicInfo, *, exact: bool = False) -> list[PartitionStats]:
        """Watermarks from index dives. Exact counts scan the partition's index and are
        opt-in."""
        bounds = self.db.select(_BOUNDS, (topic.id,))
        found = {int(r[0]): (int(r[1]), int(r[2])) for r in bounds}
        counts = self.db.select(_COUNTS, (topic.id,)) if exact else ()
        exact_counts = {int(r[0]): (int(r[1]), int(r[2])) for r in counts}
        # A partition a purge emptied has both watermarks at its low watermark.
        for p, low in self.db.select(_LOWS, (topic.id,)):
            found.setdefault(int(p), (int(low), int(low) - 1))
        return [
            _stats(p, found.get(p), exact_counts.get(p, (0, 0)) if exact else None)
            for p in range(topic.partitions)
        ]


def _stats(
    partition: int, bounds: tuple[int, int] | None, counts: tuple[int, int] | None
) -> PartitionStats:
    low, high = (bounds[0], bounds[1] + 1) if bounds else (None, 0)
    if counts is None:
        span = high - low if low is not None else 0
        return PartitionStats(
            partition=partition,
            low_watermark=low,
            high_watermark=high,
            messages=span,
            tombstones=None,
        )
    rows, tombstones = counts
    return PartitionStats(
        partition=partition,
        low_watermark=low,
        high_watermark=high,
        messages=rows - tombstones,
        tombstones=tombstones,
    )


class HeadStore:
    """The MySQL offset allocator's statements."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def allocate(self, topic_id: int, partition: int, count: int) -> int:
        """Reserve `count` offsets and return the first. Commits at once, so the row lock is
        held for one statement only; the reader's gap rules cover abandoned ranges."""
        with self.db.single() as cursor:
            if cursor.execute(_ALLOCATE, (count, topic_id, partition)) != 1:
                raise UnknownPartition(f"topic {topic_id} has no partition {partition}")
            end = int(cursor.lastrowid)
        return end - count

    def raise_to(self, topic_id: int, next_offsets: dict[int, int]) -> None:
        with self.db.transaction() as cursor:
            for partition, floor in next_offsets.items():
                cursor.execute(_RAISE_HEAD, (floor, topic_id, partition))
