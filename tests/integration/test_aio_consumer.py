"""ems.aio.Consumer against the real MariaDB and Redis: what the sync Consumer's tests
prove for consume, awaited, a sync and an async member in one group, bounded concurrency
within a partition, and cancellation at the await points of poll, ack and run."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import pytest_asyncio

from ems import Consumer as SyncConsumer
from ems import Delivery, TopicAdmin
from ems.aio import Consumer
from ems.config import Settings
from ems.exceptions import InvalidHandler, InvalidName, InvalidSetting, UnknownTopic
from ems.store import Store
from tests import sql as db
from tests.integration.test_consumer import FAST, bodies, produce, scalar

pytestmark = pytest.mark.asyncio


@pytest.fixture
def topic(settings: Settings) -> str:
    admin = TopicAdmin(settings)
    admin.create("t", 4)
    admin.close()
    return "t"


async def eventually(check: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


class Member:
    """An aio consumer's run() as a task, recording what its handler saw."""

    def __init__(
        self,
        settings: Settings,
        handler: Callable[[Delivery], Awaitable[object]] | None = None,
        group: str = "g",
        **options: Any,
    ) -> None:
        self.seen: list[Delivery] = []

        async def record(d: Delivery) -> None:
            self.seen.append(d)
            if handler is not None:
                await handler(d)

        self.consumer = Consumer(group, "t", record, settings=settings, **{**FAST, **options})
        self.task = asyncio.ensure_future(self.consumer.run(handle_signals=False))

    async def stop(self) -> int:
        self.consumer.stop()
        return await asyncio.wait_for(self.task, 15)


@pytest_asyncio.fixture
async def members(settings: Settings) -> Any:
    started: list[Member] = []

    def start(*args: Any, **options: Any) -> Member:
        m = Member(settings, *args, **options)
        started.append(m)
        return m

    yield start
    for m in started:
        if not m.task.done():
            m.task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await m.task


def assigned_clients(settings: Settings) -> int:
    return int(scalar(settings, "SELECT COUNT(DISTINCT client_id) FROM partition_assignment"))


def in_order(seen: list[Delivery]) -> bool:
    return all(
        [d.offset for d in seen if d.partition == p]
        == sorted(d.offset for d in seen if d.partition == p)
        for p in {d.partition for d in seen}
    )


async def test_two_async_members_share_the_partitions_and_see_each_message_once_in_order(
    settings: Settings, topic: str, members: Callable[..., Member]
) -> None:
    a = members(start="earliest")
    b = members()
    await eventually(lambda: assigned_clients(settings) == 2)
    produce(settings, 400)
    await eventually(lambda: len(a.seen) + len(b.seen) == 400)
    assert await a.stop() + await b.stop() == 400
    assert sorted(bodies(a.seen + b.seen), key=lambda s: int(s[1:])) == [
        f"m{i}" for i in range(400)
    ]
    assert a.seen and b.seen
    assert not {d.partition for d in a.seen} & {d.partition for d in b.seen}
    assert in_order(a.seen) and in_order(b.seen)
    assert scalar(settings, "SELECT COUNT(*) FROM topic_group_log WHERE state = 'done'") == 400
    assert scalar(settings, "SELECT SUM(committed_offset) FROM group_offset") == 400
    assert scalar(settings, "SELECT COUNT(*) FROM consumer_client") == 0


async def test_the_client_id_names_the_member_once_it_has_joined(
    settings: Settings, topic: str
) -> None:
    """Another task that sees the member in the group (its lease row, its partitions) can
    name it, though start() has not returned. start() is held right after the join: the
    group wake-up it then publishes goes to a Redis that accepts and never answers AUTH
    (the listening socket's backlog completes the connection; nobody reads it)."""
    with socket.create_server(("127.0.0.1", 0)) as mute:
        port = mute.getsockname()[1]
        held = settings.with_(redis_url=f"redis://:pw@127.0.0.1:{port}/0", connect_timeout=120)
        consumer = Consumer("g", "t", settings=held, **FAST)
        starting = asyncio.ensure_future(consumer.start())
        await eventually(lambda: scalar(settings, "SELECT COUNT(*) FROM consumer_client") == 1)
        joined = scalar(settings, "SELECT client_id FROM consumer_client")
        assert not starting.done(), "start() returned: the join was not held"
        assert consumer.client_id == joined
    # The mute server is closed: its connections are reset, the wake-up is dropped (a
    # hint), and start() returns.
    await asyncio.wait_for(starting, 30)
    assert consumer.client_id == joined
    await consumer.close()


async def test_a_sync_and_an_async_member_share_one_group(
    settings: Settings, topic: str, members: Callable[..., Member]
) -> None:
    synced: list[Delivery] = []
    sync = SyncConsumer("g", "t", synced.append, settings=settings, start="earliest", **FAST)
    thread = threading.Thread(target=sync.run, kwargs={"handle_signals": False})
    thread.start()
    try:
        a = members()
        await eventually(lambda: assigned_clients(settings) == 2)
        mine = (
            f"SELECT COUNT(*) FROM partition_assignment WHERE client_id = '{a.consumer.client_id}'"
        )
        await eventually(lambda: scalar(settings, mine) == 2)  # balanced: two each
        produce(settings, 300)
        await eventually(lambda: len(synced) + len(a.seen) == 300)
        await a.stop()
        # The async member left: the sync member takes its partitions over and goes on.
        await eventually(lambda: assigned_clients(settings) == 1)
        produce(settings, 100, first=300)
        await eventually(lambda: len(synced) + len(a.seen) == 400)
    finally:
        sync.stop()
        thread.join(15)
    assert sorted(bodies(synced + a.seen), key=lambda s: int(s[1:])) == [
        f"m{i}" for i in range(400)
    ]
    assert not {d.partition for d in synced[: len(synced) - 100]} & {d.partition for d in a.seen}
    assert in_order(synced) and in_order(a.seen)
    assert scalar(settings, "SELECT SUM(committed_offset) FROM group_offset") == 400


async def test_a_failing_message_is_retried_by_the_ladder_then_dead_lettered(
    settings: Settings, topic: str, members: Callable[..., Member]
) -> None:
    async def handler(d: Delivery) -> None:
        await asyncio.sleep(0)
        if d.body == b"m3":
            raise ValueError("poison")

    m = members(handler, start="earliest", retry_ladder="0.2s", max_attempts=3)
    produce(settings, 10)
    await eventually(lambda: scalar(settings, "SELECT COUNT(*) FROM dead_message") == 1)
    await m.stop()
    assert [d.attempt for d in m.seen if d.body == b"m3"] == [1, 2, 3]
    assert scalar(settings, "SELECT last_error FROM dead_message") == "ValueError: poison"
    assert scalar(settings, "SELECT COUNT(*) FROM topic_group_log WHERE state = 'done'") == 9


async def test_an_ordered_group_redelivers_in_place_and_keeps_order(
    settings: Settings, topic: str, members: Callable[..., Member]
) -> None:
    failures = {"left": 2}

    async def handler(d: Delivery) -> None:
        if d.body == b"m0" and failures["left"]:
            failures["left"] -= 1
            raise RuntimeError("not yet")

    m = members(handler, start="earliest", ordered=True, retry_ladder="0.3s")
    produce(settings, 40, keys=1)
    await eventually(lambda: len({d.body for d in m.seen}) == 40)
    await m.stop()
    first_success = [d.body for d in m.seen].index(b"m0", 2)
    assert bodies(m.seen)[first_success:] == [f"m{i}" for i in range(40)]


async def test_broadcast_members_each_get_every_message(
    settings: Settings, topic: str, members: Callable[..., Member]
) -> None:
    a = members(group="b", broadcast=True)
    b = members(group="b", broadcast=True)
    await eventually(lambda: scalar(settings, "SELECT COUNT(*) FROM consumer_client") == 2)
    produce(settings, 50)
    await eventually(lambda: len(a.seen) == 50 and len(b.seen) == 50)
    await a.stop()
    await b.stop()
    assert sorted(bodies(a.seen)) == sorted(bodies(b.seen)) == sorted(f"m{i}" for i in range(50))
    assert scalar(settings, "SELECT COUNT(*) FROM topic_group_log") == 0


async def test_concurrency_runs_handlers_of_one_partition_side_by_side_within_the_bound(
    settings: Settings, topic: str, members: Callable[..., Member]
) -> None:
    running: Counter[int] = Counter()
    peak: Counter[int] = Counter()

    async def handler(d: Delivery) -> None:
        running[d.partition] += 1
        peak[d.partition] = max(peak[d.partition], running[d.partition])
        await asyncio.sleep(0.02)
        running[d.partition] -= 1

    m = members(handler, start="earliest", ordered=False, concurrency=4)
    produce(settings, 60, keys=1)  # one partition
    await eventually(lambda: len(m.seen) == 60)
    await m.stop()
    assert list(peak.values()) == [4]
    assert scalar(settings, "SELECT SUM(committed_offset) FROM group_offset") == 60


async def test_a_cursor_never_passes_a_message_not_yet_acked(
    settings: Settings, topic: str
) -> None:
    produce(settings, 10, keys=1)
    async with Consumer("pull", "t", settings=settings, start="earliest", **FAST) as c:
        got = await poll_until(c, 10)
        first, *rest = sorted(got, key=lambda d: d.offset)
        await c.ack(rest)  # out of order, as side-by-side handlers finish
        assert scalar(settings, "SELECT MAX(committed_offset) FROM group_offset") == 0
        await c.ack(first)
        assert scalar(settings, "SELECT MAX(committed_offset) FROM group_offset") == 10


async def poll_until(c: Consumer, count: int, timeout: float = 15) -> list[Delivery]:
    got: list[Delivery] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        got += await c.poll(timeout=0.2)
    return got


async def test_pull_form_ack_nack_with_delay_and_async_for(settings: Settings, topic: str) -> None:
    produce(settings, 3, keys=1)
    async with Consumer("pull", "t", settings=settings, start="earliest", **FAST) as c:
        got = await poll_until(c, 3)
        await c.ack([got[0], got[2]])
        await c.nack(got[1], "later", delay=0.3)
        async for again in c:
            assert (again.offset, again.attempt) == (got[1].offset, 2)
            await c.ack(again)
            c.stop()
        assert [d async for d in c] == []  # stopped: the iteration ends
    assert scalar(settings, "SELECT COUNT(*) FROM topic_group_log WHERE state = 'done'") == 3
    assert scalar(settings, "SELECT MAX(attempts) FROM topic_group_log") == 2
    assert scalar(settings, "SELECT MAX(committed_offset) FROM group_offset") == 3


async def test_a_poll_cancelled_while_fetching_hands_its_deliveries_to_the_next_poll(
    settings: Settings, topic: str
) -> None:
    async with Consumer("pull", "t", settings=settings, start="earliest", **FAST) as c:
        waiting = asyncio.ensure_future(c.poll(timeout=5))
        await asyncio.sleep(0.3)  # the fetch waits on the worker thread
        produce(settings, 3, keys=1)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        got = await poll_until(c, 3)
        assert sorted(bodies(got)) == ["m0", "m1", "m2"]
        assert all(d.attempt == 1 for d in got)
        await c.ack(got)
    assert scalar(settings, "SELECT COUNT(*) FROM topic_group_log WHERE state = 'done'") == 3


@pytest.mark.parametrize("steps_before_cancel", [0, 1, 2, 5])
async def test_an_ack_cancelled_at_any_await_is_written_or_delivered_again(
    settings: Settings, topic: str, steps_before_cancel: int
) -> None:
    produce(settings, 20, keys=1)
    async with Consumer("pull", "t", settings=settings, start="earliest", **FAST) as c:
        got = await poll_until(c, 20)
        acking = asyncio.ensure_future(c.ack(got))
        for _ in range(steps_before_cancel):
            await asyncio.sleep(0)
        acking.cancel()
        with pytest.raises(asyncio.CancelledError):
            await acking
    done = int(scalar(settings, "SELECT COUNT(*) FROM topic_group_log WHERE state = 'done'"))
    assert done in (0, 20)  # one settlement: all of it or none of it
    async with Consumer("pull", "t", settings=settings, **FAST) as again:
        redelivered = await poll_until(again, 20 - done, timeout=3 if done == 20 else 15)
        await again.ack(redelivered)
    assert sorted(d.offset for d in redelivered) == list(range(20 - done))
    assert scalar(settings, "SELECT COUNT(*) FROM topic_group_log WHERE state = 'done'") == 20
    assert scalar(settings, "SELECT MAX(committed_offset) FROM group_offset") == 20


async def test_a_cancelled_run_acks_what_finished_and_the_rest_comes_again(
    settings: Settings, topic: str, members: Callable[..., Member]
) -> None:
    gate = asyncio.Event()

    async def stuck_on_m5(d: Delivery) -> None:
        if d.body == b"m5":
            await gate.wait()

    m = members(stuck_on_m5, start="earliest")
    produce(settings, 10, keys=1)
    await eventually(lambda: b"m5" in {d.body for d in m.seen})
    m.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await m.task
    assert scalar(settings, "SELECT COUNT(*) FROM consumer_client") == 0  # it left
    assert scalar(settings, "SELECT MAX(committed_offset) FROM group_offset") == 5
    successor = members()
    await eventually(lambda: len(successor.seen) == 5)
    await successor.stop()
    assert bodies(successor.seen) == [f"m{i}" for i in range(5, 10)]


async def test_run_acks_its_last_batch_before_it_returns(settings: Settings, topic: str) -> None:
    """run() hands a batch's outcomes to the member with its next poll; the last batch,
    with no poll after it, is acked by the close that ends run()."""
    produce(settings, 10, keys=1)
    seen: list[int] = []

    async def record(d: Delivery) -> None:
        seen.append(d.offset)

    consumer = Consumer("g", "t", record, settings=settings, start="earliest", **FAST)
    assert await asyncio.wait_for(consumer.run(max_messages=10, handle_signals=False), 15) == 10
    assert seen == list(range(10))
    assert scalar(settings, "SELECT MAX(committed_offset) FROM group_offset") == 10
    assert sorted(acked(settings)) == list(range(10))


async def test_stop_before_the_first_batch_leaves_cleanly(
    settings: Settings, topic: str, members: Callable[..., Member]
) -> None:
    m = members(start="earliest")
    await eventually(lambda: assigned_clients(settings) == 1)
    assert await m.stop() == 0
    assert scalar(settings, "SELECT COUNT(*) FROM consumer_client") == 0
    with pytest.raises(RuntimeError, match="closed"):
        await m.consumer.poll()


@pytest.mark.parametrize(
    ("args", "options", "error"),
    [
        (("bad group!", "t"), {}, InvalidName),
        (("g", "t", "not callable"), {}, InvalidHandler),
        (("g", "t"), {"concurrency": 0}, InvalidSetting),
        (("g", "t"), {"concurrency": 2, "ordered": True}, InvalidSetting),
        (("g", "t"), {"batch_size": 0}, InvalidSetting),
        (("g", "t"), {"start": "middle"}, InvalidSetting),
    ],
)
async def test_bad_input_raises_at_once_and_creates_nothing(
    settings: Settings,
    topic: str,
    args: tuple[Any, ...],
    options: dict[str, Any],
    error: type[Exception],
) -> None:
    with pytest.raises(error):
        Consumer(*args, settings=settings, **options)
    assert scalar(settings, "SELECT COUNT(*) FROM consumer_group") == 0


async def test_an_unknown_topic_raises_at_start_and_creates_nothing(
    settings: Settings, topic: str
) -> None:
    c = Consumer("g", "nope", settings=settings)
    with pytest.raises(UnknownTopic):
        async with c:  # __aexit__ does not run: the failed start let the worker go
            pass
    await eventually(lambda: not [t for t in threading.enumerate() if "ems-aio-g" in t.name])
    with pytest.raises(UnknownTopic):
        await c.poll()
    await c.close()
    assert scalar(settings, "SELECT COUNT(*) FROM consumer_group") == 0


async def test_concurrency_is_refused_for_an_existing_ordered_group(
    settings: Settings, topic: str
) -> None:
    async with Consumer("g", "t", settings=settings, ordered=True):
        pass
    with pytest.raises(InvalidSetting, match="ordered"):
        async with Consumer("g", "t", settings=settings, concurrency=3):
            pass
    assert scalar(settings, "SELECT COUNT(*) FROM consumer_client") == 0


async def test_sigterm_stops_run_gracefully_and_the_previous_handler_comes_back(
    settings: Settings, topic: str
) -> None:
    """In the main thread run() takes SIGTERM on the loop: the batch in hand is acked, the
    member commits and leaves; afterwards the application's own handler is in place."""
    called: list[int] = []

    def mine(signum: int, frame: object) -> None:
        called.append(signum)

    previous = signal.signal(signal.SIGTERM, mine)
    try:
        produce(settings, 20, keys=1)
        seen: list[Delivery] = []

        async def handle(d: Delivery) -> None:
            seen.append(d)
            if len(seen) == 5:
                os.kill(os.getpid(), signal.SIGTERM)
                await asyncio.sleep(0)

        consumer = Consumer("g", "t", handle, settings=settings, start="earliest", **FAST)
        handled = await asyncio.wait_for(consumer.run(), 15)
        assert handled == len(seen) >= 5
        assert called == []  # the consumer took the signal, not the application
        assert scalar(settings, "SELECT SUM(committed_offset) FROM group_offset") == handled
        assert scalar(settings, "SELECT COUNT(*) FROM consumer_client") == 0
        assert signal.getsignal(signal.SIGTERM) is mine
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.sleep(0.1)
        assert called == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, previous)


async def test_close_from_another_task_while_run_handles_a_batch(
    settings: Settings, topic: str, members: Callable[..., Member]
) -> None:
    """run() finishes its handler calls, acks nothing more and ends; what was not acked
    comes again to the next member, and nothing is lost."""
    gate = asyncio.Event()

    async def slow(d: Delivery) -> None:
        await gate.wait()

    m = members(slow, start="earliest")
    produce(settings, 10, keys=1)
    await eventually(lambda: len(m.seen) >= 1)
    closing = asyncio.ensure_future(m.consumer.close())
    await asyncio.sleep(0.2)
    gate.set()
    await asyncio.wait_for(closing, 15)
    await asyncio.wait_for(m.task, 15)
    assert scalar(settings, "SELECT COUNT(*) FROM consumer_client") == 0
    successor = members()
    await eventually(
        lambda: {d.offset for d in successor.seen} | set(acked(settings)) >= set(range(10))
    )
    await successor.stop()


def acked(settings: Settings) -> list[int]:
    store = Store(settings)
    try:
        done = "SELECT offset_no FROM topic_group_log WHERE state = 'done'"
        return [int(o) for o in db.values(store, done)]
    finally:
        store.close()
