"""The asyncio consumer's handling of a batch, without servers: each partition's
deliveries in order, a handler's failure recorded as its message's, every call timed,
and in an ordered group a failure retried in place holding back the rest of its
partition's batch (the others go on)."""

from __future__ import annotations

import asyncio
import datetime as dt
import types
import uuid

import pytest

from ems.aio.consumer import Consumer
from ems.consumer.state import Outcome, Policy
from ems.metrics import REGISTRY, ConsumerMetrics
from ems.types import Delivery

NOW = dt.datetime(2026, 11, 29, tzinfo=dt.UTC)


def deliveries(count: int, partitions: int) -> list[Delivery]:
    return [
        Delivery(
            topic="t",
            partition=i % partitions,
            offset=i // partitions,
            key=None,
            headers={},
            body=b"%d" % i,
            timestamp=NOW,
            attempt=1,
            message_id=i,
        )
        for i in range(count)
    ]


def consumer(handler: object, *, ordered: bool) -> tuple[Consumer, str]:
    group = f"g{uuid.uuid4().hex[:8]}"
    c = Consumer.__new__(Consumer)
    c.handler = handler  # type: ignore[assignment]
    c.concurrency = 1
    policy = Policy(ordered=ordered, ladder=(1.0,), max_attempts=3, ack_timeout=30.0)
    c._sync = types.SimpleNamespace(policy=policy, metrics=ConsumerMetrics(group, "t"))  # type: ignore[assignment]
    return c, group


def handle(c: Consumer, batch: list[Delivery]) -> tuple[list[Delivery], list[Outcome]]:
    successes: list[Delivery] = []
    failures: list[Outcome] = []
    asyncio.run(c._handle(batch, successes, failures))
    return successes, failures


def timed(group: str) -> float | None:
    labels = {"group": group, "topic": "t"}
    return REGISTRY.get_sample_value("ems_handler_seconds_count", labels)


@pytest.mark.parametrize("kind", ["async", "plain"])
def test_each_partition_in_order_failures_recorded_every_call_timed(kind: str) -> None:
    seen: list[tuple[int, int]] = []

    def work(d: Delivery) -> None:
        seen.append((d.partition, d.offset))
        if d.offset == 2:
            raise ValueError(f"bad {d.partition}")

    async def async_work(d: Delivery) -> None:
        await asyncio.sleep(0)  # let the other partitions interleave
        work(d)

    c, group = consumer(async_work if kind == "async" else work, ordered=False)
    batch = deliveries(20, 4)
    successes, failures = handle(c, batch)
    for p in range(4):
        assert [o for q, o in seen if q == p] == list(range(5))
    assert sorted((f.delivery.partition, f.delivery.offset) for f in failures) == [
        (p, 2) for p in range(4)
    ]
    assert all(f.error is not None and "ValueError: bad" in f.error for f in failures)
    assert len(successes) == 16 and not {id(d) for d in successes} & {
        id(f.delivery) for f in failures
    }
    assert timed(group) == 20


def test_an_ordered_failure_holds_back_only_its_own_partition() -> None:
    async def work(d: Delivery) -> None:
        if (d.partition, d.offset) == (1, 1):
            raise RuntimeError("retry me in place")

    c, group = consumer(work, ordered=True)
    successes, failures = handle(c, deliveries(12, 3))
    assert [(f.delivery.partition, f.delivery.offset) for f in failures] == [(1, 1)]
    handled = sorted((d.partition, d.offset) for d in successes)
    assert handled == [(0, o) for o in range(4)] + [(1, 0)] + [(2, o) for o in range(4)]
    assert timed(group) == 10  # the held-back messages were not called
