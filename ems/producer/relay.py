"""The relay: moves committed outbox rows into the stream, with offsets.

A transactional send leaves its messages in the outbox (ems.store.outbox) inside the
caller's transaction. Once that commits, a relay takes the topic's committed rows, oldest
first, allocates their offsets as any send does, inserts them and deletes them from the
outbox in one transaction of its own. A relay whose insert meets a taken offset (Redis lost
its counters) rolls back, re-seeds and tries again, like a send; a move whose reply was lost
is judged by the outbox itself (rows gone: it committed). Every producer that sent
transactionally runs one in a thread (RelayLoop), woken after its callers' commits where the
caller's library says when (SQLAlchemy sessions), and on a short interval otherwise; the
scheduler runs one too, for rows whose producer died between the caller's commit and the
move.

A scheduled send's rows (delay= or deliver_at=) carry the time from which they may move.
A pass moves a topic's undelayed rows first (send order), then its due scheduled rows (in
the order of their times, then of their sends), each given offsets at the end of their
partitions at that move; rows not yet due are neither read nor moved. A relay in a thread
wakes for the soonest scheduled time besides its interval.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Protocol

from ems.exceptions import EmsError
from ems.ports import Outbox
from ems.producer.planning import CONFLICT_ATTEMPTS, offset_conflict, place_rows, routed_again
from ems.service import Service
from ems.store.errors import BelowLowWatermark, DuplicateKey
from ems.types import TopicInfo

log = logging.getLogger(__name__)

#: Most rows one move takes (one allocation per partition, one multi-row INSERT).
MOVE_MAX = 1_000


class Placer(Protocol):
    """What a relay borrows from its producer: offsets, and the wake-up after a move."""

    def allocate_for(self, info: TopicInfo, counts: Mapping[int, int]) -> dict[int, int] | None:
        """First offset of a fresh range per partition; None: Redis went back."""

    def reseed_for(self, info: TopicInfo) -> None: ...

    def refreshed_for(self, info: TopicInfo) -> TopicInfo:
        """The topic as stored now (its partition count may have grown)."""

    def moved(self, info: TopicInfo, last: Mapping[int, int], count: int) -> None:
        """`count` rows were stored, up to the `last` offset of each partition: wake the
        topic's consumers, count them published."""


class _WentBack(Exception):
    """A counter handed out a range below one it handed out before."""


class Relay:
    """One pass moves every topic's committed outbox rows (run_once)."""

    def __init__(
        self,
        outbox: Outbox,
        placer: Placer,
        move_max: int = MOVE_MAX,
    ) -> None:
        self._outbox = outbox
        self._placer = placer
        self._move_max = move_max
        #: Seconds from the last pass's start until the soonest scheduled row comes due
        #: (None: none waits for later).
        self.next_due: float | None = None

    def run_once(self) -> int:
        """Move what waits now, every topic; the number of messages moved."""
        moved = scheduled_moved = 0
        waiting = self._outbox.waiting()
        for info in waiting.topics:
            for scheduled in (False, True):
                while True:
                    count = self.move(info, scheduled=scheduled)
                    moved += count
                    scheduled_moved += count if scheduled else 0
                    if count < self._move_max:
                        break
        self.next_due = next_due(waiting.next_due, scheduled_moved)
        return moved

    def move(self, info: TopicInfo, *, scheduled: bool = False) -> int:
        """Move up to move_max of the topic's oldest committed undelayed rows (with
        scheduled: of its due scheduled rows); 0 when none wait or another relay is
        moving them."""
        conflicts, reseed = 0, False
        while True:
            if reseed:
                self._placer.reseed_for(info)
            try:
                return self._move(info, scheduled)
            except (DuplicateKey, BelowLowWatermark, _WentBack):
                fresh = self._placer.refreshed_for(info)
                if fresh.partitions != info.partitions:
                    info = fresh  # partitions were added: the rows go by the new count
                    continue
                conflicts += 1
                if conflicts == CONFLICT_ATTEMPTS:
                    raise offset_conflict(info, self._move_max) from None
                reseed = True

    def _move(self, info: TopicInfo, scheduled: bool) -> int:
        with self._outbox.relay(info.id, self._move_max, scheduled=scheduled) as batch:
            if batch is None or not batch.rows:
                return 0
            # Routed again by the count now: partitions may have been added since the
            # caller's transaction wrote them, and its key's messages that follow go by
            # the new count; the insert is fenced with it (see ems.partitions).
            partitions = routed_again([(r.partition, r.key) for r in batch.rows], info.partitions)
            counts: dict[int, int] = {}
            for p in partitions:
                counts[p] = counts.get(p, 0) + 1
            firsts = self._placer.allocate_for(info, counts)
            if firsts is None:
                raise _WentBack()
            places, last = place_rows([r.id for r in batch.rows], partitions, firsts)
            batch.move(places, partitions=info.partitions)
        self._placer.moved(info, last, len(places))
        return len(places)


def next_due(found: float | None, scheduled_moved: int) -> float | None:
    """When the next pass is owed to a scheduled row: as found (seconds), but with rows due
    at the pass (0) the time of those after them is not known yet: at once if this pass
    moved some, else (another relay holds the topic) at the usual interval, not in a
    loop."""
    if found == 0.0 and not scheduled_moved:
        return None
    return found


class RelayLoop:
    """A relay in a daemon thread: a pass after each poke, every `interval` seconds, and
    when the soonest scheduled row comes due (so a scheduled message is moved within
    milliseconds of its time, whatever the interval). A poke that finds nothing (the
    caller's commit was still on its way) is followed by a few quick passes, so a commit
    is relayed within milliseconds, not an interval."""

    #: Seconds between the passes that follow a poke which found nothing.
    QUICK = (0.002, 0.005, 0.01, 0.02, 0.05)
    #: Seconds past a scheduled row's time the relay wakes to move it.
    LATE = 0.001

    def __init__(self, relay: Relay, interval: float) -> None:
        self._relay = relay
        self._interval = interval
        self._poked = threading.Event()
        self._service = Service("ems-relay", self._run, wake=self._poked.set)
        self._stopped = self._service.stopping
        self._service.start()

    def poke(self) -> None:
        self._poked.set()

    def stop(self, timeout: float = 5.0) -> None:
        self._service.stop_and_join(timeout)

    def _run(self) -> None:
        quick: list[float] = []
        started = time.monotonic()
        while not self._stopped.is_set():
            poked = self._poked.wait(quick.pop(0) if quick else self._pause(started))
            self._poked.clear()
            if self._stopped.is_set():
                return
            started = time.monotonic()
            moved = self._pass()
            if poked and moved == 0:
                quick = list(self.QUICK)
            elif moved:
                quick = []

    def _pause(self, started: float) -> float:
        """The interval, or less when a scheduled row comes due sooner: a little after
        its time (the server's clock decides; a pass just before would find nothing),
        counted from the start of the pass that saw it."""
        due = self._relay.next_due
        if due is None:
            return self._interval
        return min(self._interval, max(started + due + self.LATE - time.monotonic(), 0.0))

    def _pass(self) -> int:
        try:
            return self._relay.run_once()
        except EmsError as exc:  # a server away: the next pass tries again
            log.warning("the outbox relay could not move messages (%s); trying again", exc)
            return 0
