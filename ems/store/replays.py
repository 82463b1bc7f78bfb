"""Statements of replay: walk a range of a partition in chunks and queue each chunk as due
retries of one group, so that the partition's owner delivers it again."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from ems.store.database import Database

# Both walks are keyset pages (no OFFSET): each chunk starts where the last one ended.
_BY_OFFSET = (
    "SELECT id, offset_no FROM message "
    "WHERE topic_id = %s AND partition_no = %s AND offset_no > %s AND offset_no <= %s "
    "AND tombstone = 0 ORDER BY offset_no LIMIT %s"
)
_BY_TIME = (
    "SELECT id, offset_no, created_at FROM message "
    "FORCE INDEX (ix_message_topic_id_partition_no_created_at_id) "
    "WHERE topic_id = %s AND partition_no = %s "
    "AND (created_at > %s OR (created_at = %s AND id > %s)) AND created_at < %s "
    "AND offset_no < %s AND tombstone = 0 ORDER BY created_at, id LIMIT %s"
)
# Attempts carry on from the consumption log (deliveries so far), so the redelivery's
# attempt number tells the handler it has seen the message before. A message already
# waiting for a retry only becomes due now.
_QUEUE = (
    "INSERT INTO retry_message (group_id, topic_id, partition_no, offset_no, message_id, "
    "attempts, due_at, last_error) "
    "SELECT %s, m.topic_id, m.partition_no, m.offset_no, m.id, COALESCE(l.attempts, 0), "
    "NOW(6), NULL FROM message m LEFT JOIN topic_group_log l ON l.group_id = %s "
    "AND l.partition_no = m.partition_no AND l.offset_no = m.offset_no "
    "WHERE m.id IN ({ids}) ON DUPLICATE KEY UPDATE due_at = VALUES(due_at)"
)

#: A point of the time walk: (created_at, id) of the last row taken.
TimeKey = tuple[dt.datetime, int]


def queue_statement(group_id: int, message_ids: Sequence[int]) -> tuple[str, tuple[object, ...]]:
    sql = _QUEUE.format(ids=", ".join(["%s"] * len(message_ids)))
    return sql, (group_id, group_id, *message_ids)


class ReplayStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def by_offset(
        self, topic_id: int, partition: int, after: int, last: int, limit: int
    ) -> list[tuple[int, int]]:
        """(message id, offset) of the next messages with after < offset <= last."""
        rows = self.db.select(_BY_OFFSET, (topic_id, partition, after, last, limit))
        return [(int(i), int(o)) for i, o in rows]

    def by_time(
        self,
        topic_id: int,
        partition: int,
        after: TimeKey,
        until: dt.datetime,
        below: int,
        limit: int,
    ) -> list[tuple[int, int, dt.datetime]]:
        """(message id, offset, created_at) of the next messages after `after` in
        (created_at, id) order, created before `until`, at offsets below `below`."""
        at, last_id = after
        args = (topic_id, partition, at, at, last_id, until, below, limit)
        return [(int(i), int(o), c) for i, o, c in self.db.select(_BY_TIME, args)]

    def queue(self, group_id: int, message_ids: Sequence[int]) -> int:
        """Make these messages due retries of the group now; returns how many."""
        if not message_ids:
            return 0
        with self.db.single() as cursor:
            cursor.execute(*queue_statement(group_id, message_ids))
        return len(message_ids)
