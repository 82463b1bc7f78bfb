"""Dead letters made by real consumers: list, show, resend to the topic or the group,
idempotence, bulk by filter, purge, and bad input."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from ems import TopicAdmin
from ems.config import Settings
from ems.exceptions import (
    ConflictingOptions,
    DatabaseUnavailable,
    InvalidDatetime,
    MessagePurged,
    UnknownDeadLetter,
    UnknownGroup,
    UnknownTopic,
)
from ems.ops.dead_letters import DeadLetters
from ems.store import Store
from ems.values.rows import DeadLetterFilter
from tests.integration.seeding import (
    Running,
    dead_letters_of,
    execute,
    publish,
    scalar,
    snapshot,
    wait_for,
)

BAD = (b"bad-0", b"bad-1", b"oops-2")


@pytest.fixture
def letters(settings: Settings, store: Store) -> Iterator[DeadLetters]:
    """Topic t (2 partitions), ok-0..ok-4 and three bad messages; group g dead-letters
    the three bad ones, group h handles everything."""
    TopicAdmin(settings, store=store).create("t", 2)
    items = [(f"key-{i}", f"ok-{i}") for i in range(5)]
    items += [(f"key-{b.decode()}", b.decode()) for b in BAD]
    publish(settings, "t", items, source="sensor")
    dead_letters_of(settings, "g", "t", lambda d: d.body in BAD, 3)
    h = Running(settings, "h", "t", start="earliest")
    wait_for(lambda: len(h.seen) == 8)
    h.stop()
    dl = DeadLetters(settings, store=store)
    yield dl
    dl.close()


def ids_of(dl: DeadLetters, **filters: object) -> list[int]:
    return [d.id for d in dl.list(dl.filter(**filters), 100).letters]  # type: ignore[arg-type]


def test_list_filters_and_pages(settings: Settings, letters: DeadLetters) -> None:
    page = letters.list(letters.filter(group="g"), 100)
    assert sorted(d.body for d in page.letters) == sorted(BAD)
    assert {(d.group, d.topic, d.attempts) for d in page.letters} == {("g", "t", 2)}
    assert ids_of(letters, group="h") == []
    assert len(ids_of(letters, error="oops")) == 1
    assert len(ids_of(letters, error="cannot handle bad")) == 2
    assert len(ids_of(letters, topic="t", since="1h")) == 3
    assert ids_of(letters, until="1h") == []
    first = letters.list(letters.filter(), 2)
    assert len(first.letters) == 2 and first.more
    rest = letters.list(DeadLetterFilter(after_id=first.letters[-1].id), 2)
    assert len(rest.letters) == 1 and not rest.more


def test_show_has_the_whole_record(letters: DeadLetters) -> None:
    (dead_id,) = ids_of(letters, error="oops")
    d = letters.show(dead_id)
    assert (d.body, d.key, d.headers) == (b"oops-2", b"key-oops-2", {"source": "sensor"})
    assert d.last_error == "ValueError: cannot handle oops-2" and d.resent_at is None


def test_resend_to_the_topic_publishes_once_with_origin_headers(
    settings: Settings, store: Store, letters: DeadLetters
) -> None:
    (dead_id,) = ids_of(letters, error="oops")
    d = letters.show(dead_id)
    (out,) = letters.resend(DeadLetterFilter(ids=(dead_id,)))
    assert out.action == "published" and out.partition == d.partition
    new = store.queries.at(d.topic_id, out.partition, out.offset)  # type: ignore[arg-type]
    assert new is not None and (new.body, new.key) == (b"oops-2", b"key-oops-2")
    assert new.headers == {
        "source": "sensor",
        "ems-origin-topic": "t",
        "ems-origin-partition": str(d.partition),
        "ems-origin-offset": str(d.offset),
        "ems-origin-group": "g",
        "ems-origin-attempts": "2",
        "ems-origin-dead-id": str(dead_id),
    }
    assert letters.show(dead_id).resent_at is not None
    messages = scalar(settings, "SELECT COUNT(*) FROM message")
    (again,) = letters.resend(DeadLetterFilter(ids=(dead_id,)))
    assert again.action == "skipped"
    assert scalar(settings, "SELECT COUNT(*) FROM message") == messages
    (forced,) = letters.resend(DeadLetterFilter(ids=(dead_id,)), force=True)
    assert forced.action == "published"
    assert scalar(settings, "SELECT COUNT(*) FROM message") == messages + 1


def test_two_concurrent_resends_publish_once(settings: Settings, letters: DeadLetters) -> None:
    (dead_id,) = ids_of(letters, error="oops")
    messages = scalar(settings, "SELECT COUNT(*) FROM message")
    barrier = threading.Barrier(2)
    actions: list[str] = []

    def resend() -> None:
        dl = DeadLetters(settings)
        barrier.wait()
        actions.extend(o.action for o in dl.resend(DeadLetterFilter(ids=(dead_id,))))
        dl.close()

    threads = [threading.Thread(target=resend) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(actions) == ["published", "skipped"]
    assert scalar(settings, "SELECT COUNT(*) FROM message") == messages + 1


def test_resend_to_the_group_redelivers_to_that_group_only(
    settings: Settings, letters: DeadLetters
) -> None:
    (dead_id,) = ids_of(letters, error="oops")
    messages = scalar(settings, "SELECT COUNT(*) FROM message")
    g = Running(settings, "g", "t")
    h = Running(settings, "h", "t")
    (out,) = letters.resend(DeadLetterFilter(ids=(dead_id,)), to_group=True)
    assert out.action == "requeued"
    wait_for(lambda: len(g.seen) == 1)
    wait_for(lambda: scalar(settings, "SELECT COUNT(*) FROM retry_message") == 0)
    g.stop()
    h.stop()
    assert [(d.body, d.attempt) for d in g.seen] == [(b"oops-2", 1)]  # attempts reset
    assert h.seen == []
    assert scalar(settings, "SELECT COUNT(*) FROM message") == messages  # nothing published
    state = scalar(
        settings,
        "SELECT l.state FROM topic_group_log l JOIN dead_message d ON d.group_id = l.group_id "
        "AND d.partition_no = l.partition_no AND d.offset_no = l.offset_no WHERE d.id = :i",
        i=dead_id,
    )
    assert state == "done"
    assert letters.show(dead_id).resent_at is not None


def test_resend_to_the_group_of_a_purged_message_changes_nothing(
    settings: Settings, letters: DeadLetters
) -> None:
    dead_ids = ids_of(letters, group="g")
    execute(settings, "DELETE FROM message WHERE body = 'bad-1'")  # as retention would
    before = snapshot(settings)
    with pytest.raises(MessagePurged, match="resend them to the topic"):
        letters.resend(letters.select(group="g"), to_group=True)
    with pytest.raises(MessagePurged):
        letters.resend(DeadLetterFilter(ids=tuple(dead_ids)), to_group=True)
    assert snapshot(settings) == before
    # To the topic it still goes: the dead letter keeps its own copy of the body.
    outcomes = letters.resend(letters.select(group="g", error="bad-1"))
    assert [o.action for o in outcomes] == ["published"]


def test_bulk_resend_by_filter_and_dry_run(settings: Settings, letters: DeadLetters) -> None:
    before = snapshot(settings)
    planned = letters.resend(letters.select(group="g", error="cannot handle bad"), dry_run=True)
    assert [o.action for o in planned] == ["would publish", "would publish"]
    assert snapshot(settings) == before
    done = letters.resend(letters.select(group="g", error="cannot handle bad"))
    assert [o.action for o in done] == ["published", "published"]
    assert scalar(settings, "SELECT COUNT(*) FROM message") == before["message"] + 2
    assert scalar(settings, "SELECT COUNT(resent_at) FROM dead_message") == 2
    again = letters.resend(letters.select(everything=True))
    assert sorted(o.action for o in again) == ["published", "skipped", "skipped"]


def test_purge_removes_only_the_selected(settings: Settings, letters: DeadLetters) -> None:
    (oops,) = ids_of(letters, error="oops")
    assert letters.purge(letters.select([oops])) == 1
    assert sorted(ids_of(letters)) == sorted(set(ids_of(letters, group="g")) - {oops})
    assert letters.purge(letters.select(error="bad-0")) == 1
    assert [letters.show(i).body for i in ids_of(letters)] == [b"bad-1"]
    assert scalar(settings, "SELECT COUNT(*) FROM message") == 8  # messages untouched


def test_purge_in_bounded_chunks(settings: Settings, store: Store, letters: DeadLetters) -> None:
    assert store.dead_letters.purge(DeadLetterFilter(), chunk=1) == 3
    assert scalar(settings, "SELECT COUNT(*) FROM dead_message") == 0


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"ids": [10**9]}, UnknownDeadLetter),
        ({}, ConflictingOptions),
        ({"ids": [1], "group": "g"}, ConflictingOptions),
        ({"group": "nobody"}, UnknownGroup),
        ({"topic": "nope"}, UnknownTopic),
        ({"group": "g", "topic": "other"}, UnknownGroup),
        ({"since": "last week"}, InvalidDatetime),
        ({"since": "1h", "until": "2h"}, ConflictingOptions),
    ],
)
def test_bad_selections_change_nothing(
    settings: Settings, letters: DeadLetters, kwargs: dict[str, object], error: type[Exception]
) -> None:
    TopicAdmin(settings).create("other", 1)
    before = snapshot(settings)
    ids = kwargs.pop("ids", ())
    with pytest.raises(error):
        letters.purge(letters.select(ids, **kwargs))  # type: ignore[arg-type]
    with pytest.raises(error):
        letters.resend(letters.select(ids, **kwargs))  # type: ignore[arg-type]
    assert snapshot(settings) == before


def test_dead_letters_of_a_deleted_topic_cannot_be_resent(
    settings: Settings, letters: DeadLetters
) -> None:
    # As a delete ends: the messages gone, then the topic row (its groups go with it).
    execute(
        settings, "DELETE m FROM message m JOIN topic t ON t.id = m.topic_id WHERE t.name = 't'"
    )
    execute(settings, "DELETE FROM topic WHERE name = 't'")
    before = snapshot(settings)
    with pytest.raises(UnknownTopic, match="were deleted"):
        letters.resend(letters.select(everything=True))
    with pytest.raises(UnknownGroup, match="were deleted"):
        letters.resend(letters.select(everything=True), to_group=True)
    assert snapshot(settings) == before
    assert {d.group for d in letters.list(letters.select(everything=True)).letters} == {None}


def test_purge_what_was_resent(settings: Settings, letters: DeadLetters) -> None:
    (oops,) = ids_of(letters, error="oops")
    letters.resend(letters.select([oops]))
    assert letters.purge(letters.select(resent=True)) == 1
    assert sorted(d.body for d in letters.list(DeadLetterFilter()).letters) == [b"bad-0", b"bad-1"]


def test_a_resend_may_sit_idle_while_it_publishes_and_frees_its_letters_past_that(
    settings: Settings, store: Store, letters: DeadLetters
) -> None:
    """A resend's transaction locks its dead letters with a locking read and publishes
    between its statements, one batch per topic, each retrying up to the send timeout:
    it may sit idle past the session's own bound by that much, and no longer. A resend
    stalled there (a paused process, a cut link) kept the letters locked for as long as
    its session lived, and a second resend failed on the lock after 50 s."""
    ids = sorted(ids_of(letters, group="g"))
    bound = 1 + 4  # the session's bound, and the send timeout of the one topic's batch
    stalled = Store(settings.with_(idle_transaction_timeout=1, send_timeout=4))
    try:
        with pytest.raises(DatabaseUnavailable), stalled.dead_letters.locked(ids) as batch:
            session = batch.cursor.connection.thread_id()
            wait_for(lambda: _idle_ms(store, session) >= 1500)  # past the session's bound
            batch.cursor.execute("SELECT 1")  # still alive
            started = time.monotonic()
            with store.dead_letters.locked(ids) as again:  # waits for the stalled one
                waited = time.monotonic() - started
                assert sorted(d.id for d in again.rows) == ids
            batch.mark(ids)
        assert waited < bound + 3, f"a second resend waited {waited:.1f} s"
        assert not any(d.resent_at for d in letters.list(letters.filter(group="g"), 100).letters)
    finally:
        stalled.close()


def _idle_ms(store: Store, session: int) -> int:
    """How long the server has seen this session idle (ms)."""
    rows = store.db.select(
        "SELECT TIME_MS FROM information_schema.PROCESSLIST WHERE ID = %s AND COMMAND = 'Sleep'",
        (session,),
    )
    return int(rows[0][0]) if rows else 0
