"""Statements on topics and partition heads."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import func, insert, select, update

from ems.exceptions import TopicDeleting, TopicExists, UnknownPartition, UnknownTopic
from ems.models import Message, PartitionHead, PartitionLow, Topic
from ems.store.database import Database
from ems.store.errors import DuplicateKey
from ems.store.partitions import PartitionStore
from ems.types import PartitionsAdded, PartitionStats, TopicInfo

_TOPIC_COLUMNS = (
    Topic.id,
    Topic.name,
    Topic.partitions,
    Topic.retention_hours,
    Topic.max_body_bytes,
    Topic.created_at,
)
_FIELDS = ("id", "name", "partitions", "retention_hours", "max_body_bytes", "created_at")


def _topic(row: Sequence[Any]) -> TopicInfo:
    return TopicInfo(**dict(zip(_FIELDS, row, strict=True)))


class TopicStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def create(
        self, name: str, partitions: int, retention_hours: int, max_body_bytes: int
    ) -> TopicInfo:
        try:
            with self.db.connect() as conn:
                result = conn.execute(
                    insert(Topic).values(
                        name=name,
                        partitions=partitions,
                        retention_hours=retention_hours,
                        max_body_bytes=max_body_bytes,
                    )
                )
                topic_id = result.lastrowid
                conn.execute(
                    insert(PartitionHead),
                    [{"topic_id": topic_id, "partition_no": p} for p in range(partitions)],
                )
        except DuplicateKey:
            raise TopicExists(f"topic {name!r} already exists") from None
        return self.get(name)

    def get(self, name: str) -> TopicInfo:
        """UnknownTopic, or TopicDeleting while a delete of it is under way."""
        with self.db.connect() as conn:
            row = conn.execute(
                select(*_TOPIC_COLUMNS, Topic.deleting_at).where(Topic.name == name)
            ).first()
        if row is None:
            raise UnknownTopic(f"unknown topic {name!r}")
        if row.deleting_at is not None:
            raise TopicDeleting(f"topic {name!r} is being deleted")
        return _topic(row[: len(_TOPIC_COLUMNS)])

    def by_ids(self, topic_ids: Iterable[int]) -> dict[int, TopicInfo]:
        """The topics with these ids (ids of deleted topics are left out)."""
        ids = sorted(set(topic_ids))
        if not ids:
            return {}
        with self.db.connect() as conn:
            rows = conn.execute(select(*_TOPIC_COLUMNS).where(Topic.id.in_(ids)))
            return {info.id: info for info in map(_topic, rows)}

    def all(self) -> list[TopicInfo]:
        with self.db.connect() as conn:
            # A topic being deleted is gone for its users (its delete, run again, finishes).
            live = select(*_TOPIC_COLUMNS).where(Topic.deleting_at.is_(None))
            return [_topic(r) for r in conn.execute(live.order_by(Topic.name))]

    def partition_changes(self, topic_id: int) -> list[PartitionsAdded]:
        """The topic's partition changes, oldest first (see ems.store.partitions)."""
        return PartitionStore(self.db).changes(topic_id)

    def partition_stats(self, topic: TopicInfo, *, exact: bool = False) -> list[PartitionStats]:
        """Watermarks from index dives (grouping by the full key prefix lets MySQL use a
        loose index scan). Exact counts scan the partition's index and are opt-in."""
        m = Message
        bounds = (
            select(m.partition_no, func.min(m.offset_no), func.max(m.offset_no))
            .where(m.topic_id == topic.id)
            .group_by(m.topic_id, m.partition_no)
        )
        counts = (
            select(m.partition_no, func.count(), func.coalesce(func.sum(m.tombstone), 0))
            .where(m.topic_id == topic.id)
            .group_by(m.topic_id, m.partition_no)
        )
        with self.db.connect() as conn:
            found = {int(r[0]): (int(r[1]), int(r[2])) for r in conn.execute(bounds)}
            exact_counts = (
                {int(r[0]): (int(r[1]), int(r[2])) for r in conn.execute(counts)} if exact else {}
            )
            # A partition a purge emptied has both watermarks at its low watermark.
            lows = select(PartitionLow.partition_no, PartitionLow.low_offset).where(
                PartitionLow.topic_id == topic.id
            )
            for p, low in conn.execute(lows):
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

    _ALLOCATE = (
        "UPDATE partition_head SET next_offset = LAST_INSERT_ID(next_offset + %s) "
        "WHERE topic_id = %s AND partition_no = %s"
    )

    def __init__(self, db: Database) -> None:
        self.db = db

    def allocate(self, topic_id: int, partition: int, count: int) -> int:
        """Reserve `count` offsets and return the first. Commits at once, so the row lock is
        held for one statement only; the reader's gap rules cover abandoned ranges."""
        with self.db.connect() as conn:
            result = conn.exec_driver_sql(self._ALLOCATE, (count, topic_id, partition))
            if result.rowcount != 1:
                raise UnknownPartition(f"topic {topic_id} has no partition {partition}")
            end = int(result.lastrowid)
        return end - count

    def raise_to(self, topic_id: int, next_offsets: dict[int, int]) -> None:
        head = PartitionHead
        with self.db.connect() as conn:
            for partition, floor in next_offsets.items():
                conn.execute(
                    update(head)
                    .where(head.topic_id == topic_id, head.partition_no == partition)
                    .values(next_offset=func.greatest(head.next_offset, floor))
                )
