"""Writes the consumption log and ack batches on one background thread, in order.

The consume loop hands over a fetched batch's log INSERT and, later, its settlement, and
goes on fetching and handling while they commit: their log flushes are no longer on the
path of every message. One writer keeps the order, so a batch's start rows are written
before its acks, and a partition's cursor never moves back. `flush()` waits until
everything handed over is written (before a release, a synchronous ack, or leaving).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

from ems.exceptions import EmsError

log = logging.getLogger(__name__)

#: Tries of one settlement against errors that may pass (server gone, deadlocks).
ATTEMPTS = 5


Job = Callable[[], None]


class AckWriter:
    def __init__(self, alive: Callable[[], bool]) -> None:
        self._alive = alive
        self._queue: queue.Queue[Job | None] = queue.Queue()
        self._thread: threading.Thread | None = None

    def submit(self, job: Job) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="ems-acks", daemon=True)
            self._thread.start()
        self._queue.put(job)

    def flush(self) -> None:
        if self._thread is not None:
            self._queue.join()

    def close(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            try:
                if job is None:
                    return
                self._write_patiently(job)
            finally:
                self._queue.task_done()

    def _write_patiently(self, job: Job) -> None:
        for attempt in range(1, ATTEMPTS + 1):
            if not self._alive():
                return  # past the lease deadline: commit nothing
            try:
                job()
                return
            except EmsError as exc:
                log.warning("log or ack batch not written (attempt %d): %s", attempt, exc)
            except Exception:  # the writer must outlive any one batch
                log.exception("log or ack batch not written (attempt %d)", attempt)
            time.sleep(0.1 * 2**attempt)
        log.error("log or ack batch dropped after %d attempts", ATTEMPTS)
