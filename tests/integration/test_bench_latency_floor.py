"""The latency suite's hand-written floor (benchmarks.latency_floor) does the durable work
ems's members do: a fetch hands out each stored row of the partitions it reads once and
gap-free, logs exactly those rows as done and moves exactly those partitions' cursors
past them."""

from __future__ import annotations

import json
import time

from benchmarks.harness import BenchConfig
from benchmarks.latency_floor import RawMember
from ems import Consumer, Producer, RecordMetadata, TopicAdmin
from ems.config import Settings
from ems.store import Store
from ems.store.inserts import INSERT_HEAD, values
from ems.types import NewMessage
from tests import sql as db
from tests.conftest import connect


def _insert(settings: Settings, topic_id: int, partition: int, offset: int) -> None:
    headers = json.dumps({"sent": repr(time.time())})
    message = NewMessage(topic_id, partition, offset, None, headers, b"late")
    conn = connect(settings)
    try:
        conn.query(INSERT_HEAD + values(message))
        conn.commit()
    finally:
        conn.close()


def test_a_fetch_hands_out_logs_and_passes_exactly_what_its_partitions_hold(
    settings: Settings, store: Store
) -> None:
    TopicAdmin(settings, store=store).create("floor", 4)
    with Producer(settings) as producer:
        placed = [
            producer.send("floor", b"m%d" % i, key=f"k{i}", headers={"sent": repr(time.time())})
            for i in range(12)
        ]
    Consumer("floor-g", "floor", settings=settings, start="earliest").close()
    ((group_id, topic_id),) = db.rows(
        store, "SELECT id, topic_id FROM consumer_group WHERE name = 'floor-g'"
    )
    read = sorted({m.partition for m in placed})[:-1]  # one partition left unread
    cfg = BenchConfig(settings=settings, kombu_url="", seconds=1.0)
    member = RawMember(cfg, topic_id, group_id, [0, 1, 2, 3])
    try:
        expected = sorted((m.partition, m.offset) for m in placed if m.partition in read)
        assert member.fetch(read) == len(expected)
        assert member.fetch(read) == 0
        assert len(member.latencies) == len(expected)
        assert all(0 <= s < 60 for s in member.latencies)
        # A hole (an offset taken, its send not committed yet) stops its partition
        # there: what lies past it is handed out once the hole is filled.
        p = read[0]
        high = max(m.offset for m in placed if m.partition == p) + 1
        _insert(settings, topic_id, p, high + 1)
        assert member.fetch(read) == 0
        _insert(settings, topic_id, p, high)
        assert member.fetch(read) == 2
        expected += [(p, high), (p, high + 1)]
        expected.sort()
        placed += [RecordMetadata("floor", p, high), RecordMetadata("floor", p, high + 1)]
    finally:
        member.close()
    logged = db.rows(
        store,
        "SELECT partition_no, offset_no, state FROM topic_group_log WHERE group_id = :g "
        "ORDER BY partition_no, offset_no",
        {"g": group_id},
    )
    assert [(p, o) for p, o, _ in logged] == expected
    assert {state for _, _, state in logged} == {"done"}
    cursors = dict(
        db.rows(
            store,
            "SELECT partition_no, committed_offset FROM group_offset WHERE group_id = :g",
            {"g": group_id},
        )
    )
    for p in range(4):
        high = max((m.offset + 1 for m in placed if m.partition == p), default=0)
        assert cursors[p] == (high if p in read else 0), (p, cursors)
