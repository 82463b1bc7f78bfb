"""Consumer groups across a partition change, against the real servers: an ordered group
never handles a key's message written after the change before all of its messages from
before; an unordered group is not held back; a running group takes the new partitions."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ems import Consumer, Delivery, Producer, TopicAdmin
from ems.config import Settings
from ems.producer.partitioner import partition_for_key
from ems.store import Store

FAST: dict[str, Any] = {"lease_ttl": 2.0, "renew_every": 0.5}


def wait_for(check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.fixture
def admin(settings: Settings) -> Iterator[TopicAdmin]:
    with TopicAdmin(settings) as a:
        yield a


def keys_that(moved: bool, before: int, after: int, count: int) -> list[str]:
    """Keys whose partition changes (or not) when `before` partitions become `after`."""
    found = []
    i = 0
    while len(found) < count:
        key = f"key-{i}"
        i += 1
        if (
            partition_for_key(key.encode(), before) != partition_for_key(key.encode(), after)
        ) == moved:
            found.append(key)
    return found


def send(settings: Settings, keys: list[str], tag: str, per_key: int) -> None:
    with Producer(settings) as producer:
        producer.send_batch(
            "t", [{"body": f"{tag}-{n}", "key": k} for n in range(per_key) for k in keys]
        )


def poll_rounds(consumer: Consumer, until: Callable[[list[Delivery]], bool]) -> list[Delivery]:
    """Poll until `until(got)` holds, then three more rounds (past the barrier's
    re-check), acking nothing."""
    got: list[Delivery] = []
    deadline = time.monotonic() + 30
    while not until(got):
        assert time.monotonic() < deadline, f"timed out with {len(got)} deliveries"
        got += consumer.poll(timeout=0.2)
    for _ in range(3):
        got += consumer.poll(timeout=0.3)
    return got


def scenario(admin: TopicAdmin, settings: Settings) -> tuple[list[str], list[str]]:
    """2 partitions, 5 messages of each key, then 4 partitions and 5 more of each."""
    admin.create("t", 2)
    moved, stayed = keys_that(True, 2, 4, 6), keys_that(False, 2, 4, 6)
    send(settings, moved + stayed, "before", 5)
    admin.add_partitions("t", 4)
    send(settings, moved + stayed, "after", 5)
    return moved, stayed


def key_of(d: Delivery) -> str:
    assert d.key is not None
    return d.key.decode()


def test_an_ordered_group_holds_a_moved_keys_new_messages_until_its_old_ones_settle(
    admin: TopicAdmin, settings: Settings
) -> None:
    moved, stayed = scenario(admin, settings)
    with Consumer("o", "t", settings=settings, start="earliest", ordered=True, **FAST) as c:
        # Every message from before, and the stayed keys' after the change (same
        # partition, offset order), come without any ack; the moved keys' do not.
        ready = 60 + 30
        got = poll_rounds(c, lambda got: len(got) >= ready)
        assert len(got) == ready
        assert not [d for d in got if key_of(d) in moved and d.body.startswith(b"after")]
        stayed_after = [d for d in got if key_of(d) in stayed and d.body.startswith(b"after")]
        assert len(stayed_after) == 30
        c.ack(got)
        rest = poll_rounds(c, lambda more: len(more) >= 30)
    assert sorted((key_of(d), d.body) for d in rest) == sorted(
        (k, f"after-{n}".encode()) for k in moved for n in range(5)
    )
    assert {d.partition for d in rest} <= {2, 3} | {partition_for_key(k.encode(), 4) for k in moved}


def test_an_unordered_group_is_not_held_back(admin: TopicAdmin, settings: Settings) -> None:
    moved, _ = scenario(admin, settings)
    with Consumer("u", "t", settings=settings, start="earliest", **FAST) as c:
        got = poll_rounds(c, lambda got: len(got) >= 120)
    assert len(got) == 120
    assert len([d for d in got if key_of(d) in moved and d.body.startswith(b"after")]) == 30


def test_a_running_group_takes_the_new_partitions(
    admin: TopicAdmin, settings: Settings, store: Store
) -> None:
    info = admin.create("t", 2)
    seen: list[Delivery] = []
    consumers = [Consumer("g", "t", seen.append, settings=settings, **FAST) for _ in range(2)]
    threads = [threading.Thread(target=c.run, kwargs={"handle_signals": False}) for c in consumers]
    for t in threads:
        t.start()
    try:
        group = store.groups.get("g", info.id)
        assert group is not None
        wait_for(lambda: len(store.assignments.held(group.id)) == 2)
        admin.add_partitions("t", 6)
        wait_for(lambda: len(store.assignments.held(group.id)) == 6)
        owners = set(store.assignments.held(group.id).values())
        assert owners == {c.client_id for c in consumers}
        keys = [f"k{i}" for i in range(60)]
        send(settings, keys, "new", 1)
        wait_for(lambda: len(seen) >= 60)
    finally:
        for c in consumers:
            c.stop()
        for t in threads:
            t.join(timeout=20)
    assert {d.partition for d in seen} == {partition_for_key(k.encode(), 6) for k in keys}
    assert max(d.partition for d in seen) >= 2


def test_a_running_ordered_group_keeps_every_keys_order_across_changes(
    admin: TopicAdmin, settings: Settings
) -> None:
    """Two members handle a backlog written by 3 partitions and messages written while
    the topic grows to 5 and then 8, many keys: each key's messages are handled in the
    order they were sent (a message only once every earlier one of its key was)."""
    admin.create("t", 3)
    rng = random.Random(39)
    keys = [f"device-{i}" for i in range(80)]
    next_seq = dict.fromkeys(keys, 0)
    handled: dict[str, set[int]] = {k: set() for k in keys}
    out_of_order: list[tuple[str, int]] = []
    lock = threading.Lock()

    def handler(d: Delivery) -> None:
        key, seq = key_of(d), int(d.body)
        with lock:
            if any(s not in handled[key] for s in range(seq)):
                out_of_order.append((key, seq))
            handled[key].add(seq)

    def publish(producer: Producer, n: int) -> None:
        batch = []
        for _ in range(n):
            key = rng.choice(keys)
            batch.append({"body": str(next_seq[key]), "key": key})
            next_seq[key] += 1
        producer.send_batch("t", batch)

    with Producer(settings) as producer:
        for _ in range(10):
            publish(producer, 200)
        members = [
            Consumer(
                "o",
                "t",
                handler,
                settings=settings,
                start="earliest",
                ordered=True,
                batch_size=40,
                **FAST,
            )
            for _ in range(2)
        ]
        threads = [
            threading.Thread(target=c.run, kwargs={"handle_signals": False}) for c in members
        ]
        for t in threads:
            t.start()
        try:
            admin.add_partitions("t", 5)
            for _ in range(5):
                publish(producer, 100)
            admin.add_partitions("t", 8)
            for _ in range(5):
                publish(producer, 100)
            total = sum(next_seq.values())
            wait_for(lambda: sum(len(s) for s in handled.values()) >= total, timeout=60)
        finally:
            for c in members:
                c.stop()
            for t in threads:
                t.join(timeout=20)
    assert out_of_order == []
    assert all(handled[k] == set(range(next_seq[k])) for k in keys)
