"""Statements on consumer groups and their committed cursors."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from contextlib import suppress
from typing import Any

from pymysql.cursors import Cursor

from ems.exceptions import GroupDeleting
from ems.store.database import Database
from ems.store.errors import DuplicateKey, StaleGeneration
from ems.types import GroupInfo, TopicInfo

_GROUP_COLUMNS = (
    "id, name, topic_id, mode, start_position, ordered, retry_ladder, max_attempts, "
    "ack_timeout_seconds, generation"
)
_GET = f"SELECT {_GROUP_COLUMNS}, deleting_at FROM consumer_group WHERE name = %s AND topic_id = %s"
_BY_NAME = f"SELECT {_GROUP_COLUMNS} FROM consumer_group WHERE name = %s ORDER BY topic_id"
_ALL = f"SELECT {_GROUP_COLUMNS} FROM consumer_group ORDER BY name, topic_id"
_OFFSETS = "SELECT partition_no, committed_offset FROM group_offset WHERE group_id = %s"
_ALL_OFFSETS = "SELECT group_id, partition_no, committed_offset FROM group_offset"
_INSERT_GROUP = (
    "INSERT INTO consumer_group (name, topic_id, mode, start_position, ordered, retry_ladder, "
    "max_attempts, ack_timeout_seconds) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
)
_INSERT_LEADER = (
    "INSERT INTO group_leader (group_id, client_id, epoch, lease_expires_at) "
    "VALUES (%s, NULL, 0, '1970-01-02')"
)
_INSERT_OFFSET = (
    "INSERT INTO group_offset (group_id, partition_no, committed_offset, generation) "
    "VALUES (%s, %s, %s, 0)"
)
_INSERT_ASSIGNMENT = (
    "INSERT INTO partition_assignment (group_id, partition_no, client_id, generation, state) "
    "VALUES (%s, %s, NULL, 0, 'released')"
)
# A commit lands only while the committing client still owns the partition at the
# generation it was granted, and still holds a live lease: a fenced client writes nothing.
# One statement commits every partition of an ack batch: {values} is a CASE over partitions
# and {owned} an OR of (partition, generation) pairs.
_COMMIT = (
    "UPDATE group_offset o JOIN partition_assignment a "
    "ON a.group_id = o.group_id AND a.partition_no = o.partition_no "
    "JOIN consumer_client c ON c.client_id = a.client_id "
    "SET o.committed_offset = CASE o.partition_no {values} END, "
    "o.generation = a.generation, o.updated_at = NOW(6) "
    "WHERE o.group_id = %s AND a.client_id = %s AND ({owned}) "
    "AND a.state <> 'released' AND c.lease_expires_at > NOW(6)"
)
_CURSOR_CASE = "WHEN %s THEN %s"
_OWNED = "(o.partition_no = %s AND a.generation = %s)"
_OWNED_AT = "(o.partition_no = %s AND a.generation = %s AND o.committed_offset = %s)"

# A pause is a lease on the database clock: taken only when no other pause holds, so one
# reset at a time pauses a group, and one that dies leaves the group to resume by itself.
_PAUSE = (
    "UPDATE consumer_group SET paused_until = NOW(6) + INTERVAL %s MICROSECOND "
    "WHERE id = %s AND (paused_until IS NULL OR paused_until <= NOW(6))"
)
_PAUSE_LEFT = (
    "SELECT paused_until, TIMESTAMPDIFF(MICROSECOND, NOW(6), paused_until) "
    "FROM consumer_group WHERE id = %s AND paused_until > NOW(6)"
)
_LAST_OFFSETS = (
    "SELECT partition_no, MAX(offset_no) FROM message WHERE topic_id = %s "
    "GROUP BY topic_id, partition_no"
)
_LOWS = "SELECT partition_no, low_offset FROM partition_low WHERE topic_id = %s"
_RESUME = "UPDATE consumer_group SET paused_until = NULL WHERE id = %s AND paused_until = %s"
_US = 1_000_000


def group_info(row: tuple[Any, ...] | Any) -> GroupInfo:
    return GroupInfo(
        id=int(row[0]),
        name=row[1],
        topic_id=int(row[2]),
        mode=row[3],
        start_position=row[4],
        ordered=bool(row[5]),
        retry_ladder=row[6],
        max_attempts=int(row[7]),
        ack_timeout_seconds=int(row[8]),
        generation=int(row[9]),
    )


class GroupStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def get(self, name: str, topic_id: int) -> GroupInfo | None:
        """The group on the topic; None when there is none, GroupDeleting while a delete
        of it is under way (no consumer joins it then)."""
        rows = self.db.select(_GET, (name, topic_id))
        if rows and rows[0][-1] is not None:
            raise GroupDeleting(f"group {name!r} is being deleted")
        return group_info(rows[0]) if rows else None

    def by_name(self, name: str) -> list[GroupInfo]:
        rows = self.db.select(_BY_NAME, (name,))
        return [group_info(r) for r in rows]

    def all(self) -> list[GroupInfo]:
        """Every group's subscription, by name and topic id."""
        rows = self.db.select(_ALL, ())
        return [group_info(r) for r in rows]

    def create(self, spec: GroupInfo, topic: TopicInfo) -> GroupInfo:
        """Create the group with its leader row, and for a cluster group its cursors at the
        start position (as of now) and unowned assignment rows. When another client
        created it first, that group is returned."""
        with suppress(DuplicateKey), self.db.transaction() as cursor:
            self._insert(cursor, spec, topic)
        found = self.get(spec.name, topic.id)
        assert found is not None, "the group was just created"
        return found

    def _insert(self, cursor: Cursor, spec: GroupInfo, topic: TopicInfo) -> None:
        values = (
            spec.name,
            topic.id,
            spec.mode,
            spec.start_position,
            spec.ordered,
            spec.retry_ladder,
            spec.max_attempts,
            spec.ack_timeout_seconds,
        )
        cursor.execute(_INSERT_GROUP, values)
        group_id = int(cursor.lastrowid)
        cursor.execute(_INSERT_LEADER, (group_id,))
        if spec.mode == "cluster":
            starts = start_offsets(cursor, topic, spec.start_position)
            cursor.executemany(_INSERT_OFFSET, [(group_id, p, o) for p, o in starts.items()])
            parts = [(group_id, p) for p in range(topic.partitions)]
            cursor.executemany(_INSERT_ASSIGNMENT, parts)

    def offsets(self, group_id: int) -> dict[int, int]:
        """Committed cursor (next offset to consume) per partition."""
        rows = self.db.select(_OFFSETS, (group_id,))
        return {int(p): int(o) for p, o in rows}

    def all_offsets(self) -> dict[int, dict[int, int]]:
        """offsets() of every group that has a cursor, by group id (one statement)."""
        found: dict[int, dict[int, int]] = {}
        for g, p, o in self.db.select(_ALL_OFFSETS, ()):
            found.setdefault(int(g), {})[int(p)] = int(o)
        return found

    def pause(self, group_id: int, seconds: float) -> dt.datetime | None:
        """Pause the group for `seconds` (database clock): its leader revokes every
        partition and grants none until then. Returns the pause's end, which names this
        pause to resume(); None when another pause already holds."""
        with self.db.single() as cursor:
            if cursor.execute(_PAUSE, (int(seconds * _US), group_id)) != 1:
                return None
            cursor.execute(_PAUSE_LEFT, (group_id,))
            row = cursor.fetchone()
        return None if row is None else row[0]

    def pause_left(self, group_id: int) -> float | None:
        """Seconds the group stays paused (database clock), or None when it is not."""
        rows = self.db.select(_PAUSE_LEFT, (group_id,))
        return int(rows[0][1]) / _US if rows else None

    def resume(self, group_id: int, until: dt.datetime) -> None:
        """End the pause that pause() returned `until` for (a no-op once it is gone)."""
        with self.db.single() as cursor:
            cursor.execute(_RESUME, (group_id, until))

    def commit(self, group_id: int, client_id: str, cursors: Mapping[int, tuple[int, int]]) -> None:
        """Commit cursors {partition: (next offset, generation)} all together, or none:
        StaleGeneration when this client no longer owns one of the partitions."""
        with self.db.transaction() as cursor:
            commit_cursors(cursor, group_id, client_id, cursors)


def commit_cursors(
    cursor: Cursor,
    group_id: int,
    client_id: str,
    cursors: Mapping[int, tuple[int, int]],
    statement: Callable[[str], str] | None = None,
    expected: Mapping[int, int] | None = None,
) -> None:
    """Within the caller's transaction, which StaleGeneration rolls back (statement: how
    the statement names its tables, when not through ems's own connection). With
    `expected` ({partition: stored cursor}), a cursor moves only from that value: a
    commit of the same messages whose reply was lost, found to have landed after all,
    refuses this one."""
    if not cursors:
        return
    items = sorted(cursors.items())
    owned_sql = _OWNED
    owned = [v for p, (_, generation) in items for v in (p, generation)]
    if expected is not None:
        owned_sql = _OWNED_AT
        owned = [v for p, (_, g) in items for v in (p, g, expected[p])]
    sql = (statement or str)(_COMMIT).format(
        values=" ".join([_CURSOR_CASE] * len(items)),
        owned=" OR ".join([owned_sql] * len(items)),
    )
    values = [v for p, (offset, _) in items for v in (p, offset)]
    if cursor.execute(sql, (*values, group_id, client_id, *owned)) != len(items):
        partitions = [p for p, _ in items]
        raise StaleGeneration(
            f"{client_id} no longer owns all of partitions {partitions} at the generations "
            "(and cursors) it committed with; nothing was committed"
        )


def start_offsets(cursor: Cursor, topic: TopicInfo, position: str) -> dict[int, int]:
    """Per partition: the start of its log (earliest: its low watermark, 0 when nothing
    was purged) or the offset after the highest stored one (latest). Not the lowest
    stored offset: sends allocated lower offsets may still be in flight (offsets are
    handed out before their rows commit), and a group that started past them would never
    see them; from the low watermark the reader waits for them as for any hole."""
    cursor.execute(_LOWS, (topic.id,))
    low = {int(p): int(o) for p, o in cursor.fetchall()}
    if position == "earliest":
        return {p: low.get(p, 0) for p in range(topic.partitions)}
    cursor.execute(_LAST_OFFSETS, (topic.id,))
    found = {int(p): int(o) + 1 for p, o in cursor.fetchall()}
    # A partition a purge emptied starts at its low watermark, not at 0.
    return {p: found.get(p, low.get(p, 0)) for p in range(topic.partitions)}
