"""Where the consumption log's rows in flight (state 'start') are, without an index on the
log's state.

A cluster member reads a partition at most IN_FLIGHT_SPAN offsets past where its window
starts (ems.consumer.cluster), and a delivery below that start is always a redelivery of
a retry row (the cursor passes a failed message only once it is in the retry table). The
window starts at the committed cursor, or at the partition's low watermark when the
cursor lies below it: a group behind retention reads from the watermark (the purged
offsets are gone), so its first batch lies there, however far below the cursor is. So a
group partition's rows in flight are either in the window [max(cursor, low watermark),
that + IN_FLIGHT_SPAN) of the log's primary key (group_id, partition_no, offset_no), or at
the key of one of the group's retry rows. Both are read by primary-key ranges and lookups:
no index on the state, which every ack would rewrite (an entry deleted and one inserted
per delivery, the largest part of the server's cost of a delivery once many groups
consume). The watermark only rises, and never past a row in flight (the purge's floors
are read through these windows), so a window never moves past a row it held.

The window join compares the log's key columns with >= and <= instead of =: an equality
lets the optimizer look the log up by (group_id, partition_no) alone and filter the
offsets, reading a partition's whole history; with the bounds it reads, for each cursor
row, only the window's range ("Range checked for each record"). STRAIGHT_JOIN keeps the
cursor rows first. The plan tests hold both.
"""

from __future__ import annotations

from ems.types import IN_FLIGHT_SPAN

#: Where the window of cursor row o starts, with its partition's low watermark row pl
#: (LEFT JOINed: NULL for a partition never purged).
START = "GREATEST(o.committed_offset, COALESCE(pl.low_offset, 0))"
#: ON clause of `group_offset o LEFT JOIN partition_low pl STRAIGHT_JOIN topic_group_log l`:
#: l in o's window.
WINDOW = (
    "l.group_id >= o.group_id AND l.group_id <= o.group_id "
    "AND l.partition_no >= o.partition_no AND l.partition_no <= o.partition_no "
    f"AND l.offset_no >= {START} AND l.offset_no < {START} + {IN_FLIGHT_SPAN}"
)
#: The low watermark row of cursor row o of group g.
LOW = "LEFT JOIN partition_low pl ON pl.topic_id = g.topic_id AND pl.partition_no = o.partition_no"
#: ON clause of `retry_message r STRAIGHT_JOIN topic_group_log l`: l at r's key.
AT_RETRY = (
    "l.group_id = r.group_id AND l.partition_no = r.partition_no AND l.offset_no = r.offset_no"
)


#: The rows in flight: {columns} and {more} (further conditions) completed by rows().
_ROWS = (
    "SELECT {columns} FROM consumer_group g JOIN group_offset o ON o.group_id = g.id "
    f"{LOW} STRAIGHT_JOIN topic_group_log l ON {WINDOW} WHERE l.state = 'start'{{more}} "
    "UNION SELECT {columns} FROM consumer_group g JOIN retry_message r ON r.group_id = g.id "
    f"STRAIGHT_JOIN topic_group_log l ON {AT_RETRY} WHERE l.state = 'start'{{more}}"
)


def rows(columns: str, where: str = "") -> str:
    """Every log row in flight, once each, as a derived table of `columns` (of the log l
    and the group g); `where` adds conditions on l and g (its parameters appear twice,
    once per half, in that order)."""
    return _ROWS.format(columns=columns, more=f" AND {where}" if where else "")
