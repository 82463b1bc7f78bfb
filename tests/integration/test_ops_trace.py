"""Message trace against real consumers: one topic, a group in each state."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ems import Consumer, TopicAdmin
from ems.config import Settings
from ems.exceptions import InvalidOffset, UnknownMessage, UnknownPartition, UnknownTopic
from ems.ops import trace as t
from ems.ops.trace import MessageTrace, MessageTracer
from ems.store import Store
from ems.types import IdRange
from tests.integration.seeding import (
    DIE_FAST,
    FAST,
    Running,
    execute,
    publish,
    scalar,
    snapshot,
    wait_for,
)


def states(traced: MessageTrace) -> dict[str, str]:
    return {g.group: g.state for g in traced.groups}


def cursor(settings: Settings, group: str) -> int:
    return int(
        scalar(
            settings,
            "SELECT COALESCE(SUM(o.committed_offset), 0) FROM group_offset o "
            "JOIN consumer_group g ON g.id = o.group_id WHERE g.name = :g",
            g=group,
        )
    )


def consume_all(
    settings: Settings, group: str, bad: bytes | None = None, dead: int = 0, **options: object
) -> None:
    """Run the group until its cursor passed all six messages and `dead` letters exist."""
    r = Running(settings, group, "t", lambda d: d.body == bad, start="earliest", **options)
    try:
        wait_for(lambda: cursor(settings, group) == 6)
        wait_for(lambda: scalar(settings, "SELECT COUNT(*) FROM dead_message") == dead)
    finally:
        r.stop()


@pytest.fixture
def seeded(settings: Settings, store: Store) -> Iterator[Consumer]:
    """m0..m5 on a one-partition topic, and groups: ok (all done), fail (m2 dead), slow
    (m3 retrying in an hour), pull (m4, m5 in flight), fresh (nothing consumed), late
    (created after the messages, from the latest offset), bcast (broadcast)."""
    TopicAdmin(settings, store=store).create("t", 1)
    publish(settings, "t", [(None, f"m{i}") for i in range(6)])
    consume_all(settings, "ok")
    consume_all(settings, "fail", b"m2", dead=1, **DIE_FAST)
    consume_all(settings, "slow", b"m3", dead=1, retry_ladder="1h", max_attempts=5)
    for name, options in (
        ("fresh", {"start": "earliest"}),
        ("late", {}),
        ("bcast", {"broadcast": True}),
    ):
        Consumer(name, "t", settings=settings, **options).close()  # type: ignore[arg-type]
    pull = Consumer("pull", "t", settings=settings, start="earliest", **FAST)
    got = []
    wait_for(lambda: bool(got.extend(pull.poll(timeout=0.2))) or len(got) == 6)
    pull.ack([d for d in got if d.offset < 4])
    wait_for(
        lambda: scalar(settings, "SELECT COUNT(*) FROM topic_group_log WHERE state = 'start'") == 2
    )
    yield pull
    pull.close()


def test_each_group_shows_its_state_of_each_message(
    settings: Settings, store: Store, seeded: Consumer
) -> None:
    tracer = MessageTracer(settings, store=store)
    m0 = tracer.trace("t", 0, 0)
    assert m0.message is not None and m0.message.body == b"m0"
    assert states(m0) == {
        "bcast": t.NOT_TRACKED,
        "fail": t.DONE,
        "fresh": t.PENDING,
        "late": t.NOT_DELIVERED,
        "ok": t.DONE,
        "pull": t.DONE,
        "slow": t.DONE,
    }
    m2 = tracer.trace("t", 0, 2)
    fail = next(g for g in m2.groups if g.group == "fail")
    assert fail.state == t.DEAD
    assert fail.log is not None and (fail.log.state, fail.log.attempts) == ("dead", 2)
    assert fail.log.error == "ValueError: cannot handle m2"
    assert [(d.attempts, d.last_error) for d in fail.dead] == [(2, "ValueError: cannot handle m2")]
    m3 = tracer.trace("t", 0, 3)
    slow = next(g for g in m3.groups if g.group == "slow")
    assert slow.state == t.RETRYING and slow.retry is not None
    assert slow.retry.attempts == 1 and slow.retry.due_at > store.messages.now()
    m4 = tracer.trace_id(store.queries.at(store.topics.get("t").id, 0, 4).id)  # type: ignore[union-attr]
    pull = next(g for g in m4.groups if g.group == "pull")
    assert (pull.state, pull.cursor) == (t.IN_FLIGHT, 4)
    assert pull.log is not None and pull.log.client_id == seeded.client_id


def test_compacted_and_deleted_log_rows_and_purged_messages(
    settings: Settings, store: Store, seeded: Consumer
) -> None:
    ok_id = int(scalar(settings, "SELECT id FROM consumer_group WHERE name = 'ok'"))
    # A real compaction run's bookkeeping: recorded, its chunk deleted, finished.
    run = store.compaction.start(store.messages.now(), [ok_id], "unused")
    assert run.min_id is not None and run.max_id is not None
    assert store.compaction.delete_chunk(run, IdRange(low=run.min_id, high=run.max_id, rows=6)) == 6
    store.compaction.finish(run.id)
    # A log cleanup without compaction deletes the rows of another group.
    execute(
        settings,
        "DELETE l FROM topic_group_log l JOIN consumer_group g ON g.id = l.group_id "
        "WHERE g.name = 'slow' AND l.offset_no = 0",
    )
    tracer = MessageTracer(settings, store=store)
    m0 = states(tracer.trace("t", 0, 0))
    assert (m0["ok"], m0["slow"], m0["fail"]) == (t.ARCHIVED, t.CONSUMED, t.DONE)

    m2_id = int(scalar(settings, "SELECT id FROM message WHERE offset_no = 2"))
    execute(settings, "DELETE FROM message WHERE offset_no = 2")  # as retention would
    purged = tracer.trace("t", 0, 2)
    assert purged.purged and purged.message is None
    assert states(purged)["fail"] == t.DEAD
    assert states(purged)["fresh"] == t.PURGED_UNDELIVERED
    assert states(tracer.trace_id(m2_id)) == states(purged)  # found through the dead letter


def test_bad_input_raises_typed_errors_and_changes_nothing(
    settings: Settings, store: Store, seeded: Consumer
) -> None:
    tracer = MessageTracer(settings, store=store)
    before = snapshot(settings)
    for args, error in (
        (("nope", 0, 0), UnknownTopic),
        (("t", 1, 0), UnknownPartition),
        (("t", 0, -1), InvalidOffset),
        (("t", 0, 6), UnknownMessage),  # never written
    ):
        with pytest.raises(error):
            tracer.trace(*args)  # type: ignore[arg-type]
    with pytest.raises(UnknownMessage):
        tracer.trace_id(10**9)
    assert snapshot(settings) == before


def test_a_compaction_chunk_holding_more_rows_than_archived_deletes_nothing(
    settings: Settings, store: Store, seeded: Consumer
) -> None:
    ok_id = int(scalar(settings, "SELECT id FROM consumer_group WHERE name = 'ok'"))
    run = store.compaction.start(store.messages.now(), [ok_id], "unused")
    assert run.min_id is not None and run.max_id is not None
    logged = "SELECT COUNT(*) FROM topic_group_log WHERE group_id = :g"
    assert scalar(settings, logged, g=ok_id) == 6
    # Five archived, six in the range: a row committed after the archive was read.
    assert (
        store.compaction.delete_chunk(run, IdRange(low=run.min_id, high=run.max_id, rows=5)) is None
    )
    assert scalar(settings, logged, g=ok_id) == 6
    assert store.compaction.get(run.id).deleted_rows == 0
