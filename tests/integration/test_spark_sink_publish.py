"""The ems sink's publishing step against the real database, without Spark: a task run
again over the same rows (after it failed half-way, or when Spark replays its batch)
stores every row once, and bad rows are refused with ems's typed errors."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ems import Producer, TopicAdmin
from ems.config import Settings
from ems.exceptions import (
    InvalidBody,
    InvalidHeaders,
    InvalidInput,
    UnknownPartition,
    UnknownTopic,
)
from ems.store import Store
from spark.sink.options import SinkOptions
from spark.sink.publish import WriteName, publish


class Crash(Exception):
    pass


def rows(count: int, crash_at: int | None = None) -> Iterator[dict[str, Any]]:
    for i in range(count):
        if i == crash_at:
            raise Crash
        yield {
            "key": f"k{i % 3}",
            "value": b"v%d" % i,
            "topic": "even" if i % 2 == 0 else "odd",
            "headers": [("n", str(i).encode())],
        }


def bodies(store: Store, topic: str) -> list[bytes]:
    found = store.db.select(
        "SELECT m.body FROM message m JOIN topic t ON t.id = m.topic_id "
        "WHERE t.name = %s ORDER BY m.body",
        (topic,),
    )
    return [bytes(r[0]) for r in found]


@pytest.fixture
def producer(settings: Settings) -> Iterator[Producer]:
    with TopicAdmin(settings) as admin:
        admin.create("even", partitions=2)
        admin.create("odd", partitions=1)
    with Producer(settings) as p:
        yield p


def test_a_task_run_again_after_a_crash_stores_every_row_once(
    producer: Producer, store: Store
) -> None:
    options = SinkOptions.parse({"ems.write.rows": "4"})
    name = WriteName(writer="query-1", batch=7, task=2)

    with pytest.raises(Crash):
        publish(producer, options, name, rows(40, crash_at=25))
    stored_then = len(bodies(store, "even")) + len(bodies(store, "odd"))
    again = publish(producer, options, name, rows(40))  # the task's retry
    replay = publish(producer, options, name, rows(40))  # the batch replayed

    assert 0 < stored_then < 40
    assert again.already == stored_then and again.rows == 40 - stored_then
    assert replay.rows == 0 and replay.already == 40
    assert bodies(store, "even") == sorted(b"v%d" % i for i in range(0, 40, 2))
    assert bodies(store, "odd") == sorted(b"v%d" % i for i in range(1, 40, 2))
    headers = store.db.select("SELECT headers FROM message WHERE body = 'v5'", ())
    assert headers == (('{"n":"5"}',),)
    # Another batch, task or query is another write.
    other = publish(producer, options, WriteName(writer="query-1", batch=8, task=2), rows(2))
    assert other.rows == 2


def test_bad_rows_fail_with_typed_errors(producer: Producer, store: Store) -> None:
    options = SinkOptions.parse({"topic": "even"})
    name = WriteName(writer="q", batch=0, task=0)
    cases: list[tuple[dict[str, Any], type[Exception]]] = [
        ({"value": None}, InvalidBody),
        ({"value": b"x", "headers": [("a", b"\xff")]}, InvalidHeaders),
        ({"value": b"x", "headers": [("a", b"1"), ("a", b"2")]}, InvalidHeaders),
        ({"value": b"x", "topic": "odd", "partition": 5}, UnknownPartition),
    ]
    for row, error in cases:
        with pytest.raises(error):
            publish(producer, options, name, [row])
    with pytest.raises(UnknownTopic):
        publish(producer, SinkOptions.parse({}), name, [{"value": b"x", "topic": "missing"}])
    with pytest.raises(InvalidInput):
        publish(producer, SinkOptions.parse({}), name, [{"value": b"x", "topic": None}])
    assert bodies(store, "even") == bodies(store, "odd") == []


def test_options_and_columns_are_checked_before_anything_runs() -> None:
    with pytest.raises(InvalidInput, match="unknown option"):
        SinkOptions.parse({"topics": "a"})
    with pytest.raises(InvalidInput, match=r"ems\.write\.rows"):
        SinkOptions.parse({"ems.write.rows": "0"})
    with pytest.raises(InvalidInput, match="value column"):
        SinkOptions.parse({"topic": "a"}).check_columns({"key": "string"})
    with pytest.raises(InvalidInput, match="topic column"):
        SinkOptions.parse({}).check_columns({"value": "binary"})
    with pytest.raises(InvalidInput, match="column key"):
        SinkOptions.parse({"topic": "a"}).check_columns({"value": "binary", "key": "int"})
    # Kafka's source columns pass through (ignored), so a read can be written as it is.
    SinkOptions.parse({"topic": "a"}).check_columns(
        {"value": "binary", "key": "binary", "offset": "bigint", "timestamp": "timestamp"}
    )
