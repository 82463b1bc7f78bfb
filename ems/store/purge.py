"""Statements of the message purges (retention and delete-consumed) and the low watermark.

Every statement walks the message table's unique key (topic_id, partition_no, offset_no)
from the partition's low watermark. A purge round is one transaction: per partition, one
DELETE of an offset range of at most one window of rows and the raised low watermark, so a
reader that finds a range gone also finds the watermark to jump to. The bounds a round
must respect are read for all of a topic's partitions at once (grouped index reads).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable
from dataclasses import dataclass

from ems.store import fences, in_flight
from ems.store.database import Database

# The next `size` rows from `start` in offset order: how many, the last offset, and the
# first one created at or after the cutoff (NULL cutoff: none is young).
_WINDOW = (
    "SELECT COUNT(*), MAX(offset_no), MIN(CASE WHEN created_at >= %s THEN offset_no END) "
    "FROM (SELECT offset_no, created_at FROM message "
    "WHERE topic_id = %s AND partition_no = %s AND offset_no >= %s "
    "ORDER BY offset_no LIMIT %s) w"
)
_LAST_BEFORE = (
    "SELECT MAX(offset_no) FROM message "
    "WHERE topic_id = %s AND partition_no = %s AND offset_no >= %s AND offset_no < %s"
)
# Per listed partition of a topic (a JSON array): the highest stored offset, one index
# dive each (the newest entry of the partition in the key). MAX() per group would leave the
# optimizer a choice between a loose index scan and reading every index entry of the topic.
_TOPS = (
    "SELECT j.p, (SELECT offset_no FROM message WHERE topic_id = %s AND partition_no = j.p "
    "ORDER BY offset_no DESC LIMIT 1) FROM JSON_TABLE(%s, '$[*]' COLUMNS (p INT PATH '$')) j"
)
_LOW = "SELECT low_offset FROM partition_low WHERE topic_id = %s AND partition_no = %s"
_LOWS = "SELECT partition_no, low_offset FROM partition_low WHERE topic_id = %s"
# Per partition, the lowest offset some group still has to settle: retried ones, and in
# flight ones (found by primary-key ranges: ems.store.in_flight), never the done history.
_RETRY_FLOORS = (
    "SELECT r.partition_no, MIN(r.offset_no) FROM retry_message r "
    "JOIN consumer_group g ON g.id = r.group_id WHERE g.topic_id = %s GROUP BY r.partition_no"
)
_FLIGHT_FLOORS = (
    "SELECT partition_no, MIN(offset_no) FROM ("
    + in_flight.rows("l.partition_no, l.offset_no", "g.topic_id = %s")
    + ") AS f GROUP BY partition_no"
)
_RAISE_LOW = (
    "INSERT INTO partition_low (topic_id, partition_no, low_offset, updated_at) "
    "VALUES (%s, %s, %s, NOW(6)) ON DUPLICATE KEY UPDATE "
    "low_offset = GREATEST(low_offset, VALUES(low_offset)), updated_at = NOW(6)"
)
_FIRST_YOUNG = (
    "SELECT MIN(offset_no) FROM message WHERE topic_id = %s AND partition_no = %s "
    "AND offset_no >= %s AND offset_no < %s AND created_at >= %s"
)
_SET_LOW = "UPDATE partition_low SET low_offset = %s WHERE topic_id = %s AND partition_no = %s"
_DELETE = (
    "DELETE FROM message "
    "WHERE topic_id = %s AND partition_no = %s AND offset_no >= %s AND offset_no < %s"
)
_COUNT = (
    "SELECT COUNT(*) FROM message "
    "WHERE topic_id = %s AND partition_no = %s AND offset_no >= %s AND offset_no < %s"
)
_CUTOFF = "SELECT NOW(6) - INTERVAL %s HOUR"
_CONSUMED_TOPICS = "SELECT id, partitions FROM topic WHERE delete_consumed = 1 ORDER BY id"
_CLUSTER_GROUPS = "SELECT COUNT(*) FROM consumer_group WHERE topic_id = %s AND mode = 'cluster'"
# Per partition: the lowest committed cursor over the topic's cluster groups, and how many
# groups have one (a partition some group has no cursor for is not consumed by all).
_CONSUMED = (
    "SELECT o.partition_no, MIN(o.committed_offset), COUNT(*) FROM group_offset o "
    "JOIN consumer_group g ON g.id = o.group_id "
    "WHERE g.topic_id = %s AND g.mode = 'cluster' GROUP BY o.partition_no"
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Window:
    """The next rows of a partition from a start offset, in offset order."""

    rows: int
    #: Highest offset among them (None: no rows at or after the start).
    last: int | None
    #: First offset among them created at or after the cutoff.
    first_young: int | None


@dataclass(frozen=True, kw_only=True, slots=True)
class Floors:
    """Bounds a purge never crosses in a partition."""

    #: Lowest offset some group is retrying or has in flight.
    unsettled: int | None
    #: Highest stored offset: the last row stays, so the high watermark stays known.
    top: int | None


class PurgeStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def cutoff(self, retention_hours: int) -> dt.datetime:
        """The database clock minus a retention."""
        return self.db.select(_CUTOFF, (retention_hours,))[0][0]  # type: ignore[no-any-return]

    def low(self, topic_id: int, partition: int) -> int | None:
        rows = self.db.select(_LOW, (topic_id, partition))
        return int(rows[0][0]) if rows else None

    def window(
        self, topic_id: int, partition: int, start: int, size: int, cutoff: dt.datetime | None
    ) -> Window:
        # A NULL cutoff compares as unknown: no row counts as young.
        rows, last, young = self.db.select(_WINDOW, (cutoff, topic_id, partition, start, size))[0]
        return Window(
            rows=int(rows),
            last=None if last is None else int(last),
            first_young=None if young is None else int(young),
        )

    def last_before(self, topic_id: int, partition: int, start: int, end: int) -> int | None:
        """The highest stored offset in [start, end)."""
        (top,) = self.db.select(_LAST_BEFORE, (topic_id, partition, start, end))[0]
        return None if top is None else int(top)

    def lows(self, topic_id: int) -> dict[int, int]:
        """Per partition of the topic that has one, its low watermark."""
        return {int(p): int(low) for p, low in self.db.select(_LOWS, (topic_id,))}

    def floors(self, topic_id: int, partitions: Iterable[int]) -> dict[int, Floors]:
        """Per listed partition of the topic that holds messages, the bounds a purge
        respects."""
        unsettled: dict[int, int] = {}
        for sql, args in ((_RETRY_FLOORS, (topic_id,)), (_FLIGHT_FLOORS, (topic_id, topic_id))):
            for partition, low in self.db.select(sql, args):
                p = int(partition)
                unsettled[p] = min(int(low), unsettled.get(p, int(low)))
        return {
            int(p): Floors(unsettled=unsettled.get(int(p)), top=int(top))
            for p, top in self.db.select(_TOPS, (topic_id, json.dumps(sorted(partitions))))
            if top is not None
        }

    def delete(
        self,
        topic_id: int,
        ranges: list[tuple[int, int, int]],
        cutoff: dt.datetime | None = None,
    ) -> dict[int, int]:
        """For each (partition, start, end): raise the partition's low watermark to `end`
        and delete its offsets [start, end); all in one short transaction. With a cutoff,
        a row created at or after it in the range (a late producer that filled an empty
        offset after the range was chosen) stays, and the watermark stops at it. The rows
        deleted per partition."""
        deleted: dict[int, int] = {}
        ranges = sorted(ranges)
        with self.db.transaction() as cursor:
            # Every watermark is raised and fence moved before any row goes, in partition
            # order: an insert holds its partitions' fences (or, on the escaped path, their
            # watermarks) under a shared lock, so it either commits before this
            # transaction moves them or waits for its commit and then is refused; taking
            # them all first means no insert can hold one while waiting on a row this
            # transaction deleted.
            for partition, _, end in ranges:
                cursor.execute(_RAISE_LOW, (topic_id, partition, end))
            # Producers' rows checked against the watermarks before are refused from
            # here on, and checked again (ems.store.fences).
            fences.move(cursor, topic_id, [partition for partition, _, _ in ranges])
            for partition, start, end in ranges:
                if cutoff is not None:
                    # Inserts into the range committed before the raise are seen here;
                    # later ones wait on the watermark and see where it ends.
                    cursor.execute(_FIRST_YOUNG, (topic_id, partition, start, end, cutoff))
                    (young,) = cursor.fetchone()
                    if young is not None:
                        end = int(young)
                        cursor.execute(_SET_LOW, (end, topic_id, partition))
                rows = cursor.execute(_DELETE, (topic_id, partition, start, end))
                deleted[partition] = int(rows) if end > start else 0
        return deleted

    def count(self, topic_id: int, partition: int, start: int, end: int) -> int:
        """Rows in offsets [start, end) (a dry run's chunk: at most one window of rows)."""
        return int(self.db.select(_COUNT, (topic_id, partition, start, end))[0][0])

    def consumed_topics(self) -> list[tuple[int, int]]:
        """(topic id, partitions) of the topics with delete_consumed set."""
        return [(int(t), int(p)) for t, p in self.db.select(_CONSUMED_TOPICS, ())]

    def consumed(self, topic_id: int) -> dict[int, int]:
        """Per partition, the offset below which every cluster group of the topic has
        committed; empty when the topic has no cluster group."""
        groups = int(self.db.select(_CLUSTER_GROUPS, (topic_id,))[0][0])
        if not groups:
            return {}
        rows = self.db.select(_CONSUMED, (topic_id,))
        return {int(p): int(low) for p, low, n in rows if int(n) == groups}
