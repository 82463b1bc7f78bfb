"""Statements of the housekeeping jobs: the consumption log purge, due retries, in-flight
rows of dead clients, and the topic watermark captures topic ranking reads."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from ems.store import in_flight
from ems.store.database import Database
from ems.store.watermarks import HighWatermarks, all_high_watermarks

# The log purge walks the log's primary key (group_id, partition_no, offset_no), one
# partition of one group at a time, from its lowest offset up: every statement reads or
# deletes a range of one partition's offsets between constant bounds.
_LOG_CUTOFF = "SELECT NOW(6) - INTERVAL %s MICROSECOND"
# The partitions of groups that have log rows, one index dive each: the first entry of the
# key, then the first one past a (group, partition). (A DISTINCT over the key is a loose
# index scan only when the optimizer's statistics say there are few partitions; otherwise
# it reads every entry of the key.)
_FIRST_LOG_PARTITION = (
    "SELECT group_id, partition_no FROM topic_group_log ORDER BY group_id, partition_no LIMIT 1"
)
_NEXT_LOG_PARTITION = (
    "SELECT group_id, partition_no FROM topic_group_log "
    "WHERE (group_id = %s AND partition_no > %s) OR group_id > %s "
    "ORDER BY group_id, partition_no LIMIT 1"
)
# The next `size` rows of a partition from an offset on, in key order: how many, their
# first and last offset, how many were updated at or after the cutoff, and the done and
# dead ones updated before it.
_LOG_WINDOW = (
    "SELECT COUNT(*), MIN(offset_no), MAX(offset_no), COALESCE(SUM(updated_at >= %s), 0), "
    "COALESCE(SUM(state = 'done' AND updated_at < %s), 0), "
    "COALESCE(SUM(state = 'dead' AND updated_at < %s), 0) "
    "FROM (SELECT offset_no, state, updated_at FROM topic_group_log FORCE INDEX (PRIMARY) "
    "WHERE group_id = %s AND partition_no = %s AND offset_no >= %s "
    "ORDER BY offset_no LIMIT %s) w"
)
# One state's rows of a window's offsets last updated before the cutoff. The key is forced
# (the multi-table form takes the hint): given an index on (state, updated_at), the
# optimizer would read every group's old rows of the state through it instead.
_PURGE_LOG = (
    "DELETE l FROM topic_group_log l FORCE INDEX (PRIMARY) "
    "WHERE l.group_id = %s AND l.partition_no = %s AND l.offset_no >= %s "
    "AND l.offset_no <= %s AND l.state = %s AND l.updated_at < %s"
)
#: States of the log rows the purge deletes (finished: nothing reads them again).
PURGED_STATES = ("done", "dead")
#: Below every offset: where a partition's walk starts.
_BOTTOM = -(2**63)
# Autoscale decisions older than the history kept and than their group's cooldown and
# scale-down window, except the group's newest applied one (the cooldown counts from it).
_OLD_DECISIONS = (
    "SELECT d.id FROM autoscale_decision d "
    "LEFT JOIN autoscale_policy p ON p.group_id = d.group_id "
    "WHERE d.decided_at < NOW(6) - INTERVAL GREATEST(%s, COALESCE(p.cooldown_seconds, 0), "
    "COALESCE(p.scale_down_window_seconds, 0)) SECOND "
    "AND NOT (d.applied = 1 AND NOT EXISTS (SELECT 1 FROM autoscale_decision n "
    "WHERE n.group_id = d.group_id AND n.applied = 1 "
    "AND (n.decided_at, n.id) > (d.decided_at, d.id))) "
    "ORDER BY d.id LIMIT %s"
)
# Cleared alarms: opened before the cutoff (the (status, opened_at) index) and cleared too.
_OLD_ALARMS = (
    "DELETE FROM alarm WHERE status = 'cleared' AND opened_at < NOW(6) - INTERVAL %s SECOND "
    "AND cleared_at < NOW(6) - INTERVAL %s SECOND LIMIT %s"
)
_DUE = "SELECT group_id, COUNT(*) FROM retry_message WHERE due_at <= NOW(6) GROUP BY group_id"
# Due retries of partitions no live client owns: they wait for the leader to assign the
# partition (a wake-up of the group prompts it).
_UNOWNED = (
    "SELECT COUNT(*) FROM retry_message r "
    "LEFT JOIN partition_assignment a "
    "ON a.group_id = r.group_id AND a.partition_no = r.partition_no "
    "LEFT JOIN consumer_client c ON c.client_id = a.client_id AND c.lease_expires_at > NOW(6) "
    "WHERE r.due_at <= NOW(6) AND c.client_id IS NULL"
)
# Retries whose message is gone (purged or deleted by hand) can never be claimed: the claim
# joins the message for its body.
_ORPHANS = (
    "SELECT r.id FROM retry_message r LEFT JOIN message m ON m.id = r.message_id "
    "WHERE m.id IS NULL LIMIT %s"
)
_ORPHAN_LOG = (
    "UPDATE topic_group_log l JOIN retry_message r ON r.group_id = l.group_id "
    "AND r.partition_no = l.partition_no AND r.offset_no = l.offset_no "
    "SET l.state = 'dead', l.error = 'message purged while waiting for a retry', "
    "l.finished_at = NOW(6), l.updated_at = NOW(6) "
    "WHERE r.id IN ({ids}) AND l.state = 'retry'"
)
_DELETE_RETRIES = "DELETE FROM retry_message WHERE id IN ({ids})"
_DELETE_DECISIONS = "DELETE FROM autoscale_decision WHERE id IN ({ids})"
# In-flight log rows whose client has no live lease, older than the group's ack timeout
# (found by primary-key ranges: ems.store.in_flight).
_NO_LIVE_CLIENT = (
    "NOT EXISTS (SELECT 1 FROM consumer_client c "
    "WHERE c.client_id = l.client_id AND c.lease_expires_at > NOW(6))"
)
_STALE = (
    "SELECT id FROM ("
    + in_flight.rows(
        "l.id",
        f"{_NO_LIVE_CLIENT} AND l.updated_at < NOW(6) - INTERVAL g.ack_timeout_seconds SECOND",
    )
    + ") AS f LIMIT %s"
)
# Each statement re-checks that the row is still in flight with a dead client: a live
# client that took the message meanwhile rewrote client_id (the log insert is an upsert).
_STILL_STALE = f"l.id IN ({{ids}}) AND l.state = 'start' AND {_NO_LIVE_CLIENT}"
_GROUP_CURSOR = "JOIN group_offset o ON o.group_id = l.group_id AND o.partition_no = l.partition_no"
# Below the committed cursor the stream will not bring the message again: it goes to the
# retry table, due now, keeping its attempt count.
_REQUEUE = (
    "INSERT INTO retry_message (group_id, topic_id, partition_no, offset_no, message_id, "
    "attempts, due_at, last_error) "
    "SELECT l.group_id, l.topic_id, l.partition_no, l.offset_no, m.id, l.attempts, NOW(6), "
    "CONCAT('reclaimed from client ', l.client_id) FROM topic_group_log l "
    f"{_GROUP_CURSOR} JOIN message m ON m.topic_id = l.topic_id "
    "AND m.partition_no = l.partition_no AND m.offset_no = l.offset_no "
    f"WHERE {_STILL_STALE} AND l.offset_no < o.committed_offset "
    "ON DUPLICATE KEY UPDATE due_at = NOW(6), "
    "attempts = GREATEST(retry_message.attempts, VALUES(attempts))"
)
_REQUEUED_LOG = (
    f"UPDATE topic_group_log l {_GROUP_CURSOR} SET l.state = 'retry', "
    "l.error = CONCAT('reclaimed from client ', l.client_id), "
    "l.finished_at = NOW(6), l.updated_at = NOW(6) "
    f"WHERE {_STILL_STALE} AND l.offset_no < o.committed_offset AND EXISTS "
    "(SELECT 1 FROM retry_message r WHERE r.group_id = l.group_id "
    "AND r.partition_no = l.partition_no AND r.offset_no = l.offset_no)"
)
# What is left below the cursor has no message any more (deleted by hand): nothing can
# redeliver it, so its log row ends as dead instead of holding back purges forever.
_GONE_LOG = (
    f"UPDATE topic_group_log l {_GROUP_CURSOR} SET l.state = 'dead', "
    "l.error = CONCAT('reclaimed from client ', l.client_id, ': message no longer stored'), "
    "l.finished_at = NOW(6), l.updated_at = NOW(6) "
    f"WHERE {_STILL_STALE} AND l.offset_no < o.committed_offset"
)
# At or above the cursor the next owner reads the message again from the stream: the log
# row is handed back (deleted), as an ordered group does with what it fetched past a failure.
_HAND_BACK = (
    f"DELETE l FROM topic_group_log l {_GROUP_CURSOR} "
    f"WHERE {_STILL_STALE} AND l.offset_no >= o.committed_offset"
)
_NOW = "SELECT NOW(6)"
_CAPTURE = (
    "INSERT IGNORE INTO topic_watermark (captured_at, topic_id, partition_no, high_watermark) "
    "VALUES (%s, %s, %s, %s)"
)
_PRUNE_WATERMARKS = (
    "DELETE FROM topic_watermark WHERE captured_at < NOW(6) - INTERVAL %s SECOND LIMIT %s"
)
_NEWEST = "SELECT MAX(captured_at) FROM topic_watermark"
# Every captured topic's growth between the newest capture and two baselines, the busiest
# first by one of them, at most a page: the three captures' rows summed by topic in the
# server, never every topic's totals sent to the client.
_CAPTURE_TOTALS = (
    "(SELECT topic_id, SUM(high_watermark) AS total FROM topic_watermark "
    "WHERE captured_at = %s GROUP BY topic_id)"
)
_TOP_VOLUMES = (
    "SELECT t.name, GREATEST(COALESCE(n.total, 0) - COALESCE(a.total, 0), 0) AS first, "
    "GREATEST(COALESCE(n.total, 0) - COALESCE(b.total, 0), 0) AS second "
    f"FROM topic t LEFT JOIN {_CAPTURE_TOTALS} n ON n.topic_id = t.id "
    f"LEFT JOIN {_CAPTURE_TOTALS} a ON a.topic_id = t.id "
    f"LEFT JOIN {_CAPTURE_TOTALS} b ON b.topic_id = t.id "
    "ORDER BY first DESC, second DESC, t.name LIMIT %s"
)
# The window's baseline in one statement: the newest capture at or before its start, else
# the earliest capture (and whether it was the former).
_BASELINE = (
    "SELECT COALESCE(b.at, e.at), b.at IS NOT NULL FROM "
    "(SELECT MAX(captured_at) AS at FROM topic_watermark WHERE captured_at <= %s) AS b, "
    "(SELECT MIN(captured_at) AS at FROM topic_watermark) AS e"
)
_TOTALS = (
    "SELECT topic_id, SUM(high_watermark) FROM topic_watermark "
    "WHERE captured_at = %s GROUP BY topic_id"
)


def by_ids(template: str, ids: Sequence[int]) -> tuple[str, tuple[object, ...]]:
    """A statement on rows by id: the template's {ids} completed with a placeholder each."""
    return template.format(ids=", ".join(["%s"] * len(ids))), tuple(ids)


@dataclass(frozen=True, kw_only=True, slots=True)
class LogWindow:
    """The next log rows of one partition of a group, in offset order."""

    rows: int
    #: Lowest and highest offset among them.
    first: int
    last: int
    #: Rows updated at or after the cutoff.
    young: int
    #: Per purged state, the rows in it updated before the cutoff.
    purgeable: dict[str, int]


@dataclass(frozen=True, kw_only=True, slots=True)
class Reclaimed:
    #: Moved to the retry table, due now (the group's cursor had passed them).
    requeued: int
    #: Log rows deleted: the stream brings them to the next owner again.
    handed_back: int
    #: Below the cursor with the message gone: marked dead.
    lost: int = 0


class MaintenanceStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def log_cutoff(self, older_than: float) -> dt.datetime:
        """The database clock minus older_than seconds."""
        cutoff: dt.datetime = self.db.select(_LOG_CUTOFF, (int(older_than * 1e6),))[0][0]
        return cutoff

    def next_log_partition(self, after: tuple[int, int] | None) -> tuple[int, int] | None:
        """The (group, partition) with log rows that comes next in key order after `after`
        (None: the first); None past the last."""
        if after is None:
            rows = self.db.select(_FIRST_LOG_PARTITION, ())
        else:
            group_id, partition = after
            rows = self.db.select(_NEXT_LOG_PARTITION, (group_id, partition, group_id))
        return (int(rows[0][0]), int(rows[0][1])) if rows else None

    def log_window(
        self, group_id: int, partition: int, start: int | None, size: int, cutoff: dt.datetime
    ) -> LogWindow | None:
        """The next `size` log rows of the group's partition from offset `start` on (None:
        from its lowest offset), aged against `cutoff`; None when there are none."""
        bottom = _BOTTOM if start is None else start
        params = (cutoff, cutoff, cutoff, group_id, partition, bottom, size)
        rows, first, last, young, done, dead = self.db.select(_LOG_WINDOW, params)[0]
        if not rows:
            return None
        return LogWindow(
            rows=int(rows),
            first=int(first),
            last=int(last),
            young=int(young),
            purgeable={"done": int(done), "dead": int(dead)},
        )

    def purge_log(
        self,
        group_id: int,
        partition: int,
        first: int,
        last: int,
        state: str,
        cutoff: dt.datetime,
    ) -> int:
        """Delete the group's log rows of the partition at offsets first..last (inclusive)
        that are in `state` and were last updated before `cutoff`, in one statement of its
        own; the rows deleted."""
        params = (group_id, partition, first, last, state, cutoff)
        with self.db.single() as cursor:
            return int(cursor.execute(_PURGE_LOG, params))

    def prune_decisions(self, older_than: float, chunk: int) -> int:
        """Delete up to `chunk` autoscale decisions older than older_than seconds and than
        their group's cooldown and scale-down window, never a group's newest applied one;
        the rows deleted."""
        ids = [int(i) for (i,) in self.db.select(_OLD_DECISIONS, (int(older_than), chunk))]
        if not ids:
            return 0
        with self.db.single() as cursor:
            return int(cursor.execute(*by_ids(_DELETE_DECISIONS, ids)))

    def prune_alarms(self, older_than: float, chunk: int) -> int:
        """Delete up to `chunk` alarms cleared more than older_than seconds ago."""
        age = int(older_than)
        with self.db.single() as cursor:
            return int(cursor.execute(_OLD_ALARMS, (age, age, chunk)))

    def due_retries(self) -> dict[int, int]:
        """Due retry messages per group."""
        return {int(g): int(n) for g, n in self.db.select(_DUE, ())}

    def unowned_due(self) -> int:
        return int(self.db.select(_UNOWNED, ())[0][0])

    def drop_orphan_retries(self, chunk: int) -> int:
        """Delete up to `chunk` retries whose message no longer exists, marking their log
        rows dead; the retries deleted."""
        ids = [int(r[0]) for r in self.db.select(_ORPHANS, (chunk,))]
        if not ids:
            return 0
        with self.db.transaction() as cursor:
            cursor.execute(*by_ids(_ORPHAN_LOG, ids))
            return int(cursor.execute(*by_ids(_DELETE_RETRIES, ids)))

    def stale_in_flight(self, chunk: int) -> list[int]:
        """Ids of up to `chunk` in-flight log rows of dead clients past their ack timeout."""
        return [int(r[0]) for r in self.db.select(_STALE, (chunk,))]

    def reclaim(self, ids: Sequence[int]) -> Reclaimed:
        """Requeue or hand back these in-flight rows, if they are still stale."""
        if not ids:
            return Reclaimed(requeued=0, handed_back=0)
        with self.db.transaction() as cursor:
            cursor.execute(*by_ids(_REQUEUE, ids))
            requeued = int(cursor.execute(*by_ids(_REQUEUED_LOG, ids)))
            lost = int(cursor.execute(*by_ids(_GONE_LOG, ids)))
            handed_back = int(cursor.execute(*by_ids(_HAND_BACK, ids)))
        return Reclaimed(requeued=requeued, handed_back=handed_back, lost=lost)

    def capture_watermarks(self, marks: HighWatermarks | None = None) -> int:
        """One topic_watermark row per partition that has messages, all with the same
        captured_at; the rows written. `marks`: high watermarks the caller already read
        just now (store.messages.all_high_watermarks); read here when None."""
        now = self.db.select(_NOW, ())[0][0]
        if marks is None:
            marks = all_high_watermarks(self.db)
        if not marks:
            return 0
        with self.db.single() as cursor:
            cursor.executemany(_CAPTURE, [(now, t, p, h) for (t, p), h in marks.items()])
        return len(marks)

    def prune_watermarks(self, older_than: float, chunk: int) -> int:
        """Delete up to `chunk` watermark captures older than older_than seconds."""
        with self.db.single() as cursor:
            return int(cursor.execute(_PRUNE_WATERMARKS, (int(older_than), chunk)))

    def now(self) -> dt.datetime:
        return self.db.select(_NOW, ())[0][0]  # type: ignore[no-any-return]

    def newest_capture(self) -> dt.datetime | None:
        return self.db.select(_NEWEST, ())[0][0]  # type: ignore[no-any-return]

    def top_volumes(
        self, newest: dt.datetime, first: dt.datetime, second: dt.datetime, limit: int | None
    ) -> list[tuple[str, int, int]]:
        """(topic, growth since the `first` capture, growth since the `second`) of the
        `limit` topics (None: all) that grew most since `first` (then `second`, then by
        name); a topic missing from a capture counts as 0 there."""
        everything = 2**64 - 1  # MySQL's "no limit" for a LIMIT that takes a parameter
        rows = self.db.select(_TOP_VOLUMES, (newest, first, second, limit or everything))
        return [(str(n), int(a), int(b)) for n, a, b in rows]

    def baseline_capture(self, start: dt.datetime) -> tuple[dt.datetime | None, bool]:
        """The newest capture at or before `start` and True; else the earliest capture
        (None: none at all) and False."""
        at, complete = self.db.select(_BASELINE, (start,))[0]
        return at, bool(complete)

    def totals(self, captured_at: dt.datetime) -> dict[int, int]:
        """Sum of the partitions' high watermarks per topic in one capture."""
        return {int(t): int(n) for t, n in self.db.select(_TOTALS, (captured_at,))}
