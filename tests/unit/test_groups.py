"""Group descriptions are shaped from store rows by pure functions: lag, owners, members."""

from __future__ import annotations

import datetime as dt

from ems.groups import describe_group, lag, utc
from ems.types import AssignmentRow, GroupInfo, LeaderInfo, MemberInfo, TopicInfo

NOW = dt.datetime(2026, 11, 22, 1, 0, 0)
TOPIC = TopicInfo(
    id=7, name="readings", partitions=4, retention_hours=1, max_body_bytes=10, created_at=NOW
)


def group(mode: str = "cluster") -> GroupInfo:
    return GroupInfo(
        id=3,
        name="svc",
        topic_id=7,
        mode=mode,  # type: ignore[arg-type]
        start_position="earliest",
        ordered=False,
        retry_ladder="10s 1m",
        max_attempts=5,
        ack_timeout_seconds=60,
        generation=9,
    )


def member(client_id: str, seconds_left: float) -> MemberInfo:
    return MemberInfo(
        client_id=client_id,
        host="10.0.0.1",
        pid=42,
        lease_expires_at=NOW + dt.timedelta(seconds=seconds_left),
        expires_in=seconds_left,
    )


def row(partition: int, client_id: str | None, state: str = "assigned") -> AssignmentRow:
    return AssignmentRow(partition=partition, client_id=client_id, generation=8, state=state)  # type: ignore[arg-type]


def test_lag_is_high_watermark_minus_committed_and_never_negative() -> None:
    assert lag(10, 4) == 6
    assert lag(4, 4) == 0
    assert lag(0, 0) == 0
    assert lag(3, 5) == 0  # retention emptied the partition's tail


def test_utc_marks_database_times_as_utc() -> None:
    assert utc(NOW) == NOW.replace(tzinfo=dt.UTC)
    east = dt.datetime(2026, 11, 22, 3, 0, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert utc(east) == NOW.replace(tzinfo=dt.UTC)
    assert utc(east).utcoffset() == dt.timedelta(0)


def test_cluster_group_joins_owners_cursors_and_watermarks() -> None:
    d = describe_group(
        group=group(),
        topic=TOPIC,
        leader=LeaderInfo(client_id="a", epoch=2, lease_expires_at=NOW, expires_in=7.25),
        members=[member("a", 7.25), member("b", -1.5)],
        assignments=[row(0, "a"), row(1, "b"), row(2, "a", "revoking"), row(3, "a", "released")],
        committed={0: 5, 1: 0, 2: 3, 3: 9},
        high_watermarks={0: 8, 1: 4, 2: 3, 3: 9},
    )
    assert (d.group, d.topic, d.mode, d.generation, d.max_attempts) == (
        "svc",
        "readings",
        "cluster",
        9,
        5,
    )
    assert [(p.partition, p.owner, p.owner_live, p.state) for p in d.partitions] == [
        (0, "a", True, "assigned"),
        (1, "b", False, "assigned"),  # b's lease expired
        (2, "a", True, "revoking"),
        (3, None, False, "released"),  # released: nobody holds it
    ]
    assert [(p.committed_offset, p.high_watermark, p.lag) for p in d.partitions] == [
        (5, 8, 3),
        (0, 4, 4),
        (3, 3, 0),
        (9, 9, 0),
    ]
    assert d.total_lag == 7
    assert [(m.client_id, m.live, m.partitions) for m in d.members] == [
        ("a", True, (0, 2)),
        ("b", False, (1,)),
    ]
    assert d.members[1].seconds_left == -1.5
    assert d.leader is not None
    assert (d.leader.client_id, d.leader.epoch, d.leader.live) == ("a", 2, True)
    assert d.leader.lease_expires_at.tzinfo is dt.UTC


def test_partitions_without_rows_and_a_group_nobody_led() -> None:
    d = describe_group(
        group=group(),
        topic=TOPIC,
        leader=LeaderInfo(client_id=None, epoch=0, lease_expires_at=NOW, expires_in=-9.0),
        members=[],
        assignments=[],
        committed={0: 0, 1: 0, 2: 0, 3: 0},
        high_watermarks={0: 2, 1: 0, 2: 0, 3: 1},
    )
    assert d.leader is None
    assert d.members == ()
    assert [(p.owner, p.state, p.generation, p.lag) for p in d.partitions] == [
        (None, None, None, 2),
        (None, None, None, 0),
        (None, None, None, 0),
        (None, None, None, 1),
    ]
    assert d.total_lag == 3


def test_expired_leader_is_shown_as_not_live() -> None:
    d = describe_group(
        group=group(),
        topic=TOPIC,
        leader=LeaderInfo(client_id="a", epoch=4, lease_expires_at=NOW, expires_in=-0.2),
        members=[],
        assignments=[],
        committed={},
        high_watermarks={},
    )
    assert d.leader is not None and not d.leader.live
    assert [p.partition for p in d.partitions] == [0, 1, 2, 3]


def test_broadcast_group_has_watermarks_only() -> None:
    d = describe_group(
        group=group("broadcast"),
        topic=TOPIC,
        leader=None,
        members=[member("a", 5.0)],
        assignments=[],
        committed={},
        high_watermarks={0: 3, 1: 0, 2: 1, 3: 0},
    )
    assert d.total_lag is None
    assert [(p.high_watermark, p.committed_offset, p.lag, p.owner) for p in d.partitions] == [
        (3, None, None, None),
        (0, None, None, None),
        (1, None, None, None),
        (0, None, None, None),
    ]
    assert d.members[0].partitions == ()
