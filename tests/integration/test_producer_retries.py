"""A dropped connection during an insert leaves its outcome unknown. The producer sends the
same rows again and, on a duplicate-key answer, checks what is stored: its own write (told
apart by the write token stored with it, never by content) means the first attempt committed
(no duplicate is written); anyone else's rows, even identical ones, mean fresh offsets."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ems import Producer, Record, TopicAdmin
from ems.backend import mysql_backend
from ems.config import Settings
from ems.exceptions import DatabaseUnavailable, SendTimeout
from ems.store import Store
from ems.store.messages import MessageStore
from ems.types import Placed
from tests import sql as db


class _LosesAnswers(MessageStore):
    """Inserts for real, then reports the connection lost `times` times."""

    def __init__(self, store: Store, times: int, commit_first: bool) -> None:
        super().__init__(store.db)
        self.times, self.commit_first, self.calls = times, commit_first, 0

    def insert(self, placed: Placed, *token: int, **how: Any) -> None:
        self.calls += 1
        if self.calls <= self.times:
            if self.commit_first:
                super().insert(placed, *token, **how)
            raise DatabaseUnavailable("connection lost")
        super().insert(placed, *token, **how)


def _stored(store: Store) -> list[tuple[int, bytes]]:
    return [
        (int(r[0]), bytes(r[1]))
        for r in db.rows(store, "SELECT offset_no, body FROM message ORDER BY offset_no")
    ]


@pytest.fixture
def store(settings: Settings) -> Iterator[Store]:
    TopicAdmin(settings).create("t", 1)
    s = Store(settings)
    yield s
    s.close()


def test_lost_answer_after_commit_is_not_a_duplicate(store: Store) -> None:
    store.messages = _LosesAnswers(store, times=1, commit_first=True)
    with Producer(backend=mysql_backend(store.settings, store)) as producer:
        placed = producer.send_batch("t", [Record(b"a", headers={"h": "1"}), Record(b"b")])
    assert [p.offset for p in placed] == [0, 1]
    assert _stored(store) == [(0, b"a"), (1, b"b")]


def test_lost_connection_before_commit_is_sent_again(store: Store) -> None:
    store.messages = _LosesAnswers(store, times=2, commit_first=False)
    with Producer(backend=mysql_backend(store.settings, store)) as producer:
        assert producer.send("t", b"a").offset == 0
    assert _stored(store) == [(0, b"a")]


def test_someone_elses_rows_mean_fresh_offsets(store: Store) -> None:
    class _Raced(_LosesAnswers):
        def insert(self, placed: Placed, *token: int, **how: Any) -> None:
            self.calls += 1
            if self.calls == 1:  # another producer takes the same offsets meanwhile
                other = [(p, None, None, b"other") for p, _, _, _ in placed.rows]
                MessageStore.insert(self, placed._replace(rows=other))
                raise DatabaseUnavailable("connection lost")
            MessageStore.insert(self, placed, *token, **how)

    store.messages = _Raced(store, times=0, commit_first=False)
    with Producer(backend=mysql_backend(store.settings, store)) as producer:
        placed = producer.send("t", b"mine")
    assert placed.offset == 1
    assert _stored(store) == [(0, b"other"), (1, b"mine")]


class _TwinTakesTheOffsets(_LosesAnswers):
    """Another producer, handed the same offsets after Redis lost its counters, commits a
    write of identical messages (a heartbeat, a repeated reading) there; then this
    producer's first attempt loses its connection before anything of it was stored."""

    def insert(self, placed: Placed, *token: int, **how: Any) -> None:
        self.calls += 1
        if self.calls == 1:
            # The twin's own write, not this one.
            MessageStore.insert(self, placed, partitions=how.get("partitions"))
            raise DatabaseUnavailable("connection lost")
        MessageStore.insert(self, placed, *token, **how)


@pytest.mark.parametrize(
    ("count", "size"),
    [(1, 100), (50, 30_000), (2, 300_000)],
    ids=["single send", "batch over 1 MB (several statements)", "rows over 256 KiB"],
)
def test_identical_rows_of_another_producer_are_not_taken_for_ours(
    store: Store, count: int, size: int
) -> None:
    store.messages = _TwinTakesTheOffsets(store, times=0, commit_first=False)
    body = b"heartbeat " + b"x" * size
    with Producer(backend=mysql_backend(store.settings, store)) as producer:
        placed = producer.send_batch("t", [Record(body, key="gw-1", headers={"v": "1"})] * count)
    assert store.messages.calls >= 2, "the lost connection was never met"
    assert [p.offset for p in placed] == list(range(count, 2 * count))
    stored = _stored(store)
    assert [offset for offset, _ in stored] == list(range(2 * count))
    assert {b for _, b in stored} == {body}


def test_database_down_for_good_is_a_typed_error(store: Store) -> None:
    """The same rows are sent again until the send's bound, then SendTimeout. The bound
    leaves room for more tries than the 4 of the fixed count before it (the backoff
    starts tries at 0, 0.1, 0.3, 0.7, 1.5, 2.5 and 3 s), however slow each try is on a
    busy machine: with a 1 s bound the fifth try started at the deadline only when the
    fourth had ended before it."""
    store.messages = _LosesAnswers(store, times=10**6, commit_first=False)
    local = store.settings.with_(send_timeout=3.0)
    with (
        Producer(backend=mysql_backend(local, store)) as producer,
        pytest.raises(SendTimeout) as raised,
    ):
        producer.send("t", b"a")
    assert isinstance(raised.value.__cause__, DatabaseUnavailable)
    assert store.messages.calls > 4, "fewer tries than before the bound"
    assert _stored(store) == []
