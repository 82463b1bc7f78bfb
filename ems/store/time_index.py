"""A partition's time index (the message_time_index table): segments of consecutive
offsets with the running maximum of their messages' created_at.

The running maximum (prefix_max) only grows with the offset, though created_at itself
does not, so the first message at or after a time T lies in the first segment whose
prefix_max reaches T: every offset below that segment has an earlier time, and some
offset within it a time at or after T. A lookup is one index dive on prefix_max and a
read of at most SEGMENT_ROWS offsets. A segment is written only once every one of its
offsets holds a row (a message or a tombstone), and such a row never changes, so a
segment never needs rewriting; a purge only makes old ones useless, and they are pruned.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ems.store.database import Database

#: Offsets per segment: a lookup reads at most this many rows of the partition.
SEGMENT_ROWS = 1000
#: Rows one partition's extension reads at most in one step of the time-index job.
MAX_ROWS_PER_PARTITION = 50 * SEGMENT_ROWS

_LAST = (
    "SELECT end_offset, prefix_max FROM message_time_index "
    "WHERE topic_id = %s AND partition_no = %s ORDER BY end_offset DESC LIMIT 1"
)
_FIRST_OFFSET = "SELECT MIN(offset_no) FROM message WHERE topic_id = %s AND partition_no = %s"
_ROWS_FROM = (
    "SELECT offset_no, created_at, tombstone FROM message "
    "FORCE INDEX (PRIMARY) "
    "WHERE topic_id = %s AND partition_no = %s AND offset_no >= %s "
    "ORDER BY offset_no LIMIT %s"
)
_ADD = (
    "INSERT IGNORE INTO message_time_index "
    "(topic_id, partition_no, end_offset, start_offset, segment_max, prefix_max) "
    "VALUES (%s, %s, %s, %s, %s, %s)"
)
_PRUNE = (
    "DELETE FROM message_time_index WHERE topic_id = %s AND partition_no = %s AND end_offset <= %s"
)
# prefix_max grows with end_offset, so the smallest prefix_max at or after T belongs to
# the first such segment; end_offset breaks ties between equal maxima.
_ENDS = "SELECT topic_id, partition_no, MAX(end_offset) FROM message_time_index GROUP BY 1, 2"
_ALL_LOWS = "SELECT topic_id, partition_no, low_offset FROM partition_low"
SEGMENT_AT = (
    "SELECT start_offset, end_offset FROM message_time_index "
    "WHERE topic_id = %s AND partition_no = %s AND prefix_max >= %s "
    "ORDER BY prefix_max, end_offset LIMIT 1"
)


@dataclass(frozen=True, slots=True)
class Segment:
    start: int
    end: int
    #: Latest created_at of the segment's messages (tombstones aside); None: none.
    latest: dt.datetime | None
    prefix_max: dt.datetime | None


def segments(
    start: int,
    rows: Sequence[tuple[int, dt.datetime, bool]],
    prefix_max: dt.datetime | None,
    size: int = SEGMENT_ROWS,
) -> list[Segment]:
    """Whole segments of `size` offsets from `start`, over rows (offset, created_at,
    tombstone) in offset order, up to the first offset that has no row yet (pure)."""
    found: list[Segment] = []
    expected, latest, first = start, None, start
    for offset, created, tombstone in rows:
        if offset != expected:
            break  # a hole: a row may still come here, so the index stops before it
        if not tombstone and (latest is None or created > latest):
            latest = created
        expected += 1
        if expected - first == size:
            if latest is not None and (prefix_max is None or latest > prefix_max):
                prefix_max = latest
            found.append(Segment(first, expected, latest, prefix_max))
            first, latest = expected, None
    return found


class TimeIndexStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def extend(self, topic_id: int, partition: int, low: int | None, max_rows: int) -> int:
        """Add the whole segments the partition's rows allow, reading at most max_rows
        rows past the last segment, and drop segments wholly below the low watermark.
        Returns the offsets newly covered."""
        last = self.db.select(_LAST, (topic_id, partition))
        if last:
            start, prefix_max = int(last[0][0]), last[0][1]
        else:
            first = self.db.select(_FIRST_OFFSET, (topic_id, partition))
            if not first or first[0][0] is None:
                return 0
            start, prefix_max = int(first[0][0]), None
        if low is not None and low > start:
            # Purged past the index: go on from the low watermark. Offsets below it are
            # never sought, and prefix_max still bounds every offset the index covered.
            start = low
        rows = self.db.select(_ROWS_FROM, (topic_id, partition, start, max_rows))
        found = segments(start, [(int(o), c, bool(t)) for o, c, t in rows], prefix_max)
        if found:
            with self.db.transaction() as cursor:
                cursor.executemany(
                    _ADD,
                    [(topic_id, partition, s.end, s.start, s.latest, s.prefix_max) for s in found],
                )
                if low is not None:
                    cursor.execute(_PRUNE, (topic_id, partition, low))
        return found[-1].end - start if found else 0

    def behind(self, highs: Mapping[tuple[int, int], int]) -> list[tuple[int, int, int | None]]:
        """(topic id, partition, low watermark) of every partition at least a segment
        behind its high watermark (`highs`), the furthest behind first."""
        ends = {(int(t), int(p)): int(e) for t, p, e in self.db.select(_ENDS, ())}
        lows = {(int(t), int(p)): int(o) for t, p, o in self.db.select(_ALL_LOWS, ())}
        lag = {tp: high - max(ends.get(tp, 0), lows.get(tp, 0)) for tp, high in highs.items()}
        return [
            (t, p, lows.get((t, p)))
            for (t, p), n in sorted(lag.items(), key=lambda item: -item[1])
            if n >= SEGMENT_ROWS
        ]

    def segment_at(self, topic_id: int, partition: int, at: dt.datetime) -> tuple[int, int] | None:
        """[start, end) of the first segment whose prefix_max reaches `at`; None when no
        segment does (the message sought, if any, lies past the index)."""
        rows = self.db.select(SEGMENT_AT, (topic_id, partition, at))
        return (int(rows[0][0]), int(rows[0][1])) if rows else None

    def end(self, topic_id: int, partition: int) -> int | None:
        """The offset the index covers up to (None: no segment yet)."""
        rows = self.db.select(_LAST, (topic_id, partition))
        return int(rows[0][0]) if rows else None
