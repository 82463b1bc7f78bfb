"""Statements of the lag exporter (ems.ops.lag_exporter) beside those `ems group describe`
runs for one group: what waits in the retry and dead-letter tables, and how old each
partition's oldest unconsumed message is, for every group at once.

Each is one statement whatever the number of groups. The counts are exact (a metric that
stopped at a cap would hide a growing backlog from rate() and alerts): each reads one
index entry per message counted, the retry table's (group_id, due_at) index and the dead
letters. (group_id, resent_at, partition_no) index, never a row. The ages are one dive per committed
cursor into message's unique key (topic_id, partition_no, offset_no).
"""

from __future__ import annotations

from ems.store.database import Database

_US = 1_000_000
_RETRIES = "SELECT group_id, COUNT(*) FROM retry_message GROUP BY group_id"
_DEAD = (
    "SELECT group_id, COUNT(*) FROM dead_message "
    "FORCE INDEX (ix_dead_message_group_id_resent_at_partition_no) "
    "WHERE resent_at IS NULL GROUP BY group_id"
)
# The oldest unconsumed message of a partition is the first stored at or after the
# cursor (a hole or a purge may leave no row at the cursor itself), as the console's
# partition page reads it; no row: nothing waits.
_AGES = (
    "SELECT o.group_id, o.partition_no, TIMESTAMPDIFF(MICROSECOND, "
    " (SELECT m.created_at FROM message m WHERE m.topic_id = g.topic_id "
    "  AND m.partition_no = o.partition_no AND m.offset_no >= o.committed_offset "
    "  ORDER BY m.offset_no LIMIT 1), NOW(6)) "
    "FROM group_offset o JOIN consumer_group g ON g.id = o.group_id WHERE g.mode = 'cluster'"
)


class LagMetricsStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def waiting(self) -> dict[int, tuple[int, int]]:
        """{group id: (messages in the retry table, dead letters not resent)}, exact, for
        every group that has either (two statements)."""
        found: dict[int, list[int]] = {}
        for k, sql in enumerate((_RETRIES, _DEAD)):
            for g, n in self.db.select(sql, ()):
                found.setdefault(int(g), [0, 0])[k] = int(n)
        return {g: (counts[0], counts[1]) for g, counts in found.items()}

    def lag_ages(self) -> dict[int, dict[int, float]]:
        """{group id: {partition: seconds since its oldest unconsumed message was
        written}} for every committed cursor of a cluster group; a partition where
        nothing waits is left out (one statement)."""
        found: dict[int, dict[int, float]] = {}
        for g, p, us in self.db.select(_AGES, ()):
            if us is not None:
                found.setdefault(int(g), {})[int(p)] = max(0, int(us)) / _US
        return found
