"""Scheduled sends (delay= and deliver_at=) against the real MariaDB and Redis: a message
reaches its topic at its time and not before, at the end of its partition, without holding
back its key's undelayed messages; it survives its producer's death and Redis's loss, and
bad input writes nothing."""

from __future__ import annotations

import datetime as dt
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine
from sqlalchemy.orm import Session

from ems import Producer, Record, TopicAdmin
from ems.config import Settings
from ems.exceptions import InvalidSchedule, UnknownTopic
from ems.maintenance.housekeeping import relay_outbox
from ems.producer.partitioner import partition_for_key
from ems.store import Store
from ems.store import outbox as outbox_sql
from ems.testing import MemoryBroker
from tests.conftest import BASE_URL
from tests.integration import seed
from tests.integration.seed import wait_until

#: A producer whose relay's interval alone would never move anything during a test: what
#: it moves, it moves because it woke for the message's time.
SLEEPY = {"relay_interval": 3600.0}


@pytest.fixture
def topics(settings: Settings) -> Iterator[TopicAdmin]:
    admin = TopicAdmin(settings)
    admin.create("jobs", partitions=2)
    yield admin
    admin.close()


@pytest.fixture
def producer(settings: Settings, topics: TopicAdmin) -> Iterator[Producer]:
    p = Producer(settings.with_(**SLEEPY))
    yield p
    p.close()


@pytest.fixture
def engine() -> Iterator[Engine]:
    made = create_engine(BASE_URL + "test")
    yield made
    made.dispose()


def stored(store: Store) -> list[tuple[int, int, bytes, dt.datetime]]:
    """(partition, offset, body, created_at) of the topic's messages, in offset order."""
    rows = store.db.select(
        "SELECT partition_no, offset_no, body, m.created_at FROM message m "
        "JOIN topic t ON t.id = m.topic_id WHERE t.name = 'jobs' AND NOT tombstone "
        "ORDER BY partition_no, offset_no",
        (),
    )
    return [(int(p), int(o), b, c) for p, o, b, c in rows]


def bodies(store: Store) -> list[bytes]:
    return [b for _, _, b, _ in stored(store)]


def outbox_times(store: Store) -> dict[bytes, dt.datetime]:
    rows = store.db.select("SELECT body, deliver_at FROM message_outbox", ())
    return {b: t for b, t in rows}


def outbox_count(store: Store) -> int:
    return int(store.db.select("SELECT COUNT(*) FROM message_outbox", ())[0][0])


def test_a_delayed_message_arrives_at_its_time_and_not_before(
    producer: Producer, store: Store
) -> None:
    meta = producer.send("jobs", b"later", key="k", delay=0.8)
    assert (meta.partition, meta.offset) == (partition_for_key(b"k", 2), -1)
    due = outbox_times(store)[b"later"]
    assert bodies(store) == []
    scheduled = store.outbox.scheduled(store.topics.get("jobs").id)
    assert (scheduled.count, scheduled.next_at) in ((1, due), (0, None))  # 0: due already
    # The relay's interval is an hour: it wakes for the message's time.
    wait_until(lambda: bodies(store) == [b"later"])
    ((_, offset, _, created_at),) = stored(store)
    assert offset == 0
    assert created_at >= due  # moved at or after its time, by the database's clock
    assert outbox_count(store) == 0


def test_deliver_at_is_an_instant_in_any_time_zone(producer: Producer, store: Store) -> None:
    at = (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=0.5)).astimezone(
        dt.timezone(dt.timedelta(hours=-5))
    )
    producer.send_batch("jobs", [b"a", b"b"], deliver_at=at)
    times = outbox_times(store)
    assert set(times.values()) == {at.astimezone(dt.UTC).replace(tzinfo=None)}
    wait_until(lambda: sorted(bodies(store)) == [b"a", b"b"])
    assert all(created >= times[b] for _, _, b, created in stored(store))


def test_a_time_already_past_is_sent_at_once(producer: Producer, store: Store) -> None:
    producer.send("jobs", b"overdue", deliver_at=dt.datetime(2000, 1, 1, tzinfo=dt.UTC))
    wait_until(lambda: bodies(store) == [b"overdue"])


@pytest.mark.parametrize("seed_value", [1, 2, 3])
def test_order_per_key_scheduled_by_time_undelayed_unheld(
    producer: Producer, store: Store, seed_value: int
) -> None:
    """Undelayed and scheduled messages of one key, interleaved at random: the undelayed
    ones keep their send order and are not held back by scheduled ones sent before them;
    the scheduled ones come after every message already there, in the order of their
    times, then of their sends (ties included)."""
    rng = random.Random(seed_value)
    base = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=2)
    slots = [
        base + dt.timedelta(milliseconds=rng.choice((0, 100, 100, 250, 400))) for _ in range(6)
    ]
    plain: list[bytes] = []
    later: list[tuple[dt.datetime, int, bytes]] = []
    for i in range(30):
        if rng.random() < 0.5:
            body = f"p{i:02d}".encode()
            producer.send("jobs", body, key="k")
            plain.append(body)
        else:
            at = rng.choice(slots)
            body = f"s{i:02d}".encode()
            producer.send("jobs", body, key="k", deliver_at=at)
            later.append((at, i, body))
    assert dt.datetime.now(dt.UTC) < base, "the sends took longer than the test allows"
    assert bodies(store) == plain  # none held back by the scheduled ones sent before them
    wait_until(lambda: len(bodies(store)) == len(plain) + len(later))
    assert bodies(store) == plain + [b for _, _, b in sorted(later)]
    times = {b: at.replace(tzinfo=None) for at, _, b in later}
    assert all(created >= times[b] for _, _, b, created in stored(store) if b in times)
    # A message sent undelayed afterwards goes after them all.
    producer.send("jobs", b"after", key="k")
    assert bodies(store)[-1] == b"after"


def test_a_scheduled_send_in_a_transaction_is_kept_only_if_it_commits(
    producer: Producer, store: Store, engine: Engine
) -> None:
    with Session(engine) as session:
        producer.send("jobs", b"rolled back", delay=0, transaction=session)
        session.rollback()
    with Session(engine) as session:
        producer.send_batch("jobs", [b"x", b"y"], delay=0.3, transaction=session)
        producer.relay()  # uncommitted: not seen, however due
        assert bodies(store) == []
        session.commit()
    times = outbox_times(store)
    wait_until(lambda: sorted(bodies(store)) == [b"x", b"y"])
    assert all(created >= times[b] for _, _, b, created in stored(store))
    assert outbox_count(store) == 0


def test_the_scheduler_moves_a_dead_producers_due_messages_only(
    settings: Settings, topics: TopicAdmin, store: Store
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMS_")}
    env.update(EMS_DATABASE_URL=settings.database_url, EMS_REDIS_URL=settings.redis_url)
    script = (
        "import ems, sys, time\n"
        "p = ems.Producer()\n"
        "p.send('jobs', b'orphan', delay=1.5)\n"
        "print('sent', flush=True)\n"
        "time.sleep(600)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "sent\n"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    due = outbox_times(store)[b"orphan"]
    # Before its time the job leaves it (not orphaned: waiting); after, it moves it.
    assert relay_outbox(store, settings) == {"moved": 0} or _moved_late(store, due)
    assert outbox_count(store) == 1 or _moved_late(store, due)
    moved = 0
    deadline = time.monotonic() + 15
    while moved == 0:
        assert time.monotonic() < deadline
        moved = relay_outbox(store, settings)["moved"]
        time.sleep(0.05)
    ((_, offset, body, created_at),) = stored(store)
    assert (offset, body) == (0, b"orphan") and created_at >= due


def _moved_late(store: Store, due: dt.datetime) -> bool:
    """The machine was slow enough that the message came due before the check."""
    now = store.db.select("SELECT UTC_TIMESTAMP(6)", ())[0][0]
    return bool(now >= due)


def test_a_redis_that_lost_its_counters_places_scheduled_messages_after_the_stored(
    producer: Producer, store: Store, settings: Settings
) -> None:
    producer.send_batch("jobs", [Record(b"first", key="k")] * 5)  # counter of k's partition at 5
    producer.send("jobs", b"scheduled", key="k", delay=0.5)
    assert seed.lose_redis(settings) > 0
    wait_until(lambda: b"scheduled" in bodies(store))
    rows = [(o, b) for _, o, b, _ in stored(store)]
    assert rows == [(i, b"first") for i in range(5)] + [(5, b"scheduled")]
    # And a producer started after the loss, on the scheduler's side, alike.
    producer.send("jobs", b"again", key="k", delay=0.3)
    assert seed.lose_redis(settings) > 0
    wait_until(lambda: relay_outbox(store, settings)["moved"] == 1 or b"again" in bodies(store))
    assert [(o, b) for _, o, b, _ in stored(store)][-1] == (6, b"again")


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"delay": -1}, "0 or more"),
        ({"delay": 8 * 86400}, "EMS_MAX_DELAY"),
        ({"deliver_at": dt.datetime(2030, 1, 1)}, "time zone"),
        ({"delay": 5, "deliver_at": dt.datetime.now(dt.UTC)}, "not both"),
    ],
)
def test_bad_schedules_write_nothing(
    producer: Producer, store: Store, engine: Engine, kwargs: dict[str, object], says: str
) -> None:
    with pytest.raises(InvalidSchedule, match=says):
        producer.send("jobs", b"x", **kwargs)  # type: ignore[arg-type]
    with pytest.raises(InvalidSchedule, match=says):
        producer.send_batch("jobs", [b"x"], **kwargs)  # type: ignore[arg-type]
    with Session(engine) as session:
        with pytest.raises(InvalidSchedule, match=says):
            producer.send("jobs", b"x", transaction=session, **kwargs)  # type: ignore[arg-type]
        session.commit()
    with pytest.raises(UnknownTopic):
        producer.send("nope", b"x", delay=1)
    assert outbox_count(store) == 0 and bodies(store) == []


def test_the_longest_delay_is_a_setting(settings: Settings, topics: TopicAdmin) -> None:
    with Producer(settings.with_(max_delay=60)) as p, pytest.raises(InvalidSchedule, match="60"):
        p.send("jobs", b"x", delay=61)


def test_the_twin_takes_no_scheduled_send() -> None:
    broker = MemoryBroker()
    broker.create_topic("jobs")
    with Producer(backend=broker.backend()) as p, pytest.raises(InvalidSchedule):
        p.send("jobs", b"x", delay=1)


def test_the_pages_example_runs_as_printed(
    settings: Settings, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "scheduled.md").read_text()
    example = page.split("```python\n", 1)[1].split("```", 1)[0]
    with TopicAdmin(settings) as admin:
        admin.create("reminders", partitions=2)
    monkeypatch.setenv("EMS_DATABASE_URL", settings.database_url)
    monkeypatch.setenv("EMS_REDIS_URL", settings.redis_url)
    namespace: dict[str, object] = {}
    exec(compile(example, "docs/scheduled.md", "exec"), namespace)
    producer = namespace["producer"]
    assert isinstance(producer, Producer)
    producer.close()
    assert store.outbox.scheduled(store.topics.get("reminders").id).count == 4


def test_many_waiting_rows_cost_the_relay_nothing(producer: Producer, store: Store) -> None:
    """20,000 rows scheduled for tomorrow: the relay's reads are index ranges that start
    past them (EXPLAIN: the (topic_id, deliver_at, id) index, a handful of rows), and a due
    message among them moves within the usual time."""
    topic_id = store.topics.get("jobs").id
    with store.db.transaction() as cursor:
        cursor.execute(
            "INSERT INTO message_outbox (topic_id, partition_no, body, deliver_at) "
            "SELECT %s, seq %% 2, 'tomorrow', UTC_TIMESTAMP(6) + INTERVAL 1 DAY "
            "FROM seq_1_to_20000",
            (topic_id,),
        )
        cursor.execute("ANALYZE TABLE message_outbox")
    for sql in (outbox_sql._PENDING, outbox_sql._DUE):
        plan = store.db.select("EXPLAIN " + sql, (topic_id, 1000))
        ((_, _, table, kind, _, key, _, _, rows, _),) = plan
        assert (table, key) == ("message_outbox", "ix_message_outbox_topic_id_deliver_at_id")
        assert kind in ("ref", "range") and int(rows) < 100, plan
    # The pass's look at every topic: ANALYZE runs it and tells the rows each step read.
    plan = store.db.select("ANALYZE " + outbox_sql._WAITING, ())
    assert all(float(step[9] or 0) <= 2 for step in plan), plan
    assert any("index for group-by" in step[-1] for step in plan), plan
    assert store.outbox.waiting().topics == []
    producer.send("jobs", b"now", delay=0.2)
    wait_until(lambda: bodies(store) == [b"now"])
    assert store.outbox.scheduled(topic_id).count == 20_000
