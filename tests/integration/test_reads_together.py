"""Several partitions read in one statement: each gets what its own read would give, and
a consumer reads the partitions its wake-ups announced with one round trip."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import pytest

from ems import Consumer, Producer, TopicAdmin
from ems.config import Settings
from ems.offsets.reader import PartitionReader
from ems.store import Store
from ems.types import NewMessage, TopicInfo
from tests.integration import seed
from tests.integration.test_consumer import wait_for

#: Per partition: (offset, body size); partition 2 has a hole at 2, partition 3 is empty.
LAYOUT = {
    0: [(o, 10) for o in range(6)],
    1: [(0, 10), (1, 3000), (2, 40_000), (3, 10), (4, 9000)],
    2: [(0, 10), (1, 10), (3, 10), (4, 10)],
    3: [],
}


@pytest.fixture
def topic(settings: Settings, store: Store) -> TopicInfo:
    info = TopicAdmin(settings, store=store).create("t", 4)
    rows = [
        NewMessage(
            topic_id=info.id, partition=p, offset=o, key=None, headers=None, body=b"x" * size
        )
        for p, layout in LAYOUT.items()
        for o, size in layout
    ]
    seed.insert_rows(store, rows)  # partition 2's hole at 2
    return info


def _rows(fetched: Any) -> tuple[Any, ...]:
    """A fetch as comparable values: its rows as MessageRows, the cut, the count."""
    return ([tuple(r[:7]) for r in fetched.rows], fetched.cut, fetched.partitions)


@pytest.mark.parametrize(
    ("limit", "max_bytes", "at_least_one"),
    [
        (10, 1_000_000, True),
        (3, 1_000_000, True),
        (10, 5000, True),
        (10, 5000, False),
        (10, 20, True),
        (10, 20, False),
        (1, 1, True),
    ],
)
def test_a_fetch_of_several_partitions_gives_each_what_its_own_fetch_gives(
    store: Store, topic: TopicInfo, limit: int, max_bytes: int, at_least_one: bool
) -> None:
    for starts in itertools.product([0, 1, 3], repeat=2):
        reads = [(0, starts[0], limit), (1, starts[1], limit), (2, 0, limit), (3, 0, limit)]
        together = store.messages.fetch_rows_many(
            topic.id, reads, max_bytes, at_least_one=at_least_one
        )
        alone = {
            p: store.messages.fetch_rows(topic.id, p, at, n, max_bytes, at_least_one=at_least_one)
            for p, at, n in reads
        }
        assert set(together) == {0, 1, 2, 3}
        for p in alone:
            assert _rows(together[p]) == _rows(alone[p]), (p, starts)


def test_the_reader_reads_several_partitions_by_the_rule_of_each(
    settings: Settings, store: Store, topic: TopicInfo
) -> None:
    reads: Sequence[tuple[int, int, int]] = [(0, 2, 10), (1, 0, 10), (2, 0, 10), (3, 0, 10)]
    together = PartitionReader(store.messages, settings.gap_timeout).read_deliveries_many(
        topic, reads, 50_000
    )
    alone = PartitionReader(store.messages, settings.gap_timeout)
    for p, at, n in reads:
        one = alone.read_deliveries(topic, p, at, n, 50_000)
        got = together[p]
        assert [d.offset for d in got.deliveries] == [d.offset for d in one.deliveries]
        assert (got.next_offset, got.more) == (one.next_offset, one.more)
    # Partition 2 stops at its young hole; partition 1 is cut by the budget.
    assert [d.offset for d in together[2].deliveries] == [0, 1]
    assert together[2].next_offset == 2 and not together[2].more
    assert together[1].more


def test_a_young_hole_stops_its_partition_without_a_read_of_its_own(
    settings: Settings, store: Store, topic: TopicInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    reader = PartitionReader(store.messages, settings.gap_timeout)
    alone: list[int] = []
    fetch_rows = store.messages.fetch_rows

    def counted(topic_id: int, partition: int, *args: Any, **kwargs: Any) -> Any:
        alone.append(partition)
        return fetch_rows(topic_id, partition, *args, **kwargs)

    monkeypatch.setattr(store.messages, "fetch_rows", counted)
    together = reader.read_deliveries_many(topic, [(0, 0, 10), (2, 0, 10)], 50_000)
    # Partition 2's rows 0, 1, 3, 4 came in the one statement: the hole at 2 is young, so
    # the rule stops there, and nothing there needs reading again.
    assert [d.offset for d in together[2].deliveries] == [0, 1]
    assert (together[2].next_offset, together[2].more) == (2, False)
    assert [d.offset for d in together[0].deliveries] == list(range(6))
    assert alone == []


def test_a_consumer_reads_the_partitions_its_wake_ups_announced_in_one_statement(
    settings: Settings, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    TopicAdmin(settings, store=store).create("news", 4)
    with Consumer("g", "news", settings=settings, start="earliest", batch_size=100) as c:
        # Joined, holds all four partitions, and has read them (all empty) once.
        wait_for(lambda: c.poll(timeout=0.1) == [] and len(c.session.states) == 4)
        messages = c.session.reader.messages
        calls: list[tuple[str, int]] = []
        one, many = messages.fetch_rows, messages.fetch_rows_many

        def fetch_rows(*args: Any, **kwargs: Any) -> Any:
            calls.append(("one", 1))
            return one(*args, **kwargs)

        def fetch_rows_many(topic_id: int, reads: Any, *args: Any, **kwargs: Any) -> Any:
            calls.append(("many", len(reads)))
            return many(topic_id, reads, *args, **kwargs)

        monkeypatch.setattr(messages, "fetch_rows", fetch_rows)
        monkeypatch.setattr(messages, "fetch_rows_many", fetch_rows_many)
        sent: dict[int, bytes] = {}
        with Producer(settings) as producer:
            for i in itertools.count():  # one message in each partition
                meta = producer.send("news", f"m{i}", key=f"k{i}")
                sent.setdefault(meta.partition, f"m{i}".encode())
                if len(sent) == 4:
                    break
        wait_for(lambda: all(c.inbox.known_high.get(p, 0) >= 1 for p in range(4)))
        batch = c.poll(timeout=5)
        assert len(batch) == i + 1 and set(sent.values()) <= {d.body for d in batch}
        assert calls == [("many", 4)]
        c.ack(batch)
