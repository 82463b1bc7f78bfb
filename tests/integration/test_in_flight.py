"""Rows in flight without an index on the log's state: a member never reads past its
window (IN_FLIGHT_SPAN offsets from its committed cursor), every row in 'start' is found
through the windows and the retry rows, and those reads stay primary-key ranges however
long the log's history."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from ems import Consumer, Producer, TopicAdmin
from ems.config import Settings
from ems.maintenance.purge import purge_retention
from ems.ops.reset import OffsetReset, ResetTarget
from ems.store import Store
from ems.store.alarms import _IN_FLIGHT
from ems.store.maintenance import _STALE
from ems.store.purge import _FLIGHT_FLOORS
from ems.types import IN_FLIGHT_SPAN, GroupInfo, TopicInfo
from tests import sql as db
from tests.integration import seed
from tests.integration.test_consumer import FAST

_NAIVE = (
    "SELECT group_id, partition_no, COUNT(*), MIN(offset_no) FROM topic_group_log "
    "WHERE state = 'start' GROUP BY group_id, partition_no"
)
_VIEW = "SELECT group_id, partition_no, in_flight FROM ems_in_flight"


def _publish(settings: Settings, topic: str, count: int) -> None:
    with Producer(settings) as producer:
        for first in range(0, count, 2000):
            producer.send_batch(topic, [b"m%d" % i for i in range(first, min(count, first + 2000))])


def _drain(consumer: Consumer, hold: set[int]) -> list[int]:
    """Poll until two polls come back empty, acking all but the offsets in `hold`."""
    seen: list[int] = []
    empty = 0
    while empty < 2:
        batch = consumer.poll(timeout=0.3)
        empty = 0 if batch else empty + 1
        seen += [d.offset for d in batch]
        consumer.ack([d for d in batch if d.offset not in hold])
    return seen


def test_a_member_reads_no_further_than_its_window_past_the_committed_cursor(
    settings: Settings,
) -> None:
    TopicAdmin(settings).create("span", 1)
    _publish(settings, "span", IN_FLIGHT_SPAN + 700)
    options: dict[str, Any] = {"start": "earliest", "ack_timeout": 600, **FAST}
    with Consumer("g", "span", settings=settings, **options) as c:
        first = c.poll(timeout=5)
        held = first[0]
        c.ack(first[1:])
        seen = [held.offset] + [d.offset for d in first[1:]] + _drain(c, {held.offset})
        # The cursor stays at the held delivery: nothing at or past it + span is read.
        assert held.offset == 0
        assert seen == list(range(IN_FLIGHT_SPAN))
        c.ack(held)
        rest = _drain(c, set())
    assert rest == list(range(IN_FLIGHT_SPAN, IN_FLIGHT_SPAN + 700))


@pytest.fixture
def topic(settings: Settings, store: Store) -> TopicInfo:
    return TopicAdmin(settings, store=store).create("t", 2)


@pytest.fixture
def groups(store: Store, topic: TopicInfo) -> Iterator[list[GroupInfo]]:
    yield [seed.group(store, name, topic, ack_timeout=1) for name in ("a", "b")]


def _seed_history(store: Store, group: GroupInfo, partition: int, rows: int) -> None:
    """`rows` done rows below the cursor, generated in the server."""
    seed.sql(
        store,
        "INSERT INTO topic_group_log (group_id, topic_id, partition_no, offset_no, client_id, "
        f"state, attempts) SELECT %s, %s, %s, seq, 'old', 'done', 1 FROM seq_0_to_{rows - 1}",
        (group.id, group.topic_id, partition),
    )


def _in_flight_everywhere(store: Store, topic: TopicInfo, groups: list[GroupInfo]) -> None:
    """A log as members leave it: histories of done rows, batches in flight past the
    cursors (a dead client's and a live one's, one near the window's end), claimed
    retries below the cursors, and rows that are not in flight."""
    a, b = groups
    seed.messages(store, topic, 0, range(3000), 0)
    seed.messages(store, topic, 1, range(3000), 0)
    for g in groups:
        for p in (0, 1):
            _seed_history(store, g, p, 2000)
            seed.commit(store, g, p, 2000)
    for o in range(2000, 2040):
        seed.log(store, a, 0, o, state="start", client="gone", age_seconds=5)
    seed.log(store, a, 1, 2000 + IN_FLIGHT_SPAN - 1, state="start", client="gone", age_seconds=5)
    seed.log(store, b, 0, 2000, state="start", client="alive", age_seconds=5)
    seed.log(store, b, 0, 2001, state="done", client="alive")
    for g, p, o in ((a, 0, 100), (b, 1, 7)):  # claimed retries: a retry row and 'start'
        seed.sql(
            store,
            "UPDATE topic_group_log SET state = 'start', client_id = 'gone', "
            "updated_at = NOW(6) - INTERVAL 5 SECOND "
            "WHERE group_id = %s AND partition_no = %s AND offset_no = %s",
            (g.id, p, o),
        )
        seed.retry(store, g, p, o, msg_id=seed.message_id(store, topic, p, o))
    seed.retry(store, a, 1, 5, msg_id=seed.message_id(store, topic, 1, 5))  # waiting, done row
    seed.sql(store, "ANALYZE TABLE topic_group_log")


def test_every_row_in_flight_is_found_by_the_windows_and_the_retries(
    settings: Settings, store: Store, topic: TopicInfo, groups: list[GroupInfo]
) -> None:
    _in_flight_everywhere(store, topic, groups)
    naive = {(g, p): (n, low) for g, p, n, low in seed.sql(store, _NAIVE)}
    assert sum(n for n, _ in naive.values()) == 40 + 1 + 1 + 2

    alarms = {(int(r[0]), int(r[4])): int(r[5]) for r in seed.sql(store, _IN_FLIGHT)}
    assert alarms == {k: n for k, (n, _) in naive.items()}
    view = {(int(g), int(p)): int(n) for g, p, n in seed.sql(store, _VIEW)}
    assert view == alarms
    floors = dict(seed.sql(store, _FLIGHT_FLOORS, (topic.id, topic.id)))
    assert floors == {0: 100, 1: 7}
    # Every row in flight is a dead client's ('alive' holds no lease) and past the timeout.
    stale = seed.sql(store, _STALE, (1000,))
    assert len(stale) == 44


def _log_rows_read(store: Store, sql: str) -> int:
    """Rows of topic_group_log the statement read, by ANALYZE FORMAT=JSON."""
    (plan,) = db.row(store, "ANALYZE FORMAT=JSON " + sql)
    found: list[float] = []

    def walk(node: object) -> None:
        if isinstance(node, list):
            for item in node:
                walk(item)
        elif isinstance(node, dict):
            table = node.get("table")
            if isinstance(table, dict) and table.get("table_name") == "l":
                found.append(float(table.get("r_rows", 0)) * float(table.get("r_loops", 1)))
            for value in node.values():
                walk(value)

    walk(json.loads(plan))
    assert found, "the plan reads no log rows"
    return round(sum(found))


def test_the_in_flight_reads_stay_primary_key_ranges_past_a_long_history(
    store: Store, topic: TopicInfo, groups: list[GroupInfo]
) -> None:
    _in_flight_everywhere(store, topic, groups)
    # 8,000 done rows of history; 45 rows in the windows and at the retries' keys.
    for sql in (
        _STALE.replace("%s", "1000"),
        _FLIGHT_FLOORS.replace("%s", str(topic.id)),
        _IN_FLIGHT,
        _VIEW.replace("SELECT group_id, partition_no, in_flight", "SELECT *"),
    ):
        assert _log_rows_read(store, sql) <= 60, sql
        plan = seed.explain(store, sql)
        window = [r for r in plan if r["table"] == "l" and r["type"] != "eq_ref"]
        assert window and all("Range checked for each record" in r["Extra"] for r in window)


def test_a_reset_hands_back_what_a_dead_member_had_in_flight(
    settings: Settings, store: Store, topic: TopicInfo, groups: list[GroupInfo]
) -> None:
    a = groups[0]
    seed.messages(store, topic, 0, range(50), 0)
    seed.commit(store, a, 0, 20)
    for o in (20, 21, 30):
        seed.log(store, a, 0, o, state="start", client="gone")
    seed.log(store, a, 0, 22, state="done", client="gone")
    seed.log(store, a, 0, 12, state="start", client="gone")  # a claimed retry
    seed.retry(store, a, 0, 12, msg_id=seed.message_id(store, topic, 0, 12))
    seed.log(store, a, 0, 3, state="start", client="gone")  # a claimed retry kept
    seed.retry(store, a, 0, 3, msg_id=seed.message_id(store, topic, 0, 3))

    target = ResetTarget(kind="offset", offset=10)
    OffsetReset(settings, store=store).reset("a", target, topic="t", partition=0)

    rows = seed.sql(
        store,
        "SELECT offset_no, state FROM topic_group_log WHERE group_id = %s ORDER BY offset_no",
        (a.id,),
    )
    assert rows == [(3, "start"), (22, "done")]


def test_a_group_far_behind_retention_keeps_its_batch_in_flight(
    settings: Settings, store: Store
) -> None:
    """A group whose cursor lies more than IN_FLIGHT_SPAN offsets below the low watermark
    reads from the watermark: its batch lies past [cursor, cursor + span), yet it is in
    flight for every reader of that set (the view, the purge's floors, the reclaim of a
    dead member's rows), so the retention purge keeps it and a nack retries it."""
    topic = TopicAdmin(settings, store=store).create("far", 1, retention_hours=1)
    low = IN_FLIGHT_SPAN + 500
    seed.messages(store, topic, 0, range(low + 100), 48)
    group = seed.group(store, "g", topic, ack_timeout=600)
    seed.commit(store, group, 0, 0)
    store.purge.delete(topic.id, [(0, 0, low)])  # a purge while the group was away
    options: dict[str, Any] = {"start": "earliest", "batch_size": 50, **FAST}
    with Consumer("g", "far", settings=settings, store=store, **options) as c:
        batch = c.poll(timeout=5)
        c.session.writer.flush()  # their start rows are written
        assert [d.offset for d in batch] == list(range(low, low + 50))
        view = {(int(g), int(p)): int(n) for g, p, n in seed.sql(store, _VIEW)}
        assert view == {(group.id, 0): 50}
        floors = dict(seed.sql(store, _FLIGHT_FLOORS, (topic.id, topic.id)))
        assert floors == {0: low}
        purge_retention(store, settings)
        assert seed.offsets(store, topic, 0)[:50] == list(range(low, low + 50))
        c.nack(batch, "later", delay=0)
        retried: list[int] = []

        def redelivered() -> bool:
            got = c.poll(timeout=0.2)
            retried.extend(d.offset for d in got if d.attempt == 2)
            c.ack(got)
            return len(retried) >= 50

        seed.wait_until(redelivered)
        assert sorted(retried) == list(range(low, low + 50))
    assert seed.sql(store, "SELECT COUNT(*) FROM dead_message") == [(0,)]


def test_a_reset_hands_back_a_dead_members_batch_read_from_the_low_watermark(
    settings: Settings, store: Store, topic: TopicInfo, groups: list[GroupInfo]
) -> None:
    """The dead member's cursor lay far below the low watermark, so its batch was read
    from the watermark: the reset finds it there and hands it back."""
    a = groups[0]
    low = IN_FLIGHT_SPAN + 500
    seed.messages(store, topic, 0, range(low, low + 50), 0)
    store.purge.delete(topic.id, [(0, 0, low)])
    seed.commit(store, a, 0, 0)
    for o in range(low, low + 5):
        seed.log(store, a, 0, o, state="start", client="gone")
    OffsetReset(settings, store=store).reset(
        "a", ResetTarget(kind="offset", offset=low + 20), topic="t", partition=0
    )
    assert seed.sql(store, "SELECT COUNT(*) FROM topic_group_log WHERE group_id = %s", (a.id,)) == [
        (0,)
    ]
