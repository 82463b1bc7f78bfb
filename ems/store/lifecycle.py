"""Statements of topic and group deletes and of topic alters.

A delete marks its row (deleting_at, database clock), then removes what belongs to it
table by table in chunks: one DELETE of at most `chunk` rows per statement, each its own
transaction, walking an index on the key (never one DELETE of a whole topic). The marked
row goes last, so a delete cut off anywhere is finished by running it again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ems.store import fences
from ems.store.database import Database
from ems.types import TopicInfo
from ems.values.lifecycle import DELETE_FENCE

#: (table, ORDER BY of its chunked DELETE) of the rows keyed by group_id, children of the
#: group first; each order is an index whose first column is group_id (alarm's is its
#: primary key: alarms are few).
GROUP_TABLES = (
    ("topic_group_log", "group_id, partition_no, offset_no"),
    ("retry_message", "group_id, partition_no, offset_no"),
    ("dead_message", "group_id, created_at, id"),
    ("offset_snapshot", "group_id, partition_no, captured_at"),
    ("lag_report", "group_id, report_id, partition_no"),
    ("log_summary", "group_id, topic_id, hour_start, run_id"),
    ("log_summary_stage", "group_id, topic_id, hour_start, run_id"),
    ("autoscale_decision", "group_id, decided_at, id"),
    ("alarm", "id"),
    ("group_offset", "group_id, partition_no"),
    ("partition_assignment", "group_id, partition_no"),
    ("consumer_client", "group_id, client_id"),
    ("group_leader", "group_id"),
    ("autoscale_policy", "group_id"),
)
#: The same for the rows keyed by topic_id (its groups go first, by GROUP_TABLES).
#: partition_head and partition_low go with the topic row (the low watermarks are the
#: delete's fence until then).
TOPIC_TABLES = (
    ("message", "topic_id, partition_no, offset_no"),
    ("message_time_index", "topic_id, partition_no, end_offset"),
    ("topic_watermark", "topic_id, partition_no, captured_at"),
    ("message_outbox", "topic_id, id"),
    ("message_write", "topic_id, write_token"),
    ("outbox_relay", "topic_id"),
    ("alarm", "id"),
)

_TOPIC = (
    "SELECT id, name, partitions, retention_hours, max_body_bytes, created_at, deleting_at "
    "FROM topic WHERE name = %s"
)
_MARK_TOPIC = "UPDATE topic SET deleting_at = NOW(6) WHERE id = %s AND deleting_at IS NULL"
_UNMARK_TOPIC = "UPDATE topic SET deleting_at = NULL WHERE id = %s"
_DELETING_FOR = (
    "SELECT TIMESTAMPDIFF(MICROSECOND, deleting_at, NOW(6)) FROM topic "
    "WHERE id = %s AND deleting_at IS NOT NULL"
)
_TOPIC_LIVE = (
    "SELECT g.name, COUNT(*) FROM consumer_group g JOIN consumer_client c ON c.group_id = g.id "
    "WHERE g.topic_id = %s AND c.lease_expires_at > NOW(6) GROUP BY g.name ORDER BY g.name"
)
_TOPIC_GROUPS = "SELECT id, name FROM consumer_group WHERE topic_id = %s ORDER BY id"
_RAISE_LOW = (
    "INSERT INTO partition_low (topic_id, partition_no, low_offset, updated_at) "
    "VALUES (%s, %s, %s, NOW(6)) ON DUPLICATE KEY UPDATE "
    "low_offset = GREATEST(low_offset, VALUES(low_offset)), updated_at = NOW(6)"
)
_ALTER = "UPDATE topic SET retention_hours = %s, max_body_bytes = %s WHERE id = %s"
_GROUPS = "SELECT id, topic_id, deleting_at IS NOT NULL FROM consumer_group WHERE name = %s"
_MARK_GROUP = "UPDATE consumer_group SET deleting_at = NOW(6) WHERE id = %s AND deleting_at IS NULL"
_UNMARK_GROUP = "UPDATE consumer_group SET deleting_at = NULL WHERE id = %s"
_GROUP_LIVE = (
    "SELECT COUNT(*) FROM consumer_client WHERE group_id = %s AND lease_expires_at > NOW(6)"
)
_CHUNK = "DELETE FROM {table} WHERE {key} = %s ORDER BY {order} LIMIT %s"


def chunk_statement(table: str, key: str, order: str) -> str:
    """The chunked DELETE of a table's rows whose `key` column holds a value (the names
    are the store's own, never input)."""
    return _CHUNK.format(table=table, key=key, order=order)


_REMOVE_HEADS = "DELETE FROM partition_head WHERE topic_id = %s"
_REMOVE_LOWS = "DELETE FROM partition_low WHERE topic_id = %s"
_REMOVE_TOPIC = "DELETE FROM topic WHERE id = %s"
_REMOVE_GROUP = "DELETE FROM consumer_group WHERE id = %s"


@dataclass(frozen=True, kw_only=True, slots=True)
class GroupRow:
    id: int
    topic_id: int
    deleting: bool


@dataclass(frozen=True, kw_only=True, slots=True)
class Drained:
    """Rows and DELETE statements per table."""

    rows: dict[str, int]
    statements: dict[str, int]


class LifecycleStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    # -- topics ----------------------------------------------------------------------

    def topic(self, name: str) -> tuple[TopicInfo, bool] | None:
        """The topic of this name, marked or not, and whether a delete has marked it."""
        rows = self.db.select(_TOPIC, (name,))
        if not rows:
            return None
        i, n, partitions, retention, max_body, created, deleting = rows[0]
        info = TopicInfo(
            id=int(i),
            name=n,
            partitions=int(partitions),
            retention_hours=int(retention),
            max_body_bytes=int(max_body),
            created_at=created,
        )
        return info, deleting is not None

    def mark_topic(self, topic_id: int) -> None:
        with self.db.single() as cursor:
            cursor.execute(_MARK_TOPIC, (topic_id,))

    def unmark_topic(self, topic_id: int) -> None:
        with self.db.single() as cursor:
            cursor.execute(_UNMARK_TOPIC, (topic_id,))

    def deleting_for(self, topic_id: int) -> float | None:
        """Seconds since the topic was marked for deletion (database clock)."""
        rows = self.db.select(_DELETING_FOR, (topic_id,))
        return None if not rows or rows[0][0] is None else int(rows[0][0]) / 1_000_000

    def live_members_of_topic(self, topic_id: int) -> dict[str, int]:
        """Per group of the topic with live members, how many (database clock)."""
        return {str(g): int(n) for g, n in self.db.select(_TOPIC_LIVE, (topic_id,))}

    def groups_of_topic(self, topic_id: int) -> list[tuple[int, str]]:
        return [(int(i), str(n)) for i, n in self.db.select(_TOPIC_GROUPS, (topic_id,))]

    def fence(self, topic_id: int, partitions: int) -> None:
        """Raise every partition's low watermark to DELETE_FENCE, in partition order as a
        purge does, in one transaction: inserts committed before it are seen (and go with
        the chunks), later ones are refused."""
        rows = [(topic_id, p, DELETE_FENCE) for p in range(partitions)]
        if not rows:
            return
        with self.db.transaction() as cursor:
            cursor.executemany(_RAISE_LOW, rows)
            fences.move(cursor, topic_id, range(partitions))

    def remove_topic(self, topic_id: int) -> None:
        """The topic row, its partition heads and low watermarks (a few rows each), in
        one transaction: the last step of a delete."""
        with self.db.transaction() as cursor:
            cursor.execute(_REMOVE_HEADS, (topic_id,))
            cursor.execute(_REMOVE_LOWS, (topic_id,))
            cursor.execute(_REMOVE_TOPIC, (topic_id,))

    def alter(self, topic_id: int, retention_hours: int, max_body_bytes: int) -> None:
        with self.db.single() as cursor:
            cursor.execute(_ALTER, (retention_hours, max_body_bytes, topic_id))

    # -- groups ----------------------------------------------------------------------

    def groups(self, name: str) -> list[GroupRow]:
        """Every row of the group (one per topic it consumes), marked or not."""
        return [
            GroupRow(id=int(i), topic_id=int(t), deleting=bool(d))
            for i, t, d in self.db.select(_GROUPS, (name,))
        ]

    def mark_group(self, group_id: int) -> None:
        with self.db.single() as cursor:
            cursor.execute(_MARK_GROUP, (group_id,))

    def unmark_group(self, group_id: int) -> None:
        with self.db.single() as cursor:
            cursor.execute(_UNMARK_GROUP, (group_id,))

    def live_members(self, group_id: int) -> int:
        return int(self.db.select(_GROUP_LIVE, (group_id,))[0][0])

    def remove_group(self, group_id: int) -> None:
        with self.db.single() as cursor:
            cursor.execute(_REMOVE_GROUP, (group_id,))

    # -- chunks ----------------------------------------------------------------------

    def delete_group(self, group_id: int, chunk: int, pause: float) -> Drained:
        """Every row keyed by the group, in chunks, then the group row."""
        drained = self._drain(GROUP_TABLES, "group_id", group_id, chunk, pause)
        self.remove_group(group_id)
        return drained

    def drain_topic(self, topic_id: int, chunk: int, pause: float) -> Drained:
        """Every row keyed by the topic but its groups, heads, low watermarks and own row."""
        return self._drain(TOPIC_TABLES, "topic_id", topic_id, chunk, pause)

    def _drain(
        self,
        tables: tuple[tuple[str, str], ...],
        key: str,
        value: int,
        chunk: int,
        pause: float,
    ) -> Drained:
        drained = Drained(rows={}, statements={})
        for table, order in tables:
            sql = chunk_statement(table, key, order)
            rows, statements = self._chunks(sql, value, chunk, pause)
            if statements:
                drained.rows[table] = rows
                drained.statements[table] = statements
        return drained

    def _chunks(self, sql: str, value: int, chunk: int, pause: float) -> tuple[int, int]:
        """Run the chunked DELETE until a chunk comes back short; resting `pause` times
        as long as each statement took, as a purge does. (rows, statements)"""
        rows = statements = 0
        while True:
            began = time.monotonic()
            with self.db.single() as cursor:
                n = int(cursor.execute(sql, (value, chunk)))
            rows, statements = rows + n, statements + 1
            if n < chunk:
                return rows, statements
            if pause > 0:
                time.sleep((time.monotonic() - began) * pause)
