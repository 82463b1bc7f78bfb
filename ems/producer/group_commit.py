"""Group commit: concurrent callers in one process share one allocation and one INSERT.

A caller that arrives while fewer than max_flushes flushes run becomes a leader: it flushes
everything queued so far in one go, keeps flushing until its own request is done, then
hands the lead to the oldest waiting caller. A caller alone is flushed at once, so nothing
waits for a timer; under load, callers that arrive during a flush ride along with the next
one. Two flushes in flight (the default) let one group be allocated and sent while the
previous one waits for its commit. The same idea as InnoDB's group commit and Kafka's
producer batches, without a linger delay.

Each caller gives a deadline; a flush is given the earliest of its group's, as a Kafka
batch expires by its oldest record, so no caller waits past its own for the group's sake.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import Generic, TypeVar

#: A request's deadline (min over a group without a generator frame per request).
_deadline = attrgetter("deadline")
T = TypeVar("T")
R = TypeVar("R")


class _Request(Generic[T, R]):
    __slots__ = ("deadline", "done", "error", "finished", "items", "lead", "result", "wake")

    def __init__(self, items: Sequence[T], deadline: float) -> None:
        self.items = items
        self.deadline = deadline
        self.result: Sequence[R] = ()
        self.error: BaseException | None = None
        self.finished = False
        self.lead = False
        # Followers sleep on a lock taken at birth and released once (cheaper than an
        # Event); a leader whose request another leader took waits on `done`.
        self.wake = threading.Lock()
        self.wake.acquire()
        self.done: threading.Event | None = None

    def promote(self) -> None:
        self.lead = True
        self.done = threading.Event()


class GroupCommit(Generic[T, R]):
    """flush(items, deadline) -> one result per item; it is all-or-none for the items it
    is given, and deadline is the earliest of their callers'. At most max_flushes flushes
    run at once, so one flush waiting on the disk does not hold back the next group."""

    def __init__(
        self,
        flush: Callable[[list[T], float], Sequence[R]],
        max_items: int,
        max_flushes: int = 2,
    ) -> None:
        self._flush = flush
        self._max_items = max_items
        self._max_flushes = max_flushes
        self._lock = threading.Lock()
        self._queue: deque[_Request[T, R]] = deque()
        self._leaders = 0

    def submit(self, items: Sequence[T], deadline: float = math.inf) -> Sequence[R]:
        # acquire() and release() in try/finally, not `with`: the same, at less than half
        # the cost, on the path of every send (here and in _resign).
        self._lock.acquire()
        try:
            alone = not self._queue and self._leaders < self._max_flushes
            if alone:
                self._leaders += 1
        finally:
            self._lock.release()
        if alone:
            # Nobody waits: flush at once, without the request and its locks (the common
            # case of a single sender, where they cost as much as the allocation).
            try:
                return self._flush(list(items), deadline)
            finally:
                self._resign()
        request: _Request[T, R] = _Request(items, deadline)
        with self._lock:
            self._queue.append(request)
            if self._leaders < self._max_flushes:
                self._leaders += 1
                request.promote()
        if not request.lead:
            request.wake.acquire()
        if request.lead:
            self._lead(request)
        if request.error is not None:
            raise request.error
        return request.result

    def _lead(self, me: _Request[T, R]) -> None:
        assert me.done is not None
        while not me.finished:
            group = self._take()
            if not group:  # another leader is flushing my request
                me.done.wait()
                break
            self._run(group)
        self._resign()

    def _resign(self) -> None:
        """Leave the lead, handing it to the oldest waiting caller."""
        self._lock.acquire()
        try:
            self._leaders -= 1
            if self._queue and not self._queue[0].lead:
                self._leaders += 1
                successor = self._queue[0]
                successor.promote()
                successor.wake.release()
        finally:
            self._lock.release()

    def _take(self) -> list[_Request[T, R]]:
        """The oldest queued requests, up to max_items items (at least one if any)."""
        group: list[_Request[T, R]] = []
        count = 0
        with self._lock:
            while self._queue and (
                not group or count + len(self._queue[0].items) <= self._max_items
            ):
                request = self._queue.popleft()
                group.append(request)
                count += len(request.items)
        return group

    def _run(self, group: list[_Request[T, R]]) -> None:
        items = [item for request in group for item in request.items]
        try:
            results = self._flush(items, min(map(_deadline, group)))
        except BaseException as exc:  # every caller in the group sees the failure
            for request in group:
                request.error = exc
        else:
            if len(group) == 1:
                group[0].result = results
            else:
                # Each caller reads its share (a single send its one result): made once as
                # a list, so that a share is a list's slice.
                made = list(results)
                start = 0
                for request in group:
                    request.result = made[start : start + len(request.items)]
                    start += len(request.items)
        with self._lock:
            for request in group:
                request.finished = True
                if request.done is not None:
                    request.done.set()
                else:
                    request.wake.release()
