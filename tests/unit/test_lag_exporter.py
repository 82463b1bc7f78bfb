"""The lag exporter's pure parts: rows joined into each group's state, and the metric
families rendered from it."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

from ems.ops.lag_exporter import gather, render
from ems.types import GroupInfo, MemberInfo, TopicInfo

T = dt.datetime(2026, 11, 29, 9, 0)
TOPIC = TopicInfo(
    id=7, name="orders", partitions=3, retention_hours=24, max_body_bytes=1024, created_at=T
)


def group(gid: int, name: str, mode: str = "cluster") -> GroupInfo:
    return GroupInfo(
        id=gid,
        name=name,
        topic_id=7,
        mode=mode,  # type: ignore[arg-type]
        start_position="earliest",
        ordered=False,
        retry_ladder="1s",
        max_attempts=3,
        ack_timeout_seconds=30,
        generation=1,
    )


def member(client: str, expires_in: float) -> MemberInfo:
    return MemberInfo(client_id=client, host="h", pid=1, lease_expires_at=T, expires_in=expires_in)


def test_gather_and_render() -> None:
    states = gather(
        groups=[group(1, "billing"), group(2, "audit", "broadcast")],
        topics={7: TOPIC},
        committed={1: {0: 4, 1: 9, 2: 3}},
        high_watermarks={7: {0: 10, 1: 8, 2: 3}},
        members={1: [member("a", 5), member("b", -1)], 2: [member("c", 3)]},
        ages={1: {0: 12.5, 2: 99.0}},
        waiting={1: (2, 1)},
    )
    billing, audit = states
    assert [p.lag for p in billing.description.partitions] == [6, 0, 0]
    # An age is reported only where something waits; 0 elsewhere.
    assert billing.lag_seconds == {0: 12.5, 1: 0.0, 2: 0.0}
    assert (billing.retries_waiting, billing.dead_letters, billing.live_members) == (2, 1, 1)
    assert audit.lag_seconds == {} and audit.live_members == 1
    samples = {
        (m.name, tuple(s.labels.values())): s.value
        for m in render(states, True, 0.25, 1.5)
        for s in m.samples
    }
    assert samples[("ems_group_lag_messages", ("billing", "orders", "0"))] == 6
    assert samples[("ems_group_lag_seconds", ("billing", "orders", "0"))] == 12.5
    assert samples[("ems_group_retries_waiting", ("billing", "orders"))] == 2
    assert samples[("ems_group_dead_letters", ("billing", "orders"))] == 1
    assert samples[("ems_group_live_members", ("audit", "orders"))] == 1
    assert ("ems_group_retries_waiting", ("audit", "orders")) not in samples
    assert not [k for k in samples if k[0] == "ems_group_lag_messages" and k[1][0] == "audit"]
    assert samples[("ems_exporter_up", ())] == 1
    assert samples[("ems_exporter_scrape_duration_seconds", ())] == 0.25
    assert samples[("ems_exporter_data_age_seconds", ())] == 1.5


def test_a_group_of_a_deleted_topic_is_left_out() -> None:
    states = gather(
        groups=[replace(group(1, "billing"), topic_id=99)],
        topics={7: TOPIC},
        committed={},
        high_watermarks={},
        members={},
        ages={},
        waiting={},
    )
    assert states == []
