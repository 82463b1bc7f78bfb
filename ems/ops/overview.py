"""What the admin console's overview shows: the number of topics, consumer groups and open
alarms, the most urgent groups (at most MAX_GROUPS) with their status and lag from the
newest lag report, and the total lag; and the database's answer to a health check. It
costs the same few statements however many topics and groups there are.

A value the database cannot give yet is None with the reason beside it, never 0: a group
the newest lag report does not cover has no status, and there is no total lag before the
first report (`ems spark lag-report`) is published.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from ems.config import Settings
from ems.store import Store
from ems.store.client import StoreClient
from ems.types import GroupInfo, GroupMode
from ems.values.rows import GroupLag, LagReportRun

NO_REPORT = "no lag report yet: run `ems spark lag-report` (over `ems offsets snapshot` captures)"
EMPTY_REPORT = "the newest lag report holds no rows (no offset snapshots in its window)"
BROADCAST = "a broadcast group: its members keep their cursors in memory, no report covers it"
NOT_COVERED = "not in the newest lag report (it covered other groups, or the group is newer)"


@dataclass(frozen=True, kw_only=True, slots=True)
class GroupOverview:
    group: str
    topic: str
    mode: GroupMode
    #: OK, WARN, ERR or unknown (fewer than two snapshots in its window) as the newest
    #: lag report says; None when it says nothing (reason).
    status: str | None
    #: Lag summed over the partitions the report covers; None with status.
    lag: int | None
    reason: str | None
    #: The lag now (high watermarks less committed cursors, as the group page reads
    #: it); None for a broadcast group, which keeps no cursor.
    live_lag: int | None = None
    #: The age in seconds of its oldest unconsumed message now (None: nothing waits, or
    #: a broadcast group).
    lag_age_seconds: float | None = None


#: Groups the overview lists, the most urgent first (the groups page lists them all).
MAX_GROUPS = 100


@dataclass(frozen=True, kw_only=True, slots=True)
class Overview:
    #: The database clock when this was read (UTC).
    read_at: dt.datetime
    topics: int
    #: Consumer groups, one per name and topic: all of them.
    group_count: int
    #: At most MAX_GROUPS of them: the worst status in the newest report first (ERR,
    #: WARN, unknown, OK, then those it does not cover), then by name and topic.
    groups: tuple[GroupOverview, ...]
    open_alarms: int
    #: The newest published lag report (None: none yet).
    lag_report: LagReportRun | None
    #: The report's lag summed over every group it covers; None with the reason.
    total_lag: int | None
    total_lag_reason: str | None


def summarize(
    *,
    read_at: dt.datetime,
    topics: int,
    group_count: int,
    groups: Sequence[tuple[GroupInfo, str, GroupLag | None]],
    report: LagReportRun | None,
    total_lag: int | None,
    open_alarms: int,
    live: Mapping[int, tuple[int, float | None]] | None = None,
) -> Overview:
    """Join what was read into the overview (pure): `groups` are the groups shown, each
    with its topic's name and its rows of the report summed; `total_lag` is the report's
    total, None when it holds no rows; `live` each cluster group's lag now and the age of
    its oldest unconsumed message, by id."""
    now = live or {}
    shown = tuple(_with_live(_group(g, topic, report, lag), g, now) for g, topic, lag in groups)
    if report is None:
        total, reason = None, NO_REPORT
    elif total_lag is None:
        total, reason = None, EMPTY_REPORT
    else:
        total, reason = total_lag, None
    return Overview(
        read_at=read_at,
        topics=topics,
        group_count=group_count,
        groups=shown,
        open_alarms=open_alarms,
        lag_report=report,
        total_lag=total,
        total_lag_reason=reason,
    )


def _group(
    group: GroupInfo, topic: str, run: LagReportRun | None, lag: GroupLag | None
) -> GroupOverview:
    status: str | None = None
    amount: int | None = None
    reason: str | None
    if lag is not None:
        status, amount, reason = lag.status, lag.lag, None
    elif group.mode == "broadcast":
        reason = BROADCAST
    else:
        reason = NO_REPORT if run is None else NOT_COVERED
    return GroupOverview(
        group=group.name, topic=topic, mode=group.mode, status=status, lag=amount, reason=reason
    )


def _with_live(
    shown: GroupOverview, group: GroupInfo, live: Mapping[int, tuple[int, float | None]]
) -> GroupOverview:
    if group.mode == "broadcast":
        return shown
    lag, age = live.get(group.id, (0, None))
    return replace(shown, live_lag=lag, lag_age_seconds=age)


class OverviewReader(StoreClient):
    """The overview and the health check, for the admin console."""

    def __init__(self, settings: Settings | None = None, *, store: Store | None = None) -> None:
        super().__init__(settings, store=store)

    def ping(self) -> dt.datetime:
        """The database clock: the database answers. DatabaseUnavailable otherwise."""
        return self.store.maintenance.now()

    def read(self) -> Overview:
        """Six statements whatever the number of topics and groups: the clock, the
        counts, the newest report, its total, its most urgent groups and their lag now."""
        s = self.store
        read_at = s.maintenance.now()
        topics, groups, open_alarms = s.overview.counts()
        run = s.lag_reports.newest_run()
        urgent = s.overview.urgent_groups(run.id if run else None, MAX_GROUPS)
        cluster = [g.id for g, _, _ in urgent if g.mode == "cluster"]
        return summarize(
            read_at=read_at,
            topics=topics,
            group_count=groups,
            live=s.overview.live_lags(cluster),
            groups=urgent,
            report=run,
            total_lag=s.overview.report_total(run.id) if run else None,
            open_alarms=open_alarms,
        )
