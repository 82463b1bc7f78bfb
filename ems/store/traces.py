"""Statements of a message trace: what every group of the topic recorded about one
(partition, offset), and which compaction runs may have archived its log rows.

The log and retry tables are read by their unique key (group_id, partition_no,
offset_no). Dead letters are indexed by (group_id, created_at) only, so finding one
message's dead letters reads the group's dead letters; that table stays small, as a dead
letter is an incident an operator resolves.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from ems.store.database import Database
from ems.store.dead_letters import dead_letter
from ems.values.rows import CompactionCover, DeadLetter, GroupRow, LogRow, Place, RetryRow

_GROUPS = (
    "SELECT id, name, mode, ordered, start_position, created_at FROM consumer_group "
    "WHERE topic_id = %s ORDER BY name"
)
_LOG = (
    "SELECT group_id, client_id, state, attempts, error, started_at, finished_at, updated_at, "
    "exactly_once FROM topic_group_log WHERE group_id IN ({ids}) AND partition_no = %s "
    "AND offset_no = %s"
)
_RETRY = (
    "SELECT group_id, attempts, due_at, last_error, created_at, last_traceback "
    "FROM retry_message WHERE group_id IN ({ids}) AND partition_no = %s AND offset_no = %s"
)
# STRAIGHT_JOIN: read dead_message first, by its (group_id, partition_no, offset_no) index;
# left to itself the optimizer may start from the groups.
_DEAD = (
    "SELECT STRAIGHT_JOIN d.id, d.group_id, g.name, d.topic_id, t.name, d.partition_no, "
    "d.offset_no, d.message_id, d.msg_key, d.headers, SUBSTRING(d.body, 1, 0), "
    "LENGTH(d.body), d.attempts, d.last_error, d.created_at, d.resent_at, d.last_traceback "
    "FROM dead_message d "
    "JOIN consumer_group g ON g.id = d.group_id LEFT JOIN topic t ON t.id = d.topic_id "
    "WHERE d.group_id IN ({ids}) AND d.partition_no = %s AND d.offset_no = %s"
)
_CURSORS = (
    "SELECT group_id, committed_offset FROM group_offset "
    "WHERE group_id IN ({ids}) AND partition_no = %s"
)
# Runs that reached their delete step (archived, summarized, done) and whose cutoff lies
# after the message was written: only those can have deleted one of its log rows.
_COVERS = (
    "SELECT id, status, cutoff, group_ids, deleted_rows FROM compaction_run "
    "WHERE status <> 'started' AND cutoff > %s ORDER BY id"
)
# message_id has no index on these tables: a lookup by id of a purged message scans them.
_LOCATE = (
    "(SELECT topic_id, partition_no, offset_no FROM dead_message WHERE message_id = %s LIMIT 1) "
    "UNION ALL (SELECT topic_id, partition_no, offset_no FROM retry_message "
    "WHERE message_id = %s LIMIT 1) LIMIT 1"
)


def _marks(values: Sequence[object]) -> str:
    return ", ".join(["%s"] * len(values))


def for_groups(
    template: str, group_ids: Sequence[int], *params: object
) -> tuple[str, tuple[object, ...]]:
    """A statement of these groups ({ids}), their ids first among its parameters."""
    return template.format(ids=_marks(group_ids)), (*group_ids, *params)


class TraceStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def groups(self, topic_id: int) -> list[GroupRow]:
        """Every consumer group of the topic, by name."""
        return [
            GroupRow(
                id=int(r[0]),
                name=r[1],
                mode=r[2],
                ordered=bool(r[3]),
                start_position=r[4],
                created_at=r[5],
            )
            for r in self.db.select(_GROUPS, (topic_id,))
        ]

    def logs(self, group_ids: Sequence[int], partition: int, offset: int) -> list[LogRow]:
        if not group_ids:
            return []
        rows = self.db.select(*for_groups(_LOG, group_ids, partition, offset))
        return [
            LogRow(
                group_id=int(r[0]),
                client_id=r[1],
                state=r[2],
                attempts=int(r[3]),
                error=r[4],
                started_at=r[5],
                finished_at=r[6],
                updated_at=r[7],
                exactly_once=bool(r[8]),
            )
            for r in rows
        ]

    def retries(self, group_ids: Sequence[int], partition: int, offset: int) -> list[RetryRow]:
        if not group_ids:
            return []
        query = for_groups(_RETRY, group_ids, partition, offset)
        return [
            RetryRow(
                group_id=int(r[0]),
                attempts=int(r[1]),
                due_at=r[2],
                last_error=r[3],
                created_at=r[4],
                last_traceback=r[5],
            )
            for r in self.db.select(*query)
        ]

    def dead(
        self,
        group_ids: Sequence[int],
        partition: int,
        offset: int,
    ) -> list[DeadLetter]:
        """The dead letters of this message, oldest first, without their bodies."""
        if not group_ids:
            return []
        query = for_groups(_DEAD, group_ids, partition, offset)
        # Sorted here: an ORDER BY d.id would lead MySQL to scan the primary key instead.
        return sorted((dead_letter(r) for r in self.db.select(*query)), key=lambda d: d.id)

    def cursors(self, group_ids: Sequence[int], partition: int) -> dict[int, int]:
        """Committed cursor (next offset to consume) of each group in this partition."""
        if not group_ids:
            return {}
        rows = self.db.select(*for_groups(_CURSORS, group_ids, partition))
        return {int(g): int(o) for g, o in rows}

    def compactions_after(self, written_at: dt.datetime) -> list[CompactionCover]:
        """Compaction runs that may have deleted log rows of a message written then."""
        return [
            CompactionCover(
                id=int(r[0]),
                status=r[1],
                cutoff=r[2],
                group_ids=tuple(int(g) for g in r[3].split(",")) if r[3] else (),
                deleted_rows=int(r[4]),
            )
            for r in self.db.select(_COVERS, (written_at,))
        ]

    def locate(self, message_id: int) -> Place | None:
        """Where a message that is no longer stored was, as its dead letters or retry rows
        remember it."""
        rows = self.db.select(_LOCATE, (message_id, message_id))
        if not rows:
            return None
        topic_id, partition, offset = rows[0]
        return Place(topic_id=int(topic_id), partition=int(partition), offset=int(offset))
