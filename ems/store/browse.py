"""Statements of the admin console's pages (ems.ops.browse): pages of topics and groups,
and a group's per-partition extras. The facts shown beside each group of a page are
ems.store.group_facts's; the series are ems.store.series's.

Every statement reads index entries, never counts a message or log table: a watermark is
one dive into message's unique key (topic_id, partition_no, offset_no), a snapshot one
dive into its (group_id, partition_no, captured_at) key. A page runs a fixed number of
statements whatever its size, each over the ids of the page (IN lists).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ems.store.database import Database
from ems.store.group_facts import group_facts, marks, waiting
from ems.types import GroupInfo, TopicInfo
from ems.values.browse import (
    GroupFacts,
    MemberLoad,
    PartitionFacts,
    PartitionRow,
    TopicRow,
    WatermarkTotals,
)

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
_DELETE_CONSUMED = "SELECT delete_consumed FROM topic WHERE id = %s"
_ANY = "1 = 1"
_NAME_LIKE = "{column} LIKE %s ESCAPE '!'"
_NAME_AFTER = "{column} > %s"
_AFTER_GROUP = " AND g.name >= %s AND (g.name > %s OR g.topic_id > %s)"
_OF_TOPIC = "g.topic_id = %s"


def like_prefix(prefix: str) -> str:
    """A LIKE pattern (ESCAPE '!') matching what starts with `prefix`, its % and _ taken
    literally."""
    return prefix.replace("!", "!!").replace("%", "!%").replace("_", "!_") + "%"


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


def _seconds(us: Any) -> float | None:
    return None if us is None else int(us) / _US


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
        return group_facts(self.db, rows[:limit]), len(rows) > limit

    def groups_of_topic(self, topic_id: int, limit: int) -> tuple[list[GroupFacts], bool]:
        """Up to `limit` groups consuming the topic, by name, and whether more do."""
        rows = self.db.select(*groups_of_topic_query(topic_id, limit))
        return group_facts(self.db, rows[:limit]), len(rows) > limit

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
        (facts,) = group_facts(self.db, [row])
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
    rows = db.select(_TOPIC_TOTALS.format(ids=marks(topic_ids)), ())
    return {
        int(r[0]): WatermarkTotals(low=int(r[1]), high=int(r[2]), stored=int(r[3])) for r in rows
    }
