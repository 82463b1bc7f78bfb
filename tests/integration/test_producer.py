"""The producer against the real MariaDB and Redis."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ems import Producer, Record, TopicAdmin
from ems.config import Settings
from ems.exceptions import (
    BodyTooLarge,
    DatabaseUnavailable,
    InvalidBody,
    InvalidHeaders,
    InvalidInput,
    InvalidKey,
    InvalidName,
    InvalidPartitionCount,
    RedisUnavailable,
    SendTimeout,
    TopicExists,
    UnknownTopic,
)
from ems.producer.partitioner import partition_for_key
from ems.store import Store
from tests import sql as db
from tests.integration import seed


@pytest.fixture
def topics(settings: Settings) -> Iterator[TopicAdmin]:
    admin = TopicAdmin(settings)
    yield admin
    admin.close()


@pytest.fixture(params=["redis", "mysql"])
def producer(request: pytest.FixtureRequest, settings: Settings) -> Iterator[Producer]:
    p = Producer(settings.with_(allocator=request.param))
    yield p
    p.close()


def rows(store: Store, sql: str = "") -> list[tuple[int, int, bytes | None, bytes]]:
    return db.rows(  # type: ignore[return-value]
        store,
        "SELECT partition_no, offset_no, msg_key, body FROM message "
        f"WHERE tombstone = 0 {sql} ORDER BY partition_no, offset_no",
    )


def test_send_returns_partition_and_offset(
    topics: TopicAdmin, producer: Producer, store: Store
) -> None:
    topics.create("iot.readings", 4)
    first = producer.send("iot.readings", b"r1", key="project-7", headers={"unit": "C"})
    second = producer.send("iot.readings", "r2", key="project-7")
    assert first.partition == second.partition == partition_for_key(b"project-7", 4)
    assert (first.offset, second.offset) == (0, 1)
    assert rows(store) == [
        (first.partition, 0, b"project-7", b"r1"),
        (first.partition, 1, b"project-7", b"r2"),
    ]


def test_batch_is_contiguous_per_partition_in_input_order(
    topics: TopicAdmin, producer: Producer, store: Store
) -> None:
    topics.create("t", 3)
    results = producer.send_batch(
        "t", [Record(f"m{i}".encode(), key=f"k{i % 5}") for i in range(60)]
    )
    assert len(results) == 60
    by_partition: dict[int, list[int]] = {}
    for r in results:
        by_partition.setdefault(r.partition, []).append(r.offset)
    for offsets in by_partition.values():
        assert offsets == list(range(len(offsets)))
    stored = {(p, o): body for p, o, _, body in rows(store)}
    for i, r in enumerate(results):
        assert stored[(r.partition, r.offset)] == f"m{i}".encode()


def test_keyless_messages_go_round_robin(topics: TopicAdmin, producer: Producer) -> None:
    topics.create("t", 3)
    parts = [m.partition for m in producer.send_batch("t", [b"x"] * 6)]
    assert sorted(parts) == [0, 0, 1, 1, 2, 2]


def test_batch_accepts_mappings_and_plain_bodies(topics: TopicAdmin, producer: Producer) -> None:
    topics.create("t", 1)
    out = producer.send_batch("t", [b"a", "b", {"body": b"c", "key": "k", "headers": {"h": "v"}}])
    assert [m.offset for m in out] == [0, 1, 2]
    assert producer.send_batch("t", []) == []


def test_batch_takes_plain_tuples_as_records_of_their_fields(
    topics: TopicAdmin, producer: Producer, store: Store
) -> None:
    topics.create("t", 1)
    out = producer.send_batch(
        "t", [(b"a", "k", {"h": "v"}), ("b", b"k2"), (b"c",), Record(b"d", "k", {"h": "v"})]
    )
    assert [m.offset for m in out] == [0, 1, 2, 3]
    rows = db.rows(store, "SELECT msg_key, headers, body FROM message ORDER BY offset_no")
    assert [(k and bytes(k), h, bytes(b)) for k, h, b in rows] == [
        (b"k", '{"h":"v"}', b"a"),
        (b"k2", None, b"b"),
        (None, None, b"c"),
        (b"k", '{"h":"v"}', b"d"),
    ]
    with pytest.raises(InvalidInput, match="has 4 items"):
        producer.send_batch("t", [(b"e",), (b"f", None, None, None)])  # type: ignore[list-item]
    assert len(db.rows(store, "SELECT offset_no FROM message")) == 4


def test_topic_describe_counts(topics: TopicAdmin, producer: Producer) -> None:
    topics.create("t", 2)
    producer.send_batch("t", [Record(b"x", key="a")] * 3)
    stats = {s.partition: s for s in topics.describe("t")}
    p = partition_for_key(b"a", 2)
    assert (stats[p].high_watermark, stats[p].messages, stats[p].low_watermark) == (3, 3, 0)
    assert (stats[1 - p].high_watermark, stats[1 - p].messages) == (0, 0)


def test_redis_flush_loses_and_duplicates_nothing(
    topics: TopicAdmin, settings: Settings, store: Store
) -> None:
    topics.create("t", 2)
    producer = Producer(settings)
    before = producer.send_batch("t", [Record(b"a", key="k")] * 5)
    assert seed.lose_redis(settings) > 0
    after = producer.send_batch("t", [Record(b"b", key="k")] * 5)
    producer.close()
    placed = [(m.partition, m.offset) for m in before + after]
    assert len(set(placed)) == 10
    assert min(m.offset for m in after) >= 5
    assert len(rows(store)) == 10


def test_new_producer_seeds_redis_from_mysql(topics: TopicAdmin, settings: Settings) -> None:
    topics.create("t", 1)
    with Producer(settings) as p:
        p.send_batch("t", [b"x"] * 7)
    assert seed.lose_redis(settings) > 0
    with Producer(settings) as p:
        assert p.send("t", b"y").offset == 7


# -- bad input changes nothing ---------------------------------------------------------


def test_topic_creation_errors(topics: TopicAdmin) -> None:
    topics.create("t", 1)
    with pytest.raises(TopicExists):
        topics.create("t", 2)
    with pytest.raises(InvalidName):
        topics.create("bad name", 1)
    with pytest.raises(InvalidPartitionCount):
        topics.create("u", 0)
    with pytest.raises(InvalidPartitionCount):
        topics.create("u", 4097)
    with pytest.raises(InvalidInput):
        topics.create("u", 1, max_body_bytes=0)
    assert [t.name for t in topics.list()] == ["t"]


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"topic": "missing", "body": b"x"}, UnknownTopic),
        ({"topic": "bad/name", "body": b"x"}, InvalidName),
        ({"topic": "t", "body": b"x" * 11}, BodyTooLarge),
        ({"topic": "t", "body": 12}, InvalidBody),
        ({"topic": "t", "body": None}, InvalidBody),
        ({"topic": "t", "body": b"x", "headers": {"a": 1}}, InvalidHeaders),
        ({"topic": "t", "body": b"x", "headers": ["a"]}, InvalidHeaders),
        ({"topic": "t", "body": b"x", "key": 3.5}, InvalidKey),
    ],
)
def test_bad_send_changes_nothing(
    topics: TopicAdmin,
    producer: Producer,
    store: Store,
    kwargs: dict[str, object],
    error: type[Exception],
) -> None:
    topics.create("t", 1, max_body_bytes=10)
    with pytest.raises(error):
        producer.send(**kwargs)  # type: ignore[arg-type]
    assert rows(store) == []


def test_one_bad_message_rejects_the_whole_batch(
    topics: TopicAdmin, producer: Producer, store: Store
) -> None:
    topics.create("t", 1, max_body_bytes=10)
    with pytest.raises(BodyTooLarge):
        producer.send_batch("t", [b"ok", b"ok", b"far too large"])
    with pytest.raises(InvalidInput):
        producer.send_batch("t", [b"ok", object()])  # type: ignore[list-item]
    assert rows(store) == []
    assert producer.send("t", b"ok").offset == 0


def test_unreachable_database_is_a_typed_error() -> None:
    """A send gives up after its bound (here 0: one attempt), its cause the database's."""
    settings = Settings(
        database_url="mysql+pymysql://root@127.0.0.1:1/ems",
        connect_timeout=1,
        connect_attempts=2,
        send_timeout=0,
    )
    with pytest.raises(DatabaseUnavailable):
        TopicAdmin(settings).list()
    with pytest.raises(SendTimeout, match="MySQL is unreachable") as raised:
        Producer(settings).send("t", b"x")
    assert isinstance(raised.value.__cause__, DatabaseUnavailable)


@pytest.mark.parametrize(
    "url",
    [
        "redis://127.0.0.1:1/0",  # ems's own RESP client
        "rediss://127.0.0.1:1/0",  # redis-py's, as for every URL the RESP client leaves to it
        "unix:///nonexistent/ems-redis.sock?db=0",
        "redis+sentinel://127.0.0.1:1/ems/0",  # no sentinel answers
        "rediss+sentinel://127.0.0.1:1/ems/0",
    ],
)
def test_unreachable_redis_is_a_typed_error_and_writes_nothing(
    topics: TopicAdmin, settings: Settings, store: Store, url: str
) -> None:
    topics.create("t", 1)
    producer = Producer(settings.with_(redis_url=url, connect_timeout=0.5, send_timeout=0))
    with pytest.raises(SendTimeout) as raised:
        producer.send("t", b"x")
    assert isinstance(raised.value.__cause__, RedisUnavailable)
    assert rows(store) == []


def _com_insert(store: Store) -> int:
    return int(db.row(store, "SHOW GLOBAL STATUS LIKE 'Com_insert'")[1])


def test_threads_sharing_a_producer_are_committed_together(
    topics: TopicAdmin, settings: Settings, store: Store
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    topics.create("t", 4)
    before = _com_insert(store)
    with Producer(settings) as producer:

        def worker(thread: int) -> list[tuple[int, int]]:
            return [
                (m.partition, m.offset)
                for m in (producer.send("t", f"{thread}-{i}", key=f"k{thread}") for i in range(50))
            ]

        with ThreadPoolExecutor(max_workers=16) as pool:
            placed = list(pool.map(worker, range(16)))
    inserts = _com_insert(store) - before
    stored = {(p, o): body for p, o, _, body in rows(store)}
    assert len(stored) == 16 * 50
    for thread, places in enumerate(placed):
        # each thread's messages share a key: same partition, increasing offsets, in order
        assert len({p for p, _ in places}) == 1
        assert [o for _, o in places] == sorted(o for _, o in places)
        assert [stored[pl] for pl in places] == [f"{thread}-{i}".encode() for i in range(50)]
    assert inserts < 16 * 50, "concurrent sends should share INSERT statements"


def test_create_with_exist_ok_returns_the_same_topic_and_refuses_another(
    topics: TopicAdmin,
) -> None:
    first = topics.create("readings", 4, retention_hours=24)
    assert topics.create("readings", 4, retention_hours=24, exist_ok=True) == first
    with pytest.raises(TopicExists, match="already exists"):
        topics.create("readings", 4, retention_hours=24)
    with pytest.raises(TopicExists, match=r"partitions=4 \(asked 8\).*retention_hours=24"):
        topics.create("readings", 8, exist_ok=True)
    with pytest.raises(InvalidName):
        topics.create("bad name!", 1, exist_ok=True)
    assert [t.name for t in topics.list()] == ["readings"]


def test_the_readmes_example_runs_twice(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's first example, up to its consumer, run as a reader would: twice."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = readme.split("```python\n", 1)[1].split("```", 1)[0]
    producing = block.split("def store_reading", 1)[0]
    monkeypatch.setenv("EMS_DATABASE_URL", settings.database_url)
    monkeypatch.setenv("EMS_REDIS_URL", settings.redis_url)
    for _ in range(2):
        exec(compile(producing, "README.md", "exec"), {})
    store = Store(settings)
    try:
        info = store.topics.get("iot.readings")
        assert info.partitions == 16
        assert sum(store.messages.next_offsets(info.id).values()) >= 6
    finally:
        store.close()
    assert len(capsys.readouterr().out.splitlines()) == 2
