"""Group commit of the consumer's writes: what may be merged, and how."""

from __future__ import annotations

import datetime as dt
import threading
import time

import pytest

from ems.consumer.ack_writer import ATTEMPTS, AckWriter, groups
from ems.consumer.state import merge
from ems.exceptions import DatabaseUnavailable
from ems.types import Delivery, Failure, Settlement


def d(offset: int) -> Delivery:
    return Delivery(
        topic="t",
        partition=0,
        offset=offset,
        key=None,
        headers={},
        body=b"",
        timestamp=dt.datetime(2026, 1, 1),
        attempt=1,
        message_id=offset,
    )


def test_later_cursors_win_and_lists_concatenate_in_order() -> None:
    a = Settlement(done=[(0, 1)], cursors={0: (2, 5), 1: (7, 5)})
    b = Settlement(done=[(0, 2)], cursors={0: (3, 5)})
    merged = merge([a, b])
    assert merged.done == [(0, 1), (0, 2)]
    assert merged.cursors == {0: (3, 5), 1: (7, 5)}


def test_start_rows_join_a_group_unless_a_settlement_before_them_failed_or_handed_back() -> None:
    plain = Settlement(done=[(0, 1)])
    failing = Settlement(failed=[Failure(0, 2, 2, 1, "e", 1.0)])
    jobs = [([d(1)], None), (None, plain), ([d(2)], None), (None, failing), ([d(3)], None)]
    grouped = groups(jobs)  # type: ignore[arg-type]
    assert [([x.offset for x in s], len(t)) for s, t in grouped] == [([1, 2], 2), ([3], 0)]


def test_everything_handed_over_is_written_in_order_and_flush_waits_for_it() -> None:
    written: list[str] = []
    gate = threading.Event()

    def start(rows: list[Delivery]) -> None:
        gate.wait(5)
        written.append("start " + ",".join(str(r.offset) for r in rows))

    def settle(s: Settlement) -> None:
        written.append("settle " + ",".join(str(o) for _, o in s.done))

    writer = AckWriter(start, settle, lambda: True, lambda partitions: None)
    writer.started([d(1)])
    time.sleep(0.05)  # the writer now waits in the first start
    writer.settled(Settlement(done=[(0, 1)]))
    writer.started([d(2)])
    writer.settled(Settlement(done=[(0, 2)]))
    gate.set()
    writer.flush()
    assert written == ["start 1", "start 2", "settle 1,2"]
    writer.close()


def test_nothing_is_written_past_the_lease_deadline() -> None:
    written: list[Settlement] = []
    dropped: list[set[int]] = []
    writer = AckWriter(lambda rows: None, written.append, lambda: False, dropped.append)
    writer.settled(Settlement(done=[(0, 1)]))
    writer.flush()
    writer.close()
    assert written == []
    assert dropped == [{0}]


def test_a_write_given_up_names_its_partitions(monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer's caller must learn which partitions' state ran ahead of the database."""
    monkeypatch.setattr("ems.consumer.ack_writer.time.sleep", lambda s: None)
    tries: list[Settlement] = []
    dropped: list[set[int]] = []

    def failing(s: Settlement) -> None:
        tries.append(s)
        raise DatabaseUnavailable("gone")

    writer = AckWriter(lambda rows: None, failing, lambda: True, dropped.append)
    writer.settled(Settlement(done=[(0, 1)], cursors={3: (7, 1)}))
    writer.flush()
    writer.close()
    assert len(tries) == ATTEMPTS
    assert dropped == [{0, 3}]


def test_wait_written_returns_once_at_most_that_many_settlements_are_unwritten() -> None:
    gate = threading.Event()
    writer = AckWriter(lambda rows: None, lambda s: gate.wait(5), lambda: True, lambda p: None)
    writer.settled(Settlement(done=[(0, 1)]))
    writer.settled(Settlement(done=[(0, 2)]))
    writer.wait_written(2)  # two unwritten: returns at once
    waited = threading.Thread(target=writer.wait_written, args=(1,))
    waited.start()
    waited.join(0.2)
    assert waited.is_alive(), "returned while both settlements were unwritten"
    gate.set()
    waited.join(5)
    assert not waited.is_alive()
    writer.wait_written(0)
    writer.close()
