"""The lag report's run rows: written before and after Spark appends the report rows."""

from __future__ import annotations

import datetime as dt

from ems.store.database import Database
from ems.values.rows import GroupLag, LagReportRun

_NEWEST_DONE = (
    "SELECT id, as_of, window_seconds, partitions, finished_at FROM lag_report_run "
    "WHERE status = 'done' ORDER BY id DESC LIMIT 1"
)
#: Group statuses from the least to the most urgent: "unknown" (fewer than two snapshots
#: in the window) is worth a look before OK and after WARN.
GROUP_STATUS_ORDER = ("OK", "unknown", "WARN", "ERR")
#: The worst group status of a report's rows, as an index into GROUP_STATUS_ORDER.
WORST_GROUP_STATUS = (
    "MAX(CASE group_status WHEN 'ERR' THEN 3 WHEN 'WARN' THEN 2 WHEN 'unknown' THEN 1 ELSE 0 END)"
)
# One report's rows by group: the worst group status any of them says, the lag summed.
_GROUPS = (
    f"SELECT group_id, topic_id, {WORST_GROUP_STATUS}, "
    "SUM(lag), COUNT(*) FROM lag_report WHERE report_id = %s GROUP BY group_id, topic_id"
)
_START = "INSERT INTO lag_report_run (status, as_of, window_seconds) VALUES ('running', %s, %s)"
_FINISH = (
    "UPDATE lag_report_run SET status = 'done', partitions = %s, finished_at = NOW(6) WHERE id = %s"
)
_KEEP_FLOOR = "SELECT id FROM lag_report_run ORDER BY id DESC LIMIT 1 OFFSET %s"
_PRUNE_ROWS = "DELETE FROM lag_report WHERE report_id < %s"
_PRUNE_RUNS = "DELETE FROM lag_report_run WHERE id < %s"


class LagReportStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def start(self, as_of: dt.datetime, window_seconds: int) -> int:
        with self.db.single() as cursor:
            cursor.execute(_START, (as_of, window_seconds))
            return int(cursor.lastrowid)

    def finish(self, report_id: int, partitions: int) -> None:
        """Publish the report: the console reads only runs marked done."""
        with self.db.single() as cursor:
            cursor.execute(_FINISH, (partitions, report_id))

    def prune(self, keep: int) -> int:
        """Keep the newest `keep` reports (and drop rows of runs that never finished)."""
        with self.db.transaction() as cursor:
            cursor.execute(_KEEP_FLOOR, (max(keep - 1, 0),))
            found = cursor.fetchone()
            if found is None or found[0] is None:
                return 0
            cursor.execute(_PRUNE_ROWS, (found[0],))
            return int(cursor.execute(_PRUNE_RUNS, (found[0],)))

    def newest_run(self) -> LagReportRun | None:
        """The newest published report (None: no report was published yet)."""
        runs = self.db.select(_NEWEST_DONE, ())
        if not runs:
            return None
        rid, as_of, window, partitions, finished_at = runs[0]
        return LagReportRun(
            id=int(rid),
            as_of=as_of,
            window_seconds=int(window),
            partitions=int(partitions),
            finished_at=finished_at,
        )

    def newest(self) -> tuple[LagReportRun, list[GroupLag]] | None:
        """The newest published report and its rows summed by group (None: no report was
        published yet)."""
        run = self.newest_run()
        if run is None:
            return None
        groups = [
            GroupLag(
                group_id=int(g),
                topic_id=int(t),
                status=GROUP_STATUS_ORDER[int(worst)],
                lag=int(lag),
                partitions=int(n),
            )
            for g, t, worst, lag, n in self.db.select(_GROUPS, (run.id,))
        ]
        return run, groups
