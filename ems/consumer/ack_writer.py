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

A small batch (at most INLINE_MAX messages) fetched while the writer is idle is not
handed over at all: its start rows are held where the writer can see them, and its
settlement, when it comes within HOLD, is written with them on the settling thread (one
transaction, and no handoff to and from the writer thread: at a few messages per fetch
each handoff cost more CPU than the write's own statements). A write there that fails is
handed to the writer, which tries again as it does every write. Start rows held past HOLD
are taken and written by the writer, which looks for them every HOLD by itself while
holds keep coming (for LINGER after the last): in a stream nothing wakes it per batch.
A large batch goes through the writer, whose commit then overlaps the next fetch.

`wait_written(0)` before each new batch bounds what a crash can cost to the batch in
hand, never a backlog of settlements a slow database let pile up.
"""

from __future__ import annotations

import logging
import math
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
#: Batches of at most this many messages are written on the settling thread when the
#: writer is idle (see the module's docstring).
INLINE_MAX = 64
#: Seconds after start rows were last held that the writer still looks for held rows
#: every HOLD by itself; only a writer idle longer waits with no deadline, and must be
#: woken by the next hold. In a stream the consume loop thus never wakes it.
LINGER = 1.0

Job = tuple[list[Delivery], None] | tuple[None, Settlement]
#: Handed over by flush(): ends a hold.
_FLUSH: Job = ([], None)
#: Handed over to wake a writer waiting with no deadline: start rows are held.
_HELD: Job = ([], None)


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
        #: Start rows of a small batch not handed over, and when they were held: the
        #: settling thread writes them with its settlement, or the writer after HOLD.
        self._held: tuple[list[Delivery], float] | None = None
        #: Whether the writer waits with no deadline (a hold must then wake it).
        self._untimed = False
        #: When start rows were last held (the writer lingers LINGER after it).
        self._last_hold = -math.inf
        #: Jobs handed over (or held start rows taken by the writer) not yet written.
        self._jobs = 0
        #: One lock for the counts and the held rows; wait_written() and flush() wait
        #: on it.
        self._lock = threading.Condition()

    def started(self, deliveries: list[Delivery]) -> None:
        if self.hold and len(deliveries) <= INLINE_MAX:
            with self._lock:
                held = self._held is None and self._jobs == 0
                if held:
                    self._last_hold = now = time.monotonic()
                    self._held = (deliveries, now)
                    wake, self._untimed = self._untimed, False
            if held:
                self._running()
                if wake:
                    self._queue.put(_HELD)
                return
        self._put((deliveries, None))

    def settled(self, settlement: Settlement) -> None:
        with self._lock:
            held, idle = self._held, self._jobs == 0
            self._held = None
        if held is not None and idle:
            try:
                self._settle(settlement, held[0])  # on this thread: nothing to hand over
                return
            except Exception as exc:
                log.warning("ack batch not written on the consume loop (%s): handed over", exc)
            except BaseException:
                self._hand_over(held[0], settlement)
                raise
        self._hand_over(None if held is None else held[0], settlement)

    def wait_written(self, at_most: int) -> None:
        """Wait until at most `at_most` settlements handed over are still unwritten."""
        with self._lock:
            self._lock.wait_for(lambda: self._unwritten <= at_most)

    def flush(self) -> None:
        """Wait until everything handed over, and start rows held, is written (or given
        up); a hold ends at once."""
        self._hand_over_held()
        if self._service is not None:
            self._queue.put(_FLUSH)  # ends the writer's hold of queued start rows
            with self._lock:
                self._lock.wait_for(lambda: self._jobs == 0)

    def close(self) -> None:
        """Write what is queued, then end the thread (a later write starts another)."""
        self._hand_over_held()
        if self._service is not None:
            self._service.stop_and_join()
            self._service = None

    def _hand_over(self, held: list[Delivery] | None, settlement: Settlement) -> None:
        if held is not None:
            self._put((held, None))
        with self._lock:
            self._unwritten += 1
        self._put((None, settlement))

    def _hand_over_held(self) -> None:
        """Start rows held go to the writer now."""
        with self._lock:
            held, self._held = self._held, None
        if held is not None:
            self._put((held[0], None))

    def _put(self, job: Job) -> None:
        self._running()
        with self._lock:
            self._jobs += 1
        self._queue.put(job)

    def _running(self) -> None:
        if self._service is None:
            # Stopping is the end of the queue: what was queued before it is written.
            stop: Callable[[], None] = partial(self._queue.put, None)
            self._service = Service("ems-acks", self._run, wake=stop)
            self._service.start()

    def _next(self) -> tuple[Job | None, bool]:
        """The next job, and whether it is start rows held past the hold (taken here)."""
        while True:
            with self._lock:
                now, timeout = time.monotonic(), None
                if self._held is not None:
                    timeout = self._held[1] + self.hold - now
                    if timeout <= 0:
                        held, self._held = self._held[0], None
                        self._jobs += 1
                        return (held, None), True
                elif self.hold and now - self._last_hold < LINGER:
                    timeout = self.hold  # look again: rows held meanwhile wake nobody
                self._untimed = timeout is None
            try:
                job = self._queue.get(timeout=timeout)
            except queue.Empty:
                continue
            finally:
                with self._lock:
                    self._untimed = False
            if job is not _HELD:
                return job, False

    def _take(self) -> list[Job | None]:
        """The jobs waiting, at least one; start rows alone wait up to `hold` for more
        (unless they were held that long already)."""
        first, waited = self._next()
        taken = [first]
        self._drain(taken)
        if (
            not waited
            and self.hold
            and all(job is not None and job is not _FLUSH and job[1] is None for job in taken)
        ):
            deadline = time.monotonic() + self.hold
            while True:
                try:
                    job = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    return taken
                if job is not _HELD:
                    taken.append(job)
                    break
            self._drain(taken)
        return taken

    def _drain(self, taken: list[Job | None]) -> None:
        while True:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                return
            if job is not _HELD:
                taken.append(job)

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
                with self._lock:
                    self._unwritten -= sum(job is not None and job[1] is not None for job in taken)
                    self._jobs -= sum(job is not None and job is not _FLUSH for job in taken)
                    self._lock.notify_all()
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
