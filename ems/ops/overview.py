"""What the admin console's overview shows: topics, consumer groups with their status and
lag from the newest lag report, the total lag, and the open alarms; and the database's
answer to a health check.

A value the database cannot give yet is None with the reason beside it, never 0: a group
the newest lag report does not cover has no status, and there is no total lag before the
first report (`ems spark lag-report`) is published.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from ems.config import Settings
from ems.store import Store
from ems.store.client import StoreClient
from ems.types import GroupInfo, GroupMode, TopicInfo
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
    #: OK, WARN or ERR as the newest lag report says; None when it says nothing (reason).
    status: str | None
    #: Lag summed over the partitions the report covers; None with status.
    lag: int | None
    reason: str | None


@dataclass(frozen=True, kw_only=True, slots=True)
class Overview:
    #: The database clock when this was read (UTC).
    read_at: dt.datetime
    topics: int
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
    topics: Sequence[TopicInfo],
    groups: Sequence[GroupInfo],
    report: tuple[LagReportRun, Sequence[GroupLag]] | None,
    open_alarms: int,
) -> Overview:
    """Join what was read into the overview (pure)."""
    names = {t.id: t.name for t in topics}
    run, lags = report if report is not None else (None, ())
    by_group = {lag.group_id: lag for lag in lags}
    shown = tuple(
        _group(g, names.get(g.topic_id, f"#{g.topic_id}"), run, by_group.get(g.id)) for g in groups
    )
    if run is None:
        total, reason = None, NO_REPORT
    elif not lags:
        total, reason = None, EMPTY_REPORT
    else:
        total, reason = sum(lag.lag for lag in lags), None
    return Overview(
        read_at=read_at,
        topics=len(topics),
        groups=shown,
        open_alarms=open_alarms,
        lag_report=run,
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


class OverviewReader(StoreClient):
    """The overview and the health check, for the admin console."""

    def __init__(self, settings: Settings | None = None, *, store: Store | None = None) -> None:
        super().__init__(settings, store=store)

    def ping(self) -> dt.datetime:
        """The database clock: the database answers. DatabaseUnavailable otherwise."""
        return self.store.maintenance.now()

    def read(self) -> Overview:
        s = self.store
        return summarize(
            read_at=s.maintenance.now(),
            topics=s.topics.all(),
            groups=s.groups.all(),
            report=s.lag_reports.newest(),
            open_alarms=len(s.alarms.open_alarms()),
        )
