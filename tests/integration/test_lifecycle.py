"""Topic and group lifecycle against the real servers: delete (refused while members live,
forced, in chunks, cut off and finished again, a topic of the same name made again from
nothing), alter (checked as create, picked up by producers within the metadata age)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
import redis

from ems import Consumer, Producer, Record, TopicAdmin
from ems.aio import Consumer as AsyncConsumer
from ems.config import Settings
from ems.exceptions import (
    BodyTooLarge,
    GroupDeleting,
    GroupInUse,
    InvalidInput,
    TopicDeleting,
    TopicInUse,
    UnknownGroup,
    UnknownTopic,
)
from ems.groups import GroupAdmin
from ems.models import metadata
from ems.offsets.allocators import offset_key
from ems.store import Store
from ems.types import GroupInfo, TopicInfo
from ems.values.lifecycle import DELETE_FENCE
from tests.integration import seed


@pytest.fixture
def quick(settings: Settings) -> Settings:
    """Small chunks, no rest, a short metadata age: a delete runs in many statements
    and waits a fraction of a second for producers' look-ups to age."""
    return settings.with_(purge_chunk_rows=7, purge_pause=0, metadata_max_age=0.3)


@pytest.fixture
def admin(quick: Settings, store: Store) -> TopicAdmin:
    return TopicAdmin(quick, store=store)


@pytest.fixture
def groups(quick: Settings, store: Store) -> GroupAdmin:
    return GroupAdmin(quick, store=store)


@pytest.fixture
def producer(quick: Settings) -> Iterator[Producer]:
    with Producer(quick) as p:
        yield p


def _keyed_tables(column: str) -> list[str]:
    return sorted(t.name for t in metadata.sorted_tables if column in t.c)


def left_of(store: Store, column: str, ids: list[int]) -> dict[str, int]:
    """Rows per table still keyed by one of the ids (tables with none left out)."""
    found = {}
    marks = ", ".join(["%s"] * len(ids))
    for table in _keyed_tables(column):
        n = seed.sql(store, f"SELECT COUNT(*) FROM {table} WHERE {column} IN ({marks})", ids)
        if n[0][0]:
            found[table] = int(n[0][0])
    return found


def fill(store: Store, topic: TopicInfo, group: GroupInfo) -> None:
    """A row in every table keyed by the topic or the group, beside the messages."""
    g, t = group.id, topic.id
    mid = seed.message_id(store, topic, 0, 1)
    seed.log(store, group, 0, 0, state="done")
    seed.log(store, group, 0, 1, state="start")
    seed.retry(store, group, 0, 1, msg_id=mid)
    statements = [
        (
            "INSERT INTO dead_message (group_id, topic_id, partition_no, offset_no, message_id, "
            "body, attempts) VALUES (%s, %s, 0, 2, %s, 'x', 3)",
            (g, t, mid),
        ),
        (
            "INSERT INTO consumer_client (client_id, group_id, host, pid, lease_expires_at) "
            "VALUES ('gone', %s, 'h', 1, NOW(6) - INTERVAL 1 MINUTE)",
            (g,),
        ),
        (
            "INSERT INTO offset_snapshot (captured_at, group_id, topic_id, partition_no, "
            "committed_offset, high_watermark, committed_at) "
            "VALUES (NOW(6), %s, %s, 0, 0, 5, NOW(6))",
            (g, t),
        ),
        (
            "INSERT INTO lag_report (report_id, group_id, partition_no, topic_id, "
            "high_watermark, committed_offset, lag, snapshots, status, group_status, "
            "last_captured_at) VALUES (1, %s, 0, %s, 5, 0, 5, 2, 'OK', 'OK', NOW(6))",
            (g, t),
        ),
        (
            "INSERT INTO log_summary (group_id, topic_id, hour_start, run_id, done_count, "
            "retried_count, dead_count, max_attempts) VALUES (%s, %s, NOW(), 1, 1, 0, 0, 1)",
            (g, t),
        ),
        (
            "INSERT INTO log_summary_stage (group_id, topic_id, hour_start, run_id, "
            "done_count, retried_count, dead_count, max_attempts) "
            "VALUES (%s, %s, NOW(), 1, 1, 0, 0, 1)",
            (g, t),
        ),
        ("INSERT INTO autoscale_policy (group_id) VALUES (%s)", (g,)),
        (
            "INSERT INTO autoscale_decision (group_id, leader_epoch, current_replicas, "
            "desired_replicas, backend, reason) VALUES (%s, 1, 1, 2, 'log', 'r')",
            (g,),
        ),
        (
            "INSERT INTO alarm (kind, condition_key, group_id, topic_id, message) "
            "VALUES ('lag', %s, %s, %s, 'm')",
            (f"lag:{g}:0", g, t),
        ),
        (
            "INSERT INTO topic_watermark (captured_at, topic_id, partition_no, high_watermark) "
            "VALUES (NOW(6), %s, 0, 5)",
            (t,),
        ),
        (
            "INSERT INTO message_time_index (topic_id, partition_no, end_offset, start_offset) "
            "VALUES (%s, 0, 10, 0)",
            (t,),
        ),
        (
            "INSERT INTO message_outbox (topic_id, partition_no, body) VALUES (%s, 0, 'x')",
            (t,),
        ),
        ("INSERT INTO outbox_relay (topic_id) VALUES (%s)", (t,)),
        (
            "INSERT INTO partition_low (topic_id, partition_no, low_offset) VALUES (%s, 1, 0)",
            (t,),
        ),
    ]
    for statement, params in statements:
        seed.sql(store, statement, params)


def live_member(store: Store, group: GroupInfo, client: str = "alive") -> None:
    store.leases.register(group.id, client, "host", 1, 60)


def redis_counters(settings: Settings, topic: TopicInfo) -> list[bytes]:
    client = redis.Redis.from_url(settings.redis_url)
    try:
        keys = [offset_key(settings.redis_prefix, topic.id, p) for p in range(topic.partitions)]
        return [k for k in keys if client.exists(k)]  # type: ignore[misc]
    finally:
        client.close()


# -- topic delete ----------------------------------------------------------------------


def test_a_topic_delete_removes_every_row_of_the_topic_and_its_groups_in_chunks(
    quick: Settings, store: Store, admin: TopicAdmin, producer: Producer
) -> None:
    topic = admin.create("t", 3)
    other = admin.create("other", 1)
    producer.send_batch("t", [Record(f"m{i}", f"k{i}") for i in range(60)])
    producer.send("other", "stays")
    group = seed.group(store, "g", topic)
    kept = seed.group(store, "g", other)
    fill(store, topic, group)
    assert redis_counters(quick, topic)
    before = left_of(store, "topic_id", [topic.id])
    assert set(before) >= {"message", "consumer_group", "dead_message", "message_outbox"}

    done = admin.delete("t")

    assert left_of(store, "topic_id", [topic.id]) == {}
    assert left_of(store, "group_id", [group.id]) == {}
    assert done.rows["message"] == 60
    # At most 7 rows per statement: never one DELETE of the topic.
    assert done.statements["message"] >= 60 // 7
    assert done.groups == ("g",) and not done.resumed
    assert redis_counters(quick, topic) == []
    with pytest.raises(UnknownTopic):
        admin.get("t")
    assert [t.name for t in admin.list()] == ["other"]
    assert left_of(store, "group_id", [kept.id])["group_offset"] == 1
    assert seed.offsets(store, other, 0) == [0]


def test_a_delete_is_refused_while_a_group_has_live_members_unless_forced(
    store: Store, admin: TopicAdmin, producer: Producer
) -> None:
    topic = admin.create("t", 2)
    producer.send_batch("t", ["a", "b", "c"])
    group = seed.group(store, "g", topic)
    live_member(store, group)

    with pytest.raises(TopicInUse, match="g \\(1 live\\)"):
        admin.delete("t")

    assert admin.get("t") == topic  # not even marked
    assert sum(len(seed.offsets(store, topic, p)) for p in range(2)) == 3
    assert producer.send("t", "d").offset >= 0

    done = admin.delete("t", force=True)
    assert done.groups == ("g",)
    assert left_of(store, "topic_id", [topic.id]) == {}


def test_members_whose_lease_expired_do_not_hold_a_delete(store: Store, admin: TopicAdmin) -> None:
    topic = admin.create("t", 1)
    group = seed.group(store, "g", topic)
    store.leases.register(group.id, "dead", "host", 1, 0.001)
    seed.wait_until(lambda: store.lifecycle.live_members(group.id) == 0)
    admin.delete("t")
    assert left_of(store, "group_id", [group.id]) == {}


def test_deleting_an_unknown_topic_is_not_found(admin: TopicAdmin) -> None:
    with pytest.raises(UnknownTopic):
        admin.delete("nope")
    with pytest.raises(InvalidInput):
        admin.delete("bad name!")


def test_a_delete_cut_off_after_its_mark_refuses_the_topic_and_is_finished_by_another(
    quick: Settings, store: Store, admin: TopicAdmin, producer: Producer
) -> None:
    topic = admin.create("t", 2)
    producer.send_batch("t", [str(i) for i in range(20)])
    group = seed.group(store, "g", topic)
    # The first steps of a delete, then it died: marked and fenced, rows still there.
    store.lifecycle.mark_topic(topic.id)
    store.lifecycle.fence(topic.id, topic.partitions)

    # A producer that knew the topic is refused by the fence, one that looks it up by the
    # mark; consumers cannot start; the topic is gone from the list.
    with pytest.raises(TopicDeleting):
        producer.send("t", "late")
    with Producer(quick) as fresh, pytest.raises(TopicDeleting):
        fresh.send("t", "late")
    with pytest.raises(TopicDeleting):
        Consumer("g2", "t", settings=quick)
    assert admin.list() == []
    assert all(o < 10 for p in range(2) for o in seed.offsets(store, topic, p))

    done = TopicAdmin(quick, store=store).delete("t")

    assert done.resumed and done.rows["message"] == 20
    assert left_of(store, "topic_id", [topic.id]) == {}
    assert left_of(store, "group_id", [group.id]) == {}


def test_a_topic_made_again_with_the_same_name_starts_from_nothing(
    quick: Settings, store: Store, admin: TopicAdmin, producer: Producer
) -> None:
    old = admin.create("t", 2)
    sent = producer.send_batch("t", [Record(str(i), "k") for i in range(30)])
    assert max(m.offset for m in sent) >= 29
    admin.delete("t")

    new = admin.create("t", 2)
    assert new.id != old.id
    assert redis_counters(quick, old) == []
    # The producer that knew the old topic looks it up again (its look-up is older than
    # the metadata age by now: the delete waited that long) and writes to the new one.
    again = producer.send_batch("t", [Record(str(i), "k") for i in range(3)])
    assert [m.offset for m in again] == [0, 1, 2]
    assert seed.sql(store, "SELECT DISTINCT topic_id FROM message") == [(new.id,)]


def test_the_fence_refuses_an_insert_of_a_producer_that_cached_the_topic(
    store: Store, admin: TopicAdmin, producer: Producer
) -> None:
    topic = admin.create("t", 1)
    producer.send("t", "before")
    store.lifecycle.fence(topic.id, topic.partitions)
    assert seed.low(store, topic, 0) == DELETE_FENCE
    with pytest.raises(TopicDeleting):
        producer.send("t", "after")
    assert seed.offsets(store, topic, 0) == [0]


# -- topic alter -------------------------------------------------------------------------


def test_alter_changes_retention_and_max_body_and_keeps_what_is_not_given(
    admin: TopicAdmin,
) -> None:
    admin.create("t", 2, retention_hours=5, max_body_bytes=1000)
    assert admin.alter("t", retention_hours=48).retention_hours == 48
    found = admin.alter("t", max_body_bytes=2048)
    assert (found.retention_hours, found.max_body_bytes, found.partitions) == (48, 2048, 2)


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"retention_hours": 0},
        {"retention_hours": 24 * 365 * 10 + 1},
        {"max_body_bytes": -1},
        {"max_body_bytes": 10**9},
        {"retention_hours": True},
        {"max_body_bytes": "5"},
    ],
)
def test_alter_refuses_what_create_refuses_and_changes_nothing(
    admin: TopicAdmin, changes: dict[str, object]
) -> None:
    made = admin.create("t", 1, retention_hours=5, max_body_bytes=1000)
    with pytest.raises(InvalidInput):
        admin.alter("t", **changes)  # type: ignore[arg-type]
    assert admin.get("t") == made


def test_altering_an_unknown_topic_is_not_found(admin: TopicAdmin) -> None:
    with pytest.raises(UnknownTopic):
        admin.alter("nope", retention_hours=1)


def test_a_producer_applies_a_new_max_body_within_the_metadata_age(
    quick: Settings, admin: TopicAdmin, producer: Producer
) -> None:
    admin.create("t", 1, max_body_bytes=1000)
    producer.send("t", "x" * 500)
    admin.alter("t", max_body_bytes=100)
    altered = time.monotonic()

    def refused() -> bool:
        try:
            producer.send("t", "x" * 500)
        except BodyTooLarge:
            return True
        return False

    seed.wait_until(refused, timeout=10)
    # Bounded by the metadata age (0.3 s here), give or take a send.
    assert time.monotonic() - altered < quick.metadata_max_age + 2
    admin.alter("t", max_body_bytes=1000)
    seed.wait_until(lambda: not refused(), timeout=10)


# -- group delete ------------------------------------------------------------------------


def test_a_group_delete_removes_its_rows_in_chunks_on_every_topic_it_consumes(
    store: Store, admin: TopicAdmin, groups: GroupAdmin, producer: Producer
) -> None:
    t1, t2 = admin.create("t1", 2), admin.create("t2", 1)
    producer.send_batch("t1", [str(i) for i in range(5)])
    g1, g2 = seed.group(store, "g", t1), seed.group(store, "g", t2)
    other = seed.group(store, "h", t1)
    fill(store, t1, g1)
    for o in range(3, 5):
        seed.log(store, g1, 1, o, state="done")
    for o in range(30):
        seed.log(store, g2, 0, o, state="done")

    done = groups.delete("g")

    assert left_of(store, "group_id", [g1.id, g2.id]) == {}
    assert done.rows["topic_group_log"] == 2 + 2 + 30
    assert done.statements["topic_group_log"] >= 30 // 7
    assert not done.resumed
    with pytest.raises(UnknownGroup):
        groups.describe("g")
    assert groups.describe("h")[0].topic == "t1"
    assert left_of(store, "group_id", [other.id])["group_offset"] == 2
    # The topics and their messages stay.
    assert len(seed.offsets(store, t1, 0)) + len(seed.offsets(store, t1, 1)) == 5


def test_a_group_delete_is_refused_while_it_has_live_members(
    store: Store, admin: TopicAdmin, groups: GroupAdmin
) -> None:
    topic = admin.create("t", 1)
    group = seed.group(store, "g", topic)
    live_member(store, group)
    with pytest.raises(GroupInUse, match="1 live member"):
        groups.delete("g")
    assert groups.describe("g")[0].members[0].client_id == "alive"
    assert store.groups.get("g", topic.id) == group  # not marked
    with pytest.raises(UnknownGroup):
        groups.delete("nope")


def test_a_group_delete_cut_off_is_finished_and_no_consumer_joins_meanwhile(
    quick: Settings, store: Store, admin: TopicAdmin, groups: GroupAdmin
) -> None:
    topic = admin.create("t", 1)
    group = seed.group(store, "g", topic)
    seed.log(store, group, 0, 0, state="done")
    store.lifecycle.mark_group(group.id)  # a delete that died after its mark

    with pytest.raises(GroupDeleting):
        Consumer("g", "t", settings=quick)

    done = groups.delete("g")
    assert done.resumed and done.rows["topic_group_log"] == 1
    assert left_of(store, "group_id", [group.id]) == {}
    # Made again from nothing by its next consumer.
    with Consumer("g", "t", settings=quick) as consumer:
        assert consumer.group.id != group.id


def poll_until_refused(consumer: Consumer, within: float = 60.0) -> UnknownGroup:
    """Poll until the consumer refuses to go on; fails the test if it never does."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            consumer.poll(timeout=0.2)
        except UnknownGroup as exc:
            return exc
    pytest.fail(f"the consumer polled on for {within} s after its group was deleted")


def owning(consumer: Consumer, partitions: int, within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while len(consumer.session.states) < partitions:  # type: ignore[attr-defined]
        assert time.monotonic() < deadline, "the member never got its partitions"
        consumer.poll(timeout=0.2)


@pytest.mark.parametrize("broadcast", [False, True], ids=["cluster", "broadcast"])
def test_a_member_whose_topic_is_deleted_under_it_stops_with_unknown_group(
    quick: Settings, store: Store, admin: TopicAdmin, broadcast: bool
) -> None:
    """A broadcast member too: its membership renews a lease like a cluster member's."""
    admin.create("t", 2)
    with Consumer("g", "t", settings=quick, broadcast=broadcast) as consumer:
        if broadcast:
            consumer.poll(timeout=0.1)
            assert len(store.leases.every_member()) == 1
        else:
            owning(consumer, 2)
        admin.delete("t", force=True)

        refused = poll_until_refused(consumer)
        assert "'g' was deleted" in str(refused)
        # It stays refused, and rejoined nothing meanwhile.
        with pytest.raises(UnknownGroup):
            consumer.poll(timeout=0.1)
    assert store.leases.every_member() == {}


def test_a_member_whose_cursor_rows_vanish_stops_with_unknown_group(
    quick: Settings, store: Store, admin: TopicAdmin
) -> None:
    admin.create("t", 2)
    with Consumer("g", "t", settings=quick) as consumer:
        owning(consumer, 2)
        with store.db.single() as cursor:
            cursor.execute("DELETE FROM group_offset WHERE group_id = %s", (consumer.group.id,))
        consumer.session.read_again({0, 1})  # type: ignore[attr-defined]

        with pytest.raises(UnknownGroup, match=r"'g' has no cursor for partitions \[0, 1\]"):
            consumer.poll(timeout=0.1)


def test_an_asyncio_member_whose_topic_is_deleted_under_it_stops_with_unknown_group(
    quick: Settings, admin: TopicAdmin
) -> None:
    admin.create("t", 2)

    async def run() -> UnknownGroup:
        async with AsyncConsumer("g", "t", settings=quick) as consumer:
            deadline = time.monotonic() + 60
            while consumer._member.session.states.keys() != {0, 1}:  # type: ignore[attr-defined]
                assert time.monotonic() < deadline, "the member never got its partitions"
                await consumer.poll(timeout=0.2)
            admin.delete("t", force=True)
            while time.monotonic() < deadline + 60:
                try:
                    await consumer.poll(timeout=0.2)
                except UnknownGroup as exc:
                    return exc
            pytest.fail("the consumer polled on after its group was deleted")

    assert "'g' was deleted" in str(asyncio.run(run()))
