"""A producer's transactional sends: messages written into the outbox inside the caller's
transaction, and the relay that moves them into their topics once it commits.

The caller's transaction holds no offset: offsets are taken by the relay, after the commit,
as for any send. So a transaction left open (a slow request, a debugger, a client that was
killed and whose server has not noticed) delays no one's messages but its own, and readers
never wait on a hole it made. See docs/transactions.md.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from contextlib import suppress

from ems.exceptions import EmsError, InvalidSchedule, InvalidTransaction
from ems.ports import Outbox, OutboxWrites
from ems.producer.relay import Placer, Relay, RelayLoop
from ems.types import Prepared, RecordMetadata, Schedule, TopicInfo

#: The offset a transactional send reports: not known until the relay moves the message
#: (as Kafka reports -1 for an offset it was not told).
UNKNOWN_OFFSET = -1


class Transactions:
    """The outbox writes of one producer and its relay, started at the first write."""

    def __init__(self, outbox: Outbox | None, placer: Placer, interval: float) -> None:
        self._outbox = outbox
        self._placer = placer
        self._interval = interval
        self._loop: RelayLoop | None = None
        self._relay: Relay | None = None
        self._lock = threading.Lock()

    def write(
        self,
        tx: object,
        info: TopicInfo,
        prepared: Sequence[Prepared],
        schedule: Schedule | None = None,
    ) -> Sequence[RecordMetadata]:
        """Write the messages in tx (scheduled, with a schedule); their partitions,
        offsets unknown until moved."""
        outbox = self._checked()
        loop = self._started(outbox)
        if prepared:
            outbox.writer.write(tx, info.id, prepared, loop.poke, schedule)
        return [RecordMetadata(info.name, p[0], UNKNOWN_OFFSET) for p in prepared]

    def schedule(
        self, info: TopicInfo, prepared: Sequence[Prepared], schedule: Schedule
    ) -> Sequence[RecordMetadata]:
        """Write a scheduled send's messages (committed when this returns) and wake the
        relay, which then waits for their time; offsets unknown until moved."""
        if self._outbox is None:
            raise InvalidSchedule("this producer's backend takes no scheduled sends")
        outbox = self._outbox
        loop = self._started(outbox)
        if prepared:
            outbox.schedule(info.id, prepared, schedule)
            loop.poke()
        return [RecordMetadata(info.name, p[0], UNKNOWN_OFFSET) for p in prepared]

    def writer(self) -> tuple[OutboxWrites, Callable[[], None]]:
        """The outbox's writer and what wakes the relay after a commit (ems.aio's
        producer writes through them, awaited, and relays through this one)."""
        outbox = self._checked()
        return outbox.writer, self._started(outbox).poke

    def relay(self) -> int:
        """Move what committed transactions left in the outbox, now; how many moved."""
        return self._relay_of(self._checked()).run_once()

    def close(self) -> None:
        """Stop the relay after a last pass, so that what this process's callers
        committed is not left for another relay."""
        loop, self._loop = self._loop, None
        if loop is None or self._relay is None:
            return
        loop.stop()
        # What fails here stays in the outbox for the scheduler's relay or the next one.
        with suppress(EmsError):
            self._relay.run_once()

    def _checked(self) -> Outbox:
        if self._outbox is None:
            raise InvalidTransaction("this producer's backend takes no transactional sends")
        return self._outbox

    def _relay_of(self, outbox: Outbox) -> Relay:
        with self._lock:
            if self._relay is None:
                self._relay = Relay(outbox, self._placer)
            return self._relay

    def _started(self, outbox: Outbox) -> RelayLoop:
        loop = self._loop
        if loop is None:
            relay = self._relay_of(outbox)
            with self._lock:
                if self._loop is None:
                    self._loop = RelayLoop(relay, self._interval)
                loop = self._loop
        return loop
