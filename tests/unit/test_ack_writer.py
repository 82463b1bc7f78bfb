"""Group commit of the consumer's writes: what may be merged, and how."""

from __future__ import annotations

import datetime as dt
import itertools
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import pytest

from ems.consumer import ack_writer
from ems.consumer.ack_writer import HOLD, MAX_DELAY, PATIENCE, AckWriter, groups, retry_delay
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
    gate, entered = threading.Event(), threading.Event()

    def start(rows: list[Delivery]) -> None:
        entered.set()
        gate.wait(5)
        written.append("start " + ",".join(str(r.offset) for r in rows))

    def settle(s: Settlement, started: Sequence[Delivery]) -> None:
        written.append(f"start {offsets(started)} + settle {offsets(s.done)}")

    writer = AckWriter(start, settle, lambda: True, lambda partitions: None)
    writer.started([d(1)])
    assert entered.wait(5)  # the writer now waits in the first start (after its hold)
    writer.settled(Settlement(done=[(0, 1)]))
    writer.started([d(2)])
    writer.settled(Settlement(done=[(0, 2)]))
    gate.set()
    writer.flush()
    # What piled up meanwhile is one write: the start rows first, then both settlements.
    assert written == ["start 1", "start 2 + settle 1,2"]
    writer.close()


def offsets(found: Sequence[Delivery] | Sequence[tuple[int, int]]) -> str:
    return ",".join(str(x.offset if isinstance(x, Delivery) else x[1]) for x in found)


def recording() -> tuple[list[str], AckWriter]:
    written: list[str] = []

    def start(rows: list[Delivery]) -> None:
        written.append(f"start {offsets(rows)}")

    def settle(s: Settlement, started: Sequence[Delivery]) -> None:
        written.append(f"start {offsets(started)} + settle {offsets(s.done)}")

    return written, AckWriter(start, settle, lambda: True, lambda partitions: None)


def test_a_batch_settled_within_the_hold_is_written_with_its_start_rows_at_once() -> None:
    written, writer = recording()
    writer.started([d(1), d(2)])
    writer.settled(Settlement(done=[(0, 1), (0, 2)]))
    writer.wait_written(0)
    assert written == ["start 1,2 + settle 1,2"]  # one transaction, one commit
    writer.close()


def threaded() -> tuple[list[tuple[str, str]], AckWriter]:
    """A writer whose writes record (what, on which thread)."""
    written: list[tuple[str, str]] = []

    def start(rows: list[Delivery]) -> None:
        written.append((f"start {offsets(rows)}", threading.current_thread().name))

    def settle(s: Settlement, started: Sequence[Delivery]) -> None:
        what = f"start {offsets(started)} + settle {offsets(s.done)}"
        written.append((what, threading.current_thread().name))

    return written, AckWriter(start, settle, lambda: True, lambda partitions: None)


def batch(first: int, n: int) -> list[Delivery]:
    return [d(first + i) for i in range(n)]


def test_a_small_batch_settled_within_the_hold_is_written_on_the_settling_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A hold no busy machine outlasts: the settle comes within it by construction.
    monkeypatch.setattr(ack_writer, "HOLD", 60.0)
    written, writer = threaded()
    for first in (1, 3):
        writer.started(batch(first, 2))
        writer.settled(Settlement(done=[(0, first), (0, first + 1)]))
    here = threading.current_thread().name
    assert written == [("start 1,2 + settle 1,2", here), ("start 3,4 + settle 3,4", here)]
    writer.close()


def test_a_large_batch_is_written_by_the_writer_thread() -> None:
    written, writer = threaded()
    rows = batch(0, ack_writer.INLINE_MAX + 1)
    writer.started(rows)
    writer.settled(Settlement(done=[(0, r.offset) for r in rows]))
    writer.wait_written(0)
    assert [thread for _, thread in written] == ["ems-acks"]
    assert written[0][0].startswith("start 0,1,") and "+ settle 0,1," in written[0][0]
    writer.close()


def test_a_write_failed_on_the_settling_thread_is_handed_to_the_writer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ack_writer, "HOLD", 60.0)  # settled within the hold, as above
    calls: list[str] = []

    def settle(s: Settlement, started: Sequence[Delivery]) -> None:
        calls.append(threading.current_thread().name)
        if len(calls) == 1:
            raise DatabaseUnavailable("the server went away")

    writer = AckWriter(lambda rows: None, settle, lambda: True, lambda partitions: None)
    writer.started([d(1)])
    writer.settled(Settlement(done=[(0, 1)]))
    writer.wait_written(0)
    assert calls == [threading.current_thread().name, "ems-acks"]
    writer.close()


def test_start_rows_held_while_the_writer_waits_without_a_deadline_are_written_after_the_hold(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ack_writer, "LINGER", 0.2)  # the writer stops looking by itself
    written, writer = threaded()
    writer.started([d(1)])
    writer.settled(Settlement(done=[(0, 1)]))
    wait_until(lambda: writer._untimed)  # the writer found nothing held: it waits for work
    before = len(written)  # 2, not 1, if a busy machine held the first batch past the hold
    began = time.monotonic()  # before the hold starts, so the bound below is exact
    writer.started([d(2)])
    wait_until(lambda: len(written) == before + 1)
    assert time.monotonic() - began >= HOLD
    assert written[-1] == ("start 2", "ems-acks")
    writer.close()


def test_in_a_stream_the_consume_loop_never_wakes_the_writer(
    monkeypatch: pytest.MonkeyPatch, clock: FakeTime
) -> None:
    # The writer's clock stands still: however busy the machine, every batch is settled
    # within its hold and the writer lingers; its waits still time out in real time.
    written, writer = threaded()
    woken: list[object] = []
    put = writer._queue.put

    def recorded(job: object, *args: object, **kwargs: object) -> None:
        woken.append(job)
        put(job, *args, **kwargs)  # type: ignore[arg-type]

    waits = [0, 0]  # the writer's waits for work: begun, ended
    get = writer._queue.get

    def counted(*args: Any, **kwargs: Any) -> Any:
        waits[0] += 1
        try:
            return get(*args, **kwargs)
        finally:
            waits[1] += 1

    monkeypatch.setattr(writer._queue, "put", recorded)
    monkeypatch.setattr(writer._queue, "get", counted)
    for i in range(8):
        writer.started([d(i)])
        writer.settled(Settlement(done=[(0, i)]))
        # The next batch comes while the writer waits again, having found nothing held:
        # a writer waiting with no deadline would need waking by the next hold.
        wait_until(partial(waiting_again, waits, waits[1]))
    assert [what for what, _ in written] == [f"start {i} + settle {i}" for i in range(8)]
    assert woken == []
    writer.close()


def waiting_again(waits: list[int], ended: int) -> bool:
    """Whether a wait for work ended after `ended` had, and the writer waits again."""
    return waits[1] > ended and waits[0] > waits[1]


def test_start_rows_of_a_slow_batch_are_written_alone_after_the_hold() -> None:
    written, writer = recording()
    began = time.monotonic()  # before the hold starts, so the bound below is exact
    writer.started([d(1)])
    wait_until(lambda: written == ["start 1"])
    assert time.monotonic() - began >= HOLD
    writer.settled(Settlement(done=[(0, 1)]))
    writer.wait_written(0)
    assert written == ["start 1", "start  + settle 1"]
    writer.close()


def test_flush_ends_a_hold_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ack_writer, "HOLD", 30.0)  # a flush that waited it out: 30 s
    written, writer = recording()
    writer.started([d(1)])
    began = time.monotonic()
    writer.flush()
    assert written == ["start 1"] and time.monotonic() - began < 10.0
    writer.close()


def wait_until(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_nothing_is_written_past_the_lease_deadline() -> None:
    written: list[Settlement] = []
    dropped: list[set[int]] = []
    writer = AckWriter(
        lambda rows: None, lambda s, _: written.append(s), lambda: False, dropped.append
    )
    writer.settled(Settlement(done=[(0, 1)]))
    writer.flush()
    writer.close()
    assert written == []
    assert dropped == [{0}]


class FakeTime:
    """The writer's clock: sleeping moves it on at once."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeTime:
    fake = FakeTime()
    monkeypatch.setattr(ack_writer, "time", fake)
    return fake


def test_pauses_between_tries_double_from_a_fifth_of_a_second_up_to_a_second() -> None:
    assert [retry_delay(n) for n in range(1, 7)] == [0.2, 0.4, 0.8, MAX_DELAY, 1.0, 1.0]


def settle_failing(
    clock: FakeTime, settlement: Settlement, alive: Callable[[], bool] = lambda: True
) -> tuple[list[float], list[set[int]]]:
    """Hand the settlement to a writer whose database always refuses it; the times it
    was tried at, and the partitions the writer said it gave up on."""
    tried_at: list[float] = []
    dropped: list[set[int]] = []

    def failing(s: Settlement, started: Sequence[Delivery]) -> None:
        tried_at.append(clock.now)
        raise DatabaseUnavailable("gone")

    writer = AckWriter(lambda rows: None, failing, alive, dropped.append)
    writer.settled(settlement)
    writer.flush()
    writer.close()
    return tried_at, dropped


def test_a_write_given_up_names_its_partitions(clock: FakeTime) -> None:
    """The writer's caller must learn which partitions' state ran ahead of the database."""
    tried_at, dropped = settle_failing(clock, Settlement(done=[(0, 1)], cursors={3: (7, 1)}))
    assert dropped == [{0, 3}]
    # Tried until PATIENCE ran out, never more than MAX_DELAY apart, and given up at
    # once after the last try rather than after one more pause.
    assert tried_at[0] == 0.0
    assert PATIENCE - MAX_DELAY < tried_at[-1] <= PATIENCE
    assert all(0 < b - a <= MAX_DELAY + 1e-9 for a, b in itertools.pairwise(tried_at))
    assert clock.now == tried_at[-1]


def test_a_write_outlasts_a_failover_and_goes_through_soon_after_it(clock: FakeTime) -> None:
    """A database away for 4 s (a Galera cluster evicting its dead writer node takes
    several seconds): the write is not given up, and goes through within MAX_DELAY of the
    database's return."""
    written: list[float] = []
    dropped: list[set[int]] = []

    def settle(s: Settlement, started: Sequence[Delivery]) -> None:
        if clock.now < 4.0:
            raise DatabaseUnavailable("the cluster is evicting a node")
        written.append(clock.now)

    writer = AckWriter(lambda rows: None, settle, lambda: True, dropped.append)
    writer.settled(Settlement(done=[(0, 1)]))
    writer.wait_written(0)
    writer.close()
    assert dropped == []
    assert len(written) == 1 and 4.0 <= written[0] <= 4.0 + MAX_DELAY


def test_tries_stop_when_the_lease_ends(clock: FakeTime) -> None:
    tries, dropped = settle_failing(clock, Settlement(done=[(0, 1)]), lambda: clock.now < 2.0)
    assert dropped == [{0}]
    assert tries and max(tries) < 2.0


def test_wait_written_returns_once_at_most_that_many_settlements_are_unwritten() -> None:
    gate = threading.Event()
    writer = AckWriter(lambda rows: None, lambda s, _: gate.wait(5), lambda: True, lambda p: None)
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
