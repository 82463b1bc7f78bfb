"""Exactly-once consumption against the real MariaDB and Redis: a handler's writes in the
service's own database commit with the message's settlement or not at all, a failing
handler undoes only its own message's writes, sends inside the handler ride on the same
transaction, and a member that lost its partition fails its commit."""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pymysql
import pytest
from sqlalchemy import Connection, Engine, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

import ems
from ems import Consumer, Producer, Record, TopicAdmin
from ems.config import Settings
from ems.consumer import ack_writer
from ems.exceptions import InvalidHandler, InvalidSetting, InvalidTransaction
from ems.metrics import REGISTRY
from ems.ops.trace import MessageTracer
from ems.store import Store
from ems.store.errors import StaleGeneration
from ems.types import Delivery
from tests.conftest import BASE_URL
from tests.integration.seed import wait_until

FAST = {"lease_ttl": 4.0, "renew_every": 0.5}
SERVICE_DB = "test"


@pytest.fixture
def engine() -> Iterator[Engine]:
    """The service's engine, on its own database of the same server as ems's."""
    made = create_engine(BASE_URL + SERVICE_DB)
    yield made
    made.dispose()


@pytest.fixture
def counts(settings: Settings, engine: Engine) -> Iterator[str]:
    """The service's counter table: one row per message body, its count of handlings
    that committed (named after this run's ems database: parallel runs share `test`)."""
    suffix = hashlib.sha1(settings.database_name.encode()).hexdigest()[:10]
    table = f"eo_counts_{suffix}"
    with engine.begin() as conn:
        conn.execute(text(f"DROP TABLE IF EXISTS {table}"))
        conn.execute(text(f"CREATE TABLE {table} (body VARCHAR(64) PRIMARY KEY, n INT NOT NULL)"))
    yield table
    with engine.begin() as conn:
        conn.execute(text(f"DROP TABLE IF EXISTS {table}"))


@pytest.fixture
def readings(settings: Settings) -> Iterator[TopicAdmin]:
    admin = TopicAdmin(settings)
    admin.create("readings", partitions=3)
    admin.create("alerts", partitions=1)
    yield admin
    admin.close()


def publish(settings: Settings, n: int) -> list[str]:
    bodies = [f"m-{i}" for i in range(n)]
    with Producer(settings) as producer:
        producer.send_batch("readings", [Record(b, key=f"k{i % 7}") for i, b in enumerate(bodies)])
    return bodies


def counted(engine: Engine, table: str) -> dict[str, int]:
    with engine.connect() as conn:
        return {str(b): int(n) for b, n in conn.execute(text(f"SELECT body, n FROM {table}"))}


def projection(settings: Settings, engine: Engine, handle: Any, **options: Any) -> Consumer:
    """An exactly-once member of group "eo" on "readings", from the earliest offset,
    in Sessions of the service's engine."""
    return Consumer(
        "eo",
        "readings",
        handle,
        settings=settings,
        start="earliest",
        transactional=sessionmaker(engine),
        **{**FAST, **options},
    )


def bump(table: str) -> str:
    return f"INSERT INTO {table} VALUES (%s, 1) ON DUPLICATE KEY UPDATE n = n + 1"


def log_states(store: Store, group: str) -> Counter[tuple[str, int]]:
    rows = store.db.select(
        "SELECT l.state, l.exactly_once FROM topic_group_log l "
        "JOIN consumer_group g ON g.id = l.group_id WHERE g.name = %s",
        (group,),
    )
    return Counter((str(s), int(e)) for s, e in rows)


def pymysql_factory(settings: Settings) -> Callable[[], pymysql.Connection]:
    url = make_url(settings.database_url)

    def make() -> pymysql.Connection:
        return pymysql.connect(
            host=url.host or "127.0.0.1",
            port=url.port or 3306,
            user=url.username or "root",
            password=url.password or "",
            database=SERVICE_DB,
        )

    return make


@pytest.mark.parametrize("kind", ["sessionmaker", "engine", "pymysql"])
def test_every_message_counted_once_and_logged_as_exactly_once(
    settings: Settings, store: Store, engine: Engine, counts: str, readings: TopicAdmin, kind: str
) -> None:
    bodies = publish(settings, 60)
    before = (
        REGISTRY.get_sample_value("ems_handler_seconds_count", {"group": "eo", "topic": "readings"})
        or 0
    )
    factory: Any = {
        "sessionmaker": sessionmaker(engine),
        "engine": engine,
        "pymysql": pymysql_factory(settings),
    }[kind]

    def handle(d: Delivery, tx: Any) -> None:
        if isinstance(tx, Session | Connection):
            tx.execute(text(bump(counts).replace("%s", ":b", 1)), {"b": d.body.decode()})
        else:
            with tx.cursor() as cursor:
                cursor.execute(bump(counts), (d.body.decode(),))

    consumer = Consumer(
        "eo", "readings", handle, settings=settings, start="earliest", transactional=factory, **FAST
    )
    assert consumer.run(max_messages=60, handle_signals=False) == 60
    assert counted(engine, counts) == dict.fromkeys(bodies, 1)
    # each handler call observed, as the at-least-once path does
    labels = {"group": "eo", "topic": "readings"}
    assert REGISTRY.get_sample_value("ems_handler_seconds_count", labels) == 60 + before
    assert log_states(store, "eo") == Counter({("done", 1): 60})
    offsets = store.groups.offsets(consumer.group.id)
    assert sum(offsets.values()) == 60  # every cursor committed with its handler's writes


def test_an_exactly_once_batch_is_logged_as_started_while_its_handler_runs(
    settings: Settings,
    store: Store,
    engine: Engine,
    counts: str,
    readings: TopicAdmin,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its settlement commits in the caller's transaction, never through the ack writer:
    the writer must not hold the batch's start rows for it (a hold of 30 s here would
    keep them back until the batch settles)."""
    monkeypatch.setattr(ack_writer, "HOLD", 30.0)
    publish(settings, 1)
    started: list[Counter[tuple[str, int]]] = []

    def handle(d: Delivery, tx: Any) -> None:
        deadline = time.monotonic() + 10
        while not log_states(store, "eo") and time.monotonic() < deadline:
            time.sleep(0.01)
        started.append(log_states(store, "eo"))

    consumer = projection(settings, engine, handle)
    began = time.monotonic()
    assert consumer.run(max_messages=1, handle_signals=False) == 1
    assert started == [Counter({("start", 0): 1})]
    assert log_states(store, "eo") == Counter({("done", 1): 1})
    assert time.monotonic() - began < 20


def test_a_member_stalled_after_a_locking_read_in_its_batch_frees_the_row(
    settings: Settings, engine: Engine, counts: str, readings: TopicAdmin
) -> None:
    """A handler's first statement may be a locking read (SELECT ... FOR UPDATE of the
    row it is about to change). The batch's bound used to end only transactions that had
    written, so a member stalled after that read (a pause, a cut link) kept the row
    locked for as long as its session lived. The bound covers the whole transaction: the
    server ends the stalled session, the row is free, and the batch goes again."""
    with engine.begin() as conn:
        conn.execute(text(f"INSERT INTO {counts} VALUES ('held', 0)"))
    publish(settings, 1)
    waits: list[float | BaseException] = []
    locking = f"SELECT n FROM {counts} WHERE body = 'held' FOR UPDATE"

    def handle(d: Delivery, session: Session) -> None:
        session.execute(text(locking))
        if waits:
            return  # the batch again, once the stalled one has gone
        other = pymysql_factory(settings)()
        try:
            with other.cursor() as cursor:
                cursor.execute("SET SESSION innodb_lock_wait_timeout = 20")
                other.begin()
                started = time.monotonic()
                cursor.execute(locking)  # waits while the stalled batch's session lives
                waits.append(time.monotonic() - started)
                other.rollback()
        except pymysql.err.Error as exc:  # shown by the assertion below
            waits.append(exc)
        finally:
            other.close()

    consumer = projection(settings.with_(idle_transaction_timeout=1), engine, handle)
    assert consumer.run(max_messages=1, handle_signals=False) == 1
    (waited,) = waits
    assert isinstance(waited, float) and waited < 1 + 3, waited


def test_a_failing_handler_undoes_only_its_own_writes(
    settings: Settings, store: Store, engine: Engine, counts: str, readings: TopicAdmin
) -> None:
    """The handler writes, then raises for m-3 on its first delivery: that write is
    undone, m-3 goes to the retry ladder and is counted once when it passes."""
    bodies = publish(settings, 12)
    calls: Counter[str] = Counter()

    def handle(d: Delivery, session: Session) -> None:
        body = d.body.decode()
        calls[body] += 1
        session.execute(
            text(f"INSERT INTO {counts} VALUES (:b, 1) ON DUPLICATE KEY UPDATE n = n + 1"),
            {"b": body},
        )
        if body == "m-3" and d.attempt == 1:
            raise ValueError("not yet")

    consumer = projection(settings, engine, handle, retry_ladder="100ms")
    with consumer:
        handled = 0
        while counted(engine, counts).get("m-3") != 1:
            handled += consumer._run_once(None)
            assert handled < 100, "m-3 never passed"
    assert counted(engine, counts) == dict.fromkeys(bodies, 1)
    assert calls["m-3"] >= 2  # the first raised, a redelivery passed
    states = log_states(store, "eo")
    assert states == Counter({("done", 1): 12}), states  # m-3's retry row was cleared
    assert store.db.select("SELECT COUNT(*) FROM retry_message", ()) == ((0,),)


def test_a_dead_letter_request_undoes_its_writes_and_is_dead_at_once(
    settings: Settings, store: Store, engine: Engine, counts: str, readings: TopicAdmin
) -> None:
    """The handler writes, then raises ems.DeadLetter for m-3: that write is undone, m-3
    is dead at its first attempt with its reason and traceback, settled in the handler's
    transaction; the others count once."""
    bodies = publish(settings, 8)

    def handle(d: Delivery, session: Session) -> None:
        body = d.body.decode()
        session.execute(text(bump(counts).replace("%s", ":b", 1)), {"b": body})
        if body == "m-3":
            raise ems.DeadLetter("m-3 cannot be counted")

    consumer = projection(settings, engine, handle)
    with consumer:
        wait_until(lambda: _drained(consumer, engine, counts, 7), timeout=30)
    assert counted(engine, counts) == {b: 1 for b in bodies if b != "m-3"}
    ((body, attempts, error, kept),) = store.db.select(
        "SELECT body, attempts, last_error, last_traceback FROM dead_message", ()
    )
    assert (bytes(body), attempts) == (b"m-3", 1)
    assert error == "DeadLetter: m-3 cannot be counted"
    assert kept.endswith("DeadLetter: m-3 cannot be counted\n") and "in handle" in kept
    assert log_states(store, "eo") == Counter({("done", 1): 7, ("dead", 1): 1})
    assert store.db.select("SELECT COUNT(*) FROM retry_message", ()) == ((0,),)


def test_sends_in_the_handler_commit_with_its_writes(
    settings: Settings, store: Store, engine: Engine, counts: str, readings: TopicAdmin
) -> None:
    """Consume, transform, produce: a reading consumed, a count written and an alert
    published, all or none. m-5 always fails (one attempt): dead-lettered, no alert, no
    count."""
    bodies = publish(settings, 10)
    with Producer(settings) as producer:

        def handle(d: Delivery, session: Session) -> None:
            body = d.body.decode()
            session.execute(
                text(f"INSERT INTO {counts} VALUES (:b, 1) ON DUPLICATE KEY UPDATE n = n + 1"),
                {"b": body},
            )
            producer.send("alerts", f"alert {body}", transaction=session)
            if body == "m-5":
                raise RuntimeError("poison")

        consumer = projection(settings, engine, handle, max_attempts=1)
        consumer.run(max_messages=10, handle_signals=False)
        while producer.relay():
            pass
    good = [b for b in bodies if b != "m-5"]
    assert counted(engine, counts) == dict.fromkeys(good, 1)
    alerts = store.db.select(
        "SELECT body FROM message m JOIN topic t ON t.id = m.topic_id WHERE t.name = 'alerts'",
        (),
    )
    assert sorted(bytes(a).decode() for (a,) in alerts) == sorted(f"alert {b}" for b in good)
    dead = store.db.select("SELECT body, last_error FROM dead_message", ())
    assert [(bytes(b), e) for b, e in dead] == [(b"m-5", "RuntimeError: poison")]
    assert log_states(store, "eo") == Counter({("done", 1): 9, ("dead", 1): 1})
    # The trace tells both: the alert came through its producer's transaction, the
    # reading was settled in the handler's.
    tracer = MessageTracer(settings, store=store)
    (alert_place,) = store.db.select(
        "SELECT partition_no, offset_no FROM message m JOIN topic t ON t.id = m.topic_id "
        "WHERE t.name = 'alerts' LIMIT 1",
        (),
    )
    assert tracer.trace("alerts", *alert_place).message.transactional  # type: ignore[union-attr]
    (reading,) = store.db.select(
        "SELECT partition_no, offset_no FROM message m JOIN topic t ON t.id = m.topic_id "
        "WHERE t.name = 'readings' AND body = 'm-1'",
        (),
    )
    trace = tracer.trace("readings", *reading)
    assert trace.message is not None and not trace.message.transactional
    (group,) = trace.groups
    assert group.note.endswith("settled exactly once, in the handler's own transaction")


MOVES = {
    # a leader's reassignment
    "generation": "UPDATE partition_assignment SET generation = generation + 1 "
    "WHERE partition_no = %s",
    # an earlier commit of the same batch, its reply lost, that landed after all
    "cursor": "UPDATE group_offset SET committed_offset = committed_offset + 1 "
    "WHERE partition_no = %s",
}


@pytest.mark.parametrize("move", sorted(MOVES))
def test_a_commit_behind_a_moved_fence_is_refused(
    settings: Settings,
    store: Store,
    engine: Engine,
    counts: str,
    readings: TopicAdmin,
    move: str,
) -> None:
    """While the first batch is handled, its first message's partition changes under the
    member: its generation moves (as a leader's reassignment does) or its stored cursor
    does (as a commit of this batch whose reply was lost and that landed after all). The
    batch's commit is refused at the cursor's fence, its writes roll back, and the
    messages come again from the stored cursor: each counted once (the message the moved
    cursor passed, never)."""
    bodies = publish(settings, 9)
    first: list[Delivery] = []

    def handle(d: Delivery, session: Session) -> None:
        session.execute(
            text(f"INSERT INTO {counts} VALUES (:b, 1) ON DUPLICATE KEY UPDATE n = n + 1"),
            {"b": d.body.decode()},
        )
        if not first:
            first.append(d)
            with store.db.transaction() as cursor:
                assert cursor.execute(MOVES[move], (d.partition,)) == 1

    consumer = projection(settings, engine, handle)
    with consumer:
        batch = consumer.poll(timeout=5.0)
        assert batch
        runner = consumer._exactly_once
        assert runner is not None
        with pytest.raises(StaleGeneration, match="no longer owns"):
            runner.handle(batch)
        assert counted(engine, counts) == {}  # the batch's writes rolled back
        skipped = {first[0].body.decode()} if move == "cursor" else set()
        wanted = {b: 1 for b in bodies if b not in skipped}
        wait_until(lambda: _drained(consumer, engine, counts, len(wanted)), timeout=30)
    assert first[0].offset == 0
    assert counted(engine, counts) == wanted


def _drained(consumer: Consumer, engine: Engine, table: str, n: int) -> bool:
    consumer._run_once(None)
    return len(counted(engine, table)) == n


def test_wrong_set_ups_are_refused_with_typed_errors(
    settings: Settings, engine: Engine, counts: str, readings: TopicAdmin
) -> None:
    maker = sessionmaker(engine)
    with pytest.raises(InvalidHandler, match="needs a handler"):
        Consumer("eo", "readings", settings=settings, transactional=maker)
    with pytest.raises(InvalidSetting, match="broadcast"):
        Consumer("eo", "readings", print, settings=settings, broadcast=True, transactional=maker)
    with pytest.raises(InvalidTransaction, match="not a str"):
        Consumer("eo", "readings", print, settings=settings, transactional="mysql://x")  # type: ignore[arg-type]


def test_a_handler_that_ends_the_transaction_is_stopped(
    settings: Settings, store: Store, engine: Engine, counts: str, readings: TopicAdmin
) -> None:
    publish(settings, 3)

    def commits(d: Delivery, session: Session) -> None:
        session.commit()

    consumer = projection(settings, engine, commits)
    with pytest.raises(InvalidHandler, match="ended the batch's transaction"):
        consumer.run(handle_signals=False)
    assert store.db.select("SELECT COUNT(*) FROM topic_group_log WHERE state = 'done'", ()) == (
        (0,),
    )


def test_a_factory_of_something_else_and_pull_acks_are_refused(
    settings: Settings, engine: Engine, counts: str, readings: TopicAdmin
) -> None:
    publish(settings, 2)
    consumer = Consumer(
        "eo",
        "readings",
        print,
        settings=settings,
        start="earliest",
        transactional=lambda: 42,
        **FAST,
    )
    with pytest.raises(InvalidTransaction, match="not a int"):
        consumer.run(handle_signals=False)
    with Consumer(
        "eo2", "readings", print, settings=settings, start="earliest", transactional=engine, **FAST
    ) as pulled:
        got = pulled.poll(timeout=5.0)
        assert got
        with pytest.raises(InvalidSetting, match="in run"):
            pulled.ack(got)
