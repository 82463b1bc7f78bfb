"""A member's fetch is bounded in bytes as well as in messages (max_batch_bytes): against
the real servers, on the stream, the retry and the broadcast paths, sync and asyncio."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from ems import Consumer, Delivery, Producer, TopicAdmin
from ems.aio import Consumer as AioConsumer
from ems.config import Settings
from ems.exceptions import InvalidSetting
from ems.validation import MAX_BATCH_BYTES
from tests.integration.seed import poll_until
from tests.integration.test_consumer import FAST, scalar

KB = 1000


def _topic(settings: Settings, name: str, partitions: int) -> str:
    admin = TopicAdmin(settings)
    admin.create(name, partitions)
    admin.close()
    return name


@pytest.fixture
def one(settings: Settings) -> str:
    """A topic of one partition: every delivery in one offset order."""
    return _topic(settings, "one", 1)


@pytest.fixture
def four(settings: Settings) -> str:
    return _topic(settings, "four", 4)


def publish(settings: Settings, topic: str, bodies: Sequence[bytes]) -> None:
    with Producer(settings) as producer:
        producer.send_batch(topic, list(bodies))


def body(i: int, size: int = KB) -> bytes:
    return (b"%05d" % i * (size // 5 + 1))[:size]


def offsets(batch: list[Delivery]) -> list[int]:
    return [d.offset for d in batch]


def size(batch: list[Delivery]) -> int:
    return sum(len(d.body) for d in batch)


def drain(consumer: Consumer, first: list[Delivery], *, ack: bool = True) -> list[list[Delivery]]:
    """The batch polled first, then every batch after it polled without waiting: a batch
    cut by its budget leaves its partition to read again at once, not at the next
    wake-up or idle poll."""
    batches = []
    batch = first
    while batch:
        batches.append(batch)
        if ack:
            consumer.ack(batch)
        batch = consumer.poll(timeout=0)
    return batches


def test_a_batch_stops_at_the_byte_budget_and_the_next_continues_where_it_stopped(
    settings: Settings, one: str
) -> None:
    publish(settings, one, [body(i) for i in range(40)])
    with Consumer("g", one, settings=settings, start="earliest", max_batch_bytes=4500, **FAST) as c:
        batches = drain(c, poll_until(c, 1))
    assert [len(b) for b in batches] == [4] * 10  # 4,000 bytes; a fifth would make 5,000
    assert [o for b in batches for o in offsets(b)] == list(range(40))
    assert [d.body for b in batches for d in b] == [body(i) for i in range(40)]
    assert scalar(settings, "SELECT committed_offset FROM group_offset") == 40
    assert scalar(settings, "SELECT COUNT(*) FROM message WHERE tombstone") == 0


def test_a_message_larger_than_the_budget_is_delivered_alone(settings: Settings, one: str) -> None:
    publish(settings, one, [body(0, 10), body(1, 10), body(2, 50 * KB), body(3, 10)])
    with Consumer("g", one, settings=settings, start="earliest", max_batch_bytes=KB, **FAST) as c:
        batches = drain(c, poll_until(c, 1))
    assert [offsets(b) for b in batches] == [[0, 1], [2], [3]]
    assert len(batches[1][0].body) == 50 * KB


def test_the_budget_holds_for_the_batch_over_all_partitions(settings: Settings, four: str) -> None:
    with Producer(settings) as producer:
        for i in range(40):
            producer.send(four, body(i), key=f"k{i % 8}")
    options: dict[str, Any] = {"start": "earliest", "max_batch_bytes": 2500, **FAST}
    with Consumer("g", four, settings=settings, **options) as c:
        batches = drain(c, poll_until(c, 1))
    assert all(len(b) <= 2 and size(b) <= 2500 for b in batches)
    seen = [d for b in batches for d in b]
    assert sorted(d.body for d in seen) == sorted(body(i) for i in range(40))
    for p in range(4):  # each partition in offset order, from 0, without a gap
        mine = [d.offset for d in seen if d.partition == p]
        assert mine == list(range(len(mine)))


def test_due_retries_come_within_the_budget_and_the_rest_stay_unclaimed(
    settings: Settings, one: str
) -> None:
    publish(settings, one, [body(i) for i in range(10)])
    options: dict[str, Any] = {"start": "earliest", "max_batch_bytes": 2500, **FAST}
    with Consumer("g", one, settings=settings, **options) as c:
        first = drain(c, poll_until(c, 1), ack=False)
        assert [len(b) for b in first] == [2] * 5
        c.nack([d for b in first for d in b], "again", delay=0.2)
        retried = poll_until(c, 1)
        # Claimed for the ack timeout: the two delivered, and none past the budget.
        claimed = "SELECT COUNT(*) FROM retry_message WHERE due_at > NOW(6) + INTERVAL 60 SECOND"
        assert scalar(settings, claimed) == 2
        batches = drain(c, retried)
    assert [len(b) for b in batches] == [2] * 5
    assert all(d.attempt == 2 for b in batches for d in b)
    assert [o for b in batches for o in offsets(b)] == list(range(10))  # oldest due first
    assert scalar(settings, "SELECT COUNT(*) FROM retry_message") == 0


def test_a_broadcast_member_honours_the_budget(settings: Settings, one: str) -> None:
    options: dict[str, Any] = {"broadcast": True, "start": "earliest", "max_batch_bytes": 2500}
    publish(settings, one, [body(i) for i in range(10)])
    with Consumer("b", one, settings=settings, **options, **FAST) as c:
        batches = drain(c, poll_until(c, 1))
    assert [offsets(b) for b in batches] == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]]


async def _aio_batches(settings: Settings, topic: str) -> list[list[int]]:
    options: dict[str, Any] = {"start": "earliest", "max_batch_bytes": 2500, **FAST}
    batches = []
    async with AioConsumer("g", topic, settings=settings, **options) as c:
        while len(batches) < 5:
            batch = await c.poll(timeout=1)
            await c.ack(batch)
            if batch:
                batches.append(offsets(batch))
    return batches


@pytest.mark.asyncio
async def test_the_asyncio_consumer_passes_the_budget_on(settings: Settings, one: str) -> None:
    publish(settings, one, [body(i) for i in range(10)])
    assert await _aio_batches(settings, one) == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]]


BAD = [0, -1, True, 1.5, "4MiB", None, MAX_BATCH_BYTES + 1]


@pytest.mark.parametrize("bad", BAD)
def test_a_bad_byte_budget_raises_and_creates_nothing(
    settings: Settings, one: str, bad: object
) -> None:
    with pytest.raises(InvalidSetting, match="max_batch_bytes"):
        Consumer("g", one, settings=settings, max_batch_bytes=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidSetting, match="max_batch_bytes"):
        AioConsumer("g", one, settings=settings, max_batch_bytes=bad)  # type: ignore[arg-type]
    assert scalar(settings, "SELECT COUNT(*) FROM consumer_group") == 0
    assert scalar(settings, "SELECT COUNT(*) FROM consumer_client") == 0
