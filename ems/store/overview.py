"""Statements of the admin console's overview (ems.ops.overview): counts of the small
tables, the newest lag report's total and most urgent groups, and those groups' lag now."""

from __future__ import annotations

from collections.abc import Sequence

from ems.store.database import Database
from ems.store.group_facts import age, lags_query
from ems.store.groups import group_info
from ems.store.lag_reports import GROUP_STATUS_ORDER, WORST_GROUP_STATUS
from ems.types import GroupInfo
from ems.values.rows import GroupLag

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


class OverviewStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def counts(self) -> tuple[int, int, int]:
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
        return {int(r[0]): (int(r[1]), age(r[4])) for r in rows}

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
