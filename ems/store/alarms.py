"""Statements of the alarm scan: what it observes, and the alarm rows it writes.

Every age is computed by the database clock. Nothing here counts the message table:
high watermarks come from one loose index scan of its unique key, the oldest unconsumed
message from one unique-key lookup per partition.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from ems.store import in_flight
from ems.store.browse import like_prefix
from ems.store.database import Database
from ems.store.errors import DuplicateKey
from ems.store.watermarks import all_high_watermarks
from ems.values.alarms import (
    DEAD_LETTER_COUNT_CAP,
    AlarmRecord,
    Condition,
    DeadLetterObservation,
    InFlightObservation,
    Observations,
    PartitionObservation,
)

_US = 1_000_000
# The message at the cursor is the oldest unconsumed one: one unique-key lookup.
_CURSORS = (
    "SELECT o.group_id, g.name, g.topic_id, t.name, o.partition_no, o.committed_offset, "
    "TIMESTAMPDIFF(MICROSECOND, o.updated_at, NOW(6)), "
    "(SELECT TIMESTAMPDIFF(MICROSECOND, m.created_at, NOW(6)) FROM message m "
    " WHERE m.topic_id = g.topic_id AND m.partition_no = o.partition_no "
    " AND m.offset_no = o.committed_offset), "
    "g.lag_alarm_messages, g.lag_alarm_seconds, g.stall_alarm_seconds "
    "FROM group_offset o JOIN consumer_group g ON g.id = o.group_id "
    "JOIN topic t ON t.id = g.topic_id WHERE g.mode = 'cluster'"
)
# The cursor sits on a hole or below purged rows: the first stored message after it.
_NEXT_STORED_AGE = (
    "SELECT TIMESTAMPDIFF(MICROSECOND, created_at, NOW(6)) FROM message "
    "WHERE topic_id = %s AND partition_no = %s AND offset_no >= %s ORDER BY offset_no LIMIT 1"
)
# Rows in flight, found by primary-key ranges (ems.store.in_flight).
_IN_FLIGHT = (
    "SELECT f.group_id, g.name, g.topic_id, t.name, f.partition_no, COUNT(*), "
    "SUM(f.started_at < NOW(6) - INTERVAL g.ack_timeout_seconds SECOND), "
    "TIMESTAMPDIFF(MICROSECOND, MIN(f.started_at), NOW(6)), g.ack_timeout_seconds FROM ("
    + in_flight.rows("l.group_id, l.partition_no, l.offset_no, l.started_at")
    + ") AS f JOIN consumer_group g ON g.id = f.group_id JOIN topic t ON t.id = g.topic_id "
    "GROUP BY f.group_id, f.partition_no, g.name, g.topic_id, t.name, g.ack_timeout_seconds"
)
_CLUSTER_GROUPS = (
    "SELECT g.id, g.name, g.topic_id, t.name FROM consumer_group g "
    "JOIN topic t ON t.id = g.topic_id WHERE g.mode = 'cluster'"
)
_DEAD_LETTER_MARKS = (
    "SELECT condition_key, MAX(last_seen_at) FROM alarm "
    "WHERE condition_key LIKE 'dead\\_letter:%%' AND status = 'cleared' GROUP BY condition_key"
)
# Bounded: the (group_id, created_at) index, at most the cap of rows looked at.
_DEAD_LETTERS = (
    "SELECT COUNT(*), TIMESTAMPDIFF(MICROSECOND, MAX(created_at), NOW(6)) FROM ("
    " SELECT created_at FROM dead_message WHERE group_id = %s AND created_at > %s "
    " AND resent_at IS NULL LIMIT %s) d"
)
_ALARM_COLUMNS = (
    "a.id, a.kind, a.condition_key, a.status, a.group_id, g.name, a.topic_id, t.name, "
    "a.partition_no, a.value, a.threshold, a.message, a.opened_at, a.last_seen_at, "
    "a.cleared_at, a.notified_at, a.notify_attempts, a.notify_error, a.acknowledged_by, "
    "a.acknowledged_at"
)
_SELECT_ALARMS = (
    f"SELECT {_ALARM_COLUMNS} FROM alarm a LEFT JOIN consumer_group g ON g.id = a.group_id "
    "LEFT JOIN topic t ON t.id = a.topic_id"
)
_INSERT = (
    "INSERT INTO alarm (kind, condition_key, open_key, status, group_id, topic_id, "
    "partition_no, value, threshold, message) VALUES (%s, %s, %s, 'open', %s, %s, %s, %s, %s, %s)"
)
_REFRESH = (
    "UPDATE alarm SET last_seen_at = NOW(6), value = %s, threshold = %s, message = %s "
    "WHERE open_key = %s"
)
# Clearing makes the clearing notice due: the webhook hears of it like of the opening.
_CLEAR = (
    "UPDATE alarm SET status = 'cleared', open_key = NULL, cleared_at = NOW(6), "
    "notified_at = NULL, notify_attempts = 0, notify_error = NULL{extra} "
    "WHERE id = %s AND status = 'open'"
)
_ACKNOWLEDGED = (
    ", last_seen_at = NOW(6), message = CONCAT(message, ' [acknowledged]'), "
    "acknowledged_by = %s, acknowledged_at = NOW(6)"
)
#: Alarm states as the console names them: "closed" is the table's "cleared".
_STATES = {"open": "a.status = 'open'", "closed": "a.status = 'cleared'", "all": "1 = 1"}
# Open alarms are always due; a cleared one only for a day, so a webhook configured later
# hears of what is open now, not of years of history.
_PENDING = (
    f"{_SELECT_ALARMS} WHERE a.notified_at IS NULL AND (a.status = 'open' OR "
    "a.cleared_at > NOW(6) - INTERVAL 1 DAY) ORDER BY a.id LIMIT %s"
)
_NOTIFIED = (
    "UPDATE alarm SET notified_at = IF(%s IS NULL, NOW(6), NULL), "
    "notify_attempts = notify_attempts + %s, notify_error = %s WHERE id = %s"
)
_THRESHOLDS = (
    "UPDATE consumer_group SET lag_alarm_messages = %s, lag_alarm_seconds = %s, "
    "stall_alarm_seconds = %s WHERE id = %s"
)
_GET_THRESHOLDS = (
    "SELECT lag_alarm_messages, lag_alarm_seconds, stall_alarm_seconds FROM consumer_group "
    "WHERE id = %s"
)

_GET = f"{_SELECT_ALARMS} WHERE a.id = %s"
_OPEN = f"{_SELECT_ALARMS} WHERE a.status = 'open' ORDER BY a.id"
# A search: {where} is its conditions, ANDed.
_SEARCH = f"{_SELECT_ALARMS} WHERE {{where}} ORDER BY a.id DESC LIMIT %s"
_ANY = "1 = 1"
_IS_OPEN = "a.status = 'open'"
_OF_KIND = "a.kind = %s"
_OF_GROUPS = "a.group_id IN ({ids})"
_GROUP_IS = "g.name = %s"
_GROUP_LIKE = "g.name LIKE %s ESCAPE '!'"
_BEFORE = "a.id < %s"


def clear_query(
    alarm_id: int, *, acknowledged: bool, by: str | None
) -> tuple[str, tuple[object, ...]]:
    """The clearing of an open alarm, an acknowledgement's (made `by`, cut to 64
    characters) or not."""
    if acknowledged:
        return _CLEAR.format(extra=_ACKNOWLEDGED), (None if by is None else by[:64], alarm_id)
    return _CLEAR.format(extra=""), (alarm_id,)


def _search(
    where: Sequence[str], params: Sequence[object], limit: int
) -> tuple[str, tuple[object, ...]]:
    return _SEARCH.format(where=" AND ".join(where)), (*params, limit)


def listing_query(
    *, include_cleared: bool, kind: str | None, group_ids: Sequence[int] | None, limit: int
) -> tuple[str, tuple[object, ...]]:
    """Alarms newest first: the open ones, or all with include_cleared; of a kind, of
    groups (none: nothing)."""
    where: list[str] = [_ANY]
    params: list[object] = []
    if not include_cleared:
        where.append(_IS_OPEN)
    if kind is not None:
        where.append(_OF_KIND)
        params.append(kind)
    if group_ids is not None:
        where.append(_OF_GROUPS.format(ids=", ".join(["%s"] * len(group_ids)) or "NULL"))
        params.extend(group_ids)
    return _search(where, params, limit)


def page_query(
    *, state: str, group: str | None, group_prefix: str, before_id: int | None, limit: int
) -> tuple[str, tuple[object, ...]]:
    """A keyset page of alarms (see AlarmStore.page)."""
    where = [_STATES[state]]
    params: list[object] = []
    if group is not None:
        where.append(_GROUP_IS)
        params.append(group)
    if group_prefix:
        where.append(_GROUP_LIKE)
        params.append(like_prefix(group_prefix))
    if before_id is not None:
        where.append(_BEFORE)
        params.append(before_id)
    return _search(where, params, limit)


def _seconds(us: Any) -> float | None:
    return None if us is None else int(us) / _US


class AlarmStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    # -- observations ------------------------------------------------------------------

    def observe(self) -> Observations:
        """Everything the alarm conditions are evaluated over, read now."""
        return Observations(
            partitions=self._partitions(),
            in_flight=self._in_flight(),
            dead_letters=self._dead_letters(),
        )

    def _partitions(self) -> list[PartitionObservation]:
        marks = all_high_watermarks(self.db)
        out = []
        for r in self.db.select(_CURSORS, ()):
            high = max(marks.get((r[2], r[4]), 0), int(r[5]))
            age = _seconds(r[7])
            if age is None and high > r[5]:
                found = self.db.select(_NEXT_STORED_AGE, (r[2], r[4], r[5]))
                age = _seconds(found[0][0]) if found else None
            out.append(
                PartitionObservation(
                    group_id=int(r[0]),
                    group=r[1],
                    topic_id=int(r[2]),
                    topic=r[3],
                    partition=int(r[4]),
                    committed_offset=int(r[5]),
                    high_watermark=high,
                    since_commit=_seconds(r[6]) or 0.0,
                    oldest_unconsumed_age=age,
                    lag_alarm_messages=None if r[8] is None else int(r[8]),
                    lag_alarm_seconds=None if r[9] is None else int(r[9]),
                    stall_alarm_seconds=int(r[10]),
                )
            )
        return out

    def _in_flight(self) -> list[InFlightObservation]:
        return [
            InFlightObservation(
                group_id=int(r[0]),
                group=r[1],
                topic_id=int(r[2]),
                topic=r[3],
                partition=int(r[4]),
                in_flight=int(r[5]),
                overdue=int(r[6] or 0),
                oldest_age=_seconds(r[7]) or 0.0,
                ack_timeout_seconds=int(r[8]),
            )
            for r in self.db.select(_IN_FLIGHT, ())
        ]

    def _dead_letters(self) -> list[DeadLetterObservation]:
        marks = {k: at for k, at in self.db.select(_DEAD_LETTER_MARKS, ())}
        out = []
        for gid, group, topic_id, topic in self.db.select(_CLUSTER_GROUPS, ()):
            since = marks.get(f"dead_letter:{gid}") or dt.datetime(1970, 1, 2)
            ((count, age),) = self.db.select(_DEAD_LETTERS, (gid, since, DEAD_LETTER_COUNT_CAP))
            if count:
                out.append(
                    DeadLetterObservation(
                        group_id=int(gid),
                        group=group,
                        topic_id=int(topic_id),
                        topic=topic,
                        unhandled=int(count),
                        newest_age=_seconds(age),
                    )
                )
        return out

    # -- alarm rows --------------------------------------------------------------------

    def open(self, c: Condition) -> int | None:
        """Insert an open alarm; None when one is already open for the condition (the
        unique open_key said so), which the caller refreshes instead."""
        values = (c.kind, c.key, c.key, c.group_id, c.topic_id, c.partition, c.value)
        try:
            with self.db.single() as cursor:
                cursor.execute(_INSERT, (*values, c.threshold, c.message))
                return int(cursor.lastrowid)
        except DuplicateKey:
            return None

    def refresh(self, conditions: Sequence[Condition]) -> list[Condition]:
        """Mark the open alarms of the conditions as seen now, in one transaction (one
        commit, however many alarms stay open); returns the conditions none was open for."""
        missing = []
        with self.db.transaction() as cursor:
            # In key order: two scans at once lock the rows in the same order, no deadlock.
            for c in sorted(conditions, key=lambda c: c.key):
                if not cursor.execute(_REFRESH, (c.value, c.threshold, c.message, c.key)):
                    missing.append(c)
        return missing

    def clear(self, alarm_id: int, *, acknowledged: bool = False, by: str | None = None) -> bool:
        """Clear an open alarm; False when it was not open. An acknowledgement also moves
        last_seen_at to now, the point dead letters count as new from, and records who
        made it (`by`, cut to 64 characters) and when."""
        with self.db.single() as cursor:
            return bool(cursor.execute(*clear_query(alarm_id, acknowledged=acknowledged, by=by)))

    def get(self, alarm_id: int) -> AlarmRecord | None:
        rows = self.db.select(_GET, (alarm_id,))
        return _record(rows[0]) if rows else None

    def open_alarms(self) -> list[AlarmRecord]:
        rows = self.db.select(_OPEN, ())
        return [_record(r) for r in rows]

    def listing(
        self,
        *,
        include_cleared: bool,
        kind: str | None = None,
        group_ids: Sequence[int] | None = None,
        limit: int = 1000,
    ) -> list[AlarmRecord]:
        """Alarms newest first: the open ones, or all with include_cleared."""
        query = listing_query(
            include_cleared=include_cleared, kind=kind, group_ids=group_ids, limit=limit
        )
        return [_record(r) for r in self.db.select(*query)]

    def page(
        self,
        *,
        state: str,
        group: str | None = None,
        group_prefix: str = "",
        before_id: int | None = None,
        limit: int,
    ) -> list[AlarmRecord]:
        """Alarms newest (highest id) first, at most `limit`: those in `state` (open,
        closed, all), of the group named `group` or of the groups whose name starts with
        `group_prefix` (literally), with an id below `before_id`. A keyset page: the
        primary key orders and bounds it."""
        query = page_query(
            state=state, group=group, group_prefix=group_prefix, before_id=before_id, limit=limit
        )
        return [_record(r) for r in self.db.select(*query)]

    def pending_notices(self, limit: int) -> list[AlarmRecord]:
        """Alarms whose current notice (opened, or cleared) the webhook has not had."""
        return [_record(r) for r in self.db.select(_PENDING, (limit,))]

    def record_notice(self, alarm_id: int, attempts: int, error: str | None) -> None:
        """Count the attempts; a success stamps notified_at, a failure keeps it due."""
        with self.db.single() as cursor:
            cursor.execute(_NOTIFIED, (error, attempts, error, alarm_id))

    # -- thresholds --------------------------------------------------------------------

    def thresholds(self, group_id: int) -> tuple[int | None, int | None, int] | None:
        rows = self.db.select(_GET_THRESHOLDS, (group_id,))
        if not rows:
            return None
        lag, seconds, stall = rows[0]
        return (
            None if lag is None else int(lag),
            None if seconds is None else int(seconds),
            int(stall),
        )

    def set_thresholds(
        self, group_id: int, lag_messages: int | None, lag_seconds: int | None, stall: int
    ) -> None:
        with self.db.single() as cursor:
            cursor.execute(_THRESHOLDS, (lag_messages, lag_seconds, stall, group_id))


def _record(r: Sequence[Any]) -> AlarmRecord:
    return AlarmRecord(
        id=int(r[0]),
        kind=r[1],
        condition_key=r[2],
        status=r[3],
        group_id=None if r[4] is None else int(r[4]),
        group=r[5],
        topic_id=None if r[6] is None else int(r[6]),
        topic=r[7],
        partition=None if r[8] is None else int(r[8]),
        value=r[9],
        threshold=r[10],
        message=r[11],
        opened_at=r[12],
        last_seen_at=r[13],
        cleared_at=r[14],
        notified_at=r[15],
        notify_attempts=int(r[16]),
        notify_error=r[17],
        acknowledged_by=r[18],
        acknowledged_at=r[19],
    )
