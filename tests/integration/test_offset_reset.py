"""Offset reset against the real server: every target on an inactive group, the exact
datetime lookup, dry runs and bad input that change nothing, the pause protocol's edges
(dead owners, members that do not release, a concurrent reset)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest

from ems import TopicAdmin
from ems.config import Settings
from ems.consumer.groups import ensure_group
from ems.exceptions import (
    ConflictingOptions,
    EmsError,
    GroupBusy,
    InvalidDatetime,
    InvalidSetting,
    OffsetOutOfRange,
    UnknownGroup,
    UnknownPartition,
    UnknownTopic,
    UnsupportedGroup,
)
from ems.ops.reset import OffsetReset, ResetTarget
from ems.store import Store
from ems.store.errors import StaleGeneration
from ems.types import GroupInfo, TopicInfo
from tests import sql as db
from tests.integration.offsets_data import (
    T0,
    T1,
    T2,
    consumed_group,
    insert,
    options,
    small_topic,
    snapshot,
)


@pytest.fixture
def topic(settings: Settings, store: Store) -> TopicInfo:
    return small_topic(settings, store)


@pytest.fixture
def group(store: Store, topic: TopicInfo) -> GroupInfo:
    return consumed_group(store, topic)


@pytest.fixture
def resets(settings: Settings, store: Store) -> Iterator[OffsetReset]:
    r = OffsetReset(settings, store=store)
    yield r
    r.close()


def generation(store: Store, group: GroupInfo) -> int:
    found = store.groups.get(group.name, group.topic_id)
    assert found is not None
    return found.generation


def test_an_inactive_group_is_reset_to_each_target(
    store: Store, group: GroupInfo, resets: OffsetReset
) -> None:
    before = generation(store, group)
    done = resets.reset("g", resets.target(earliest=True))
    assert store.groups.offsets(group.id) == {0: 0, 1: 0, 2: 0}
    assert [(c.partition, c.current, c.new, c.change) for c in done.changes] == [
        (0, 3, 0, -3),
        (1, 3, 0, -3),
        (2, 3, 0, -3),
    ]
    assert done.generation == before + 1 == generation(store, group)
    assert store.groups.pause_left(group.id) is None

    resets.reset("g", resets.target(latest=True))
    assert store.groups.offsets(group.id) == {0: 20, 1: 5, 2: 0}
    resets.reset("g", resets.target(offset=4), partition=1)
    assert store.groups.offsets(group.id) == {0: 20, 1: 4, 2: 0}
    resets.reset("g", resets.target(offset=0), partition=2)  # empty: [0, 0]
    resets.reset("g", resets.target(when="2026-11-20T07:00:00"))
    assert store.groups.offsets(group.id) == {0: 0, 1: 0, 2: 0}
    resets.reset("g", resets.target(when="2026-11-20T10:00:00+02:00"))  # 08:00 UTC is T0
    assert store.groups.offsets(group.id) == {0: 0, 1: 0, 2: 0}
    resets.reset("g", resets.target(when="2026-11-20T08:00:00.000001"))  # after every one
    assert store.groups.offsets(group.id) == {0: 20, 1: 5, 2: 0}
    assert generation(store, group) == before + 7
    rows = store.assignments.rows(group.id)
    assert all(r.state == "released" and r.client_id is None for r in rows)


def test_a_shift_moves_each_cursor_from_where_it_is(
    store: Store, group: GroupInfo, resets: OffsetReset
) -> None:
    """Kafka's --shift-by: each committed cursor (3, 3, 3 over partitions holding 20, 5
    and 0 messages) moves by N, kept within the partition's stored offsets."""
    planned = resets.plan("g", resets.target(shift=5))
    assert [(c.partition, c.current, c.new) for c in planned.changes] == [
        (0, 3, 8),
        (1, 3, 5),
        (2, 3, 0),
    ]
    resets.reset("g", resets.target(shift=5))
    assert store.groups.offsets(group.id) == {0: 8, 1: 5, 2: 0}
    resets.reset("g", resets.target(shift=-6), partition=0)
    assert store.groups.offsets(group.id) == {0: 2, 1: 5, 2: 0}
    resets.reset("g", resets.target(shift=-1_000))
    assert store.groups.offsets(group.id) == {0: 0, 1: 0, 2: 0}


def test_a_dry_run_changes_nothing(store: Store, group: GroupInfo, resets: OffsetReset) -> None:
    before = snapshot(store, group.id)
    planned = resets.plan("g", resets.target(latest=True))
    assert [(c.partition, c.current, c.new) for c in planned.changes] == [
        (0, 3, 20),
        (1, 3, 5),
        (2, 3, 0),
    ]
    assert snapshot(store, group.id) == before


def test_a_datetime_reset_is_exact_when_many_messages_share_a_time(
    store: Store, topic: TopicInfo, group: GroupInfo, resets: OffsetReset
) -> None:
    """Partition 0 of a new topic: 0-49 at T0, 50-99 at T1, except that offset 30 was
    committed late, at T2 (an out-of-order commit). The first row the time index meets at
    T1 is offset 50, but offset 30 is the first message at or after T1 and at T2."""
    info = TopicAdmin(store=store).create("times", 2)
    rows = [(o, T1 if o >= 50 else T2 if o == 30 else T0) for o in range(100)]
    insert(store, info, 0, rows)
    # Partition 1 takes the other statement (its first row at T1 lies near the end): 0-89
    # at T0 except offset 85 (late, T2), 90-99 at T1; offset 84 a tombstone filled at T2.
    rows = [(o, T1 if o >= 90 else T2 if o in (84, 85) else T0) for o in range(100)]
    insert(store, info, 1, rows, tombstones=[84])
    ensure_group(store, "g", info, options())

    def reset_to(at: dt.datetime, partition: int) -> int:
        resets.reset("g", ResetTarget(kind="datetime", at=at), topic="times", partition=partition)
        group_id = store.groups.get("g", info.id).id  # type: ignore[union-attr]
        return store.groups.offsets(group_id)[partition]

    assert reset_to(T1, 0) == 30
    assert reset_to(T2, 0) == 30
    assert reset_to(T1 - dt.timedelta(microseconds=1), 0) == 30
    assert reset_to(T0, 0) == 0
    assert reset_to(T2 + dt.timedelta(microseconds=1), 0) == 100
    assert reset_to(T1, 1) == 85  # the tombstone at 84 is no message
    assert reset_to(T2, 1) == 85
    assert reset_to(T1 - dt.timedelta(seconds=1), 1) == 85


def test_earliest_respects_the_low_watermark(
    store: Store, topic: TopicInfo, group: GroupInfo, resets: OffsetReset
) -> None:
    db.run(
        store,
        "INSERT INTO partition_low (topic_id, partition_no, low_offset) VALUES (:t, 0, 8)",
        {"t": topic.id},
    )
    resets.reset("g", resets.target(earliest=True))
    assert store.groups.offsets(group.id) == {0: 8, 1: 0, 2: 0}
    with pytest.raises(OffsetOutOfRange):
        resets.reset("g", resets.target(offset=7), partition=0)


def test_earliest_made_while_the_first_sends_are_in_flight_keeps_them(
    settings: Settings, store: Store, resets: OffsetReset
) -> None:
    """Offsets are handed out before their rows commit: a reset to the earliest offset
    while the sends of offsets 0-4 of a partition are still in flight and 5 has committed
    lands on the log's start (0), not on 5, and an explicit offset there is in range."""
    info = TopicAdmin(settings, store=store).create("late", 1)
    insert(store, info, 0, [(5, T0)])
    ensure_group(store, "lg", info, options())
    resets.reset("lg", resets.target(latest=True), topic="late")
    done = resets.reset("lg", resets.target(earliest=True), topic="late")
    assert [(c.partition, c.new) for c in done.changes] == [(0, 0)]
    resets.reset("lg", resets.target(offset=2), topic="late")
    lg = store.groups.get("lg", info.id)
    assert lg is not None
    assert store.groups.offsets(lg.id) == {0: 2}


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda r: r.reset("nope", r.target(earliest=True)), UnknownGroup),
        (lambda r: r.reset("g", r.target(earliest=True), topic="nope"), UnknownTopic),
        (lambda r: r.reset("g", r.target(earliest=True), topic="other"), UnknownGroup),
        (lambda r: r.reset("g", r.target(earliest=True), partition=3), UnknownPartition),
        (lambda r: r.reset("g", r.target(offset=6), partition=1), OffsetOutOfRange),
        (lambda r: r.reset("g", r.target(offset=6)), OffsetOutOfRange),
        (lambda r: r.reset("g", r.target(when="last tuesday")), InvalidDatetime),
        (lambda r: r.reset("g", r.target(earliest=True, latest=True)), ConflictingOptions),
        (lambda r: r.reset("g", r.target(earliest=True), timeout=0), InvalidSetting),
        (lambda r: r.reset("b", r.target(earliest=True)), UnsupportedGroup),
        (lambda r: r.plan("b", r.target(earliest=True)), UnsupportedGroup),
    ],
)
def test_bad_input_changes_nothing(
    store: Store,
    group: GroupInfo,
    resets: OffsetReset,
    call: object,
    error: type[EmsError],
) -> None:
    other = TopicAdmin(store=store).create("other", 1)
    ensure_group(store, "b", other, options(broadcast=True))
    before = snapshot(store, group.id)
    with pytest.raises(error):
        call(resets)  # type: ignore[operator]
    assert snapshot(store, group.id) == before


def test_a_group_on_several_topics_needs_the_topic(
    store: Store, topic: TopicInfo, group: GroupInfo, resets: OffsetReset
) -> None:
    other = TopicAdmin(store=store).create("other", 1)
    insert(store, other, 0, [(o, T0) for o in range(4)])
    second = ensure_group(store, "g", other, options())
    before = snapshot(store, group.id), snapshot(store, second.id)
    with pytest.raises(ConflictingOptions, match="other, t"):
        resets.reset("g", resets.target(latest=True))
    assert (snapshot(store, group.id), snapshot(store, second.id)) == before
    resets.reset("g", resets.target(latest=True), topic="other")
    assert store.groups.offsets(second.id) == {0: 4}
    assert snapshot(store, group.id) == before[0]


LEASE = "UPDATE consumer_client SET lease_expires_at ="


def lead_and_grant(store: Store, group: GroupInfo, grants: dict[int, str]) -> int:
    epoch = store.leases.lead(group.id, "leader", ttl=10)
    assert epoch is not None
    return store.assignments.apply(group.id, ("leader", epoch), grants, [])


def test_partitions_of_a_dead_client_are_released_and_it_can_never_commit(
    store: Store, group: GroupInfo, resets: OffsetReset
) -> None:
    store.leases.register(group.id, "leader", "h", 1, ttl=10)
    store.leases.register(group.id, "dying", "h", 1, ttl=0.2)
    granted = lead_and_grant(store, group, {0: "dying", 1: "dying"})
    # The lease ran out without the row being reaped.
    db.run(store, f"{LEASE} NOW(6) - INTERVAL 1 SECOND WHERE client_id = 'dying'")
    done = resets.reset("g", resets.target(offset=1), partition=0)
    assert done.released_dead == 2  # partition 1 too: the whole group was paused
    rows = {r.partition: r for r in store.assignments.rows(group.id)}
    assert rows[0].client_id is None and rows[0].state == "released"
    # Even if its lease came back, the rows are gone.
    db.run(store, f"{LEASE} NOW(6) + INTERVAL 10 SECOND WHERE client_id = 'dying'")
    with pytest.raises(StaleGeneration):
        store.groups.commit(group.id, "dying", {0: (19, granted)})
    assert store.groups.offsets(group.id) == {0: 1, 1: 3, 2: 3}


def test_a_member_that_does_not_release_makes_the_reset_give_up_and_resume_the_group(
    store: Store, group: GroupInfo, resets: OffsetReset
) -> None:
    """A live member holds partition 0 and never releases (no consume loop runs here)."""
    store.leases.register(group.id, "leader", "h", 1, ttl=30)
    store.leases.register(group.id, "stuck", "h", 1, ttl=30)
    lead_and_grant(store, group, {0: "stuck"})
    before = store.groups.offsets(group.id)
    with pytest.raises(GroupBusy, match=r"stuck.*\[0\]"):
        resets.reset("g", resets.target(latest=True), timeout=0.5)
    assert store.groups.offsets(group.id) == before
    assert store.groups.pause_left(group.id) is None
    assert generation(store, group) == 1  # only the grant's bump


def test_one_reset_at_a_time(store: Store, group: GroupInfo, resets: OffsetReset) -> None:
    until = store.groups.pause(group.id, 30)
    assert until is not None and store.groups.pause(group.id, 30) is None
    before = snapshot(store, group.id)
    with pytest.raises(GroupBusy, match="another reset"):
        resets.reset("g", resets.target(latest=True))
    assert snapshot(store, group.id) == before
    store.groups.resume(group.id, until)
    resets.reset("g", resets.target(latest=True))
    assert store.groups.offsets(group.id)[0] == 20


def test_an_expired_pause_of_a_crashed_reset_does_not_block_the_next(
    store: Store, group: GroupInfo, resets: OffsetReset
) -> None:
    store.groups.pause(group.id, 0.000001)
    assert store.groups.pause_left(group.id) is None
    resets.reset("g", resets.target(latest=True))
    assert store.groups.offsets(group.id)[1] == 5


def test_retries_the_stream_delivers_again_are_dropped(
    store: Store, topic: TopicInfo, group: GroupInfo, resets: OffsetReset
) -> None:
    db.run(
        store,
        "INSERT INTO retry_message (group_id, topic_id, partition_no, offset_no, "
        "message_id, attempts, due_at) SELECT :g, topic_id, partition_no, offset_no, "
        "id, 1, NOW(6) FROM message WHERE topic_id = :t AND partition_no = 0 "
        "AND offset_no IN (1, 2, 10)",
        {"g": group.id, "t": topic.id},
    )
    done = resets.reset("g", resets.target(offset=2), partition=0)
    assert done.retries_dropped == 2
    assert db.values(store, "SELECT offset_no FROM retry_message") == [1]
