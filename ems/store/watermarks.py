"""Every partition's high watermark, read in one statement (a loose index scan of the
message table's unique key), for the jobs that capture or compare them all."""

from __future__ import annotations

from ems.store.database import Database
from ems.store.messages import ALL_HIGH_WATERMARKS, HighWatermarks


def all_high_watermarks(db: Database) -> HighWatermarks:
    """(topic id, partition) -> one past its highest stored offset, for every partition
    that holds messages."""
    return {(int(t), int(p)): int(h) for t, p, h in db.select(ALL_HIGH_WATERMARKS, ())}
