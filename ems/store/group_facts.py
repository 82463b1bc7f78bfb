"""The facts a page of groups shows beside each group, read over the page's ids (IN lists
of integers) in a fixed number of statements whatever the page's size: its members, its
lag, cursorless partitions, rewinds and oldest unconsumed message, what waits in the
retry and dead-letter tables (capped reads), and its newest finished lag report. Each
statement reads index entries: a watermark is one dive into message's unique key, a
snapshot one dive into its (group_id, partition_no, captured_at) key."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ems.store.database import Database
from ems.values.browse import WAITING_CAP, GroupFacts

_US = 1_000_000

# What waits beside the stream, per group: retries (by the (group_id, due_at) index) and
# dead letters not resent (by the (group_id, created_at) index), each read up to
# WAITING_CAP + 1 rows: a page never counts a big table, and a group with more shows
# "more than WAITING_CAP".
_WAITING_ONE = "(SELECT 0 AS k, group_id AS g FROM retry_message WHERE group_id = %s LIMIT %s)"
_DEAD_ONE = (
    "(SELECT 1 AS k, group_id AS g FROM dead_message WHERE group_id = %s "
    "AND resent_at IS NULL LIMIT %s)"
)
_MEMBERS = (
    "SELECT group_id, COUNT(*), COUNT(CASE WHEN lease_expires_at > NOW(6) THEN 1 END) "
    "FROM consumer_client WHERE group_id IN ({ids}) GROUP BY group_id"
)
# Per partition of each cluster group (partition_head lists every partition, so one whose
# cursor row is missing still counts): the high watermark as GroupAdmin reads it (one past
# the highest stored offset; the low watermark of a partition a purge emptied; 0 when
# never written), the lowest stored offset for a partition
# without a cursor, and the two newest snapshots' cursors. Grouped, so it is materialized
# and each dive runs once.
_PARTITIONS = (
    "SELECT g.id AS group_id, h.partition_no, o.committed_offset AS committed, "
    " COALESCE((SELECT m.offset_no + 1 FROM message m WHERE m.topic_id = g.topic_id "
    "  AND m.partition_no = h.partition_no ORDER BY m.offset_no DESC LIMIT 1), "
    " (SELECT pl.low_offset FROM partition_low pl WHERE pl.topic_id = g.topic_id "
    "  AND pl.partition_no = h.partition_no)) AS high, "
    " CASE WHEN o.committed_offset IS NULL THEN "
    " (SELECT m.offset_no FROM message m WHERE m.topic_id = g.topic_id "
    "  AND m.partition_no = h.partition_no ORDER BY m.offset_no LIMIT 1) END AS first_offset, "
    " (SELECT s.committed_offset FROM offset_snapshot s WHERE s.group_id = g.id "
    "  AND s.partition_no = h.partition_no ORDER BY s.captured_at DESC LIMIT 1) AS last_snap, "
    " (SELECT s.committed_offset FROM offset_snapshot s WHERE s.group_id = g.id "
    "  AND s.partition_no = h.partition_no ORDER BY s.captured_at DESC LIMIT 1, 1) AS prev_snap, "
    # The oldest unconsumed message: the first stored at or after the cursor (from offset
    # 0 without one), as the partition page reads it: one dive into the message key.
    " (SELECT m.created_at FROM message m WHERE m.topic_id = g.topic_id "
    "  AND m.partition_no = h.partition_no AND m.offset_no >= COALESCE(o.committed_offset, 0) "
    "  ORDER BY m.offset_no LIMIT 1) AS oldest "
    "FROM consumer_group g JOIN partition_head h ON h.topic_id = g.topic_id "
    "LEFT JOIN group_offset o ON o.group_id = g.id AND o.partition_no = h.partition_no "
    "WHERE g.id IN ({ids}) AND g.mode = 'cluster' "
    "GROUP BY g.id, g.topic_id, h.partition_no, o.committed_offset"
)
_LAGS = (
    "SELECT p.group_id, "
    "SUM(GREATEST(COALESCE(p.high, 0) - COALESCE(p.committed, p.first_offset, 0), 0)), "
    "COUNT(CASE WHEN p.committed IS NULL THEN 1 END), "
    "COUNT(CASE WHEN p.last_snap < p.prev_snap THEN 1 END), "
    "TIMESTAMPDIFF(MICROSECOND, MIN(p.oldest), NOW(6)) "
    f"FROM ({_PARTITIONS}) p GROUP BY p.group_id"
)
# The newest report of each group whose run is done: the (group_id, report_id) index read
# backwards, stopping at the first row of a finished run. Only the newest run can still be
# running, so at most its rows are skipped (the run's status is looked up once per run, by
# the subquery cache), however many reports are kept. (A join with lag_report_run let the
# optimizer buffer the join and sort every report row of the group.)
_LATEST_REPORT = (
    "SELECT r.report_id FROM lag_report r FORCE INDEX (ix_lag_report_group_id_report_id) "
    "WHERE r.group_id = {group} "
    "AND (SELECT u.status FROM lag_report_run u WHERE u.id = r.report_id) = 'done' "
    "ORDER BY r.report_id DESC LIMIT 1"
)
_REPORTS = (
    "SELECT x.group_id, x.report_id, u.as_of, "
    " (SELECT r.group_status FROM lag_report r WHERE r.report_id = x.report_id "
    "  AND r.group_id = x.group_id LIMIT 1) "
    "FROM (SELECT g.id AS group_id, ({latest}) AS report_id FROM consumer_group g "
    " WHERE g.id IN ({ids}) GROUP BY g.id) x "
    "JOIN lag_report_run u ON u.id = x.report_id"
)
_WAITING = "SELECT w.g, w.k, COUNT(*) FROM ({union}) w GROUP BY w.g, w.k"


def marks(ids: Sequence[int]) -> str:
    """An IN list of these ids, written in as integers."""
    return ", ".join(str(int(i)) for i in ids)


def lags_query(group_ids: Sequence[int]) -> tuple[str, tuple[object, ...]]:
    """The live lags of these groups (their ids written in, as integers)."""
    return _LAGS.format(ids=marks(group_ids)), ()


def waiting_query(group_ids: Sequence[int]) -> tuple[str, tuple[object, ...]]:
    """What waits beside the stream for these groups (see waiting)."""
    union = " UNION ALL ".join([_WAITING_ONE, _DEAD_ONE] * len(group_ids))
    params = [v for g in group_ids for v in (g, WAITING_CAP + 1) * 2]
    return _WAITING.format(union=union), tuple(params)


def age(us: Any) -> float | None:
    """An age in seconds from a TIMESTAMPDIFF in microseconds, never below 0 (a message
    written in the same microsecond as the read)."""
    return None if us is None else max(0, int(us)) / _US


def waiting(db: Database, group_ids: Sequence[int]) -> dict[int, tuple[int, int]]:
    """{group id: (retries waiting, dead letters not resent)}, each group's rows of
    each table read up to WAITING_CAP + 1 (one statement; the counts are over the capped
    reads, never over a table)."""
    if not group_ids:
        return {}
    found: dict[int, list[int]] = {}
    for g, k, n in db.select(*waiting_query(group_ids)):
        found.setdefault(int(g), [0, 0])[int(k)] = int(n)
    return {g: (counts[0], counts[1]) for g, counts in found.items()}


def group_facts(db: Database, rows: Sequence[Any]) -> list[GroupFacts]:
    """The page's groups with their members, lag and newest report: three statements
    over the page's ids."""
    if not rows:
        return []
    ids = marks([int(r[0]) for r in rows])
    members = {
        int(g): (int(n), int(live)) for g, n, live in db.select(_MEMBERS.format(ids=ids), ())
    }
    lags = {
        int(g): (int(lag), int(cursorless), int(rewound), age(oldest))
        for g, lag, cursorless, rewound, oldest in db.select(_LAGS.format(ids=ids), ())
    }
    beside = waiting(db, [int(r[0]) for r in rows])
    latest = _LATEST_REPORT.format(group="g.id")
    reports = {
        int(g): (int(report), at, status)
        for g, report, at, status in db.select(_REPORTS.format(latest=latest, ids=ids), ())
    }
    out = []
    for r in rows:
        gid = int(r[0])
        n, live = members.get(gid, (0, 0))
        lag = lags.get(gid)
        report, at, status = reports.get(gid, (None, None, None))
        out.append(
            GroupFacts(
                id=gid,
                name=r[1],
                topic_id=int(r[2]),
                topic=r[3],
                mode=r[4],
                start_position=r[5],
                members=n,
                live_members=live,
                total_lag=None if r[4] != "cluster" else (lag[0] if lag else 0),
                partitions_without_cursor=lag[1] if lag else 0,
                rewound_partitions=lag[2] if lag else 0,
                lag_age_seconds=lag[3] if lag and r[4] == "cluster" else None,
                retries_waiting=beside.get(gid, (0, 0))[0],
                dead_letters=beside.get(gid, (0, 0))[1],
                report_id=report,
                report_status=None if status is None else str(status),
                report_as_of=at,
            )
        )
    return out
