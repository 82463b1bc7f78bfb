"""Statements of offset resets: the offsets a partition holds, the first offset at a point
in time, and the one transaction that lands new cursors on a paused group."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pymysql.cursors import Cursor

from ems.exceptions import GroupBusy, PlanChanged
from ems.store.database import Database
from ems.store.time_index import TimeIndexStore
from ems.types import IN_FLIGHT_SPAN

_BOUNDS = (
    "SELECT partition_no, MAX(offset_no) FROM message "
    "WHERE topic_id = %s GROUP BY topic_id, partition_no"
)
_LOWS = "SELECT partition_no, low_offset FROM partition_low WHERE topic_id = %s"
# The first message at or after a time is MIN(offset_no) over the rows at or after it, not
# the row the time index meets first: a producer that committed late (out of order) wrote a
# lower offset with a later created_at. Both statements below are exact; the cheaper one
# reads the rows on the smaller side of the first row the time index meets.
_FIRST_ROW_AT = (
    "SELECT offset_no FROM message FORCE INDEX (ix_message_topic_id_partition_no_created_at_id) "
    "WHERE topic_id = %s AND partition_no = %s AND created_at >= %s AND offset_no >= %s "
    "AND tombstone = 0 ORDER BY created_at LIMIT 1"
)
FIRST_BY_OFFSET = (
    "SELECT offset_no FROM message FORCE INDEX (PRIMARY) "
    "WHERE topic_id = %s AND partition_no = %s AND offset_no BETWEEN %s AND %s "
    "AND created_at >= %s AND tombstone = 0 ORDER BY offset_no LIMIT 1"
)
_FIRST_BY_TIME = (
    "SELECT MIN(offset_no) FROM message "
    "FORCE INDEX (ix_message_topic_id_partition_no_created_at_id) "
    "WHERE topic_id = %s AND partition_no = %s AND created_at >= %s AND offset_no >= %s "
    "AND tombstone = 0"
)
# The landing transaction takes its locks in the leader's order (group row, then
# assignment rows) so that the two never deadlock on each other.
_LOCK_GROUP = (
    "SELECT generation FROM consumer_group "
    "WHERE id = %s AND paused_until = %s AND paused_until > NOW(6) FOR UPDATE"
)
_LOCK_ASSIGNMENTS = (
    "SELECT partition_no, client_id, state FROM partition_assignment WHERE group_id = %s FOR UPDATE"
)
_LIVE = "SELECT client_id FROM consumer_client WHERE group_id = %s AND lease_expires_at > NOW(6)"
# After the check no live member holds a row that is not released, so the rows left are a
# dead client's: released with no owner, no stale owner can ever commit under them.
_RELEASE_DEAD = (
    "UPDATE partition_assignment SET client_id = NULL, state = 'released', "
    "updated_at = NOW(6) WHERE group_id = %s AND state <> 'released'"
)
_LOCK_CURSORS = (
    "SELECT partition_no, committed_offset FROM group_offset WHERE group_id = %s FOR UPDATE"
)
_BUMP_AND_RESUME = (
    "UPDATE consumer_group SET generation = generation + 1, paused_until = NULL WHERE id = %s"
)
_SET_CURSOR = (
    "UPDATE group_offset SET committed_offset = %s, generation = %s, updated_at = NOW(6) "
    "WHERE group_id = %s AND partition_no = %s"
)
# What a dead member had in flight is handed back (its log rows deleted): its window past
# the old cursor (or past the low watermark, when the cursor lies below it), and
# redeliveries of the retries dropped below. Found nowhere else once the cursor moved
# (ems.store.in_flight); the new cursor decides what comes next.
_LOW_OF_GROUP = (
    "SELECT pl.low_offset FROM consumer_group g JOIN partition_low pl "
    "ON pl.topic_id = g.topic_id AND pl.partition_no = %s WHERE g.id = %s"
)
_HAND_BACK_WINDOW = (
    "DELETE FROM topic_group_log WHERE group_id = %s AND partition_no = %s "
    f"AND offset_no >= %s AND offset_no < %s + {IN_FLIGHT_SPAN} AND state = 'start'"
)
_HAND_BACK_RETRIED = (
    "DELETE l FROM retry_message r STRAIGHT_JOIN topic_group_log l ON l.group_id = r.group_id "
    "AND l.partition_no = r.partition_no AND l.offset_no = r.offset_no "
    "WHERE r.group_id = %s AND r.partition_no = %s AND r.offset_no >= %s AND l.state = 'start'"
)
# Retries at or after the new cursor would come twice: the stream delivers them again.
_DROP_RETRIES = (
    "DELETE FROM retry_message WHERE group_id = %s AND partition_no = %s AND offset_no >= %s"
)


_GENERATION = "SELECT generation FROM consumer_group WHERE id = %s"


@dataclass(frozen=True, kw_only=True, slots=True)
class Landed:
    """What the landing transaction found and wrote."""

    #: The group generation after the bump; every earlier grant is stale.
    generation: int
    #: Committed cursors just before the reset, of the partitions reset.
    before: dict[int, int]
    #: Partitions a dead client still held, now released.
    released_dead: int
    #: Retry rows dropped because the stream delivers their offsets again.
    retries_dropped: int


class ResetStore:
    def __init__(self, db: Database, time_index: TimeIndexStore) -> None:
        self.db = db
        self.time_index = time_index

    def bounds(self, topic_id: int) -> dict[int, tuple[int, int | None]]:
        """Per partition that has rows or a low watermark: (highest stored offset or -1,
        low watermark or None). Index dives only."""
        rows = self.db.select(_BOUNDS, (topic_id,))
        lows = {int(p): int(o) for p, o in self.db.select(_LOWS, (topic_id,))}
        found: dict[int, tuple[int, int | None]] = {
            int(p): (int(hi), lows.get(int(p))) for p, hi in rows
        }
        for p, low in lows.items():
            found.setdefault(p, (-1, low))
        return found

    def first_at(
        self, topic_id: int, partition: int, at: dt.datetime, earliest: int, high: int
    ) -> int | None:
        """The lowest offset in [earliest, high) of a message (tombstones aside) created at
        or after `at`; None when there is none. Through the time index: one segment read
        when a segment's prefix_max reaches `at`; else past the index only."""
        segment = self.time_index.segment_at(topic_id, partition, at)
        if segment is not None:
            start, end = segment
            args: tuple[object, ...] = (topic_id, partition, max(start, earliest), end - 1, at)
            if start < end and max(start, earliest) < end:
                rows = self.db.select(FIRST_BY_OFFSET, args)
                if rows:
                    return int(rows[0][0])
            # Nothing left of it at or after `earliest` (purged): the rest lies past it.
            after = end
        else:
            after = self.time_index.end(topic_id, partition) or earliest
        return self._first_past(topic_id, partition, at, max(after, earliest), high)

    def _first_past(
        self, topic_id: int, partition: int, at: dt.datetime, earliest: int, high: int
    ) -> int | None:
        """As first_at, over [earliest, high) without the index: the candidate the time
        index meets first, then whichever side of it is shorter."""
        seen = self.db.select(_FIRST_ROW_AT, (topic_id, partition, at, earliest))
        if not seen:
            return None
        candidate = int(seen[0][0])
        if candidate - earliest <= high - candidate:
            args: tuple[object, ...] = (topic_id, partition, earliest, candidate, at)
            rows = self.db.select(FIRST_BY_OFFSET, args)
        else:
            rows = self.db.select(_FIRST_BY_TIME, (topic_id, partition, at, earliest))
        found = rows[0][0] if rows else None
        return candidate if found is None else int(found)

    def land(
        self,
        group_id: int,
        until: dt.datetime,
        cursors: Mapping[int, int],
        check: Callable[[Mapping[int, int]], Sequence[str]] | None = None,
    ) -> Landed | None:
        """In one transaction on the group paused until `until`: unless a live member
        still holds a partition (then None, nothing written), release the partitions of
        dead clients, set the cursors, hand back what dead members had in flight (their
        windows past the old cursors, and redeliveries of the retries the new cursors
        drop), bump the generation and end the pause. GroupBusy
        when that pause no longer holds. `check` sees the committed cursors as locked: when
        it names problems, PlanChanged is raised and nothing is written."""
        with self.db.transaction() as cursor:
            if not cursor.execute(_LOCK_GROUP, (group_id, until)):
                raise GroupBusy(f"the pause of group {group_id} ended before the reset landed")
            if _held_by_live(cursor, group_id):
                return None  # nothing written; the commit only ends the locks
            released = int(cursor.execute(_RELEASE_DEAD, (group_id,)))
            cursor.execute(_LOCK_CURSORS, (group_id,))
            current = {int(p): int(o) for p, o in cursor.fetchall()}
            problems = check(current) if check is not None else ()
            if problems:
                raise PlanChanged("; ".join(problems))  # rolls the release back
            cursor.execute(_BUMP_AND_RESUME, (group_id,))
            cursor.execute(_GENERATION, (group_id,))
            ((generation,),) = cursor.fetchall()
            items = sorted(cursors.items())
            cursor.executemany(_SET_CURSOR, [(o, generation, group_id, p) for p, o in items])
            for p, o in items:
                cursor.execute(_LOW_OF_GROUP, (p, group_id))
                low = cursor.fetchone()
                start = max(current.get(p, o), int(low[0] or 0) if low else 0)
                cursor.execute(_HAND_BACK_WINDOW, (group_id, p, start, start))
                cursor.execute(_HAND_BACK_RETRIED, (group_id, p, o))
            dropped = sum(int(cursor.execute(_DROP_RETRIES, (group_id, p, o))) for p, o in items)
        return Landed(
            generation=generation,
            before={p: current[p] for p, _ in items if p in current},
            released_dead=released,
            retries_dropped=dropped,
        )


def _held_by_live(cursor: Cursor, group_id: int) -> bool:
    cursor.execute(_LOCK_ASSIGNMENTS, (group_id,))
    rows = cursor.fetchall()
    cursor.execute(_LIVE, (group_id,))
    live = {r[0] for r in cursor.fetchall()}
    return any(state != "released" and client in live for _, client, state in rows)
