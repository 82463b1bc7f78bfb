"""Transactional publishing against the real MariaDB and Redis: a message is published if
and only if the caller's transaction commits, no consumer sees it before, a transaction's
messages keep their order, and a transaction left open holds no one else up."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.orm import Session

from ems import Consumer, Producer, Record, TopicAdmin
from ems.config import Settings
from ems.exceptions import InvalidInput, InvalidTransaction, UnknownTopic
from ems.store import Store
from ems.testing import MemoryBroker
from ems.types import NewMessage, placed_of
from tests.conftest import BASE_URL, connect
from tests.integration.seed import wait_until

FAST = {"lease_ttl": 2.0, "renew_every": 0.5}


@pytest.fixture
def topics(settings: Settings) -> Iterator[TopicAdmin]:
    admin = TopicAdmin(settings)
    admin.create("orders", partitions=3)
    yield admin
    admin.close()


@pytest.fixture
def producer(settings: Settings, topics: TopicAdmin) -> Iterator[Producer]:
    p = Producer(settings)
    yield p
    p.close()


@pytest.fixture
def engine() -> Iterator[Engine]:
    """The service's engine, on its own database of the same server."""
    made = create_engine(BASE_URL + "test")
    yield made
    made.dispose()


def stored(store: Store) -> list[tuple[int, int, bytes]]:
    """(partition, offset, body) of every message of the topic, tombstones left out."""
    rows = store.db.select(
        "SELECT partition_no, offset_no, body FROM message m JOIN topic t ON t.id = m.topic_id "
        "WHERE t.name = 'orders' AND NOT tombstone ORDER BY partition_no, offset_no",
        (),
    )
    return [(int(p), int(o), b) for p, o, b in rows]


def bodies(store: Store) -> list[bytes]:
    return sorted(b for _, _, b in stored(store))


def test_a_session_commit_publishes_and_a_rollback_does_not(
    producer: Producer, store: Store, engine: Engine
) -> None:
    with Session(engine) as session:
        sent = producer.send("orders", b"rolled back", key="o-1", transaction=session)
        session.rollback()
    with Session(engine) as session:
        (meta,) = producer.send_batch("orders", [b"committed"], transaction=session)
        assert bodies(store) == []
        session.commit()
    assert (sent.topic, sent.offset, meta.offset) == ("orders", -1, -1)
    # The commit wakes the relay: no call needed, and the rolled-back one never comes.
    wait_until(lambda: bodies(store) == [b"committed"])
    assert store.outbox.pending(producer.store.topics.get("orders").id) == 0


def test_nothing_is_delivered_before_the_commit(
    settings: Settings, producer: Producer, engine: Engine
) -> None:
    with Consumer("g", "orders", settings=settings, start="earliest", **FAST) as consumer:
        with engine.connect() as conn:
            producer.send("orders", b"pending", transaction=conn)
            producer.relay()  # a relay pass now finds nothing committed
            assert consumer.poll(timeout=0.5) == []
            conn.commit()
        got: list[bytes] = []
        wait_until(lambda: bool(got.extend(d.body for d in consumer.poll(timeout=0.2))) or got)
        assert got == [b"pending"]


def test_a_pymysql_commit_is_relayed_by_the_next_pass(
    producer: Producer, store: Store, settings: Settings
) -> None:
    conn = connect(settings)
    try:
        conn.autocommit(False)
        producer.send_batch("orders", [b"a", b"b"], transaction=conn)
        conn.commit()
    finally:
        conn.close()
    wait_until(lambda: bodies(store) == [b"a", b"b"])  # PyMySQL tells nothing: the interval


def test_a_transaction_keeps_its_order_within_each_partition(
    producer: Producer, store: Store, engine: Engine
) -> None:
    messages = [Record(f"{i:05d}".encode(), key=f"k{i % 5}") for i in range(2_500)]
    with Session(engine) as session:
        producer.send_batch("orders", messages[:1_000], transaction=session)
        for m in messages[1_000:1_010]:
            producer.send("orders", m.body, key=m.key, transaction=session)
        producer.send_batch("orders", messages[1_010:], transaction=session)
        session.commit()
    wait_until(lambda: len(stored(store)) == 2_500)  # more than one move takes
    by_partition: dict[int, list[tuple[int, bytes]]] = {}
    for p, o, b in stored(store):
        by_partition.setdefault(p, []).append((o, b))
    for rows in by_partition.values():
        offsets = [o for o, _ in rows]
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))  # no holes
        assert [b for _, b in rows] == sorted(b for _, b in rows)  # the send order


def test_an_open_transaction_holds_up_no_one_else(
    settings: Settings, producer: Producer, store: Store, engine: Engine
) -> None:
    """Plain sends and transactional ones that commit go through, and are consumed, one
    pair after another, while another transaction stays open on the same partition for
    three gap timeouts (a hole would have stopped readers that long)."""
    held = Session(engine)
    try:
        producer.send_batch("orders", [Record(b"held", key="k")] * 3, transaction=held)
        opened = time.monotonic()
        with Consumer("g", "orders", settings=settings, start="earliest", **FAST) as consumer:
            seen: list[bytes] = []
            i = 0
            while time.monotonic() - opened < 3 * settings.gap_timeout or i < 3:
                producer.send("orders", f"plain-{i}".encode(), key="k")
                with Session(engine) as session:
                    producer.send("orders", f"tx-{i}".encode(), key="k", transaction=session)
                    session.commit()
                want = {f"plain-{i}".encode(), f"tx-{i}".encode()}

                def arrived(want: set[bytes] = want) -> bool:
                    seen.extend(d.body for d in consumer.poll(timeout=0.2))
                    return want <= set(seen)

                wait_until(arrived, timeout=settings.gap_timeout * 10)
                i += 1
            assert b"held" not in seen
            held.commit()
            wait_until(
                lambda: (
                    seen.extend(d.body for d in consumer.poll(timeout=0.2))
                    or seen.count(b"held") == 3
                )
            )
    finally:
        held.close()  # an open transaction would hold the next test's TRUNCATE


def test_the_relay_re_seeds_when_its_offsets_are_taken(
    producer: Producer, store: Store, engine: Engine
) -> None:
    (meta,) = producer.send_batch("orders", [Record(b"first", key="k")])  # seeds counters
    info = store.topics.get("orders")
    # Another writer takes the partition's next offsets behind the counter's back.
    squat = [
        NewMessage(info.id, meta.partition, meta.offset + 1 + i, None, None, b"squatter")
        for i in range(3)
    ]
    store.messages.insert(placed_of(squat))
    with Session(engine) as session:
        producer.send("orders", b"moved", key="k", transaction=session)
        session.commit()
    wait_until(lambda: b"moved" in bodies(store))
    (moved,) = [o for _, o, b in stored(store) if b == b"moved"]
    assert moved == meta.offset + 4


def test_concurrent_relays_move_each_row_once(
    settings: Settings, topics: TopicAdmin, store: Store, engine: Engine
) -> None:
    producers = [Producer(settings) for _ in range(3)]
    try:

        def publish(p: Producer, n: int) -> None:
            for i in range(40):
                with Session(engine) as session:
                    p.send_batch(
                        "orders", [f"{n}-{i}-{j}".encode() for j in range(5)], transaction=session
                    )
                    session.commit()

        threads = [threading.Thread(target=publish, args=(p, n)) for n, p in enumerate(producers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wait_until(lambda: len(stored(store)) >= 600)
        assert bodies(store) == sorted(
            f"{n}-{i}-{j}".encode() for n in range(3) for i in range(40) for j in range(5)
        )
    finally:
        for p in producers:
            p.close()


def test_bad_input_and_bad_transactions_write_nothing(
    producer: Producer, store: Store, engine: Engine, settings: Settings
) -> None:
    with Session(engine) as session:
        with pytest.raises(UnknownTopic):
            producer.send("nope", b"x", transaction=session)
        with pytest.raises(InvalidInput):
            producer.send_batch("orders", [b"ok", 7], transaction=session)  # type: ignore[list-item]
        session.commit()
    with pytest.raises(InvalidTransaction):
        producer.send("orders", b"x", transaction=engine)
    auto = connect(settings)
    try:
        with pytest.raises(InvalidTransaction, match="autocommit"):
            producer.send("orders", b"x", transaction=auto)
    finally:
        auto.close()
    assert producer.relay() == 0
    assert stored(store) == []
    assert store.db.select("SELECT COUNT(*) FROM message_outbox", ()) == ((0,),)


def test_the_twin_takes_no_transactional_send() -> None:
    broker = MemoryBroker()
    broker.create_topic("orders")
    with Producer(backend=broker.backend()) as p, pytest.raises(InvalidTransaction):
        p.send("orders", b"x", transaction=object())


def test_a_producer_closed_after_the_commit_moves_what_it_sent(
    settings: Settings, topics: TopicAdmin, store: Store, engine: Engine
) -> None:
    p = Producer(settings.with_(relay_interval=3600))
    conn = connect(settings)
    conn.autocommit(False)
    p.send("orders", b"last words", transaction=conn)
    conn.commit()
    conn.close()
    p.close()  # a last pass: no other relay runs here
    assert bodies(store) == [b"last words"]


def test_the_service_tables_commit_with_the_messages(
    producer: Producer, store: Store, engine: Engine
) -> None:
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE IF NOT EXISTS ems_tx_orders (id INT PRIMARY KEY)"))
        conn.execute(text("DELETE FROM ems_tx_orders"))
    try:
        for order, fail in ((1, False), (2, True), (3, False)):
            with Session(engine) as session:
                session.execute(text("INSERT INTO ems_tx_orders VALUES (:id)"), {"id": order})
                producer.send("orders", f"order {order}".encode(), transaction=session)
                if fail:
                    session.rollback()
                else:
                    session.commit()
        wait_until(lambda: len(stored(store)) == 2)
        with engine.connect() as conn:
            ids = [r[0] for r in conn.execute(text("SELECT id FROM ems_tx_orders ORDER BY id"))]
        assert ids == [1, 3]
        assert bodies(store) == [b"order 1", b"order 3"]
    finally:
        with engine.begin() as conn:
            conn.execute(text("DROP TABLE ems_tx_orders"))


def test_a_move_never_waits_for_an_open_transactions_row(
    settings: Settings, topics: TopicAdmin, store: Store
) -> None:
    """The move touches only the rows it moves: an open transaction's row among them (a
    smaller id than the committed rows after it) holds up neither the insert nor the
    delete, however much of the outbox the move takes."""
    p = Producer(settings.with_(relay_interval=3600))
    held = connect(settings)
    try:
        held.autocommit(False)
        p.send("orders", b"held", key="k", transaction=held)
        conn = connect(settings)
        conn.autocommit(False)
        p.send_batch(
            "orders", [Record(f"c-{i}".encode(), key="k") for i in range(20)], transaction=conn
        )
        conn.commit()
        conn.close()
        moved: list[int] = []
        relay = threading.Thread(target=lambda: moved.append(p.relay()), daemon=True)
        relay.start()
        relay.join(timeout=5 * settings.gap_timeout)
        waited = relay.is_alive()
        held.rollback()  # lets a waiting move go on, so that the test ends
        relay.join()
        assert not waited, "the move waited for the open transaction"
        assert moved == [20]
        assert b"held" not in bodies(store)
    finally:
        held.close()
        p.close()
