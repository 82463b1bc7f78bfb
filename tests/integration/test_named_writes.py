"""Producer.send_once: a write named by its token is stored once, however often and
however concurrently it is sent (what the Spark sink builds its exactly-once on)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from ems import Producer, Record, TopicAdmin
from ems.backend import mysql_backend
from ems.config import Settings
from ems.exceptions import InvalidInput, InvalidKey, UnknownPartition
from ems.store import Store
from tests.integration.test_producer_retries import _LosesAnswers


@pytest.fixture
def producer(settings: Settings) -> Iterator[Producer]:
    with TopicAdmin(settings) as admin:
        admin.create("named", partitions=3)
        admin.create("other", partitions=1)
    p = Producer(settings)
    yield p
    p.close()


def stored(store: Store, topic: str = "named") -> list[tuple[int, bytes]]:
    rows = store.db.select(
        "SELECT m.partition_no, m.body FROM message m JOIN topic t ON t.id = m.topic_id "
        "WHERE t.name = %s AND m.tombstone = 0 ORDER BY m.partition_no, m.offset_no",
        (topic,),
    )
    return [(int(p), bytes(b)) for p, b in rows]


def test_the_same_token_stores_once_per_topic(producer: Producer, store: Store) -> None:
    batch = [Record(b"a", key="k1"), Record(b"b", key="k2")]

    assert producer.send_once("named", batch, token=41) is True
    assert producer.send_once("named", batch, token=41) is False
    assert producer.send_once("other", batch, token=41) is True

    assert sorted(b for _, b in stored(store)) == [b"a", b"b"]
    assert len(stored(store, "other")) == 2
    assert store.db.select("SELECT COUNT(*) FROM message_write", ())[0][0] == 2


def test_concurrent_sends_of_one_token_store_it_once(settings: Settings, store: Store) -> None:
    with TopicAdmin(settings) as admin:
        admin.create("named", partitions=3)
    producers = [Producer(settings) for _ in range(4)]
    results: list[bool] = []
    start = threading.Barrier(len(producers))

    def send(p: Producer) -> None:
        start.wait()
        results.append(p.send_once("named", [b"x%d" % i for i in range(50)], token=7))

    threads = [threading.Thread(target=send, args=(p,)) for p in producers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for p in producers:
        p.close()

    assert sorted(results) == [False, False, False, True]
    assert len(stored(store)) == 50


def test_partitions_are_placed_as_given_and_bad_input_changes_nothing(
    producer: Producer, store: Store
) -> None:
    assert producer.send_once("named", [b"p2", b"p0"], token=1, partitions=[2, 0])
    assert stored(store) == [(0, b"p0"), (2, b"p2")]

    with pytest.raises(UnknownPartition):
        producer.send_once("named", [b"x"], token=2, partitions=[3])
    with pytest.raises(InvalidKey):
        producer.send_once("named", [Record(b"x", key=b"k" * 300)], token=2)
    with pytest.raises(InvalidInput):
        producer.send_once("named", [b"x"], token=0)
    with pytest.raises(InvalidInput):
        producer.send_once("named", [b"x", b"y"], token=2, partitions=[0])

    assert len(stored(store)) == 2
    assert producer.send_once("named", [b"x"], token=2) is True  # the name was not taken


def test_old_names_are_forgotten(producer: Producer, store: Store) -> None:
    producer.send_once("named", [b"a"], token=5)
    assert store.messages.purge_writes(3600) == 0
    store.db.select("UPDATE message_write SET created_at = NOW(6) - INTERVAL 2 HOUR", ())
    assert store.messages.purge_writes(3600) == 1
    assert not store.messages.written(producer.store.topics.get("named").id, 5)


def test_a_named_write_whose_answer_was_lost_is_recognised(settings: Settings) -> None:
    with TopicAdmin(settings) as admin:
        admin.create("named", partitions=1)
    store = Store(settings)
    store.messages = _LosesAnswers(store, times=1, commit_first=True)
    try:
        with Producer(backend=mysql_backend(settings, store)) as producer:
            assert producer.send_once("named", [b"a", b"b"], token=9) is True
            assert producer.send_once("named", [b"a", b"b"], token=9) is False
        assert stored(store) == [(0, b"a"), (0, b"b")]
    finally:
        store.close()
