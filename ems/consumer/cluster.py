"""The cluster consume loop's I/O: follow ownership, fetch, log, settle, hand off."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from operator import attrgetter
from typing import TYPE_CHECKING

from ems.consumer.ack_writer import AckWriter
from ems.consumer.barrier import Barrier
from ems.consumer.errors import LeaseLost
from ems.consumer.reads import read_together, within
from ems.consumer.state import (
    Acks,
    Outcome,
    PartitionState,
    Policy,
    Settled,
    expired,
    moved_cursors,
    settle,
    settle_acks,
)
from ems.exceptions import LockConflict, UnknownGroup
from ems.offsets.budget import mean_size, rows_to_scan
from ems.store.errors import StaleGeneration
from ems.types import (
    IN_FLIGHT_SPAN,
    Delivery,
    DeliveryBatch,
    GroupInfo,
    Settlement,
    TopicInfo,
)

if TYPE_CHECKING:
    from ems.coordination.membership import Membership
    from ems.metrics import ConsumerMetrics
    from ems.offsets.reader import PartitionReader
    from ems.ports import ConsumeStore, Notifier

log = logging.getLogger(__name__)

#: Seconds between looks at the retry table for due messages.
RETRY_SCAN_EVERY = 1.0
#: Tries of an ack transaction that the server chose as a deadlock victim.
DEADLOCK_ATTEMPTS = 5
#: Deliveries of one partition in flight at most (poll() without ack() stops there).
MAX_IN_FLIGHT = 5000
#: Seconds before a partition an ordered group holds across a partition change is looked
#: at again (and most often the group's cursors are read while it waits).
HOLD_RECHECK = 0.2


def again(d: Delivery, failures: int | None) -> Delivery:
    """The delivery as the attempt after its failures so far (None: none)."""
    return d if failures is None else replace(d, attempt=failures + 1)


_BODY = attrgetter("body")


def body_bytes(deliveries: list[Delivery]) -> int:
    """The bytes a batch's byte budget counts: its bodies'."""
    return sum(map(len, map(_BODY, deliveries)))


class ClusterSession:
    """The partitions this client owns, and the statements that consume them."""

    def __init__(
        self,
        store: ConsumeStore,
        reader: PartitionReader,
        group: GroupInfo,
        topic: TopicInfo,
        membership: Membership,
        publisher: Notifier,
        policy: Policy,
        metrics: ConsumerMetrics,
    ) -> None:
        self.store = store
        self.reader = reader
        self.group = group
        self.topic = topic
        self.membership = membership
        self.publisher = publisher
        self.policy = policy
        self.states: dict[int, PartitionState] = {}
        #: Ordered groups: what holds a key's messages back across partition changes.
        self.barrier = Barrier(store.topics.partition_changes(topic.id)) if policy.ordered else None
        #: The group's committed cursors the barrier last read, and when (monotonic).
        self._cursors: Mapping[int, int] = {}
        self._cursors_at = -HOLD_RECHECK
        self._version = -1
        #: The client id the states were taken under (the owned rows name it).
        self._holder: str | None = None
        self._next_retry_scan = 0.0
        #: Mean body size of the retries claimed last (see rows_to_scan).
        self._retry_size: int | None = None
        self._turn = 0
        self._stale = threading.Event()
        self.metrics = metrics
        self.writer = AckWriter(
            self._log_started, self.write, membership.lease_valid, self._not_written
        )
        #: Partitions with a settlement or start rows that were never written: their
        #: state ran ahead of the database, so it is dropped and read again from the
        #: stored cursor (the messages come again rather than be skipped).
        self._unwritten: set[int] = set()
        self._unwritten_lock = threading.Lock()

    # -- ownership ---------------------------------------------------------------------

    def sync(self) -> None:
        """Follow the membership: take granted partitions from their committed cursor,
        drop lost ones without committing, release drained revoked ones."""
        if not self.membership.lease_valid():
            if self.states:
                log.warning("lease deadline passed: dropping %d partitions", len(self.states))
            self.states.clear()
            # Once a renewal makes the lease valid again, the partitions still owned are
            # taken anew from their cursors, even if the ownership did not change.
            self._version = -1
            return
        self._reload_unwritten()
        version, owned = self.membership.ownership()
        if version != self._version:
            self._version = version
            if self.barrier is not None:
                # An offset reset (which revokes everything) may have moved cursors back.
                self.barrier.reset()
                self._cursors_at = -HOLD_RECHECK
            if set(owned) != set(self.states):
                self.metrics.rebalances.inc()
            holder = next((row.client_id for row in owned.values()), self._holder)
            if holder != self._holder:
                # The membership joined again under a new client id while this loop did
                # not look (blocked in a handler or a statement throughout the lapse):
                # others may have owned and committed these partitions meanwhile.
                self.states.clear()
                self._holder = holder
            for p in list(self.states):
                if p not in owned:
                    del self.states[p]
                else:
                    # Re-granted to this same client id (a revocation the leader took
                    # back): ownership never lapsed, so the state carries on.
                    self.states[p].generation = owned[p].generation
            new = [p for p in owned if p not in self.states]
            cursors = self.store.groups.offsets(self.group.id) if new else {}
            missing = sorted(p for p in new if p not in cursors)
            if missing:
                # Every granted partition has its cursor row from the same transaction:
                # rows gone means the group was deleted under this member.
                raise UnknownGroup(
                    f"group {self.group.name!r} has no cursor for partitions {missing}: it "
                    "was deleted while this member ran"
                )
            for p in new:
                at = cursors[p]
                self.states[p] = PartitionState(
                    partition=p, generation=owned[p].generation, position=at, committed=at
                )
            for p, row in owned.items():
                self.states[p].revoking = row.state == "revoking"
        self._release_drained()

    def _not_written(self, partitions: set[int]) -> None:
        """Called from the ack writer's thread or the caller's."""
        with self._unwritten_lock:
            self._unwritten |= partitions

    def read_again(self, partitions: set[int]) -> None:
        """Drop these partitions' state before the next fetch, and take them anew from
        their stored cursors: a batch of theirs was handed out and never settled."""
        self._not_written(partitions)

    def _reload_unwritten(self) -> set[int]:
        """Drop the state of the partitions whose writes were not made (read again from
        their stored cursors at the next sync); returns them."""
        if not self._unwritten:
            return set()
        # Settlements queued before the drop are made from the same untrusted state:
        # the writer strips these partitions from them, and they all go first.
        self.writer.flush()
        with self._unwritten_lock:
            dropped, self._unwritten = self._unwritten, set()
        log.warning("writes of partitions %s were not made: reading them again", sorted(dropped))
        for p in dropped:
            self.states.pop(p, None)
        self._version = -1  # taken anew from the stored cursors below
        return dropped

    def _release_drained(self) -> None:
        drained = {p: s for p, s in self.states.items() if s.revoking and not s.in_flight()}
        if not drained:
            return
        self.writer.flush()  # the release commits the cursor: pending acks go first
        with self._unwritten_lock:
            # A write of theirs was just dropped: read them again first (next sync).
            drained = {p: s for p, s in drained.items() if p not in self._unwritten}
        if not drained:
            return
        cursors = {p: (s.cursor(), s.generation) for p, s in drained.items()}
        try:
            self.store.groups.commit(self.group.id, self.membership.client_id, cursors)
        except StaleGeneration:
            # Reassigned already, or refused for a moment (the server saw the lease
            # lapse): the states stay, and the next sync reads the ownership again. It
            # drops what is no longer ours and tries to release the rest once more; to
            # forget them here would leave a partition still ours revoking for good.
            log.info("revoked partitions %s: release refused, looking again", sorted(drained))
            self._version = -1
            return
        self.store.assignments.release(
            self.group.id,
            self.membership.client_id,
            {p: s.generation for p, s in drained.items()},
        )
        for p in drained:
            del self.states[p]
        self.publisher.group(self.group.id)

    def interest(self) -> frozenset[int] | None:
        # A member wakes for the partitions it holds; one it is granted is read from its
        # cursor when taken, whatever wake-ups came before.
        return frozenset(self.states)

    def mark(self, news: Mapping[int, int] | None = None) -> None:
        """Partitions worth reading now: those with news ({partition: last offset
        announced}) not read yet, or all when None."""
        for p, s in self.states.items():
            if news is None or (p in news and s.position <= news[p]):
                s.dirty = True
            if news is not None and p in news:
                s.announced = max(s.announced, news[p])

    # -- fetch -------------------------------------------------------------------------

    def fetch(self, limit: int, max_bytes: int) -> list[Delivery]:
        # A partition whose last write failed is dropped before it is read further: every
        # window below starts at a cursor that is written.
        self._reload_unwritten()
        batch = self._read_batch(limit, max_bytes)
        if not batch:
            # Nothing to hand out, so nothing to wait for: the poll looks again as news
            # comes, while the last acks still commit.
            return batch
        # The batch is read while the acks of the last one commit on the writer (two round
        # trips at once); it is handed out only once they are written, so a crash
        # redelivers at most the batch in hand. A partition whose write failed meanwhile
        # is dropped with what was just read of it, and read again from its stored cursor.
        self.writer.wait_written(0)
        dropped = self._reload_unwritten()
        if dropped:
            batch = [d for d in batch if d.partition not in dropped]
        if batch:
            # Logged as started on the writer, while the handler already works on it.
            self.writer.started(batch)
        return batch

    def _read_batch(self, limit: int, max_bytes: int) -> list[Delivery]:
        now = time.monotonic()
        batch = self._due_retries(limit, max_bytes, now)
        left = max_bytes - body_bytes(batch)
        order = sorted(self.states)
        self._turn += 1
        turn = [self.states[order[(self._turn + i) % len(order)]] for i in range(len(order))]
        ready = [s for s in turn if s.dirty and not s.revoking and s.blocked_until <= now]
        together = read_together(ready, limit - len(batch))
        if together:
            # Partitions whose wake-ups told what they hold: one statement for all of them.
            batch += self._read_many(together, limit - len(batch), left, not batch, now)
            left = max_bytes - body_bytes(batch)
            ready = [s for s in ready if s.partition not in together]
        for state in ready:
            if len(batch) >= limit or left <= 0:
                break
            read = self._read(state, limit - len(batch), left, not batch, now)
            left -= body_bytes(read)
            batch.extend(read)
        return batch

    def _read_many(
        self, scans: Mapping[int, int], room: int, max_bytes: int, first: bool, now: float
    ) -> list[Delivery]:
        """One read of several partitions ({partition: rows to scan}), then cut to the
        batch's bounds in their turn: `room` messages and max_bytes of bodies, the first
        message whatever its size when nothing else is in the batch yet (first)."""
        reads = []
        for p, scan in scans.items():
            rows = min(scan, self._room(self.states[p]))
            if rows > 0:
                reads.append((p, self.states[p].position, rows))
        if not reads:
            return []
        found = self.reader.read_deliveries_many(self.topic, reads, max_bytes, at_least_one=first)
        out: list[Delivery] = []
        left = max_bytes
        for p, _, _ in reads:
            read = within(found[p], room - len(out), left, first and not out)
            taken = self._took(self.states[p], read, now)
            left -= body_bytes(taken)
            out += taken
        return out

    def _room(self, state: PartitionState) -> int:
        # Never past IN_FLIGHT_SPAN offsets from the committed cursor (reads are gap-free,
        # so `room` messages span `room` offsets): a partition whose oldest delivery is held
        # waits there until it is settled or its ack timeout expires it.
        return min(
            MAX_IN_FLIGHT - state.in_flight(),
            state.committed + IN_FLIGHT_SPAN - state.position,
        )

    def _read(
        self, state: PartitionState, room: int, max_bytes: int, first: bool, now: float
    ) -> list[Delivery]:
        """A read of up to `room` messages and max_bytes of bodies; the first message
        whatever its size when nothing else is in the batch yet (first)."""
        room = min(room, self._room(state))
        if room <= 0:
            return []
        read = self.reader.read_deliveries(
            self.topic, state.partition, state.position, room, max_bytes, at_least_one=first
        )
        return self._took(state, read, now)

    def _took(self, state: PartitionState, read: DeliveryBatch, now: float) -> list[Delivery]:
        """A partition's read, taken into its state: what of it is handed out."""
        # A read cut by its bounds leaves the partition to read again at once; one that
        # reached the end (or a young hole) waits for news.
        state.dirty = read.more
        state.position = read.next_offset
        out = read.deliveries
        if read.partitions is not None and read.partitions > self.topic.partitions:
            self._partitions_added()
        if self.barrier is not None and out:
            held = self.barrier.held(out, self._group_cursors)
            if held is not None:
                # Written after a partition change, while its key's messages from before
                # are not all settled yet: read again from here in a while.
                state.position = out[held].offset
                state.dirty = True
                state.blocked_until = now + HOLD_RECHECK
                out = out[:held]
        if state.failures:  # ordered: the message the partition waits on comes again
            out = [again(d, state.failures.get(d.offset)) for d in out]
        state.outstanding.add(out, now)
        return out

    def _partitions_added(self) -> None:
        """A read saw the topic with more partitions than known: take the topic and its
        changes as they are now, before any message of the read is handed out (the read
        saw the change, so these do too)."""
        self.topic = self.store.topics.get(self.topic.name)
        if self.barrier is not None:
            self.barrier.reset(self.store.topics.partition_changes(self.topic.id))
        log.info("topic %s now has %d partitions", self.topic.name, self.topic.partitions)

    def _group_cursors(self) -> Mapping[int, int]:
        """The group's committed cursors, read at most every HOLD_RECHECK seconds, and
        this member's own settled positions, which may run ahead of the stored ones."""
        now = time.monotonic()
        if now >= self._cursors_at + HOLD_RECHECK:
            self._cursors = self.store.groups.offsets(self.group.id)
            self._cursors_at = now
        found = dict(self._cursors)
        for p, s in self.states.items():
            found[p] = max(found.get(p, 0), s.committed)
        return found

    def _due_retries(self, limit: int, max_bytes: int, now: float) -> list[Delivery]:
        if now < self._next_retry_scan:
            return []
        live = [p for p, s in self.states.items() if not s.revoking]
        rows = rows_to_scan(self._retry_size, limit, max_bytes)
        due = self.store.consumption.claim_due(
            self.group.id, self.topic.name, live, rows, self.policy.ack_timeout, max_bytes
        )
        size = mean_size([d.body for d in due])
        if size is not None:
            self._retry_size = size
        # A scan that found some may have left more behind (the batch's count or byte
        # bound): the next fetch looks again; one that found none rests a while.
        self._next_retry_scan = now if due else now + RETRY_SCAN_EVERY
        fresh = []
        for d in due:
            state = self.states[d.partition]
            if d.offset not in state.redelivered:
                state.redelivered.add([d], now)
                fresh.append(d)
        return fresh

    # -- settle ------------------------------------------------------------------------

    def expire(self) -> list[Outcome]:
        return expired(self.states.values(), time.monotonic(), self.policy.ack_timeout)

    def settle(self, outcomes: Settled, *, wait: bool = True) -> None:
        """Apply an ack batch and write it: at once (wait) or on the ack writer, which
        commits while the next batch is fetched. Nothing is written once the lease
        deadline has passed; a partition reassigned meanwhile is dropped from the write."""
        if isinstance(outcomes, Acks):
            settlement = settle_acks(outcomes.deliveries, self.states)
        else:
            settlement = settle(outcomes, self.states, self.policy, time.monotonic())
        if self._stale.is_set():
            self._stale.clear()
            self._version = -1
        if not settlement:
            return
        if not self.membership.lease_valid():
            self.states.clear()
            return
        for p, (offset, _) in settlement.cursors.items():
            self.states[p].committed = offset
        self.metrics.settled(settlement)
        if wait:
            self.writer.flush()
            try:
                self.write(settlement)
            except BaseException:
                self._not_written(settlement.partitions())
                raise
        else:
            self.writer.settled(settlement)

    def settle_within(
        self, outcomes: list[Outcome], commit: Callable[[Settlement, dict[int, int]], None]
    ) -> None:
        """Exactly once: apply the batch's outcomes and have `commit` write the
        settlement in the caller's transaction and commit it. The settlement's cursors
        cover every partition the batch touched, moved or not: each is a fence (owned at
        its generation, under a live lease, and still at the cursor this batch was read
        from: {partition: stored cursor}, commit's second argument) that fails the commit
        of a member that lost it, or of a batch whose earlier commit landed though its
        reply was lost. Whatever fails, the partitions are read again from their stored
        cursors, which say whether the transaction committed."""
        self.writer.flush()  # the batch's start rows, which the settlement marks done
        touched = {o.delivery.partition for o in outcomes}
        settlement = settle(outcomes, self.states, self.policy, time.monotonic())
        touched |= settlement.partitions()
        try:
            if not self.membership.lease_valid():
                self.states.clear()
                raise LeaseLost("the lease deadline passed; the batch was not settled")
            with self._unwritten_lock:
                lost = touched & self._unwritten
            if lost:
                raise LeaseLost(f"the start rows of partitions {sorted(lost)} were not written")
            fenced = {
                p: (self.states[p].cursor(), self.states[p].generation)
                for p in touched
                if p in self.states
            }
            expected = {p: self.states[p].committed for p in fenced}
            commit(replace(settlement, cursors=fenced), expected)
        except StaleGeneration:
            self._stale.set()
            self.membership.poke()
            self._not_written(touched)
            raise
        except BaseException:
            self._not_written(touched)
            raise
        for p, (offset, _) in fenced.items():
            self.states[p].committed = offset
        self.metrics.settled(settlement)

    def settles_elsewhere(self) -> None:
        """Its settlements commit elsewhere (exactly once, in the callers' transactions):
        the writer writes start rows at once, as nothing will come to join them."""
        self.writer.hold = 0.0

    def _log_started(self, deliveries: list[Delivery]) -> None:
        client = self.membership.client_id
        self.store.consumption.start(self.group.id, self.topic.id, client, deliveries)

    def write(self, settlement: Settlement, started: Sequence[Delivery] = ()) -> None:
        """Runs on the caller's thread or the ack writer's; touches no partition state.
        The start rows of `started` go first, in the same transaction. Partitions whose
        earlier writes were dropped are left out of the settlement: their state is read
        again from the database before anything of theirs is written. Past the lease
        deadline it writes nothing and raises LeaseLost, as a failed write: the caller
        must not count it as written."""
        if not self.membership.lease_valid():
            raise LeaseLost("the lease deadline passed; the settlement was not written")
        with self._unwritten_lock:
            untrusted = settlement.partitions() & self._unwritten if self._unwritten else None
        if untrusted:
            settlement = settlement.only(settlement.partitions() - untrusted)
            if not settlement:
                if started:
                    self._log_started(list(started))
                return
        try:
            self._settle(settlement, started)
        except StaleGeneration:
            if started:  # rolled back with the settlement: on their own
                self._log_started(list(started))
            # Keep what this client still owns at the generation it settled under.
            self._stale.set()
            self.membership.poke()
            me = self.membership.client_id
            owned = {
                r.partition: r.generation
                for r in self.store.assignments.rows(self.group.id)
                if r.client_id == me and r.state != "released"
            }
            kept = {p for p, g in owned.items() if settlement.cursors.get(p, (0, g))[1] == g}
            # The rest is not written (its retry and dead-letter rows neither); where this
            # client holds such a partition again, at a newer generation, its state must
            # not carry on past those messages.
            self._not_written(settlement.partitions() - kept)
            if kept:
                self._settle(settlement.only(kept))

    def lag(self, known_high: Mapping[int, int]) -> dict[int, int]:
        """Called from the metrics server's thread: the states are copied in one step
        (atomic under the GIL) while the consume loop may change them."""
        states = list(self.states.items())
        return {p: max(known_high.get(p, 0), s.position) - s.committed for p, s in states}

    def close(self) -> None:
        """On leaving: write what the ack writer holds, stop it, then commit the cursors
        that moved since their last commit, while the lease still holds. A cursor stops
        before any delivery that was polled and never acked."""
        self.writer.flush()
        self.writer.close()
        with self._unwritten_lock:
            # Their state ran ahead of what was written: the stored cursor stays.
            cursors = {
                p: c for p, c in moved_cursors(self.states).items() if p not in self._unwritten
            }
        if not cursors or not self.membership.lease_valid():
            return
        try:
            self.store.groups.commit(self.group.id, self.membership.client_id, cursors)
        except StaleGeneration as exc:
            log.info("cursor commit on leave skipped: %s", exc)

    def _settle(self, settlement: Settlement, started: Sequence[Delivery] = ()) -> None:
        """A deadlock rolled the transaction back, so the same writes are tried again."""
        for attempt in range(1, DEADLOCK_ATTEMPTS + 1):
            try:
                self.store.consumption.settle(
                    self.group.id, self.topic.id, self.membership.client_id, settlement, started
                )
                return
            except LockConflict:
                if attempt == DEADLOCK_ATTEMPTS:
                    raise
                time.sleep(0.01 * attempt)
