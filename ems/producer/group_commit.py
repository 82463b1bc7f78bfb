"""Group commit: concurrent callers in one process share one allocation and one INSERT.

The first caller to arrive leads: it flushes everything queued so far in one go, and keeps
flushing until its own request is done, then hands the lead to the oldest waiting caller.
A caller alone is flushed at once, so nothing waits for a timer; under load, callers that
arrive during a flush ride along with the next one. The same idea as InnoDB's group commit
and Kafka's producer batches, without a linger delay.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class _Request(Generic[T, R]):
    __slots__ = ("error", "finished", "items", "lead", "result", "wake")

    def __init__(self, items: Sequence[T]) -> None:
        self.items = items
        self.result: list[R] = []
        self.error: BaseException | None = None
        self.finished = False
        self.lead = False
        # A lock taken at birth and released once to wake the waiter: cheaper than an Event.
        self.wake = threading.Lock()
        self.wake.acquire()


class GroupCommit(Generic[T, R]):
    """flush(items) -> one result per item; it is all-or-none for the items it is given."""

    def __init__(self, flush: Callable[[list[T]], list[R]], max_items: int) -> None:
        self._flush = flush
        self._max_items = max_items
        self._lock = threading.Lock()
        self._queue: deque[_Request[T, R]] = deque()
        self._leading = False

    def submit(self, items: Sequence[T]) -> list[R]:
        request: _Request[T, R] = _Request(items)
        with self._lock:
            self._queue.append(request)
            if not self._leading:
                self._leading = request.lead = True
        if not request.lead:
            request.wake.acquire()
        if not request.finished:
            self._lead(request)
        if request.error is not None:
            raise request.error
        return request.result

    def _lead(self, me: _Request[T, R]) -> None:
        while not me.finished:
            self._run(self._take())
        with self._lock:
            if self._queue:
                successor = self._queue[0]
                successor.lead = True
                successor.wake.release()
            else:
                self._leading = False

    def _take(self) -> list[_Request[T, R]]:
        """The oldest queued requests, up to max_items items (always at least one)."""
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
            results = self._flush(items)
        except BaseException as exc:  # every caller in the group sees the failure
            for request in group:
                request.error = exc
        else:
            start = 0
            for request in group:
                request.result = results[start : start + len(request.items)]
                start += len(request.items)
        for request in group:
            request.finished = True
            if not request.lead:
                request.wake.release()
