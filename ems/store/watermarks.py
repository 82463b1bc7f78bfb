"""Every partition's high watermark, read in one statement (a loose index scan of the
message table's unique key), for the jobs that capture or compare them all."""

from __future__ import annotations

from ems.store.database import Database

#: The next offset of every non-empty partition of every topic: a loose index scan of the
#: unique key, one index dive per partition (never COUNT(*)).
ALL_HIGH_WATERMARKS = (
    "SELECT topic_id, partition_no, MAX(offset_no) + 1 FROM message GROUP BY topic_id, partition_no"
)
#: (topic id, partition) -> high watermark, for the partitions that hold messages.
HighWatermarks = dict[tuple[int, int], int]


def all_high_watermarks(db: Database) -> HighWatermarks:
    """(topic id, partition) -> one past its highest stored offset, for every partition
    that holds messages."""
    return {(int(t), int(p)): int(h) for t, p, h in db.select(ALL_HIGH_WATERMARKS, ())}
