"""Statements of the admin console's read models (ems.ops.browse): pages of topics and
groups, a group's per-partition extras, its newest lag report, lag and volume series.

Every statement reads index entries, never counts a message or log table: a watermark is
one dive into message's unique key (topic_id, partition_no, offset_no), a snapshot or a
watermark capture one dive into its (owner, partition_no, captured_at) key. A page runs
a fixed number of statements whatever its size, each over the ids of the page (IN lists).
Series are sampled, not scanned: one dive per partition and bucket of the window, so
their cost does not grow with the capture rate or the rows stored.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from ems.store.database import Database
from ems.store.groups import group_info
from ems.store.lag_reports import GROUP_STATUS_ORDER, WORST_GROUP_STATUS
from ems.types import GroupInfo, TopicInfo
from ems.values.browse import (
    WAITING_CAP,
    GroupFacts,
    MemberLoad,
    PartitionFacts,
    PartitionRow,
    TopicRow,
    WatermarkTotals,
)
from ems.values.rows import GroupLag

_US = 1_000_000

# Pages are read in the order of the name's unique index: forced, so that a small table's
# plan (a scan and a sort) is not kept as the table grows.
_TOPICS = (
    "SELECT id, name, partitions, retention_hours, delete_consumed, max_body_bytes, created_at "
    "FROM topic FORCE INDEX (uq_topic_name) WHERE {where} ORDER BY name LIMIT %s"
)
# The derived table is grouped, so it is materialized: each dive runs once per partition.
_TOPIC_TOTALS = (
    "SELECT p.topic_id, "
    "SUM(COALESCE(p.first_offset, p.purged_below, 0)), "
    "SUM(COALESCE(p.last_offset + 1, p.purged_below, 0)), "
    "SUM(COALESCE(p.last_offset + 1 - p.first_offset, 0)) "
    "FROM (SELECT h.topic_id, h.partition_no, MAX(pl.low_offset) AS purged_below, "
    " (SELECT m.offset_no FROM message m WHERE m.topic_id = h.topic_id "
    "  AND m.partition_no = h.partition_no ORDER BY m.offset_no LIMIT 1) AS first_offset, "
    " (SELECT m.offset_no FROM message m WHERE m.topic_id = h.topic_id "
    "  AND m.partition_no = h.partition_no ORDER BY m.offset_no DESC LIMIT 1) AS last_offset "
    " FROM partition_head h LEFT JOIN partition_low pl "
    " ON pl.topic_id = h.topic_id AND pl.partition_no = h.partition_no "
    " WHERE h.topic_id IN ({ids}) GROUP BY h.topic_id, h.partition_no) p "
    "GROUP BY p.topic_id"
)

_GROUPS = (
    "SELECT g.id, g.name, g.topic_id, t.name, g.mode, g.start_position FROM ("
    " SELECT id, name, topic_id, mode, start_position FROM consumer_group g {index} "
    " WHERE {where} ORDER BY name, topic_id LIMIT %s) g "
    "JOIN topic t ON t.id = g.topic_id ORDER BY g.name, g.topic_id"
)
_BY_NAME = "FORCE INDEX (uq_consumer_group_name_topic_id)"
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
# A group's statuses in one report for the partitions of one page: a range of the
# (report_id, group_id, partition_no) primary key.
_REPORT_STATUSES = (
    "SELECT partition_no, status FROM lag_report "
    "WHERE report_id = %s AND group_id = %s AND partition_no BETWEEN %s AND %s"
)
# One page of a group's partitions, after a partition number (keyset on partition_head's
# primary key, LIMIT inside the derived table so that only the page's partitions are
# dived into): the cursor, the high watermark as GroupAdmin reads it (one past the
# highest stored offset, or the low watermark of a partition a purge emptied), the
# lowest stored offset, the age of the oldest unconsumed message (the first stored at or
# after the cursor: a hole or a purge may leave no row at the cursor itself) and the two
# newest snapshots' cursors.
_PARTITION_PAGE = (
    "SELECT p.partition_no, p.committed, p.high, p.first_offset, "
    "TIMESTAMPDIFF(MICROSECOND, p.oldest_at, NOW(6)), p.last_snap < p.prev_snap "
    "FROM (SELECT h.partition_no, o.committed_offset AS committed, "
    " COALESCE((SELECT m.offset_no + 1 FROM message m WHERE m.topic_id = h.topic_id "
    "  AND m.partition_no = h.partition_no ORDER BY m.offset_no DESC LIMIT 1), "
    " (SELECT pl.low_offset FROM partition_low pl WHERE pl.topic_id = h.topic_id "
    "  AND pl.partition_no = h.partition_no)) AS high, "
    " (SELECT m.offset_no FROM message m WHERE m.topic_id = h.topic_id "
    "  AND m.partition_no = h.partition_no ORDER BY m.offset_no LIMIT 1) AS first_offset, "
    " (SELECT m.created_at FROM message m WHERE m.topic_id = h.topic_id "
    "  AND m.partition_no = h.partition_no AND m.offset_no >= COALESCE(o.committed_offset, 0) "
    "  ORDER BY m.offset_no LIMIT 1) AS oldest_at, "
    " (SELECT s.committed_offset FROM offset_snapshot s WHERE s.group_id = %s "
    "  AND s.partition_no = h.partition_no ORDER BY s.captured_at DESC LIMIT 1) AS last_snap, "
    " (SELECT s.committed_offset FROM offset_snapshot s WHERE s.group_id = %s "
    "  AND s.partition_no = h.partition_no ORDER BY s.captured_at DESC LIMIT 1, 1) AS prev_snap "
    " FROM partition_head h LEFT JOIN group_offset o "
    " ON o.group_id = %s AND o.partition_no = h.partition_no "
    " WHERE h.topic_id = %s AND h.partition_no > %s AND h.partition_no < %s "
    " ORDER BY h.partition_no LIMIT %s) p ORDER BY p.partition_no"
)
_MEMBER_LOADS = (
    "SELECT client_id, created_at, cpu_percent, load_rate, reported_at "
    "FROM consumer_client WHERE group_id = %s"
)
# The overview: counts of the small tables (never of the message or log tables), the
# newest report's total, and its most urgent groups: worst status first (ERR, WARN, OK,
# then groups the report does not cover), then by name. The report's rows are read by its
# primary key (report_id, group_id, partition_no), once per group.
_OVERVIEW_COUNTS = (
    "SELECT (SELECT COUNT(*) FROM topic), (SELECT COUNT(*) FROM consumer_group), "
    "(SELECT COUNT(*) FROM alarm WHERE status = 'open')"
)
_REPORT_TOTAL = "SELECT SUM(lag), COUNT(*) FROM lag_report WHERE report_id = %s"
_URGENT_GROUPS = (
    "SELECT g.id, g.name, g.topic_id, g.mode, g.start_position, g.ordered, g.retry_ladder, "
    "g.max_attempts, g.ack_timeout_seconds, g.generation, t.name, r.worst, r.lag, r.n "
    "FROM consumer_group g JOIN topic t ON t.id = g.topic_id LEFT JOIN ("
    f" SELECT group_id, {WORST_GROUP_STATUS} AS worst, SUM(lag) AS lag, COUNT(*) AS n "
    " FROM lag_report WHERE report_id = %s "
    " GROUP BY group_id) r ON r.group_id = g.id "
    "ORDER BY COALESCE(r.worst, -1) DESC, g.name, g.topic_id LIMIT %s"
)

_DELETE_CONSUMED = "SELECT delete_consumed FROM topic WHERE id = %s"

# A series samples its window: per bucket, the last capture in it (one dive into the
# captured_at index, which MIN/MAX answers while the statement is optimized: every capture
# writes one captured_at for all its rows), then per partition that capture's row (one
# lookup of the (owner, partition_no, captured_at) unique key, a join in that order: a
# join's lookup costs a third of a correlated subquery's, and the captured_at index, which
# holds every owner's rows of a capture, is never the one read). Each bucket is its own
# SELECT with constant bounds, so no plan depends on the optimizer's estimates.
_CAPTURE_IN = (
    "SELECT {n} AS n, (SELECT MAX(captured_at) FROM {table} WHERE {lower}captured_at <= %s) AS at"
)
_SAMPLED = (
    "SELECT STRAIGHT_JOIN c.n, c.at, SUM({value}), COUNT(*) FROM ({captures}) c "
    "JOIN partition_head h ON h.topic_id = %s "
    "JOIN {table} s FORCE INDEX ({key}) ON s.{owner} = %s "
    "AND s.partition_no = h.partition_no AND s.captured_at = c.at "
    "WHERE c.at IS NOT NULL GROUP BY c.n, c.at ORDER BY c.n"
)
_LAG = "GREATEST(s.high_watermark - s.committed_offset, 0)"
_VOLUME = "s.high_watermark"
_AFTER_CAPTURE = "captured_at > %s AND "
_KEY = "uq_{table}_{owner}_partition_no_captured_at"
_WAITING = "SELECT w.g, w.k, COUNT(*) FROM ({union}) w GROUP BY w.g, w.k"
_ANY = "1 = 1"
_NAME_LIKE = "{column} LIKE %s ESCAPE '!'"
_NAME_AFTER = "{column} > %s"
_AFTER_GROUP = " AND g.name >= %s AND (g.name > %s OR g.topic_id > %s)"
_OF_TOPIC = "g.topic_id = %s"

#: A series bucket: (start, end]; no start: everything up to the end.
Bucket = tuple[dt.datetime | None, dt.datetime]
#: Per bucket whose last capture holds rows of the group or topic: the bucket's number,
#: that capture's time, the summed value and the partitions it has rows for.
SeriesRow = tuple[int, dt.datetime, int, int]


def like_prefix(prefix: str) -> str:
    """A LIKE pattern (ESCAPE '!') matching what starts with `prefix`, its % and _ taken
    literally."""
    return prefix.replace("!", "!!").replace("%", "!%").replace("_", "!_") + "%"


def _marks(ids: Sequence[int]) -> str:
    return ", ".join(str(int(i)) for i in ids)


def topics_query(prefix: str, after: str | None, limit: int) -> tuple[str, tuple[object, ...]]:
    """A page of topics by name (one row more than `limit`: whether more follow)."""
    where, params = _name_filter("name", prefix, after)
    return _TOPICS.format(where=where), (*params, limit + 1)


def groups_query(
    prefix: str, after: tuple[str, int | None] | None, limit: int
) -> tuple[str, tuple[object, ...]]:
    """A page of groups by name then topic id (see BrowseStore.groups; one row more than
    `limit`)."""
    name, topic_id = after if after is not None else (None, None)
    where, params = _name_filter("g.name", prefix, name if topic_id is None else None)
    if name is not None and topic_id is not None:
        where += _AFTER_GROUP
        params += [name, name, topic_id]
    return _GROUPS.format(index=_BY_NAME, where=where), (*params, limit + 1)


def groups_of_topic_query(topic_id: int, limit: int) -> tuple[str, tuple[object, ...]]:
    return _GROUPS.format(index="", where=_OF_TOPIC), (topic_id, limit + 1)


def lags_query(group_ids: Sequence[int]) -> tuple[str, tuple[object, ...]]:
    """The live lags of these groups (their ids written in, as integers)."""
    return _LAGS.format(ids=_marks(group_ids)), ()


def series_query(
    table: str, owner: str, value: str, owner_id: int, topic_id: int, buckets: Sequence[Bucket]
) -> tuple[str, tuple[object, ...]]:
    """A series sampled from `table` (rows of `owner` = owner_id): one SELECT per bucket."""
    captures, params = [], []
    for n, (start, end) in enumerate(buckets):
        lower = "" if start is None else _AFTER_CAPTURE
        captures.append(_CAPTURE_IN.format(n=n, table=table, lower=lower))
        params += [end] if start is None else [start, end]
    sql = _SAMPLED.format(
        value=value,
        table=table,
        key=_KEY.format(table=table, owner=owner),
        owner=owner,
        captures=" UNION ALL ".join(captures),
    )
    return sql, (*params, topic_id, owner_id)


def waiting_query(group_ids: Sequence[int]) -> tuple[str, tuple[object, ...]]:
    """What waits beside the stream for these groups (see waiting)."""
    union = " UNION ALL ".join([_WAITING_ONE, _DEAD_ONE] * len(group_ids))
    params = [v for g in group_ids for v in (g, WAITING_CAP + 1) * 2]
    return _WAITING.format(union=union), tuple(params)


def _seconds(us: Any) -> float | None:
    return None if us is None else int(us) / _US


def _age(us: Any) -> float | None:
    """An age in seconds from a TIMESTAMPDIFF in microseconds, never below 0 (a message
    written in the same microsecond as the read)."""
    return None if us is None else max(0, int(us)) / _US


class BrowseStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    # -- topics --------------------------------------------------------------------------

    def topics(
        self, prefix: str, after: str | None, limit: int
    ) -> tuple[list[TopicRow], dict[int, WatermarkTotals], bool]:
        """Up to `limit` topics by name whose name starts with `prefix` and comes after
        `after`, their watermark totals, and whether more follow: two statements whatever
        the limit."""
        rows = self.db.select(*topics_query(prefix, after, limit))
        topics = [
            TopicRow(
                id=int(r[0]),
                name=r[1],
                partitions=int(r[2]),
                retention_hours=int(r[3]),
                delete_consumed=bool(r[4]),
                max_body_bytes=int(r[5]),
                created_at=r[6],
            )
            for r in rows[:limit]
        ]
        return topics, _totals(self.db, [t.id for t in topics]), len(rows) > limit

    def delete_consumed(self, topic_id: int) -> bool:
        rows = self.db.select(_DELETE_CONSUMED, (topic_id,))
        return bool(rows[0][0]) if rows else False

    # -- groups --------------------------------------------------------------------------

    def groups(
        self, prefix: str, after: tuple[str, int | None] | None, limit: int
    ) -> tuple[list[GroupFacts], bool]:
        """Up to `limit` groups (one per name and topic) by name then topic id, whose name
        starts with `prefix` and which come after `after`: a name and a topic id, or a
        name alone (None) to skip every topic of that name. Also whether more follow.
        Five statements, whatever the limit."""
        rows = self.db.select(*groups_query(prefix, after, limit))
        return _group_facts(self.db, rows[:limit]), len(rows) > limit

    def groups_of_topic(self, topic_id: int, limit: int) -> tuple[list[GroupFacts], bool]:
        """Up to `limit` groups consuming the topic, by name, and whether more do."""
        rows = self.db.select(*groups_of_topic_query(topic_id, limit))
        return _group_facts(self.db, rows[:limit]), len(rows) > limit

    def partition_page(
        self, group_id: int, topic: TopicInfo, after: int | None, limit: int
    ) -> list[PartitionRow]:
        """Up to `limit` partitions of the topic numbered above `after`, in order, with
        the group's cursor, the high watermark and the facts GroupAdmin does not read (a
        few index dives per partition of the page, none for the others)."""
        start = -1 if after is None else after
        params = (group_id, group_id, group_id, topic.id, start, topic.partitions, limit)
        rows = self.db.select(_PARTITION_PAGE, params)
        return [
            PartitionRow(
                partition=int(r[0]),
                committed_offset=None if r[1] is None else int(r[1]),
                high_watermark=0 if r[2] is None else int(r[2]),
                facts=PartitionFacts(
                    first_offset=None if r[3] is None else int(r[3]),
                    lag_age_seconds=_seconds(r[4]),
                    rewound=bool(r[5]),
                ),
            )
            for r in rows
        ]

    def group_totals(self, group: GroupInfo, topic: str) -> GroupFacts:
        """The group's totals over every partition, as the groups page reads them: its
        members, lag, partitions without a cursor, rewinds and newest report (three
        aggregate statements, no row per partition leaves the server)."""
        row = (group.id, group.name, group.topic_id, topic, group.mode, group.start_position)
        (facts,) = _group_facts(self.db, [row])
        return facts

    def waiting(self, group_id: int) -> tuple[int, int]:
        """The group's messages in the retry table, and its dead letters not resent
        (each at most WAITING_CAP + 1: more than WAITING_CAP)."""
        return waiting(self.db, [group_id]).get(group_id, (0, 0))

    def member_loads(self, group_id: int) -> dict[str, MemberLoad]:
        """Per client of the group: when it joined and its last load report."""
        rows = self.db.select(_MEMBER_LOADS, (group_id,))
        return {
            str(r[0]): MemberLoad(
                joined_at=r[1],
                cpu_percent=None if r[2] is None else float(r[2]),
                load_rate=None if r[3] is None else float(r[3]),
                reported_at=r[4],
            )
            for r in rows
        }

    def report_statuses(
        self, report_id: int, group_id: int, first: int, last: int
    ) -> dict[int, str]:
        """Partition -> its status in the report, for the group's partitions numbered
        `first` to `last`."""
        rows = self.db.select(_REPORT_STATUSES, (report_id, group_id, first, last))
        return {int(p): str(status) for p, status in rows}

    # -- overview ------------------------------------------------------------------------

    def overview_counts(self) -> tuple[int, int, int]:
        """The topics, the consumer groups (one per name and topic) and the open alarms."""
        (row,) = self.db.select(_OVERVIEW_COUNTS, ())
        return int(row[0]), int(row[1]), int(row[2])

    def report_total(self, report_id: int) -> int | None:
        """A lag report's lag summed over all its rows; None when it holds none."""
        ((total, rows),) = self.db.select(_REPORT_TOTAL, (report_id,))
        return int(total) if rows else None

    def live_lags(self, group_ids: Sequence[int]) -> dict[int, tuple[int, float | None]]:
        """{group id: (its lag now, summed over its partitions; the age in seconds of its
        oldest unconsumed message, None when nothing waits)} for these cluster groups (one
        statement over the ids, as a page of groups reads it)."""
        if not group_ids:
            return {}
        rows = self.db.select(*lags_query(group_ids))
        return {int(r[0]): (int(r[1]), _age(r[4])) for r in rows}

    def urgent_groups(
        self, report_id: int | None, limit: int
    ) -> list[tuple[GroupInfo, str, GroupLag | None]]:
        """Up to `limit` groups, worst status in the report first, then by name: each with
        its topic's name and its rows of the report summed (None: the report does not
        cover it, or there is no report)."""
        rows = self.db.select(_URGENT_GROUPS, (report_id, limit))
        out = []
        for r in rows:
            info = group_info(r[:10])
            lag = None
            if r[11] is not None:
                lag = GroupLag(
                    group_id=info.id,
                    topic_id=info.topic_id,
                    status=GROUP_STATUS_ORDER[int(r[11])],
                    lag=int(r[12]),
                    partitions=int(r[13]),
                )
            out.append((info, str(r[10]), lag))
        return out

    # -- series --------------------------------------------------------------------------

    def lag_series(
        self, group_id: int, topic_id: int, buckets: Sequence[Bucket]
    ) -> list[SeriesRow]:
        """The group's summed lag (never negative per partition) at the last offset
        snapshot of each bucket."""
        return self._series("offset_snapshot", "group_id", _LAG, group_id, topic_id, buckets)

    def volume_series(self, topic_id: int, buckets: Sequence[Bucket]) -> list[SeriesRow]:
        """The topic's summed high watermark at the last watermark capture of each bucket."""
        return self._series("topic_watermark", "topic_id", _VOLUME, topic_id, topic_id, buckets)

    def _series(
        self,
        table: str,
        owner: str,
        value: str,
        owner_id: int,
        topic_id: int,
        buckets: Sequence[Bucket],
    ) -> list[SeriesRow]:
        if not buckets:
            return []
        rows = self.db.select(*series_query(table, owner, value, owner_id, topic_id, buckets))
        return [(int(r[0]), r[1], int(r[2]), int(r[3])) for r in rows if r[3]]


def _name_filter(column: str, prefix: str, after: str | None) -> tuple[str, list[object]]:
    where: list[str] = [_ANY]
    params: list[object] = []
    if prefix:
        where.append(_NAME_LIKE.format(column=column))
        params.append(like_prefix(prefix))
    if after is not None:
        where.append(_NAME_AFTER.format(column=column))
        params.append(after)
    return " AND ".join(where), params


def _totals(db: Database, topic_ids: Sequence[int]) -> dict[int, WatermarkTotals]:
    if not topic_ids:
        return {}
    rows = db.select(_TOPIC_TOTALS.format(ids=_marks(topic_ids)), ())
    return {
        int(r[0]): WatermarkTotals(low=int(r[1]), high=int(r[2]), stored=int(r[3])) for r in rows
    }


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


def _group_facts(db: Database, rows: Sequence[Any]) -> list[GroupFacts]:
    """The page's groups with their members, lag and newest report: three statements
    over the page's ids."""
    if not rows:
        return []
    ids = _marks([int(r[0]) for r in rows])
    members = {
        int(g): (int(n), int(live)) for g, n, live in db.select(_MEMBERS.format(ids=ids), ())
    }
    lags = {
        int(g): (int(lag), int(cursorless), int(rewound), _age(age))
        for g, lag, cursorless, rewound, age in db.select(_LAGS.format(ids=ids), ())
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
