"""Message queries against the real MariaDB: by place, by id, by key and by time."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest

from ems import TopicAdmin
from ems.config import Settings
from ems.exceptions import (
    ConflictingOptions,
    InvalidDatetime,
    InvalidKey,
    InvalidOffset,
    InvalidSetting,
    UnknownMessage,
    UnknownPartition,
    UnknownTopic,
)
from ems.ops.query import MessageQuery
from ems.producer.partitioner import partition_for_key
from ems.store import Store
from tests.integration.seeding import execute, publish, snapshot

T0 = dt.datetime(2026, 1, 1, 12, 0, 0)


@pytest.fixture
def query(settings: Settings, store: Store) -> Iterator[MessageQuery]:
    TopicAdmin(settings, store=store).create("t", 4)
    q = MessageQuery(settings, store=store)
    yield q
    q.close()


def seed_timed(settings: Settings, n: int = 40, keys: int = 4) -> list[tuple[str, str]]:
    """n messages with keys k0..k{keys-1}, message i written at T0 + i seconds."""
    items = [(f"k{i % keys}", f"m{i}") for i in range(n)]
    publish(settings, "t", items)
    # The producer's rows get the database clock; pin them to known times by body.
    execute(
        settings,
        "UPDATE message SET created_at = :t0 + INTERVAL CAST(SUBSTRING(body, 2) AS UNSIGNED) "
        "SECOND",
        t0=T0,
    )
    return items


def bodies(result: object) -> list[str]:
    return [m.body.decode() for m in result.messages]  # type: ignore[attr-defined]


def test_get_by_place_and_by_id_returns_the_stored_message(
    settings: Settings, query: MessageQuery
) -> None:
    publish(settings, "t", [("a", "first")])
    (meta,) = publish(settings, "t", [("device-7", "\xff binary? no, text")], trace="x1")
    found = query.get("t", meta.partition, meta.offset)
    m = found.message
    assert (found.topic, m.partition, m.offset) == ("t", meta.partition, meta.offset)
    assert (m.key, m.body, m.headers) == (
        b"device-7",
        "\xff binary? no, text".encode(),
        {"trace": "x1"},
    )
    assert query.get_by_id(m.id) == found


def test_unknown_places_and_tombstones_raise_typed_errors(
    settings: Settings, store: Store, query: MessageQuery
) -> None:
    (meta,) = publish(settings, "t", [("a", "x")])
    store.messages.insert_tombstones(store.topics.get("t").id, meta.partition, [meta.offset + 1])
    before = snapshot(settings)
    with pytest.raises(UnknownTopic):
        query.get("nope", 0, 0)
    with pytest.raises(UnknownPartition, match="has no partition 4"):
        query.get("t", 4, 0)
    with pytest.raises(InvalidOffset):
        query.get("t", 0, -1)
    with pytest.raises(UnknownMessage, match="holds offsets 0-1"):
        query.get("t", meta.partition, meta.offset + 2)
    with pytest.raises(UnknownMessage, match="tombstone"):
        query.get("t", meta.partition, meta.offset + 1)
    with pytest.raises(UnknownMessage):
        query.get_by_id(10**9)
    assert snapshot(settings) == before


def test_find_by_key_returns_that_key_within_the_half_open_range_only(
    settings: Settings, query: MessageQuery
) -> None:
    seed_timed(settings)
    since, until = T0 + dt.timedelta(seconds=9), T0 + dt.timedelta(seconds=29)
    result = query.find("t", key="k1", since=since, until=until)
    # k1 is every 4th message from 1; m9 is at `since` (in), m29 at `until` (out).
    assert bodies(result) == ["m9", "m13", "m17", "m21", "m25"]
    assert not result.more
    assert result.key_partition == partition_for_key(b"k1", 4)
    assert {m.partition for m in result.messages} == {result.key_partition}
    paged = query.find("t", key="k1", since=since.isoformat(), limit=2)
    assert bodies(paged) == ["m9", "m13"] and paged.more
    assert bodies(query.find("t", key="nobody")) == []
    other = (result.key_partition + 1) % 4
    assert bodies(query.find("t", key="k1", partition=other)) == []


def test_find_in_a_time_range_merges_partitions_by_time_and_skips_tombstones(
    settings: Settings, store: Store, query: MessageQuery
) -> None:
    seed_timed(settings, n=20)
    topic = store.topics.get("t")
    store.messages.insert_tombstones(topic.id, 0, [10_000])
    execute(settings, "UPDATE message SET created_at = :t WHERE tombstone = 1", t=T0)
    result = query.find("t", since=T0, until=T0 + dt.timedelta(seconds=12), limit=8)
    assert bodies(result) == [f"m{i}" for i in range(8)]
    assert result.more
    assert len({m.partition for m in result.messages}) > 1
    everything = query.find("t", since=T0 + dt.timedelta(seconds=15))
    assert bodies(everything) == [f"m{i}" for i in range(15, 20)] and not everything.more
    p = result.messages[0].partition
    one = query.find("t", partition=p, limit=100)
    assert {m.partition for m in one.messages} == {p}
    assert len(one.messages) == sum(1 for m in query.find("t").messages if m.partition == p)
    assert all(not m.tombstone for m in query.find("t", limit=100).messages)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"since": "yesterday"}, InvalidDatetime),
        ({"since": "2026-01-02", "until": "2026-01-01"}, ConflictingOptions),
        ({"since": "2026-01-01", "until": "2026-01-01"}, ConflictingOptions),
        ({"limit": 0}, InvalidSetting),
        ({"partition": 9}, UnknownPartition),
        ({"key": b"x" * 256}, InvalidKey),
    ],
)
def test_bad_find_input_raises_before_reading(
    settings: Settings, query: MessageQuery, kwargs: dict[str, object], error: type[Exception]
) -> None:
    publish(settings, "t", [("a", "x")])
    before = snapshot(settings)
    with pytest.raises(error):
        query.find("t", **kwargs)  # type: ignore[arg-type]
    assert snapshot(settings) == before
