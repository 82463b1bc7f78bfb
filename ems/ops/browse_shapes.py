"""The admin console's read models shaped from what the store read (pure): a topic's and a
group's summary, a group's detail (its members, one page of its partitions, its totals)
and a topic's volume points. Statuses as ems.values.browse explains them."""

from __future__ import annotations

import builtins
import datetime as dt
from collections.abc import Mapping, Sequence

from ems.groups import MemberDescription, describe_leader, describe_member, lag, utc
from ems.ops.browse_input import GROUP_PARTITIONS, MAX_GROUP_MEMBERS
from ems.types import AssignmentRow, GroupInfo, LeaderInfo, MemberInfo, PartitionStats, TopicInfo
from ems.values.browse import (
    GroupDetail,
    GroupFacts,
    GroupMember,
    GroupPartition,
    GroupSummary,
    LagFrom,
    MemberLoad,
    PartitionRow,
    TopicPartition,
    TopicRow,
    TopicSummary,
    VolumePoint,
    WatermarkTotals,
    status,
)


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
