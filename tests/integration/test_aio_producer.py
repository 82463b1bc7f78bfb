"""ems.aio.Producer against the real MariaDB and Redis: what the thread-safe producer's
tests prove for publish, awaited, plus cancellation at each await point of a send."""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict
from collections.abc import Iterator

import pytest

from ems import Producer as SyncProducer
from ems import Record, TopicAdmin
from ems.aio import Producer
from ems.aio.group import AsyncGroupCommit
from ems.config import Settings
from ems.exceptions import (
    BodyTooLarge,
    InvalidBody,
    InvalidHeaders,
    InvalidInput,
    InvalidKey,
    InvalidName,
    RedisUnavailable,
    SendTimeout,
    UnknownTopic,
)
from ems.store import Store
from ems.types import RecordMetadata, placed_of
from tests import sql as db
from tests.integration import seed

pytestmark = pytest.mark.asyncio


@pytest.fixture
def topics(settings: Settings) -> Iterator[TopicAdmin]:
    admin = TopicAdmin(settings)
    yield admin
    admin.close()


def stored(store: Store) -> list[tuple[int, int, bytes]]:
    """(partition, offset, body) of every message row, tombstones left out."""
    return [
        (int(p), int(o), bytes(b))
        for p, o, b in db.rows(
            store,
            "SELECT partition_no, offset_no, body FROM message WHERE tombstone = 0 "
            "ORDER BY partition_no, offset_no",
        )
    ]


def assert_gap_free(rows: list[tuple[int, int, bytes]]) -> None:
    """Per partition, offsets 0..n-1, each once."""
    by_partition: dict[int, list[int]] = defaultdict(list)
    for p, o, _ in rows:
        by_partition[p].append(o)
    for p, offsets in by_partition.items():
        assert offsets == list(range(len(offsets))), f"partition {p}: {offsets[:20]}..."


def _com_insert(store: Store) -> int:
    return int(db.row(store, "SHOW GLOBAL STATUS LIKE 'Com_insert'")[1])


@pytest.mark.parametrize("allocator", ["redis", "mysql"])
async def test_send_and_send_batch_return_places(
    topics: TopicAdmin, settings: Settings, store: Store, allocator: str
) -> None:
    topics.create("t", 2)
    async with Producer(settings.with_(allocator=allocator)) as producer:
        first = await producer.send("t", b"a", key="k")
        batch = await producer.send_batch(
            "t", [Record(b"b", key="k"), b"c", {"body": "d", "key": "k", "headers": {"h": "v"}}]
        )
        assert await producer.send_batch("t", []) == []
    assert isinstance(first, RecordMetadata)
    assert first == RecordMetadata("t", first.partition, 0)
    assert batch[0] == RecordMetadata("t", first.partition, 1)
    # the keyless "c" went round robin, to either partition
    assert batch[2].partition == first.partition
    assert batch[2].offset == (2 if batch[1].partition != first.partition else 3)
    assert len(stored(store)) == 4
    assert_gap_free(stored(store))


async def test_tasks_sharing_a_producer_are_committed_together_gap_free(
    topics: TopicAdmin, settings: Settings, store: Store
) -> None:
    """1,000 sends from 100 tasks: each stored once, offsets per partition gap-free, and
    each task's messages (one key) at increasing offsets in the order it sent them."""
    topics.create("t", 4)
    before = _com_insert(store)
    async with Producer(settings) as producer:

        async def task(t: int) -> list[RecordMetadata]:
            return [await producer.send("t", f"{t}-{i}", key=f"k{t}") for i in range(10)]

        placed = await asyncio.gather(*(task(t) for t in range(100)))
    inserts = _com_insert(store) - before
    rows = stored(store)
    assert len(rows) == 1000
    assert_gap_free(rows)
    by_place = {(p, o): body for p, o, body in rows}
    for t, places in enumerate(placed):
        assert len({m.partition for m in places}) == 1
        offsets = [m.offset for m in places]
        assert offsets == sorted(offsets)
        assert [by_place[(m.partition, m.offset)] for m in places] == [
            f"{t}-{i}".encode() for i in range(10)
        ]
    assert inserts < 200, f"{inserts} INSERTs for 1,000 concurrent sends"


async def test_a_lone_send_waits_for_no_timer(topics: TopicAdmin, settings: Settings) -> None:
    topics.create("t", 1)
    async with Producer(settings) as producer:
        await producer.send("t", b"warm")
        loop = asyncio.get_running_loop()
        start = loop.time()
        await producer.send("t", b"x")
        assert loop.time() - start < 0.5


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
        ({"topic": "t", "body": b"x", "key": "k" * 256}, InvalidKey),
    ],
)
async def test_bad_send_is_a_typed_error_and_changes_nothing(
    topics: TopicAdmin,
    settings: Settings,
    store: Store,
    kwargs: dict[str, object],
    error: type[Exception],
) -> None:
    topics.create("t", 1, max_body_bytes=10)
    async with Producer(settings) as producer:
        with pytest.raises(error):
            await producer.send(**kwargs)  # type: ignore[arg-type]
    assert stored(store) == []


@pytest.mark.parametrize(
    "url",
    ["redis://127.0.0.1:1/0", "rediss://127.0.0.1:1/0", "rediss+sentinel://127.0.0.1:1/ems/0"],
)
async def test_unreachable_redis_is_a_typed_error_and_writes_nothing(
    topics: TopicAdmin, settings: Settings, store: Store, url: str
) -> None:
    topics.create("t", 1)
    local = settings.with_(redis_url=url, connect_timeout=0.5, send_timeout=0)
    async with Producer(local) as producer:
        with pytest.raises(SendTimeout) as raised:
            await producer.send("t", b"x")
    assert isinstance(raised.value.__cause__, RedisUnavailable)
    assert stored(store) == []


async def test_one_bad_message_rejects_the_whole_batch(
    topics: TopicAdmin, settings: Settings, store: Store
) -> None:
    topics.create("t", 1, max_body_bytes=10)
    async with Producer(settings) as producer:
        with pytest.raises(BodyTooLarge):
            await producer.send_batch("t", [b"ok", b"ok", b"far too large"])
        with pytest.raises(InvalidInput):
            await producer.send_batch("t", [b"ok", object()])  # type: ignore[list-item]
        with pytest.raises(InvalidInput):
            await producer.send_batch("t", [b"x"] * 10_001)
        with pytest.raises(UnknownTopic):
            await producer.send_batch("nope", [b"ok"])
        assert stored(store) == []
        assert (await producer.send("t", b"ok")).offset == 0


async def test_redis_flush_mid_run_loses_and_duplicates_nothing(
    topics: TopicAdmin, settings: Settings, store: Store
) -> None:
    topics.create("t", 3)
    async with Producer(settings) as producer:

        async def task(t: int) -> list[RecordMetadata]:
            out = []
            for i in range(20):
                out.append(await producer.send("t", f"{t}-{i}", key=f"k{t}"))
                if t == 0 and i == 10:
                    assert await asyncio.to_thread(seed.lose_redis, settings) > 0
            return out

        placed = [m for ms in await asyncio.gather(*(task(t) for t in range(20))) for m in ms]
    assert len({(m.partition, m.offset) for m in placed}) == 400
    rows = stored(store)
    assert sorted(body for _, _, body in rows) == sorted(
        f"{t}-{i}".encode() for t in range(20) for i in range(20)
    )
    assert {(p, o) for p, o, _ in rows} == {(m.partition, m.offset) for m in placed}


async def test_new_producer_seeds_redis_from_mysql(topics: TopicAdmin, settings: Settings) -> None:
    topics.create("t", 1)
    async with Producer(settings) as p:
        await p.send_batch("t", [b"x"] * 7)
    assert seed.lose_redis(settings) > 0
    async with Producer(settings) as p:
        assert (await p.send("t", b"y")).offset == 7


async def test_sync_and_aio_producers_on_one_topic_keep_offsets_unique_and_gap_free(
    topics: TopicAdmin, settings: Settings, store: Store
) -> None:
    topics.create("t", 2)
    sync_places: list[RecordMetadata] = []

    def sync_side() -> None:
        with SyncProducer(settings) as p:
            for i in range(300):
                sync_places.append(p.send("t", f"s{i}", key=f"s{i % 3}"))

    thread = threading.Thread(target=sync_side)
    thread.start()
    async with Producer(settings) as producer:

        async def task(t: int) -> list[RecordMetadata]:
            return [await producer.send("t", f"a{t}-{i}", key=f"a{t}") for i in range(30)]

        aio_places = [m for ms in await asyncio.gather(*(task(t) for t in range(10))) for m in ms]
    await asyncio.to_thread(thread.join)
    rows = stored(store)
    assert len(rows) == 600
    assert_gap_free(rows)
    assert len({(m.partition, m.offset) for m in sync_places + aio_places}) == 600


# -- cancellation ------------------------------------------------------------------------


async def test_cancelled_while_queued_writes_nothing(
    topics: TopicAdmin, settings: Settings, store: Store
) -> None:
    """A send cancelled before a flush took it: nothing written, no success reported."""
    topics.create("t", 1)
    async with Producer(settings, linger=0.2) as producer:
        await producer.send("t", b"first")
        doomed = asyncio.create_task(producer.send("t", b"doomed"))
        kept = asyncio.create_task(producer.send("t", b"kept"))
        await asyncio.sleep(0.05)  # both queued; the flush lingers
        doomed.cancel()
        with pytest.raises(asyncio.CancelledError):
            await doomed
        assert (await kept).offset == 1
    assert [body for _, _, body in stored(store)] == [b"first", b"kept"]


async def test_cancelled_during_the_topic_lookup_lets_the_lookup_serve_others(
    topics: TopicAdmin, settings: Settings, store: Store
) -> None:
    topics.create("t", 1)
    async with Producer(settings) as producer:
        doomed = asyncio.create_task(producer.send("t", b"doomed"))
        other = asyncio.create_task(producer.send("t", b"other"))
        await asyncio.sleep(0)  # both wait on the one lookup
        doomed.cancel()
        with pytest.raises(asyncio.CancelledError):
            await doomed
        assert (await other).offset == 0
    assert [body for _, _, body in stored(store)] == [b"other"]


@pytest.mark.parametrize("step", ["allocate", "insert", "publish"])
async def test_cancelled_while_its_group_is_in_flight_lets_the_group_commit(
    topics: TopicAdmin, settings: Settings, store: Store, step: str
) -> None:
    """Cancelled while its group awaits Redis, MySQL or the wake-up: the caller sees
    CancelledError, never a place; the group commits for the others; nothing is lost or
    written twice, and later sends continue the offsets without a gap."""
    topics.create("t", 1)
    async with Producer(settings) as producer:
        await producer.send("t", b"warm")
        reached = asyncio.Event()
        release = asyncio.Event()
        target = {
            "allocate": (producer, "_allocate"),
            "insert": (producer.store, "insert"),
            "publish": (producer._wakeups, "messages"),
        }[step]
        original = getattr(*target)

        async def paused(*args: object, **kwargs: object) -> object:
            reached.set()
            await release.wait()
            return await original(*args, **kwargs)

        setattr(target[0], target[1], paused)
        doomed = asyncio.create_task(producer.send("t", b"doomed"))
        other = asyncio.create_task(producer.send("t", b"other"))
        await reached.wait()
        doomed.cancel()
        await asyncio.sleep(0)
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await doomed
        assert (await other).offset == 2
        setattr(target[0], target[1], original)
        assert (await producer.send("t", b"after")).offset == 3
    rows = stored(store)
    assert [body for _, _, body in rows] == [b"warm", b"doomed", b"other", b"after"]
    assert_gap_free(rows)


async def test_a_failed_flush_fails_every_caller_of_its_group() -> None:
    calls: list[list[int]] = []

    async def flush(items: list[int], deadline: float) -> list[int]:
        calls.append(items)
        await asyncio.sleep(0)
        if 13 in items:
            raise InvalidInput("unlucky")
        return [i * 2 for i in items]

    group: AsyncGroupCommit[int, int] = AsyncGroupCommit(flush, 100, max_flushes=1)
    results = await asyncio.gather(
        group.submit([1]), group.submit([2, 13]), group.submit([3]), return_exceptions=True
    )
    assert calls == [[1, 2, 13, 3]]  # submitted together: one flush
    assert all(isinstance(r, InvalidInput) for r in results)
    assert await group.submit([4]) == [8]
    await group.wait_idle()


# -- a statement of a split batch refused ------------------------------------------------


def _big_batch(count: int, tag: str) -> list[Record]:
    """Records large enough that a batch of them is sent as several INSERTs."""
    pad = "x" * 20_000
    return [Record(f"{tag}-{i}|{pad}", key="k") for i in range(count)]


def _labels(rows: list[tuple[int, int, bytes]]) -> list[str]:
    return sorted(body.split(b"|")[0].decode() for _, _, body in rows)


async def test_a_split_batch_refused_in_a_later_statement_is_stored_once(
    topics: TopicAdmin, settings: Settings, store: Store
) -> None:
    """A batch of several INSERTs whose third meets a stored offset (a hole filled with a
    tombstone while the producer was slow): the earlier statements' rows must not stay
    behind in an open transaction, to be committed by the retry beside its own copy."""
    from ems.store.inserts import insert_statements
    from ems.types import NewMessage

    topics.create("t", 1)
    info = store.topics.get("t")
    batch = _big_batch(120, "b")
    split = insert_statements(
        placed_of(
            [
                NewMessage(info.id, 0, 1 + i, None, None, r.body.encode())
                for i, r in enumerate(batch)
            ]
        ),
        None,
        [0],
    )
    assert split is not None and len(split) >= 3
    async with Producer(settings) as producer:
        await producer.send("t", "first")  # seeds the counter: the batch takes 1..120
        store.messages.insert_tombstones(info.id, 0, range(100, 101))
        placed = await producer.send_batch("t", batch)
        assert len({m.offset for m in placed}) == 120
        # A single send after the refusal: on the connection the batch used, it must be
        # committed on its own, not inside what the batch left open.
        await producer.send("t", "after")
    labels = _labels(stored(store))
    assert labels == sorted(["first", "after", *(f"b-{i}" for i in range(120))])


async def test_no_connection_returns_to_the_pool_inside_a_transaction(
    topics: TopicAdmin, settings: Settings, store: Store
) -> None:
    """A single INSERT on the connection a refused split batch used is committed at once:
    acknowledged means committed, not merely visible to the producer's own session."""
    from ems.store.aio import AsyncMessageStore
    from ems.store.errors import DuplicateKey
    from ems.types import NewMessage

    topics.create("t", 1)
    info = store.topics.get("t")
    store.messages.insert_tombstones(info.id, 0, range(100, 101))
    rows = [
        NewMessage(info.id, 0, i, None, None, r.body.encode())
        for i, r in enumerate(_big_batch(120, "b"))
    ]
    aio_store = AsyncMessageStore(settings)
    try:
        with pytest.raises(DuplicateKey):
            await aio_store.insert(placed_of(rows), None)
        await aio_store.insert(
            placed_of([NewMessage(info.id, 0, 500, None, None, b"single")]), None
        )
        # Read from another connection while the store is still open.
        assert _labels(stored(store)) == ["single"]
    finally:
        await aio_store.close()
    assert _labels(stored(store)) == ["single"]
