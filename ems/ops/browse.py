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
import itertools
from collections.abc import Mapping, Sequence

from ems.config import Settings
from ems.display import parse_when, shown
from ems.exceptions import InvalidCursor, InvalidName, InvalidSetting, InvalidWindow
from ems.groups import MemberDescription, describe_leader, describe_member, lag, utc
from ems.ops.query import When
from ems.store import Store
from ems.store.browse import Bucket
from ems.store.client import StoreClient
from ems.store.lookup import find_group
from ems.types import AssignmentRow, GroupInfo, LeaderInfo, MemberInfo, PartitionStats, TopicInfo
from ems.validation import NAME_RE, check_name
from ems.values.browse import (
    WAITING_CAP,
    GroupDetail,
    GroupFacts,
    GroupHeading,
    GroupMember,
    GroupPartition,
    GroupSummary,
    LagFrom,
    LagPoint,
    MemberLoad,
    Page,
    PartitionRow,
    TopicDetail,
    TopicPartition,
    TopicRow,
    TopicSummary,
    VolumePoint,
    WatermarkTotals,
    status,
)

DEFAULT_PAGE = 50
MAX_PAGE = 100
#: Longest prefix: a name has at most 128 characters.
MAX_PREFIX = 128
#: Groups a topic's detail lists (more_groups says when there are more).
MAX_TOPIC_GROUPS = 200
#: A group's detail shows its partitions by pages of at most GROUP_PARTITIONS, and at most
#: MAX_GROUP_MEMBERS members: at most 100 rows together.
GROUP_PARTITIONS = 50
MAX_GROUP_MEMBERS = 50
DEFAULT_POINTS = 500
MAX_POINTS = 1000
MAX_SERIES = dt.timedelta(days=31)
#: Partition lookups one series may cost (points x partitions): about 90 ms on an idle
#: server (a lookup costs some 3.5 us), twice that on a busy one, so a topic of 250
#: partitions or fewer gets a chart's 100 points and one of 1,000 gets 25.
MAX_SERIES_CELLS = 25_000

_US = dt.timedelta(microseconds=1)


# -- input -------------------------------------------------------------------------------


def check_prefix(prefix: object) -> str:
    """A name prefix: text of at most 128 characters ("" lists everything)."""
    if not isinstance(prefix, str) or len(prefix) > MAX_PREFIX:
        shown = repr(prefix) if isinstance(prefix, str) and len(prefix) <= 80 else "given"
        raise InvalidName(f"the prefix {shown} must be text of at most {MAX_PREFIX} characters")
    try:
        prefix.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidName("the prefix must be valid Unicode text") from None
    return prefix


def check_page_limit(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise InvalidSetting(f"limit must be an integer from 1 to {MAX_PAGE}, not {limit!r}")
    return limit


def topic_cursor(after: object) -> str | None:
    """A topics page cursor: None, or the name of the last topic seen."""
    if after is None:
        return None
    if not isinstance(after, str) or NAME_RE.fullmatch(after) is None:
        raise InvalidCursor(f"{shown(after)} is not a topics page cursor (a topic name)")
    return after


def group_cursor(after: object) -> tuple[str, int | None] | None:
    """A groups page cursor: None, "<group>/<topic id>" (a next_after), or a group name
    alone to list the groups after every topic of that name."""
    if after is None:
        return None
    if isinstance(after, str):
        name, slash, topic_id = after.partition("/")
        if NAME_RE.fullmatch(name) is not None:
            if not slash:
                return name, None
            if topic_id.isascii() and topic_id.isdigit() and len(topic_id) <= 19:
                return name, int(topic_id)
    raise InvalidCursor(
        f"{shown(after)} is not a groups page cursor (a group name, or the next_after of a "
        "groups page)"
    )


def partition_cursor(after: object) -> int | None:
    """A group detail's page cursor: None, or the number of the last partition seen."""
    if after is None:
        return None
    if isinstance(after, str) and after.isascii() and after.isdigit() and len(after) <= 9:
        return int(after)
    raise InvalidCursor(f"{shown(after)} is not a partitions page cursor (a partition number)")


def check_partitions_limit(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= GROUP_PARTITIONS:
        raise InvalidSetting(
            f"limit must be an integer from 1 to {GROUP_PARTITIONS}, not {limit!r}"
        )
    return limit


def check_points(max_points: object) -> int:
    if (
        isinstance(max_points, bool)
        or not isinstance(max_points, int)
        or not 1 <= max_points <= MAX_POINTS
    ):
        raise InvalidSetting(
            f"max_points must be an integer from 1 to {MAX_POINTS}, not {max_points!r}"
        )
    return max_points


def check_window(start: dt.datetime, end: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
    """(start, end) of a series: start before end, at most 31 days apart."""
    shown = f"{start.isoformat(sep=' ')} to {end.isoformat(sep=' ')}"
    if start >= end:
        raise InvalidWindow(f"a series must start before it ends, not {shown}")
    if end - start > MAX_SERIES:
        raise InvalidWindow(f"a series covers at most {MAX_SERIES.days} days, not {shown}")
    return start, end


def buckets(start: dt.datetime, end: dt.datetime, points: int) -> list[Bucket]:
    """(start, end] cut into `points` buckets as equal as microseconds allow (fewer when
    the window is shorter than `points` microseconds)."""
    total = (end - start) // _US
    count = max(1, min(points, total))
    edges = [start + _US * (total * i // count) for i in range(count)] + [end]
    return [(low, high) for low, high in itertools.pairwise(edges)]


def series_points(max_points: int, partitions: int) -> int:
    """The buckets of a series over this many partitions."""
    return max(1, min(max_points, MAX_SERIES_CELLS // max(1, partitions)))


def _end(value: object, what: str) -> str | dt.datetime:
    if not isinstance(value, str | dt.datetime):
        raise InvalidWindow(f"{what} must be a datetime, or text such as 2h, not {value!r}")
    return value


def _when(value: str | dt.datetime, now: dt.datetime | None) -> dt.datetime:
    """A datetime as naive UTC (an aware one converted), text by parse_when against the
    database clock `now`."""
    if isinstance(value, str):
        assert now is not None
        return parse_when(value, now)
    return value.astimezone(dt.UTC).replace(tzinfo=None) if value.tzinfo else value


# -- shaping (pure) ----------------------------------------------------------------------


def topic_summary(row: TopicRow, totals: WatermarkTotals | None) -> TopicSummary:
    t = totals or WatermarkTotals(low=0, high=0, stored=0)
    return TopicSummary(
        name=row.name,
        partitions=row.partitions,
        retention_hours=row.retention_hours,
        delete_consumed=row.delete_consumed,
        max_body_bytes=row.max_body_bytes,
        created_at=utc(row.created_at),
        low_watermark_total=t.low,
        high_watermark_total=t.high,
        stored_offsets=t.stored,
    )


def topic_partition(s: PartitionStats) -> TopicPartition:
    return TopicPartition(
        partition=s.partition,
        low_watermark=s.low_watermark,
        high_watermark=s.high_watermark,
        stored_offsets=s.messages,
    )


def totals_of(stats: builtins.list[PartitionStats]) -> WatermarkTotals:
    """The same totals the topics page reads in SQL, from `ems topic describe`'s rows."""
    return WatermarkTotals(
        low=sum(s.low_watermark or 0 for s in stats),
        high=sum(s.high_watermark for s in stats),
        stored=sum(s.messages for s in stats),
    )


def group_summary(f: GroupFacts) -> GroupSummary:
    rewound = f.rewound_partitions > 0
    return GroupSummary(
        name=f.name,
        topic=f.topic,
        mode=f.mode,
        start_position=f.start_position,
        members=f.members,
        live_members=f.live_members,
        total_lag=f.total_lag,
        partitions_without_cursor=f.partitions_without_cursor,
        lag_age_seconds=f.lag_age_seconds,
        retries_waiting=f.retries_waiting,
        dead_letters=f.dead_letters,
        status=status(f.report_status, rewound),
        report_status=f.report_status,
        report_as_of=None if f.report_as_of is None else utc(f.report_as_of),
        rewound=rewound,
    )


def group_detail(
    group: GroupInfo,
    topic: TopicInfo,
    *,
    leader: LeaderInfo | None,
    members: Sequence[MemberInfo],
    assignments: Sequence[AssignmentRow],
    loads: Mapping[str, MemberLoad],
    rows: Sequence[PartitionRow],
    totals: GroupFacts | None,
    statuses: Mapping[int, str],
    limit: int = GROUP_PARTITIONS,
) -> GroupDetail:
    """A group's detail from what the store read: its members (the first
    MAX_GROUP_MEMBERS, with their load and the partitions they hold), one page of its
    partitions (`rows`: up to limit + 1 of them, the last only saying that more follow)
    with the lag of partitions without a cursor, lag ages, report statuses
    (`statuses`, the page's) and rewinds, and the totals over every partition
    (`totals`, as the groups page reads them; None for a broadcast group)."""
    cluster = group.mode == "cluster"
    live = {m.client_id for m in members if m.expires_in > 0}
    owners = {a.partition: a for a in assignments}
    held: dict[str, list[int]] = {}
    for a in assignments:
        if a.client_id is not None and a.state != "released" and a.partition < topic.partitions:
            held.setdefault(a.client_id, []).append(a.partition)
    shown_leader = describe_leader(leader)
    leading = shown_leader.client_id if shown_leader is not None and shown_leader.live else None
    shown = [
        _member(
            describe_member(m, tuple(sorted(held.get(m.client_id, ())))),
            loads.get(m.client_id),
            m.client_id == leading,
        )
        for m in members[:MAX_GROUP_MEMBERS]
    ]
    page = [
        _partition(r, owners.get(r.partition), live, statuses.get(r.partition), cluster=cluster)
        for r in rows[:limit]
    ]
    rewound = bool(totals and totals.rewound_partitions)
    report_status = totals.report_status if totals else None
    as_of = totals.report_as_of if totals else None
    return GroupDetail(
        name=group.name,
        topic=topic.name,
        mode=group.mode,
        start_position=group.start_position,
        ordered=group.ordered,
        retry_ladder=group.retry_ladder,
        max_attempts=group.max_attempts,
        ack_timeout_seconds=group.ack_timeout_seconds,
        generation=group.generation,
        leader=shown_leader,
        members=tuple(shown),
        member_count=len(members),
        partitions=tuple(page),
        partition_count=topic.partitions,
        next_after=page[-1].partition if len(rows) > limit and page else None,
        total_lag=(totals.total_lag if totals else 0) if cluster else None,
        partitions_without_cursor=totals.partitions_without_cursor if totals else 0,
        status=status(report_status, rewound),
        report_status=report_status,
        report_as_of=None if as_of is None else utc(as_of),
        rewound=rewound,
    )


def _member(m: MemberDescription, load: MemberLoad | None, leads: bool) -> GroupMember:
    return GroupMember(
        client_id=m.client_id,
        host=m.host,
        pid=m.pid,
        joined_at=utc(load.joined_at) if load else None,
        lease_expires_at=m.lease_expires_at,
        seconds_left=m.seconds_left,
        live=m.live,
        leader=leads,
        partitions=m.partitions,
        cpu_percent=load.cpu_percent if load else None,
        load_rate=load.load_rate if load else None,
        reported_at=_utc(load.reported_at) if load else None,
    )


def _partition(
    r: PartitionRow,
    a: AssignmentRow | None,
    live: set[str],
    report_status: str | None,
    *,
    cluster: bool,
) -> GroupPartition:
    partition_lag: int | None
    lag_from: LagFrom | None
    if not cluster:
        partition_lag, lag_from = None, None
    elif r.committed_offset is not None:
        partition_lag, lag_from = lag(r.high_watermark, r.committed_offset), "committed"
    else:
        # No cursor row: nothing is known to be consumed, so all that is stored counts.
        first = r.facts.first_offset
        partition_lag = 0 if first is None else lag(r.high_watermark, first)
        lag_from = "low_watermark"
    # A broadcast group keeps no cursor: no age, no rewind, no report.
    rewound = cluster and r.facts.rewound
    shown_status = report_status if cluster else None
    owner = a.client_id if a is not None and a.state != "released" else None
    return GroupPartition(
        partition=r.partition,
        owner=owner,
        owner_live=owner in live,
        state=None if a is None else a.state,
        generation=None if a is None else a.generation,
        committed_offset=r.committed_offset,
        high_watermark=r.high_watermark,
        lag=partition_lag,
        lag_from=lag_from,
        lag_age_seconds=r.facts.lag_age_seconds if cluster and partition_lag else None,
        report_status=shown_status,
        rewound=rewound,
        status=status(shown_status, rewound),
    )


def _utc(value: dt.datetime | None) -> dt.datetime | None:
    return None if value is None else utc(value)


def volume_points(rows: builtins.list[tuple[int, dt.datetime, int, int]]) -> list[VolumePoint]:
    """Points from the sampled captures; bucket 0 is the baseline before the window."""
    out: list[VolumePoint] = []
    previous: tuple[dt.datetime, int] | None = None
    for n, at, total, _ in rows:
        if n > 0:
            out.append(
                VolumePoint(
                    at=utc(at),
                    high_watermark_total=total,
                    messages=None if previous is None else max(0, total - previous[1]),
                    span_seconds=None if previous is None else (at - previous[0]).total_seconds(),
                )
            )
        previous = (at, total)
    return out


# -- the read models ---------------------------------------------------------------------


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
        rows = self.store.browse.lag_series(info.id, topic_info.id, buckets(start, end, points))
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
        rows = self.store.browse.volume_series(info.id, [before, *buckets(start, end, points)])
        return volume_points(rows)

    def _window(self, since: When, until: When) -> tuple[dt.datetime, dt.datetime]:
        """Both ends as naive UTC: a datetime as is, text by parse_when against the
        database clock (read only for text). InvalidWindow, InvalidDatetime."""
        start, end = _end(since, "since"), _end(until, "until")
        now = self.store.messages.now() if isinstance(start, str) or isinstance(end, str) else None
        return check_window(_when(start, now), _when(end, now))
