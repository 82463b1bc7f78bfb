"""The offset snapshot capture (committed offsets and high watermarks, one INSERT) and the
lag report's read of a window of snapshots.

The capture is cheap by construction: group_offset is small, the high watermarks come from
one loose index scan of message's unique key (one index dive per partition, never
COUNT(*)), the oldest unconsumed message is one unique-key lookup per committed partition.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from ems.store.database import Database
from ems.store.watermarks import HighWatermarks, all_high_watermarks

_INSERT = (
    "INSERT INTO offset_snapshot (captured_at, group_id, topic_id, partition_no, "
    "committed_offset, high_watermark, committed_at, oldest_unconsumed_at) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
)
_NOW = "SELECT NOW(6)"
# Each committed (group, partition) with the creation time of the message at its cursor.
_COMMITTED = (
    "SELECT o.group_id, g.topic_id, o.partition_no, o.committed_offset, o.updated_at, "
    "(SELECT m.created_at FROM message m WHERE m.topic_id = g.topic_id "
    "AND m.partition_no = o.partition_no AND m.offset_no = o.committed_offset) "
    "FROM group_offset o JOIN consumer_group g ON g.id = o.group_id WHERE g.mode = 'cluster'"
)
_ID_RANGE = (
    "SELECT MIN(id), MAX(id) FROM offset_snapshot WHERE captured_at > %s AND captured_at <= %s"
)
_WINDOW = (
    "SELECT id, captured_at, group_id, topic_id, partition_no, committed_offset, "
    "high_watermark, committed_at, oldest_unconsumed_at FROM offset_snapshot WHERE {where}"
)


def window_query(
    ids: tuple[int, int], start: dt.datetime, end: dt.datetime, group_ids: Sequence[int]
) -> str:
    """The SELECT of the snapshots captured in (start, end] within their id bounds (from
    SnapshotStore.id_range), of these groups ([]: every group). Spark's JDBC source runs it
    in ranges of id and takes no bind parameters, so ids and times are formatted in."""
    where = (
        f"id BETWEEN {int(ids[0])} AND {int(ids[1])} "
        f"AND captured_at > '{start.isoformat(sep=' ')}' "
        f"AND captured_at <= '{end.isoformat(sep=' ')}'"
    )
    if group_ids:
        where += f" AND group_id IN ({', '.join(str(int(g)) for g in group_ids)})"
    return _WINDOW.format(where=where)


class SnapshotStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def capture(self, marks: HighWatermarks | None = None) -> int:
        """Record one snapshot row per committed (group, partition); returns the row count.
        Every row of a capture carries the same captured_at (the database clock). `marks`:
        high watermarks the caller already read just now; read here when None."""
        ((now,),) = self.db.select(_NOW, ())
        if marks is None:
            marks = all_high_watermarks(self.db)
        committed = self.db.select(_COMMITTED, ())
        # A committed offset past the last stored message (retention purged the tail, or
        # the group committed at a watermark) is no lag; never report a negative one.
        rows = [
            (now, gid, tid, part, offset, max(marks.get((tid, part), 0), offset), at, oldest)
            for gid, tid, part, offset, at, oldest in committed
        ]
        if rows:
            with self.db.single() as cursor:
                cursor.executemany(_INSERT, rows)
        return len(rows)

    def id_range(self, start: dt.datetime, end: dt.datetime) -> tuple[int, int] | None:
        """Primary-key bounds of the snapshots captured in (start, end], from the
        captured_at index; None when there are none."""
        ((low, high),) = self.db.select(_ID_RANGE, (start, end))
        return None if low is None else (int(low), int(high))
