from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from ems.producer.group_commit import GroupCommit
from ems.types import BatchMetadata


class Recorder:
    def __init__(self, delay: float = 0.0, fail_on: int | None = None) -> None:
        self.groups: list[list[int]] = []
        self.delay, self.fail_on = delay, fail_on
        self.lock = threading.Lock()

    def flush(self, items: list[int], deadline: float) -> list[int]:
        with self.lock:
            self.groups.append(list(items))
        time.sleep(self.delay)
        if self.fail_on is not None and self.fail_on in items:
            raise RuntimeError("flush failed")
        return [i * 10 for i in items]


def test_a_lone_caller_is_flushed_at_once() -> None:
    rec = Recorder()
    gc = GroupCommit(rec.flush, max_items=100)
    assert gc.submit([1, 2]) == [10, 20]
    assert gc.submit([3]) == [30]
    assert rec.groups == [[1, 2], [3]]


def test_concurrent_callers_share_flushes_and_get_their_own_results() -> None:
    rec = Recorder(delay=0.005)
    gc = GroupCommit(rec.flush, max_items=1000)
    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(lambda i: gc.submit([i, -i]), range(400)))
    assert results == [[i * 10, -i * 10] for i in range(400)]
    flushed = sorted(x for g in rec.groups for x in g)
    assert flushed == sorted([i for i in range(400)] + [-i for i in range(400)])
    assert len(rec.groups) < 200  # callers rode along with each other


def test_groups_respect_max_items() -> None:
    rec = Recorder(delay=0.002)
    gc = GroupCommit(rec.flush, max_items=5)
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda i: gc.submit([i, i]), range(100)))
    assert all(len(g) <= 5 for g in rec.groups)
    big = gc.submit(list(range(9)))  # a request larger than the cap goes alone
    assert big == [i * 10 for i in range(9)] and rec.groups[-1] == list(range(9))


def test_a_failed_flush_fails_exactly_its_group() -> None:
    rec = Recorder(delay=0.002, fail_on=13)
    gc = GroupCommit(rec.flush, max_items=1000)

    def call(i: int) -> str:
        try:
            gc.submit([i])
        except RuntimeError:
            return "failed"
        return "ok"

    with ThreadPoolExecutor(max_workers=8) as pool:
        outcomes = list(pool.map(call, range(60)))
    failed_group = next(g for g in rec.groups if 13 in g)
    assert {i for i, o in enumerate(outcomes) if o == "failed"} == set(failed_group)
    assert gc.submit([1]) == [10]  # and the committer keeps working


def test_base_exceptions_reach_the_caller() -> None:
    def flush(items: list[int], deadline: float) -> list[int]:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        GroupCommit(flush, max_items=10).submit([1])


def test_two_flushes_overlap_but_never_more() -> None:
    running, peak = 0, 0
    lock = threading.Lock()

    def flush(items: list[int], deadline: float) -> list[int]:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        time.sleep(0.01)
        with lock:
            running -= 1
        return items

    gc = GroupCommit(flush, max_items=1000, max_flushes=2)
    with ThreadPoolExecutor(max_workers=12) as pool:
        results = list(pool.map(lambda i: gc.submit([i]), range(120)))
    assert results == [[i] for i in range(120)]
    assert peak == 2


def test_one_flush_at_a_time_when_asked() -> None:
    rec = Recorder(delay=0.005)
    gc = GroupCommit(rec.flush, max_items=1000, max_flushes=1)
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda i: gc.submit([i]), range(80)))
    assert results == [[i * 10] for i in range(80)]
    assert len(rec.groups) < 80


def test_a_flush_is_given_the_earliest_deadline_of_its_group() -> None:
    """A group waits no longer than its most hurried caller: one caller holds the flush
    while three queue with deadlines 30, 10 and 20; they are flushed together, by 10."""
    entered, release = threading.Event(), threading.Event()
    seen: list[tuple[list[int], float]] = []

    def flush(items: list[int], deadline: float) -> list[int]:
        seen.append((list(items), deadline))
        if items == [0]:
            entered.set()
            release.wait(10)
        return items

    gc = GroupCommit(flush, max_items=100, max_flushes=1)
    with ThreadPoolExecutor(max_workers=4) as pool:
        first = pool.submit(gc.submit, [0], 99.0)
        assert entered.wait(10)
        queued = [pool.submit(gc.submit, [i], d) for i, d in [(1, 30.0), (2, 10.0), (3, 20.0)]]
        deadline = time.monotonic() + 10
        while len(gc._queue) < 3:  # all three queued behind the flush
            assert time.monotonic() < deadline
            time.sleep(0.001)
        release.set()
        assert first.result() == [0] and [f.result() for f in queued] == [[1], [2], [3]]
    assert seen == [([0], 99.0), ([1, 2, 3], 10.0)]


def test_a_lone_caller_gets_the_flush_results_and_a_group_list_shares_of_them() -> None:
    """A batch sent alone keeps its results made when read (ems.types.BatchMetadata); in
    a group every caller reads its share, so the results are made once, as a list."""
    firsts = {p: 100 * p for p in range(4)}
    rec = Recorder(delay=0.005)

    def flush(items: list[int], deadline: float) -> BatchMetadata:
        rec.flush(items, deadline)
        return BatchMetadata("t", [i % 4 for i in items], firsts)

    gc = GroupCommit(flush, max_items=1000)
    lone = gc.submit([1, 2, 5])
    assert isinstance(lone, BatchMetadata)
    assert lone == [("t", 1, 100), ("t", 2, 200), ("t", 1, 101)]
    with ThreadPoolExecutor(max_workers=16) as pool:
        shares = list(pool.map(lambda i: gc.submit([i]), range(200)))
    shared = {i for g in rec.groups[1:] if len(g) > 1 for i in g}
    assert shared  # callers rode along with each other
    expected = {}  # each item's place within its group's flush
    for g in rec.groups[1:]:
        seen: dict[int, int] = {}
        for i in g:
            expected[i] = ("t", i % 4, firsts[i % 4] + seen.get(i % 4, 0))
            seen[i % 4] = seen.get(i % 4, 0) + 1
    assert [list(share) for share in shares] == [[expected[i]] for i in range(200)]
    assert all(type(shares[i]) is list for i in shared)
