"""Statements on dead letters: list by filter, read one, purge in chunks, and the locked
batch a resend works on.

A resend locks its dead letters (SELECT ... FOR UPDATE, in id order) for the length of
one transaction: the republish or the requeue happens while they are locked, and the
same transaction marks them resent. A second resend of the same letters waits for the
first and then sees them resent, so it skips them instead of publishing twice.

The republish runs between the transaction's statements, one batch per topic, each
retrying through an outage up to the send timeout: the transaction may sit idle that
long (resend_idle_bound), and no longer, so a resend stalled there (a paused process, a
cut link) frees its letters once that bound has passed.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from pymysql.cursors import Cursor

from ems.store.database import Database
from ems.values.rows import DeadLetter, DeadLetterFilter, Orphaned

#: Bytes of each body a listing reads (the whole body is read by get and by resends).
LIST_BODY_BYTES = 1024
#: Rows one purge DELETE removes at most, so a large purge never holds many locks.
PURGE_CHUNK = 1000

# {traceback}: d.last_traceback where one dead letter is read, NULL in listings (each up
# to 8,192 characters, a page of 100 would carry 800 KB nobody reads there).
_COLUMNS = (
    "d.id, d.group_id, g.name, d.topic_id, t.name, d.partition_no, d.offset_no, d.message_id, "
    "d.msg_key, d.headers, {body}, LENGTH(d.body), d.attempts, d.last_error, d.created_at, "
    "d.resent_at, {traceback}"
)
# The group or topic may have been deleted since: a dead letter outlives them.
_FROM = (
    "FROM dead_message d LEFT JOIN consumer_group g ON g.id = d.group_id "
    "LEFT JOIN topic t ON t.id = d.topic_id"
)
_TRACEBACK = "d.last_traceback"
_LIST = f"SELECT {_COLUMNS} {_FROM} WHERE {{where}} ORDER BY d.id LIMIT %s"
_COUNT = "SELECT COUNT(*) FROM dead_message d WHERE {where}"
_IDS = "SELECT d.id FROM dead_message d WHERE {where} ORDER BY d.id LIMIT %s"
_DELETE = "DELETE d FROM dead_message d WHERE d.id IN ({ids}) AND {where}"
# A resend locks its dead letters' rows alone, then reads them with their group and topic:
# a locking read of the join would lock the topic row too, and every insert into the
# topic reads that row under a shared lock (the partition-count fence), so the resend's
# own publish would wait on it until the lock wait timeout.
_LOCK = "SELECT d.id FROM dead_message d WHERE d.id IN ({ids}) ORDER BY d.id FOR UPDATE"
_LOCKED = f"SELECT {_COLUMNS} {_FROM} WHERE d.id IN ({{ids}}) ORDER BY d.id"
_ORPHANED = (
    "SELECT d.id, m.id IS NULL OR m.tombstone = 1, t.id IS NULL, g.id IS NULL "
    "FROM dead_message d LEFT JOIN message m ON m.id = d.message_id "
    "LEFT JOIN topic t ON t.id = d.topic_id LEFT JOIN consumer_group g ON g.id = d.group_id "
    "WHERE d.id IN ({ids}) AND (m.id IS NULL OR m.tombstone = 1 OR t.id IS NULL OR g.id IS NULL) "
    "ORDER BY d.id"
)
_DELETE_IDS = "DELETE FROM dead_message WHERE id IN ({ids})"
_MARK = "UPDATE dead_message SET resent_at = NOW(6) WHERE id IN ({ids})"
# Back into the group's retry table, due now, attempts counted afresh; only while the
# original message row exists (the retry path reads the body from it).
_REQUEUE = (
    "INSERT INTO retry_message (group_id, topic_id, partition_no, offset_no, message_id, "
    "attempts, due_at, last_error, last_traceback) SELECT %s, topic_id, partition_no, "
    "offset_no, id, 0, NOW(6), %s, NULL FROM message WHERE id = %s AND tombstone = 0 "
    "ON DUPLICATE KEY UPDATE attempts = 0, due_at = NOW(6), last_error = VALUES(last_error), "
    "last_traceback = NULL"
)

# Conditions of a filter, ANDed; each holds its own placeholders.
_BY_IDS = "d.id IN ({ids})"
_BY_GROUPS = "d.group_id IN ({ids})"
_BY_TOPIC = "d.topic_id = %s"
_SINCE = "d.created_at >= %s"
_UNTIL = "d.created_at < %s"
_ERROR = "d.last_error LIKE %s"
_RESENT = "d.resent_at IS NOT NULL"
_NOT_RESENT = "d.resent_at IS NULL"
_AFTER = "d.id > %s"
_CEILING = "d.id <= %s"
# The id below the `rows` newest at or under a ceiling (a primary-key range read of rows+1
# entries): the floor of a bounded search. No row: the window holds every dead letter.
_FLOOR = (
    "SELECT d.id, d.created_at FROM dead_message d WHERE d.id <= %s "
    "ORDER BY d.id DESC LIMIT 1 OFFSET %s"
)


def _marks(values: Sequence[object]) -> str:
    return ", ".join(["%s"] * len(values))


def like_pattern(text: str) -> str:
    """A LIKE pattern matching `text` anywhere, its wildcards taken literally."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def where(f: DeadLetterFilter) -> tuple[str, tuple[object, ...]]:
    """The filter as a SQL condition on `d` (dead_message) and its parameters."""
    parts: list[str] = [_AFTER]
    params: list[object] = [max(f.after_id, f.floor_id)]
    conditions: list[tuple[bool, str, Sequence[object]]] = [
        (f.ceiling_id is not None, _CEILING, (f.ceiling_id,)),
        (bool(f.ids), _BY_IDS.format(ids=_marks(f.ids)), f.ids),
        (bool(f.group_ids), _BY_GROUPS.format(ids=_marks(f.group_ids or ())), f.group_ids or ()),
        (f.topic_id is not None, _BY_TOPIC, (f.topic_id,)),
        (f.since is not None, _SINCE, (f.since,)),
        (f.until is not None, _UNTIL, (f.until,)),
        (f.error is not None, _ERROR, (like_pattern(f.error or ""),)),
        (f.resent is True, _RESENT, ()),
        (f.resent is False, _NOT_RESENT, ()),
    ]
    for applies, sql, values in conditions:
        if applies:
            parts.append(sql)
            params += values
    if f.group_ids is not None and not f.group_ids:
        parts.append("FALSE")  # groups were asked for and none matched
    return " AND ".join(parts), tuple(params)


def dead_letter(row: Sequence[Any]) -> DeadLetter:
    return DeadLetter(
        id=int(row[0]),
        group_id=int(row[1]),
        group=row[2],
        topic_id=int(row[3]),
        topic=row[4],
        partition=int(row[5]),
        offset=int(row[6]),
        message_id=int(row[7]),
        key=None if row[8] is None else bytes(row[8]),
        headers=json.loads(row[9]) if row[9] else {},
        body=bytes(row[10]),
        body_size=int(row[11]),
        attempts=int(row[12]),
        last_error=row[13],
        created_at=row[14],
        resent_at=row[15],
        last_traceback=row[16],
    )


def _body(prefix: int | None) -> str:
    """The body column: whole, or only its first `prefix` bytes."""
    return "d.body" if prefix is None else f"SUBSTRING(d.body, 1, {int(prefix)})"


def list_query(f: DeadLetterFilter, limit: int, *, whole: bool) -> tuple[str, tuple[object, ...]]:
    """Matching dead letters in id order: whole (body and traceback), or as a listing
    shows them (a prefix of the body, no traceback)."""
    condition, params = where(f)
    body, traceback = (_body(None), _TRACEBACK) if whole else (_body(LIST_BODY_BYTES), "NULL")
    return _LIST.format(where=condition, body=body, traceback=traceback), (*params, limit)


def count_query(f: DeadLetterFilter) -> tuple[str, tuple[object, ...]]:
    condition, params = where(f)
    return _COUNT.format(where=condition), params


def ids_query(f: DeadLetterFilter, limit: int) -> tuple[str, tuple[object, ...]]:
    condition, params = where(f)
    return _IDS.format(where=condition), (*params, limit)


def purge_query(ids: Sequence[int], f: DeadLetterFilter) -> tuple[str, tuple[object, ...]]:
    """The DELETE of these dead letters, as long as they still match the filter."""
    condition, params = where(f)
    return _DELETE.format(ids=_marks(ids), where=condition), (*ids, *params)


def orphaned_query(ids: Sequence[int]) -> tuple[str, tuple[object, ...]]:
    return _ORPHANED.format(ids=_marks(ids)), tuple(ids)


def lock_query(ids: Sequence[int]) -> tuple[str, tuple[object, ...]]:
    """The locking read of the dead letters' rows alone (see _LOCK)."""
    return _LOCK.format(ids=_marks(ids)), tuple(ids)


def locked_query(ids: Sequence[int]) -> tuple[str, tuple[object, ...]]:
    """The (locked) dead letters with their group and topic, whole bodies."""
    return _LOCKED.format(ids=_marks(ids), body=_body(None), traceback="NULL"), tuple(ids)


def mark_query(ids: Sequence[int]) -> tuple[str, tuple[object, ...]]:
    return _MARK.format(ids=_marks(ids)), tuple(ids)


def delete_ids_query(ids: Sequence[int]) -> tuple[str, tuple[object, ...]]:
    return _DELETE_IDS.format(ids=_marks(ids)), tuple(ids)


def resend_idle_bound(idle: int, send_timeout: float, topics: int) -> int:
    """Seconds a resend's transaction may sit idle: the session's bound, plus the send
    timeout for each topic's batch it publishes between its statements."""
    return idle + math.ceil(send_timeout) * topics


class LockedDeadLetters:
    """Dead letters locked by a resend's transaction, and what it may do with them."""

    def __init__(self, cursor: Cursor, rows: list[DeadLetter]) -> None:
        self.cursor = cursor
        self.rows = rows
        self.marked: list[int] = []

    def requeue(self, letter: DeadLetter, note: str) -> bool:
        """Put the message back in its group's retry table, due now with attempts reset;
        False (nothing written) when the original message row is gone."""
        values = (letter.group_id, note, letter.message_id)
        return bool(self.cursor.execute(_REQUEUE, values))

    def mark(self, ids: Sequence[int]) -> None:
        """Mark these resent when the transaction commits."""
        self.marked += ids

    def delete(self, ids: Sequence[int]) -> int:
        """Delete these (locked) dead letters when the transaction commits; the rows."""
        if not ids:
            return 0
        return int(self.cursor.execute(*delete_ids_query(ids)))


class DeadLetterStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def matching(self, f: DeadLetterFilter, limit: int) -> list[DeadLetter]:
        """Matching dead letters in id order, each with only a prefix of its body."""
        return [dead_letter(r) for r in self.db.select(*list_query(f, limit, whole=False))]

    def floor(self, ceiling: int | None, rows: int) -> tuple[int, dt.datetime] | None:
        """The id (and time) of the dead letter just below the `rows` newest at or under
        `ceiling` (None: the newest of all); None when there are no more than `rows`."""
        top = (1 << 63) - 1 if ceiling is None else ceiling
        found = self.db.select(_FLOOR, (top, rows))
        return (int(found[0][0]), found[0][1]) if found else None

    def get(self, dead_id: int) -> DeadLetter | None:
        """One dead letter with its whole body."""
        found = self.list_full(DeadLetterFilter(ids=(dead_id,)), 1)
        return found[0] if found else None

    def list_full(self, f: DeadLetterFilter, limit: int) -> list[DeadLetter]:
        return [dead_letter(r) for r in self.db.select(*list_query(f, limit, whole=True))]

    def count(self, f: DeadLetterFilter) -> int:
        return int(self.db.select(*count_query(f))[0][0])

    def ids(self, f: DeadLetterFilter, limit: int) -> list[int]:
        """Ids of matching dead letters in id order (page on with after_id)."""
        return [int(r[0]) for r in self.db.select(*ids_query(f, limit))]

    def orphaned(self, ids: Sequence[int]) -> list[Orphaned]:
        """Those of these dead letters whose original message, topic or group is gone."""
        if not ids:
            return []
        rows = self.db.select(*orphaned_query(ids))
        return [
            Orphaned(
                id=int(r[0]), message_gone=bool(r[1]), topic_gone=bool(r[2]), group_gone=bool(r[3])
            )
            for r in rows
        ]

    def purge(self, f: DeadLetterFilter, chunk: int = PURGE_CHUNK) -> int:
        """Delete every matching dead letter, chunk rows per statement (each its own
        transaction); returns the rows deleted."""
        deleted, after = 0, f.after_id
        while True:
            page = replace(f, after_id=after)
            ids = self.ids(page, chunk)
            if not ids:
                return deleted
            with self.db.single() as cursor:
                deleted += cursor.execute(*purge_query(ids, page))
            after = ids[-1]

    @contextmanager
    def locked(self, ids: Sequence[int]) -> Iterator[LockedDeadLetters]:
        """Lock these dead letters (whole bodies) for one transaction; the ids marked on
        the yielded batch get resent_at = NOW(6) when the block ends without error, and
        everything the block wrote through it is rolled back when it raises."""
        with self.db.transaction() as cursor:
            rows: list[DeadLetter] = []
            if ids:
                cursor.execute(*lock_query(ids))
                cursor.execute(*locked_query(ids))
                rows = [dead_letter(r) for r in cursor.fetchall()]
            batch = LockedDeadLetters(cursor, rows)
            idle, sends = self.db.settings.idle_transaction_timeout, self.db.settings.send_timeout
            bound = resend_idle_bound(idle, sends, len({d.topic_id for d in rows}))
            with self.db.idle_bound(cursor, bound):
                yield batch
                if batch.marked:
                    cursor.execute(*mark_query(batch.marked))
