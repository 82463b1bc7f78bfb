"""The read models' pure parts: statuses, cursors, LIKE prefixes, series buckets and the
shaping of a group's detail from the rows of one page and the group's totals."""

from __future__ import annotations

import datetime as dt
import itertools

import pytest

from ems.ops.browse_input import (
    MAX_SERIES_CELLS,
    buckets,
    group_cursor,
    series_points,
    topic_cursor,
)
from ems.ops.browse_shapes import group_detail, volume_points
from ems.store.browse import like_prefix
from ems.types import AssignmentRow, GroupInfo, LeaderInfo, MemberInfo, TopicInfo
from ems.values.browse import GroupFacts, MemberLoad, PartitionFacts, PartitionRow, status

NOW = dt.datetime(2026, 11, 22, 1, 0, 0)
TOPIC = TopicInfo(
    id=7, name="readings", partitions=3, retention_hours=1, max_body_bytes=10, created_at=NOW
)


def group(mode: str = "cluster") -> GroupInfo:
    return GroupInfo(
        id=3,
        name="svc",
        topic_id=7,
        mode=mode,  # type: ignore[arg-type]
        start_position="latest",
        ordered=False,
        retry_ladder="10s",
        max_attempts=5,
        ack_timeout_seconds=60,
        generation=2,
    )


@pytest.mark.parametrize(
    ("report", "rewound", "shown"),
    [
        (None, False, "unknown"),
        (None, True, "REWIND"),
        ("OK", False, "OK"),
        ("OK", True, "REWIND"),
        ("WARN", True, "REWIND"),
        ("ERR", True, "ERR"),
        ("STALL", True, "STALL"),
        ("STOP", False, "STOP"),
    ],
)
def test_the_status_shown_is_the_worse_of_the_report_and_a_rewind(
    report: str | None, rewound: bool, shown: str
) -> None:
    assert status(report, rewound) == shown


def test_a_like_prefix_escapes_its_wildcards_and_the_escape_character() -> None:
    assert like_prefix("") == "%"
    assert like_prefix("a_b") == "a!_b%"
    assert like_prefix("100%") == "100!%%"
    assert like_prefix("x!y") == "x!!y%"


def test_cursors_are_names_and_group_cursors_carry_a_topic_id() -> None:
    assert topic_cursor(None) is None
    assert topic_cursor("orders.v2") == "orders.v2"
    assert group_cursor(None) is None
    assert group_cursor("billing") == ("billing", None)
    assert group_cursor("billing/42") == ("billing", 42)


def test_buckets_cut_the_window_into_contiguous_pieces() -> None:
    start, end = NOW, NOW + dt.timedelta(hours=1)
    cut = buckets(start, end, 7)
    assert len(cut) == 7
    assert cut[0][0] == start and cut[-1][1] == end
    assert all(a[1] == b[0] for a, b in itertools.pairwise(cut))
    widths = {(high - low) for low, high in cut if low is not None}
    assert max(widths) - min(widths) <= dt.timedelta(microseconds=1)
    # A window shorter than the points asked for gets one bucket per microsecond.
    assert len(buckets(start, start + dt.timedelta(microseconds=3), 500)) == 3


def test_a_series_over_many_partitions_gets_fewer_points() -> None:
    assert series_points(500, 16) == 500
    assert series_points(1000, 4096) == MAX_SERIES_CELLS // 4096
    assert series_points(10, 10**9) == 1


def test_volume_points_count_from_the_point_before_and_never_go_negative() -> None:
    at = [NOW + dt.timedelta(minutes=i) for i in range(4)]
    rows = [(0, at[0], 100, 2), (1, at[1], 130, 2), (3, at[2], 120, 2), (4, at[3], 150, 2)]
    points = volume_points(rows)
    assert [(p.messages, p.span_seconds) for p in points] == [
        (30, 60.0),
        (0, 60.0),  # a partition emptied by a purge dropped out of the capture
        (30, 60.0),
    ]
    assert volume_points(rows[1:])[0].messages is None


def facts(**changes: object) -> GroupFacts:
    fields: dict[str, object] = {
        "id": 3,
        "name": "svc",
        "topic_id": 7,
        "topic": "readings",
        "mode": "cluster",
        "start_position": "latest",
        "members": 0,
        "live_members": 0,
        "total_lag": 0,
        "partitions_without_cursor": 0,
        "rewound_partitions": 0,
        "report_id": None,
        "report_status": None,
        "report_as_of": None,
    }
    return GroupFacts(**(fields | changes))  # type: ignore[arg-type]


def row(
    partition: int, committed: int | None, high: int, first: int | None, **f: object
) -> PartitionRow:
    return PartitionRow(
        partition=partition,
        committed_offset=committed,
        high_watermark=high,
        facts=PartitionFacts(
            first_offset=first,
            lag_age_seconds=f.get("age"),  # type: ignore[arg-type]
            rewound=bool(f.get("rewound")),
        ),
    )


def test_group_detail_counts_a_partition_without_cursor_from_its_low_watermark() -> None:
    rows = [
        row(0, None, 10, 3, age=60.0),
        row(1, 4, 9, 0, age=5.0, rewound=True),
        row(2, None, 0, None),
    ]
    totals = facts(
        total_lag=12,
        partitions_without_cursor=2,
        rewound_partitions=1,
        report_id=1,
        report_status="WARN",
        report_as_of=NOW,
    )
    detail = group_detail(
        group(),
        TOPIC,
        leader=None,
        members=[],
        assignments=[
            AssignmentRow(partition=p, client_id=None, generation=0, state="released")
            for p in range(3)
        ],
        loads={},
        rows=rows,
        totals=totals,
        statuses={1: "WARN"},
    )
    assert [(p.lag, p.lag_from, p.lag_age_seconds) for p in detail.partitions] == [
        (7, "low_watermark", 60.0),
        (5, "committed", 5.0),
        (0, "low_watermark", None),
    ]
    assert (detail.total_lag, detail.partitions_without_cursor) == (12, 2)
    assert [p.status for p in detail.partitions] == ["unknown", "REWIND", "unknown"]
    assert (detail.status, detail.rewound, detail.report_as_of) == (
        "REWIND",
        True,
        NOW.replace(tzinfo=dt.UTC),
    )
    assert (detail.partition_count, detail.next_after) == (3, None)


def test_group_detail_shows_one_page_and_says_where_the_next_starts() -> None:
    members = [
        MemberInfo(client_id=f"c{i:02d}", host="h", pid=i, lease_expires_at=NOW, expires_in=5.0)
        for i in range(60)
    ]
    topic = TopicInfo(
        id=7, name="readings", partitions=120, retention_hours=1, max_body_bytes=10, created_at=NOW
    )
    assignments = [
        AssignmentRow(partition=p, client_id=f"c{p % 60:02d}", generation=1, state="assigned")
        for p in range(120)
    ]
    rows = [row(p, 1, 3, 0) for p in range(10, 16)]
    detail = group_detail(
        group(),
        topic,
        leader=None,
        members=members,
        assignments=assignments,
        loads={},
        rows=rows,
        totals=facts(total_lag=240),
        statuses={},
        limit=5,
    )
    assert [p.partition for p in detail.partitions] == [10, 11, 12, 13, 14]
    assert (detail.next_after, detail.partition_count, detail.total_lag) == (14, 120, 240)
    assert (len(detail.members), detail.member_count) == (50, 60)
    # Members hold partitions off the page too.
    assert detail.members[1].partitions == (1, 61)
    assert detail.partitions[0].owner == "c10"


def test_a_broadcast_group_has_no_lag_and_members_keep_their_load() -> None:
    def member(client_id: str, left: float) -> MemberInfo:
        lease = NOW + dt.timedelta(seconds=left)
        return MemberInfo(
            client_id=client_id, host="h", pid=1, lease_expires_at=lease, expires_in=left
        )

    load = MemberLoad(joined_at=NOW, cpu_percent=80.0, load_rate=None, reported_at=NOW)
    detail = group_detail(
        group("broadcast"),
        TOPIC,
        leader=LeaderInfo(client_id="x", epoch=3, lease_expires_at=NOW, expires_in=5.0),
        members=[member("x", 5.0), member("y", -1.0)],
        assignments=[],
        loads={"x": load},
        rows=[row(0, None, 10, 0, age=3.0, rewound=True), row(1, None, 0, None)],
        totals=None,
        statuses={0: "ERR"},
    )
    assert detail.total_lag is None
    assert {(p.lag, p.lag_from, p.status, p.lag_age_seconds) for p in detail.partitions} == {
        (None, None, "unknown", None)
    }
    assert detail.status == "unknown"
    x, y = detail.members
    assert (x.leader, x.live, x.cpu_percent, x.joined_at) == (
        True,
        True,
        80.0,
        NOW.replace(tzinfo=dt.UTC),
    )
    assert (y.leader, y.live, y.cpu_percent, y.joined_at) == (False, False, None, None)
    assert detail.leader is not None and detail.leader.epoch == 3
