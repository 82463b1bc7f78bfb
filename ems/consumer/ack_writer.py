"""Writes the consumption log and ack batches on one background thread, in order.

The consume loop hands over a fetched batch's start rows and, later, its settlement, and
goes on fetching and handling while they commit: their log flushes are no longer on the
path of every message. Whatever piled up while the writer was busy is written together
(group commit): one transaction for all start rows and the merged settlements, so a busy
writer catches up instead of queueing. Start rows handed over alone wait up to HOLD for
the settlement of their batch: a batch handled within it costs one commit, not two (one
for its start rows, one for its acks); a slower one has its start rows written at HOLD.
Start rows go before the settlements that follow them; a settlement that hands back or
fails messages closes its group, so a later start row of the same offset is never
overtaken. `flush()` waits until everything handed over is written (before a release, a
synchronous ack, or leaving), and ends a hold at once.

`wait_written(0)` before each new batch bounds what a crash can cost to the batch in
hand, never a backlog of settlements a slow database let pile up.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial

from ems.consumer.state import merge
from ems.exceptions import EmsError
from ems.service import Service
from ems.types import Delivery, Settlement

log = logging.getLogger(__name__)

#: Seconds one write is tried again, while the lease holds, against errors that may pass:
#: a server restarting, a cluster still evicting a dead node (Galera's default
#: evs.suspect_timeout is 5 s), a deadlock. With the database down the lease, renewed
#: through the same database, ends the tries first.
PATIENCE = 10.0
#: Longest pause between two tries: a write goes through within it of the database's
#: return.
MAX_DELAY = 1.0
#: Jobs waiting at most; past it the consume loop waits for the writer.
MAX_PENDING = 256
#: Seconds start rows handed over alone wait for their batch's settlement, to be written
#: with it in one transaction. A crash within it leaves no start row for the batch in
#: hand (it is delivered again all the same, from the committed cursor).
HOLD = 0.05

Job = tuple[list[Delivery], None] | tuple[None, Settlement]
#: Handed over by flush(): ends a hold.
_FLUSH: Job = ([], None)


def retry_delay(tries: int) -> float:
    """The pause after the tries-th failed try: 0.2 s, doubling, at most MAX_DELAY."""
    return min(0.1 * 2.0**tries, MAX_DELAY)


def groups(jobs: Sequence[Job]) -> list[tuple[list[Delivery], list[Settlement]]]:
    """Jobs in order, as groups of (start rows, settlements) that may be written as one
    INSERT then one transaction."""
    out: list[tuple[list[Delivery], list[Settlement]]] = [([], [])]
    for starts, settlement in jobs:
        pending_starts, settlements = out[-1]
        if settlement is not None:
            settlements.append(settlement)
        elif any(s.failed or s.logged_only or s.handed_back for s in settlements):
            out.append((list(starts or []), []))
        else:
            pending_starts.extend(starts or [])
    return out


class AckWriter:
    def __init__(
        self,
        start: Callable[[list[Delivery]], None],
        settle: Callable[[Settlement, Sequence[Delivery]], None],
        alive: Callable[[], bool],
        dropped: Callable[[set[int]], None],
    ) -> None:
        self._start = start
        self._settle = settle
        self._alive = alive
        #: Told the partitions of a write given up: their state must not be trusted.
        self._dropped = dropped
        self._queue: queue.Queue[Job | None] = queue.Queue(MAX_PENDING)
        #: Seconds start rows handed over alone wait for a settlement (0: none).
        self.hold = HOLD
        self._service: Service | None = None
        #: Settlements handed over and not yet written (or given up).
        self._unwritten = 0
        self._written = threading.Condition()

    def started(self, deliveries: list[Delivery]) -> None:
        self._put((deliveries, None))

    def settled(self, settlement: Settlement) -> None:
        with self._written:
            self._unwritten += 1
        self._put((None, settlement))

    def wait_written(self, at_most: int) -> None:
        """Wait until at most `at_most` settlements handed over are still unwritten."""
        with self._written:
            self._written.wait_for(lambda: self._unwritten <= at_most)

    def flush(self) -> None:
        if self._service is not None:
            self._queue.put(_FLUSH)
            self._queue.join()

    def close(self) -> None:
        """Write what is queued, then end the thread (a later write starts another)."""
        if self._service is not None:
            self._service.stop_and_join()
            self._service = None

    def _put(self, job: Job) -> None:
        if self._service is None:
            # Stopping is the end of the queue: what was queued before it is written.
            stop: Callable[[], None] = partial(self._queue.put, None)
            self._service = Service("ems-acks", self._run, wake=stop)
            self._service.start()
        self._queue.put(job)

    def _take(self) -> list[Job | None]:
        """The jobs waiting, at least one; start rows alone wait up to `hold` for more."""
        taken = [self._queue.get()]
        self._drain(taken)
        if self.hold and all(
            job is not None and job is not _FLUSH and job[1] is None for job in taken
        ):
            try:
                taken.append(self._queue.get(timeout=self.hold))
            except queue.Empty:
                return taken
            self._drain(taken)
        return taken

    def _drain(self, taken: list[Job | None]) -> None:
        while True:
            try:
                taken.append(self._queue.get_nowait())
            except queue.Empty:
                return

    def _run(self) -> None:
        while True:
            taken = self._take()
            try:
                jobs = [job for job in taken if job is not None and job is not _FLUSH]
                for starts, settlements in groups(jobs):
                    merged = merge(settlements) if settlements else None
                    if merged:
                        if not self._patiently(partial(self._settle, merged, starts)):
                            self._dropped(merged.partitions() | {d.partition for d in starts})
                    elif starts and not self._patiently(partial(self._start, starts)):
                        self._dropped({d.partition for d in starts})
            finally:
                with self._written:
                    self._unwritten -= sum(job is not None and job[1] is not None for job in taken)
                    self._written.notify_all()
                for _ in taken:
                    self._queue.task_done()
            if None in taken:
                return

    def _patiently(self, write: Callable[[], None]) -> bool:
        """Whether the write went through: tried until it does, the lease ends or
        PATIENCE has passed, with pauses of retry_delay between tries."""
        give_up_at = time.monotonic() + PATIENCE
        tries = 0
        while self._alive():  # past the lease deadline: commit nothing
            tries += 1
            try:
                write()
                return True
            except EmsError as exc:
                log.warning("log or ack batch not written (try %d): %s", tries, exc)
            except Exception:  # the writer must outlive any one batch
                log.exception("log or ack batch not written (try %d)", tries)
            pause = retry_delay(tries)
            if time.monotonic() + pause > give_up_at:
                log.error("log or ack batch dropped after %d tries", tries)
                return False
            time.sleep(pause)
        return False
