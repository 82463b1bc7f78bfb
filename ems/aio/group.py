"""Group commit for asyncio: the sends of every task that await at the same time share
one flush (one allocation per partition, one INSERT).

A send queues its items and, if fewer than max_flushes flushes run, starts one as a task
of its own. That task runs once the sender yields, so every send made meanwhile by other
tasks is already queued: it takes them all (up to max_items) and keeps flushing until the
queue is empty. Nothing waits for a timer unless a linger is configured (then a flush
first sleeps that long, to gather more). The same idea as ems.producer.group_commit for
threads, where a waiting caller leads instead of a task.

Each send gives a deadline; a flush is given the earliest of its group's (see
ems.producer.group_commit).

Cancellation: a send cancelled while its items are still queued takes them out, so they
are never written; once a flush has taken them, the flush is not the caller's and runs on
for the others (the cancelled caller is not told where its items landed).
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from operator import attrgetter
from typing import Generic, TypeVar

#: A request's deadline (min over a group without a generator frame per request).
_deadline = attrgetter("deadline")
T = TypeVar("T")
R = TypeVar("R")


class _Request(Generic[T, R]):
    __slots__ = ("deadline", "future", "items", "taken")

    def __init__(
        self, items: Sequence[T], deadline: float, future: asyncio.Future[Sequence[R]]
    ) -> None:
        self.items = items
        self.deadline = deadline
        self.future = future
        self.taken = False


class AsyncGroupCommit(Generic[T, R]):
    """flush(items, deadline) -> one result per item, all-or-none for the items it is
    given; deadline is the earliest of their senders'."""

    def __init__(
        self,
        flush: Callable[[list[T], float], Awaitable[Sequence[R]]],
        max_items: int,
        *,
        max_flushes: int = 2,
        linger: float = 0.0,
    ) -> None:
        self._flush = flush
        self._max_items = max_items
        self._max_flushes = max_flushes
        self._linger = linger
        self._queue: deque[_Request[T, R]] = deque()
        #: Flushes under way, counted as they start and end (a task's done callbacks run
        #: a loop step later, when a send could already have seen it as running).
        self._running = 0
        self._flushers: set[asyncio.Task[None]] = set()

    async def submit(self, items: Sequence[T], deadline: float = math.inf) -> Sequence[R]:
        loop = asyncio.get_running_loop()
        request: _Request[T, R] = _Request(items, deadline, loop.create_future())
        self._queue.append(request)
        if self._running < self._max_flushes:
            self._running += 1
            task = loop.create_task(self._drain())
            self._flushers.add(task)
            task.add_done_callback(self._flushers.discard)
        try:
            return await request.future
        except asyncio.CancelledError:
            if not request.taken:
                self._queue.remove(request)
            raise

    async def wait_idle(self) -> None:
        """Until every flush under way has finished."""
        while self._flushers:
            await asyncio.wait(list(self._flushers))

    async def _drain(self) -> None:
        try:
            if self._linger > 0:
                await asyncio.sleep(self._linger)
            while self._queue:
                await self._run(self._take())
        finally:
            self._running -= 1

    def _take(self) -> list[_Request[T, R]]:
        """The oldest queued requests, up to max_items items (at least one)."""
        group: list[_Request[T, R]] = []
        count = 0
        queue = self._queue
        while queue and (not group or count + len(queue[0].items) <= self._max_items):
            request = queue.popleft()
            request.taken = True
            group.append(request)
            count += len(request.items)
        return group

    async def _run(self, group: list[_Request[T, R]]) -> None:
        items = [item for request in group for item in request.items]
        try:
            results = await self._flush(items, min(map(_deadline, group)))
        except asyncio.CancelledError:
            for request in group:
                request.future.cancel()
            raise
        except Exception as exc:  # every caller in the group sees the failure
            for request in group:
                if not request.future.done():
                    request.future.set_exception(exc)
            return
        if len(group) == 1:
            if not group[0].future.done():  # a cancelled caller is not told
                group[0].future.set_result(results)
            return
        # Each caller reads its share (a single send its one result): made once as a list,
        # so that a share is a list's slice.
        made = list(results)
        start = 0
        for request in group:
            end = start + len(request.items)
            if not request.future.done():
                request.future.set_result(made[start:end])
            start = end
