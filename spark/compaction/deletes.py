"""A run's chunked deletes on a thread pool: MySQL, not Spark, does this work, so the
chunks go out over parallel store connections while Spark computes the summaries."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed

from ems.types import IdRange

#: Parallel DELETE connections at most: MySQL, not Spark, does this work, and the store's
#: connection pool (5 + 10 overflow) also serves the compaction lease's renewals.
MAX_DELETE_WORKERS = 8

#: One chunk: its id range, and its archived ids when it is deleted by them.
Chunk = tuple[IdRange, list[int] | None]


class Deletes:
    """Delete chunks running on a thread pool; each chunk commits with its count.

    `delete` deletes one chunk and returns its rows; `checkpoint` is called with the number
    of chunks completed so far, after each (the crash test hook)."""

    def __init__(
        self,
        delete: Callable[[IdRange, list[int] | None], int],
        checkpoint: Callable[[int], None],
        chunks: list[Chunk],
        workers: int,
    ) -> None:
        self.delete = delete
        self.checkpoint = checkpoint
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.completed = 0
        size = max(1, min(workers, len(chunks), MAX_DELETE_WORKERS))
        self.pool = ThreadPoolExecutor(max_workers=size)
        self.futures = [self.pool.submit(self._one, chunk, ids) for chunk, ids in chunks]

    def _one(self, chunk: IdRange, ids: list[int] | None) -> int:
        if self.stopping.is_set():
            return 0
        count = self.delete(chunk, ids)
        with self.lock:
            self.completed += 1
            completed = self.completed
        try:
            self.checkpoint(completed)
        except BaseException:
            self.stopping.set()
            raise
        return count

    def wait(self) -> int:
        """The rows deleted, once every chunk is done (re-raises a chunk's error)."""
        try:
            deleted = sum(future.result() for future in as_completed(self.futures))
        except BaseException:
            self.cancel()
            raise
        self.pool.shutdown()
        return deleted

    def cancel(self) -> None:
        """Start no more chunks; wait for those running."""
        self.stopping.set()
        self.pool.shutdown(wait=True, cancel_futures=True)
