"""The admin console's read models: pages of topics and of consumer groups, a topic's and a
group's detail, a group's lag and a topic's volume over time.

Every call checks its input before it reads anything (InvalidName, InvalidSetting for a
limit, InvalidCursor, InvalidWindow, InvalidDatetime; UnknownTopic, UnknownGroup) and is
bounded whatever the data holds:

- a page is keyset-paginated by name (groups: by name, then topic id) with 1 to 100 items
  and costs the same statements however long it is (two for topics, four for groups),
  each reading index entries of the page's rows only: no COUNT over the message or log
  tables, every watermark an index dive;
- a prefix is matched literally (its % and _ are characters, not wildcards);
- a series covers at most 31 days in at most max_points buckets (1 to 1,000), each point
  sampled from the last capture in its bucket with one index lookup per partition, so a
  series costs points x partitions lookups, never a scan of the captures (a topic of many
  partitions gets fewer points: at most MAX_SERIES_CELLS lookups in all).

Statuses come from the newest finished lag report that covered a group (ems.values.browse
explains the values, REWIND and "unknown").
"""

from __future__ import annotations

import builtins
import datetime as dt

from ems.config import Settings
from ems.groups import utc
from ems.ops.browse_input import (
    DEFAULT_PAGE,
    DEFAULT_POINTS,
    GROUP_PARTITIONS,
    MAX_TOPIC_GROUPS,
    buckets,
    check_page_limit,
    check_partitions_limit,
    check_points,
    check_prefix,
    group_cursor,
    partition_cursor,
    series_points,
    series_window,
    topic_cursor,
)
from ems.ops.browse_shapes import (
    group_detail,
    group_summary,
    topic_partition,
    topic_summary,
    totals_of,
    volume_points,
)
from ems.ops.query import When
from ems.store import Store
from ems.store.client import StoreClient
from ems.store.lookup import find_group
from ems.store.series import Bucket
from ems.validation import check_name
from ems.values.browse import (
    WAITING_CAP,
    GroupDetail,
    GroupHeading,
    GroupSummary,
    LagPoint,
    Page,
    TopicDetail,
    TopicRow,
    TopicSummary,
    VolumePoint,
)


class Browser(StoreClient):
    """The pages the admin console shows (read-only)."""

    def __init__(self, settings: Settings | None = None, *, store: Store | None = None) -> None:
        super().__init__(settings, store=store)

    def topics_page(
        self, prefix: str = "", after: str | None = None, limit: int = DEFAULT_PAGE
    ) -> Page[TopicSummary]:
        """Topics by name whose name starts with `prefix`, after the topic `after`."""
        check_prefix(prefix)
        cursor = topic_cursor(after)
        check_page_limit(limit)
        rows, totals, more = self.store.browse.topics(prefix, cursor, limit)
        return Page(
            items=tuple(topic_summary(r, totals.get(r.id)) for r in rows),
            next_after=rows[-1].name if more and rows else None,
        )

    def topic_detail(self, name: str) -> TopicDetail:
        """A topic's settings, partitions with their watermarks and stored offsets, and
        the groups consuming it. InvalidName, UnknownTopic."""
        info = self.store.topics.get(check_name(name, "topic"))
        stats = self.store.topics.partition_stats(info)
        row = TopicRow(
            id=info.id,
            name=info.name,
            partitions=info.partitions,
            retention_hours=info.retention_hours,
            delete_consumed=self.store.browse.delete_consumed(info.id),
            max_body_bytes=info.max_body_bytes,
            created_at=info.created_at,
        )
        groups, more = self.store.browse.groups_of_topic(info.id, MAX_TOPIC_GROUPS)
        later = self.store.outbox.scheduled(info.id, cap=WAITING_CAP)
        return TopicDetail(
            summary=topic_summary(row, totals_of(stats)),
            partitions=tuple(topic_partition(s) for s in stats),
            groups=tuple(group_summary(g) for g in groups),
            more_groups=more,
            scheduled=later.count,
            next_scheduled_at=later.next_at,
        )

    def groups_page(
        self, prefix: str = "", after: str | None = None, limit: int = DEFAULT_PAGE
    ) -> Page[GroupSummary]:
        """Groups (one item per name and topic) by name, then topic, whose name starts
        with `prefix`, after the cursor `after`."""
        check_prefix(prefix)
        cursor = group_cursor(after)
        check_page_limit(limit)
        facts, more = self.store.browse.groups(prefix, cursor, limit)
        last = facts[-1] if facts else None
        return Page(
            items=tuple(group_summary(f) for f in facts),
            next_after=f"{last.name}/{last.topic_id}" if more and last else None,
        )

    def group_detail(
        self,
        name: str,
        topic: str | None = None,
        after: str | None = None,
        limit: int = GROUP_PARTITIONS,
    ) -> GroupDetail:
        """One group on one topic (`topic` may be left out when it consumes one only):
        GroupAdmin.describe's view plus lag ages, statuses and the members' load, its
        partitions after the partition `after` (a cursor), `limit` of them. InvalidName,
        InvalidCursor, InvalidSetting, UnknownTopic, UnknownGroup, ConflictingOptions."""
        if topic is not None:
            check_name(topic, "topic")
        cursor = partition_cursor(after)
        check_partitions_limit(limit)
        group, info = find_group(self.store, name, topic)
        s = self.store
        # The page's cursors and watermarks come from one statement (one read view), so a
        # cursor moving in between cannot show up as a negative lag.
        rows = s.browse.partition_page(group.id, info, cursor, limit + 1)
        shown = rows[:limit]
        cluster = group.mode == "cluster"
        totals = s.browse.group_totals(group, info.name) if cluster else None
        report = totals.report_id if totals else None
        statuses = (
            s.browse.report_statuses(report, group.id, shown[0].partition, shown[-1].partition)
            if report is not None and shown
            else {}
        )
        return group_detail(
            group,
            info,
            leader=s.leases.leader(group.id),
            members=s.leases.members(group.id),
            assignments=s.assignments.rows(group.id),
            loads=s.browse.member_loads(group.id),
            rows=rows,
            totals=totals,
            statuses=statuses,
            limit=limit,
        )

    def group_heading(self, name: str, topic: str | None = None) -> GroupHeading:
        """The group's name, topic and mode, without its detail. InvalidName,
        UnknownTopic, UnknownGroup, ConflictingOptions."""
        if topic is not None:
            check_name(topic, "topic")
        group, info = find_group(self.store, name, topic)
        return GroupHeading(name=group.name, topic=info.name, mode=group.mode)

    def lag_series(
        self,
        group: str,
        since: When,
        until: When,
        max_points: int = DEFAULT_POINTS,
        *,
        topic: str | None = None,
    ) -> builtins.list[LagPoint]:
        """A group's total lag over [since, until] from the offset snapshots, at most
        max_points of them, oldest first; [] for a broadcast group (no snapshots)."""
        check_name(group, "group")
        if topic is not None:
            check_name(topic, "topic")
        check_points(max_points)
        start, end = self._window(since, until)
        info, topic_info = find_group(self.store, group, topic)
        if info.mode != "cluster":
            return []
        points = series_points(max_points, topic_info.partitions)
        rows = self.store.series.lag(info.id, topic_info.id, buckets(start, end, points))
        return [LagPoint(at=utc(at), lag=total, partitions=n) for _, at, total, n in rows]

    def topic_volume_series(
        self, topic: str, since: When, until: When, max_points: int = DEFAULT_POINTS
    ) -> builtins.list[VolumePoint]:
        """A topic's summed high watermark over [since, until] from the watermark
        captures, at most max_points of them, oldest first, each with the messages
        written since the point before (the first: since the last capture before
        `since`, None when there is none)."""
        check_name(topic, "topic")
        check_points(max_points)
        start, end = self._window(since, until)
        info = self.store.topics.get(topic)
        points = series_points(max_points, info.partitions)
        before: Bucket = (None, start)
        rows = self.store.series.volume(info.id, [before, *buckets(start, end, points)])
        return volume_points(rows)

    def _window(self, since: When, until: When) -> tuple[dt.datetime, dt.datetime]:
        """Both ends as naive UTC: a datetime as is, text by parse_when against the
        database clock (read only for text). InvalidWindow, InvalidDatetime."""
        return series_window(since, until, self.store.messages.now)
