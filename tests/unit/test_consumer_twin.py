"""The consumer, its membership and the cooperative handoff at unit speed, on the
in-memory twin (ems.testing): the same code that runs on MySQL and Redis, no server."""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import ems
import ems.aio
from ems import Consumer
from ems.exceptions import (
    InvalidName,
    InvalidPartitionCount,
    InvalidSetting,
    PartitionsNotAdded,
    UnknownGroup,
    UnknownTopic,
)
from ems.producer.partitioner import partition_for_key
from ems.store.errors import StaleGeneration
from ems.testing import ManualClock, MemoryBroker
from ems.types import Delivery, GroupInfo

FAST = {"lease_ttl": 5.0, "renew_every": 0.05, "start": "earliest"}


def wait_until(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def owned(c: Consumer) -> set[int]:
    return set(c.membership.ownership()[1])


def polling(consumers: list[Consumer], seen: list[tuple[str, int, int]]) -> Callable[[], None]:
    """One round of poll and ack by every consumer: handoffs move only while owners
    poll (a revoked partition is released by its owner's consume loop)."""

    def round_() -> None:
        for c in consumers:
            batch = c.poll(timeout=0.01)
            seen.extend((c.client_id, d.partition, d.offset) for d in batch)
            c.ack(batch)

    return round_


def wait_polling(
    consumers: list[Consumer], seen: list[tuple[str, int, int]], check: Callable[[], bool]
) -> None:
    step = polling(consumers, seen)

    def done() -> bool:
        step()
        return check()

    wait_until(done)


def drain(consumers: list[Consumer], seen: list[tuple[str, int, int]], until: int) -> None:
    """Poll and ack round robin until `until` deliveries were seen."""
    deadline = time.monotonic() + 15
    while len(seen) < until:
        assert time.monotonic() < deadline, f"only {len(seen)} of {until} delivered"
        for c in consumers:
            batch = c.poll(timeout=0.05)
            seen.extend((c.client_id, d.partition, d.offset) for d in batch)
            c.ack(batch)


def test_a_handler_is_tested_without_servers() -> None:
    """What a user's unit test looks like: publish, run the handler, look at what was
    committed, retried and dead-lettered."""
    broker = MemoryBroker()
    broker.create_topic("readings", partitions=2)
    for i in range(6):
        broker.send("readings", f"{i}", key=f"project-{i % 3}")
    broker.send("readings", "not a number", key="project-0")
    stored: list[float] = []

    def handle(d: Delivery) -> None:
        stored.append(float(d.body))

    consumer = broker.consumer(
        "store", "readings", handle, retry_ladder="10ms", max_attempts=2, **FAST
    )
    assert consumer.run(max_messages=8, handle_signals=False) == 8  # 7, and one retry
    assert sorted(stored) == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert sum(broker.committed("store", "readings").values()) == 7
    (dead,) = broker.dead_letters("store", "readings")
    assert (dead.message.body, dead.attempts) == (b"not a number", 2)
    assert "ValueError" in dead.error
    assert {row.state for row in broker.log("store", "readings").values()} == {"done", "dead"}


def test_a_batch_is_bounded_in_bytes_and_a_larger_message_comes_alone() -> None:
    broker = MemoryBroker()
    broker.create_topic("t", partitions=2)
    sizes = [300, 300, 300, 5000, 300, 300, 300, 300]
    for i, size in enumerate(sizes):
        broker.send("t", b"x" * size, key=f"k{i}")
    with broker.consumer("g", "t", max_batch_bytes=1000, **FAST) as c:
        wait_until(lambda: len(owned(c)) == 2)
        batches = []
        while batch := c.poll(timeout=0):
            batches.append([len(d.body) for d in batch])
            c.ack(batch)
    assert sorted(s for b in batches for s in b) == sorted(sizes)
    assert all(sum(b) <= 1000 or len(b) == 1 for b in batches)
    assert [5000] in batches


def test_bad_input_is_refused_as_on_the_servers() -> None:
    broker = MemoryBroker()
    with pytest.raises(UnknownTopic):
        broker.consumer("g", "nowhere")
    broker.create_topic("t")
    with pytest.raises(UnknownTopic):
        broker.send("other", b"x")
    with pytest.raises(InvalidName):
        broker.create_topic("no spaces")
    with pytest.raises(InvalidPartitionCount):
        broker.create_topic("u", 0)
    for look in (broker.committed, broker.dead_letters, broker.log):
        with pytest.raises(UnknownGroup):
            look("never-joined", "t")
        with pytest.raises(InvalidName):
            look("bad name", "t")


def test_members_split_the_partitions_and_hand_them_over_without_loss() -> None:
    broker = MemoryBroker()
    broker.create_topic("t", partitions=4)
    for i in range(200):
        broker.send("t", b"x", key=str(i))
    seen: list[tuple[str, int, int]] = []
    a = broker.consumer("g", "t", batch_size=10, **FAST)
    b = broker.consumer("g", "t", batch_size=10, **FAST)
    with a, b:
        wait_polling([a, b], seen, lambda: len(owned(a)) == 2 and len(owned(b)) == 2)
        assert owned(a).isdisjoint(owned(b))
        drain([a, b], seen, 100)
        b.close()  # b commits and leaves: a takes its partitions over from its cursors
        wait_polling([a], seen, lambda: owned(a) == {0, 1, 2, 3})
        drain([a], seen, 200)
    handled = {(p, o) for _, p, o in seen}
    assert len(handled) == 200  # every message, none lost
    assert sum(broker.committed("g", "t").values()) == 200


def lease_left(broker: MemoryBroker, member: Consumer) -> float:
    """Seconds left on the member's lease, on the storage's clock (0 once gone)."""
    infos = broker.store.leases.members(member.group.id)
    return max((m.expires_in for m in infos if m.client_id == member.client_id), default=0.0)


def test_a_member_that_stops_renewing_loses_its_partitions_to_the_live_one() -> None:
    """Leases run on the storage's clock: move it, and a silent member's lease expires
    without waiting out its TTL."""
    clock = ManualClock()
    broker = MemoryBroker(clock=clock)
    broker.create_topic("t", partitions=4)
    a = broker.consumer("g", "t", **FAST)
    b = broker.consumer("g", "t", **FAST)
    seen: list[tuple[str, int, int]] = []
    with a:
        wait_polling([a, b], seen, lambda: len(owned(a)) == 2 and len(owned(b)) == 2)
        b.membership._stop.set()  # b's threads stop renewing, as in a kill -9
        for _ in range(6):  # past b's 5 s lease, a step at a time: a renews meanwhile
            clock.advance(1.0)
            wait_until(lambda: lease_left(broker, a) > 4.5)  # a renewed after the step
        wait_polling([a], seen, lambda: owned(a) == {0, 1, 2, 3})
        assert [m.client_id for m in broker.store.leases.members(a.group.id)] == [a.client_id]
    b.close()


def test_broadcast_members_each_get_every_message() -> None:
    broker = MemoryBroker()
    broker.create_topic("t", partitions=3)
    members = [broker.consumer("b", "t", broadcast=True, start="latest") for _ in range(2)]
    got: dict[int, list[bytes]] = {0: [], 1: []}
    for m in members:
        m.start()
    try:
        for i in range(9):
            broker.send("t", f"{i}")

        def poll_all() -> bool:
            for i, m in enumerate(members):
                got[i].extend(d.body for d in m.poll(timeout=0.01))
            return all(len(v) == 9 for v in got.values())

        wait_until(poll_all)
    finally:
        for m in members:
            m.close()
    assert sorted(got[0]) == sorted(got[1]) == [b"%d" % i for i in range(9)]


def test_a_running_consumer_wakes_on_a_send_from_another_thread() -> None:
    broker = MemoryBroker()
    broker.create_topic("t")
    handled = threading.Event()
    consumer = broker.consumer("g", "t", lambda d: handled.set(), **FAST)
    runner = threading.Thread(target=consumer.run, kwargs={"handle_signals": False})
    runner.start()
    try:
        wait_until(lambda: owned(consumer) == {0})
        broker.send("t", b"late")
        assert handled.wait(5)
    finally:
        consumer.stop()
        runner.join(10)
    assert broker.committed("g", "t") == {0: 1}


def test_the_brokers_producers_share_its_counters_and_reach_its_consumers() -> None:
    """broker.producer() and broker.aio_producer() are the real producers on the twin:
    with the broker's own send they take offsets from one set of counters (as producers
    sharing one Redis do), and a running consumer gets every message in order."""
    broker = MemoryBroker()
    broker.create_topic("t")
    handled: list[bytes] = []
    consumer = broker.consumer("g", "t", lambda d: handled.append(d.body), **FAST)
    runner = threading.Thread(target=consumer.run, kwargs={"handle_signals": False})
    runner.start()

    async def publish_async() -> list[int]:
        async with broker.aio_producer() as producer:
            return [m.offset for m in await producer.send_batch("t", [b"c", b"d"])]

    try:
        wait_until(lambda: owned(consumer) == {0})
        assert broker.send("t", b"a").offset == 0
        with broker.producer() as producer:
            assert producer.send("t", b"b").offset == 1
        assert asyncio.run(publish_async()) == [2, 3]
        assert broker.send_batch("t", [b"e"])[0].offset == 4
        wait_until(lambda: len(handled) == 5)
    finally:
        consumer.stop()
        runner.join(10)
    assert handled == [b"a", b"b", b"c", b"d", b"e"]
    assert broker.committed("g", "t") == {0: 5}


def test_both_sdks_show_the_same_attributes() -> None:
    """ems.Consumer and ems.aio.Consumer: `group` a GroupInfo, `topic` a TopicInfo,
    `options` the GroupOptions checked; ems.aio's group and topic from the join on."""
    broker = MemoryBroker()
    topic = broker.create_topic("t", partitions=2)
    with broker.consumer("g", "t", batch_size=7, **FAST) as member:
        assert (member.group.name, member.topic) == ("g", topic)
        assert member.options.batch_size == 7

    async def aio_attributes() -> tuple[object, ...]:
        member = ems.aio.Consumer("g", "t", backend=broker.backend(), batch_size=7, **FAST)
        with pytest.raises(RuntimeError, match="await start"):
            member.group  # noqa: B018
        async with member:
            return (member.group, member.topic, member.options, member.client_id)

    group, found, options, client_id = asyncio.run(aio_attributes())
    stored = broker.store.groups.get("g", topic.id)
    assert isinstance(group, GroupInfo) and stored is not None
    assert (group.id, group.name, found) == (stored.id, "g", topic)
    assert options == member.options and isinstance(client_id, str)


def test_partitions_added_reach_running_members_and_producers() -> None:
    """broker.add_partitions: the broker's producer routes keys by the new count at its
    next send, and a running member is given the new partitions (read from offset 0)."""
    broker = MemoryBroker()
    broker.create_topic("t", partitions=1)
    handled: list[tuple[int, int, bytes]] = []
    consumer = broker.consumer(
        "g", "t", lambda d: handled.append((d.partition, d.offset, d.body)), **FAST
    )
    runner = threading.Thread(target=consumer.run, kwargs={"handle_signals": False})
    runner.start()
    try:
        wait_until(lambda: owned(consumer) == {0})
        assert broker.send("t", b"a", key="k").partition == 0
        change = broker.add_partitions("t", 3)
        assert (change.before, change.after, change.watermarks) == (1, 3, (1,))
        keys = {partition_for_key(f"k{i}".encode(), 3): f"k{i}" for i in range(30)}
        placed = [broker.send("t", f"to {p}".encode(), key=keys[p]) for p in (1, 2, 0)]
        # The first send was routed by the count it knew (to 0, offset 1), refused by the
        # change's fence and routed again: offset 1 of partition 0 is a hole, closed by a
        # tombstone after the gap timeout.
        assert [(m.partition, m.offset) for m in placed] == [(1, 0), (2, 0), (0, 2)]
        wait_until(lambda: owned(consumer) == {0, 1, 2} and len(handled) == 4)
    finally:
        consumer.stop()
        runner.join(10)
    assert sorted(handled) == [(0, 0, b"a"), (0, 2, b"to 0"), (1, 0, b"to 1"), (2, 0, b"to 2")]
    assert broker.committed("g", "t") == {0: 3, 1: 1, 2: 1}
    with pytest.raises(PartitionsNotAdded):
        broker.add_partitions("t", 3)


def test_the_guides_example_runs() -> None:
    guide = Path(__file__).resolve().parents[2] / "docs" / "guide.md"
    text = guide.read_text()
    section = text.split("\n## Testing handlers without servers\n", 1)[1]
    code = section.split("```python", 1)[1].split("```", 1)[0]
    namespace: dict[str, object] = {}  # as printed: the block defines all it uses
    exec(compile(code, "docs/guide.md", "exec"), namespace)
    namespace["test_store_reading"]()  # type: ignore[operator]
    assert namespace["latest"] == {b"project-42": 21.5}


def test_the_guides_failure_example_runs() -> None:
    guide = Path(__file__).resolve().parents[2] / "docs" / "guide.md"
    section = guide.read_text().split("\n### A handler's failures\n", 1)[1]
    code = section.split("```python", 1)[1].split("```", 1)[0]

    class UpstreamBusy(Exception):
        pass

    class UnknownDevice(Exception):
        device = "7"

    def save(key: bytes | None, body: bytes) -> None:
        if body == b"busy":
            raise UpstreamBusy("try later")
        if body == b"stranger":
            raise UnknownDevice

    namespace: dict[str, object] = {
        "ems": ems,
        "save": save,
        "UpstreamBusy": UpstreamBusy,
        "UnknownDevice": UnknownDevice,
    }
    exec(compile(code, "docs/guide.md", "exec"), namespace)
    broker = MemoryBroker()
    broker.create_topic("iot.readings")
    for body in ("busy", "stranger", "fine"):
        broker.send("iot.readings", body)
    handler = namespace["store_reading"]
    consumer = broker.consumer("g", "iot.readings", handler, **FAST)  # type: ignore[arg-type]
    assert consumer.run(max_messages=3, handle_signals=False) == 3
    ((_, retry),) = broker.retries("g", "iot.readings").items()
    assert (
        retry.error == "Retry: requested by the handler, after 30s (after UpstreamBusy: try later)"
    )
    assert (retry.due - broker.store.tables.clock()).total_seconds() > 25
    (dead,) = broker.dead_letters("g", "iot.readings")
    assert (dead.message.body, dead.attempts) == (b"stranger", 1)
    assert dead.error.startswith("DeadLetter: unknown device 7 (after UnknownDevice")
    assert broker.committed("g", "iot.readings") == {0: 3}


def test_a_revoked_partition_whose_release_commit_is_refused_is_released_at_the_next_sync(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The commit before a release can be refused while the partition is still this
    member's (the server saw its lease lapse for a moment, under load): the member keeps
    the partition's state and releases it on a later round, rather than forget it and
    leave the partition revoking, and the joiner waiting, for good."""
    broker = MemoryBroker()
    broker.create_topic("t", partitions=4)
    for i in range(40):
        broker.send("t", b"x", key=str(i))
    seen: list[tuple[str, int, int]] = []
    a = broker.consumer("g", "t", batch_size=10, **FAST)
    with a:
        drain([a], seen, 40)
        committed = dict(broker.committed("g", "t"))
        commit = broker.store.groups.commit
        refused: list[dict[int, tuple[int, int]]] = []

        def refuse_the_first_release(
            group_id: int, client_id: str, cursors: dict[int, tuple[int, int]]
        ) -> None:
            rows = broker.store.assignments.rows(group_id)
            revoking = {r.partition for r in rows if r.state == "revoking"}
            if not refused and revoking and set(cursors) <= revoking:
                refused.append(dict(cursors))
                raise StaleGeneration("the lease looked lapsed to the server")
            commit(group_id, client_id, cursors)

        monkeypatch.setattr(broker.store.groups, "commit", refuse_the_first_release)
        b = broker.consumer("g", "t", batch_size=10, **FAST)
        with b:
            wait_polling([a, b], seen, lambda: len(owned(a)) == 2 and len(owned(b)) == 2)
    assert refused, "the release commit was never refused: the test did not test it"
    assert broker.committed("g", "t") == committed and sum(committed.values()) == 40
    assert len({(p, o) for _, p, o in seen}) == 40 == len(seen)  # nothing came twice


# -- what a failing handler leaves, and what it asks for ---------------------------------


def test_a_failure_keeps_its_traceback_and_logs_it_once(caplog: pytest.LogCaptureFixture) -> None:
    broker = MemoryBroker()
    broker.create_topic("t")
    broker.send("t", "poison")

    def handle(d: Delivery) -> None:
        raise ValueError("cannot handle <b>poison</b>")

    consumer = broker.consumer("g", "t", handle, retry_ladder="1h", **FAST)
    with caplog.at_level(logging.INFO, logger="ems.consumer.consumer"):
        assert consumer.run(max_messages=1, handle_signals=False) == 1
    ((_, row),) = broker.retries("g", "t").items()
    assert row.error == "ValueError: cannot handle <b>poison</b>"
    assert row.traceback is not None and "in handle" in row.traceback
    assert row.traceback.endswith("ValueError: cannot handle <b>poison</b>\n")
    (record,) = [r for r in caplog.records if r.name == "ems.consumer.consumer"]
    assert record.levelno == logging.WARNING and record.exc_info is not None
    assert "handler failed on t/0@0 (attempt 1)" in record.getMessage()


def test_a_requested_retry_waits_its_delay_and_dies_after_the_last_attempt(
    caplog: pytest.LogCaptureFixture,
) -> None:
    broker = MemoryBroker()
    broker.create_topic("t")
    broker.send("t", "later")
    at: list[float] = []

    def handle(d: Delivery) -> None:
        at.append(time.monotonic())
        raise ems.Retry(delay=0.2)

    # The ladder's hour never comes within the test: the redeliveries are the Retry's.
    consumer = broker.consumer("g", "t", handle, retry_ladder="1h", max_attempts=3, **FAST)
    with caplog.at_level(logging.INFO, logger="ems.consumer.consumer"):
        assert consumer.run(max_messages=3, handle_signals=False) == 3
    assert all(b - a >= 0.2 for a, b in itertools.pairwise(at)), at
    (dead,) = broker.dead_letters("g", "t")
    assert (dead.attempts, dead.error) == (3, "Retry: requested by the handler, after 0.2s")
    assert dead.traceback is not None and "raise ems.Retry(delay=0.2)" in dead.traceback
    assert broker.retries("g", "t") == {}
    records = [r for r in caplog.records if r.name == "ems.consumer.consumer"]
    assert [r.levelno for r in records] == [logging.INFO] * 3
    assert all(r.exc_info is None for r in records)


def test_a_dead_letter_request_skips_the_attempts_left() -> None:
    broker = MemoryBroker()
    broker.create_topic("t")
    broker.send("t", "unknown device")
    broker.send("t", "fine")
    handled: list[bytes] = []

    def handle(d: Delivery) -> None:
        if d.body == b"unknown device":
            raise ems.DeadLetter("device 7 is not registered")
        handled.append(d.body)

    consumer = broker.consumer("g", "t", handle, **FAST)  # 16 attempts by default
    assert consumer.run(max_messages=2, handle_signals=False) == 2
    (dead,) = broker.dead_letters("g", "t")
    assert (dead.message.body, dead.attempts) == (b"unknown device", 1)
    assert dead.error == "DeadLetter: device 7 is not registered"
    assert dead.traceback is not None and dead.traceback.endswith(
        "DeadLetter: device 7 is not registered\n"
    )
    assert handled == [b"fine"] and broker.committed("g", "t") == {0: 2}


def test_an_ordered_group_waits_in_place_for_a_requested_retry() -> None:
    broker = MemoryBroker()
    broker.create_topic("t")
    for body in ("a", "b", "c"):
        broker.send("t", body, key="one")
    seen: list[tuple[bytes, int, float]] = []

    def handle(d: Delivery) -> None:
        seen.append((d.body, d.attempt, time.monotonic()))
        if d.body == b"a" and d.attempt == 1:
            raise ems.Retry(delay=0.3)
        if d.body == b"b":
            raise ems.DeadLetter("b is bad")

    consumer = broker.consumer("g", "t", handle, ordered=True, retry_ladder="1h", **FAST)
    # Fetched: a, b, c (b and c handed back while a waits), then a, b, c again; b's
    # DeadLetter does not hold c back.
    assert consumer.run(max_messages=6, handle_signals=False) == 6
    assert [(b, n) for b, n, _ in seen] == [(b"a", 1), (b"a", 2), (b"b", 1), (b"c", 1)]
    assert seen[1][2] - seen[0][2] >= 0.3
    assert [d.message.body for d in broker.dead_letters("g", "t")] == [b"b"]
    assert broker.committed("g", "t") == {0: 3}


def test_an_ordered_message_dead_at_its_last_attempt_does_not_hold_back_its_batch() -> None:
    """The partition moves on at once: the messages fetched after it in the same batch
    are handled in that batch, not left in flight until the ack timeout."""
    broker = MemoryBroker()
    broker.create_topic("t")
    for body in ("a", "b", "c"):
        broker.send("t", body, key="one")
    seen: list[bytes] = []

    def handle(d: Delivery) -> None:
        seen.append(d.body)
        if d.body == b"a":
            raise ValueError("never")

    consumer = broker.consumer("g", "t", handle, ordered=True, max_attempts=1, **FAST)
    assert consumer.run(max_messages=3, handle_signals=False) == 3
    assert seen == [b"a", b"b", b"c"] and broker.committed("g", "t") == {0: 3}
    assert [d.message.body for d in broker.dead_letters("g", "t")] == [b"a"]


@pytest.mark.parametrize("delay", [math.nan, -1.0, math.inf])
def test_a_nack_with_a_bad_delay_is_refused_and_changes_nothing(delay: float) -> None:
    broker = MemoryBroker()
    broker.create_topic("t")
    broker.send("t", "x")
    with broker.consumer("g", "t", **FAST) as c:
        (d,) = c.poll(timeout=5)
        with pytest.raises(InvalidSetting, match="retry delay"):
            c.nack(d, "bad", delay=delay)
        c.ack(d)  # still in flight: the refused nack settled nothing
    assert broker.committed("g", "t") == {0: 1} and broker.retries("g", "t") == {}
    assert broker.log("g", "t")[(0, 0)].state == "done"
