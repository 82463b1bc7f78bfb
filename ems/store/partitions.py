"""Statements of adding partitions to a topic, and the changes ordered groups read.

The change runs in one transaction that takes the topic row FOR UPDATE (changes take
turns), then writes the new count on the partition_low row of every old partition,
creating the missing ones (low watermark 0), under X locks, and moves every old
partition's fence on (ems.store.fences). A producer's row holds its partition's fence
under a shared lock until it commits (the escaped path reads the partition_low rows with
a locking read instead; a missing row is gap-locked, which the change's insert of it
waits for), so the change waits for inserts in progress, and inserts that come after it
are refused and checked again against the new count: one routed by the old count is
refused (and routed again by the producer). The high watermarks read after that
therefore split each old partition exactly: rows below were routed by the old count, rows
at or past it by the new one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ems.exceptions import PartitionsNotAdded, PlanChanged, UnknownTopic
from ems.store import fences
from ems.store.database import Database
from ems.types import PartitionsAdded, TopicInfo

_LOCK_TOPIC = (
    "SELECT id, name, partitions, retention_hours, max_body_bytes, created_at FROM topic "
    "WHERE name = %s FOR UPDATE"
)
_HIGHS = (
    "SELECT partition_no, MAX(offset_no) + 1 FROM message WHERE topic_id = %s "
    "GROUP BY topic_id, partition_no"
)
_LOWS = "SELECT partition_no, low_offset FROM partition_low WHERE topic_id = %s"
_RAISE = "UPDATE topic SET partitions = %s WHERE id = %s"
# A new partition needs no row: only the new count routes rows to it.
_FENCE = (
    "INSERT INTO partition_low (topic_id, partition_no, low_offset, partitions) "
    "VALUES (%s, %s, 0, %s) ON DUPLICATE KEY UPDATE partitions = VALUES(partitions)"
)
_HEADS = "INSERT INTO partition_head (topic_id, partition_no, next_offset) VALUES (%s, %s, 0)"
_CHANGE = (
    "INSERT INTO partition_change (topic_id, partitions, partition_no, high_watermark) "
    "VALUES (%s, %s, %s, %s)"
)
_CLUSTER_GROUPS = "SELECT id FROM consumer_group WHERE topic_id = %s AND mode = 'cluster'"
# A new partition holds nothing yet: every group reads it from its first offset, whatever
# its start position (all of it was written after the group was there).
_OFFSETS = (
    "INSERT INTO group_offset (group_id, partition_no, committed_offset, generation) "
    "VALUES (%s, %s, 0, 0)"
)
_ASSIGNMENTS = (
    "INSERT INTO partition_assignment (group_id, partition_no, client_id, generation, state) "
    "VALUES (%s, %s, NULL, 0, 'released')"
)
_CHANGES = (
    "SELECT partitions, partition_no, high_watermark, created_at FROM partition_change "
    "WHERE topic_id = %s ORDER BY partitions, partition_no"
)


def _info(row: Sequence[Any]) -> TopicInfo:
    return TopicInfo(
        id=int(row[0]),
        name=row[1],
        partitions=int(row[2]),
        retention_hours=int(row[3]),
        max_body_bytes=int(row[4]),
        created_at=row[5],
    )


class PartitionStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def add(
        self, name: str, partitions: int, *, expected: int | None = None
    ) -> tuple[PartitionsAdded, list[int]]:
        """Raise the topic's count to `partitions` (PartitionsNotAdded unless it grows;
        PlanChanged unless it has `expected` partitions now, when given): heads, cursors
        at 0 and unowned assignment rows for the new partitions, and the change's
        watermarks, all in one transaction. Returns the change and the ids of the cluster
        groups given the new partitions."""
        with self.db.transaction() as cursor:
            cursor.execute(_LOCK_TOPIC, (name,))
            row = cursor.fetchone()
            if row is None:
                raise UnknownTopic(f"unknown topic {name!r}")
            topic = _info(row)
            if expected is not None and topic.partitions != expected:
                raise PlanChanged(
                    f"topic {name!r} has {topic.partitions} partitions now, not {expected}"
                )
            if partitions <= topic.partitions:
                raise PartitionsNotAdded(
                    f"topic {name!r} has {topic.partitions} partitions; partitions can only "
                    f"be added (asked for {partitions})"
                )
            old = range(topic.partitions)
            cursor.executemany(_FENCE, [(topic.id, p, partitions) for p in old])
            fences.move(cursor, topic.id, old)
            watermarks = _watermarks(cursor, topic)
            cursor.execute(_RAISE, (partitions, topic.id))
            new = range(topic.partitions, partitions)
            cursor.executemany(_HEADS, [(topic.id, p) for p in new])
            cursor.executemany(
                _CHANGE, [(topic.id, partitions, p, w) for p, w in enumerate(watermarks)]
            )
            cursor.execute(_CLUSTER_GROUPS, (topic.id,))
            groups = [int(g) for (g,) in cursor.fetchall()]
            pairs = [(g, p) for g in groups for p in new]
            if pairs:
                cursor.executemany(_OFFSETS, pairs)
                cursor.executemany(_ASSIGNMENTS, pairs)
        change = PartitionsAdded(
            topic_id=topic.id, before=topic.partitions, after=partitions, watermarks=watermarks
        )
        return change, groups

    def changes(self, topic_id: int) -> list[PartitionsAdded]:
        """The topic's partition changes, oldest first."""
        return changes_of(topic_id, self.db.select(_CHANGES, (topic_id,)))


def _watermarks(cursor: Any, topic: TopicInfo) -> tuple[int, ...]:
    """Each partition's next offset: past its highest stored row (tombstones too), never
    below its low watermark; read after the fence is written, so no insert is in flight."""
    cursor.execute(_LOWS, (topic.id,))
    found = {int(p): int(low) for p, low in cursor.fetchall()}
    cursor.execute(_HIGHS, (topic.id,))
    for p, high in cursor.fetchall():
        found[int(p)] = max(int(high), found.get(int(p), 0))
    return tuple(found.get(p, 0) for p in range(topic.partitions))


def changes_of(topic_id: int, rows: Sequence[Sequence[Any]]) -> list[PartitionsAdded]:
    """Rows of (partitions, partition_no, high_watermark, created_at), ordered by the first
    two, as PartitionsAdded values."""
    by_count: dict[int, list[Sequence[Any]]] = {}
    for row in rows:
        by_count.setdefault(int(row[0]), []).append(row)
    return [
        PartitionsAdded(
            topic_id=topic_id,
            before=len(found),
            after=after,
            watermarks=tuple(int(r[2]) for r in found),
            created_at=found[0][3],
        )
        for after, found in by_count.items()
    ]
