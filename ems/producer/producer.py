"""The producer: validate, partition, allocate a range, insert in one statement."""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from types import TracebackType
from typing import Self, overload

from ems.backend import Backend, mysql_backend
from ems.config import Settings
from ems.exceptions import EmsError, InvalidInput, RedisUnavailable
from ems.metrics import published
from ems.ports import OffsetAllocator
from ems.producer.deadline import PASSING, Attempts
from ems.producer.group_commit import GroupCommit
from ems.producer.metadata import TopicCache
from ems.producer.partitioner import RoundRobin
from ems.producer.planning import (
    CONFLICT_ATTEMPTS,
    GROUP_MAX,
    MAX_BATCH,
    Outgoing,
    RangeEnds,
    last_offsets,
    metadata,
    offset_conflict,
    partition_counts,
    pin,
    prepare,
    prepare_batch,
    reroute,
    went_back,
)
from ems.producer.scheduling import Delay, schedule_of
from ems.producer.tokens import write_token
from ems.producer.transactional import Transactions
from ems.store.errors import BelowLowWatermark, DuplicateKey
from ems.types import (
    Placed,
    Prepared,
    Record,
    RecordMetadata,
    Schedule,
    TopicInfo,
    first_place,
)
from ems.validation import check_name

__all__ = ["GROUP_MAX", "MAX_BATCH", "Outgoing", "Producer", "went_back"]

log = logging.getLogger(__name__)
_new = tuple.__new__


class Producer:
    """Publishes messages to topics. Thread-safe; share one per process.

    `send` and `send_batch` return only after the rows are committed in MySQL. Calls made
    at the same time from several threads are committed together (one offset range per
    partition, one INSERT), so many threads sending single messages cost about what one
    thread sending batches does.

    A send rides out a lost Redis master, a lost database node and a server that takes
    no writes for up to `settings.send_timeout` seconds (EMS_SEND_TIMEOUT), trying again
    with backoff, and then raises SendTimeout; bad input raises at once.

    It runs on MySQL and Redis (`settings`, or the environment), or on the `backend`
    given (whose settings it then uses): ems.backend.mysql_backend on a Store the caller
    keeps, or ems.testing's in-memory twin.
    """

    def __init__(self, settings: Settings | None = None, *, backend: Backend | None = None) -> None:
        if backend is None:
            backend = mysql_backend(settings or Settings.from_env())
        self.backend = backend
        self.settings = backend.settings
        self.store = backend.store
        self._allocator: OffsetAllocator | None = None
        #: Topics as looked up, each for at most settings.metadata_max_age seconds.
        self._topics = TopicCache(self.settings.metadata_max_age)
        #: Topics looked up by transactional sends, which take no offset: not re-seeded.
        self._looked_up = TopicCache(self.settings.metadata_max_age)
        self._round_robin = RoundRobin()
        #: One per topic and partition count its messages were routed by.
        self._committers: dict[tuple[int, int], GroupCommit[Prepared, RecordMetadata]] = {}
        self._committers_lock = threading.Lock()
        self._wakeups = backend.notifier
        #: Per topic id and partition, the end of the last range its counter handed out.
        self._ends = RangeEnds()
        self._allocating = threading.Lock()
        self._transactions = Transactions(backend.outbox, self, self.settings.relay_interval)

    @property
    def allocator(self) -> OffsetAllocator:
        """Created on first use, so a producer can be built while Redis is down: its
        sends wait for Redis within their bound (see send)."""
        if self._allocator is None:
            self._allocator = self.backend.allocator()
        return self._allocator

    # -- public API ------------------------------------------------------------------

    def send(
        self,
        topic: str,
        body: bytes | str,
        key: str | bytes | None = None,
        headers: Mapping[str, str] | None = None,
        *,
        transaction: object = None,
        delay: Delay | None = None,
        deliver_at: dt.datetime | None = None,
    ) -> RecordMetadata:
        """Publish one message; returns its partition and offset once committed. Raises
        SendTimeout if Redis or the database stayed away for the whole send timeout.

        With a transaction (a SQLAlchemy Session or Connection, or a PyMySQL connection,
        on the server of this ems database), the message is published if and only if that
        transaction commits, and seen by no consumer before: its offset is not known
        yet (-1). See docs/transactions.md.

        With delay (seconds or a timedelta) or deliver_at (an aware datetime), the
        message is stored now and reaches its topic at that time, not before (the
        database's clock), at the end of its partition; its offset is not known yet
        (-1). With a transaction too: stored if and only if it commits. See
        docs/scheduled.md."""
        if transaction is not None or delay is not None or deliver_at is not None:
            record = (Record(body, key, headers),)
            schedule = self._schedule(delay, deliver_at)
            return self._send_later(transaction, topic, record, schedule)[0]
        deadline = time.monotonic() + self.settings.send_timeout
        info = self._topics.get(topic) or self._topic(topic, deadline)
        prepared = prepare(info, body, key, headers, self._round_robin)
        # _committer(info), found with one lookup once made (as every send but the first).
        committer = self._committers.get((info.id, info.partitions)) or self._committer(info)
        (landed,) = committer.submit((prepared,), deadline)
        return landed

    def send_batch(
        self,
        topic: str,
        messages: Iterable[Outgoing],
        *,
        transaction: object = None,
        delay: Delay | None = None,
        deliver_at: dt.datetime | None = None,
    ) -> Sequence[RecordMetadata]:
        """Publish messages with one allocation per partition and one multi-row INSERT.
        All or none are committed. Returns where each landed, in input order: a sequence of
        RecordMetadata (an ems.BatchMetadata, which makes them when read, so a caller that
        does not read them pays for no object per message). A message is an ems.Record,
        a plain tuple of its fields ((body, key, headers), (body, key) or (body,): the
        cheapest to build), a body alone, or a mapping with 'body' and optional 'key' and
        'headers'. With a transaction, a delay or a deliver_at: as send's, all of them in
        their order."""
        schedule = self._schedule(delay, deliver_at)
        if transaction is not None or schedule is not None:
            return self._send_later(transaction, topic, messages, schedule)
        deadline = time.monotonic() + self.settings.send_timeout
        info = self._topics.get(topic) or self._topic(topic, deadline)
        prepared = prepare_batch(info, messages, self._round_robin)
        if not prepared:
            return []
        return self._committer(info).submit(prepared, deadline)

    def send_once(
        self,
        topic: str,
        messages: Iterable[Outgoing],
        *,
        token: int,
        partitions: Sequence[int | None] | None = None,
    ) -> bool:
        """Publish messages as send_batch does (the same checks and errors, all or none),
        named by `token`: a number from 1 to 2**63 - 1 that the caller derives from what
        the write is (the Spark sink: its query, batch, task and row). However often it is
        called with the same token for the same topic, at once or after a crash, the
        messages are stored once: True when this call stored them, False when a write of
        that token had been (nothing is written then). partitions: per message, the
        partition to put it in (None: routed by its key as usual); UnknownPartition for
        one the topic lacks. Never grouped with other callers' sends."""
        if isinstance(token, bool) or not isinstance(token, int) or not 0 < token < 2**63:
            raise InvalidInput(f"a write token is a number from 1 to 2**63 - 1, not {token!r}")
        deadline = time.monotonic() + self.settings.send_timeout
        info = self._topics.get(topic) or self._topic(topic, deadline)
        prepared, pinned = pin(info, prepare_batch(info, messages, self._round_robin), partitions)
        if not prepared:
            return True
        if self.store.messages.written(info.id, token):
            return False
        return self._insert(info, prepared, deadline, named=token, pinned=pinned) is not None

    @property
    def transactions(self) -> Transactions:
        """This producer's transactional side (its outbox writer and relay)."""
        return self._transactions

    def relay(self) -> int:
        """Move the messages of committed transactional sends into their topics now (the
        producer's relay does so by itself); returns how many it moved."""
        return self._transactions.relay()

    def close(self) -> None:
        self._transactions.close()
        self._wakeups.close()
        if self._allocator is not None:
            self._allocator.close()
        if self.backend.owns_store:
            self.store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- steps -----------------------------------------------------------------------

    def _schedule(self, delay: Delay | None, deliver_at: dt.datetime | None) -> Schedule | None:
        if delay is None and deliver_at is None:
            return None
        now = dt.datetime.now(dt.UTC)
        return schedule_of(delay, deliver_at, self.settings.max_delay, now)

    def _send_later(
        self,
        tx: object,
        topic: str,
        messages: Iterable[Outgoing],
        schedule: Schedule | None,
    ) -> Sequence[RecordMetadata]:
        """A transactional or scheduled send: validated and partitioned as any, written
        into the outbox (in tx, if given). No offset is taken, so neither Redis nor the
        counters are needed here."""
        info = self._topics.get(topic) or self._looked_up.get(topic)
        if info is None:
            info = self.store.topics.get(check_name(topic, "topic"))
            self._looked_up.put(topic, info)
        prepared = prepare_batch(info, messages, self._round_robin)
        if tx is None:
            assert schedule is not None
            return self._transactions.schedule(info, prepared, schedule)
        return self._transactions.write(tx, info, prepared, schedule)

    # The relay's Placer: offsets for moved rows, and what a move tells.

    def allocate_for(self, info: TopicInfo, counts: Mapping[int, int]) -> dict[int, int] | None:
        return self._allocate(info, counts)

    def reseed_for(self, info: TopicInfo) -> None:
        self._reseed(info)

    def moved(self, info: TopicInfo, last: Mapping[int, int], count: int) -> None:
        self._wakeups.messages(info.id, last)
        published(info.name).inc(count)

    def _topic(self, name: str, deadline: float) -> TopicInfo:
        check_name(name, "topic")
        attempts = Attempts(deadline, self.settings.send_timeout)
        while True:
            try:
                info = self.store.topics.get(name)
                # Redis is not trusted to remember: seed the counters from MySQL first
                # (once per topic id: a refresh of the same topic needs none).
                previous = self._topics.previous(name)
                if previous is None or previous.id != info.id:
                    self._reseed(info)
            except PASSING as exc:
                self._pause(attempts, exc)
                continue
            self._topics.put(name, info)
            return info

    def _committer(self, info: TopicInfo) -> GroupCommit[Prepared, RecordMetadata]:
        """The group commit of the topic's messages routed by info.partitions: a group's
        rows were all routed by the count its inserts are fenced with."""
        place_key = (info.id, info.partitions)
        committer = self._committers.get(place_key)
        if committer is None:
            with self._committers_lock:
                committer = self._committers.get(place_key)
                if committer is None:
                    committer = GroupCommit(partial(self._insert, info), GROUP_MAX)
                    self._committers[place_key] = committer
        return committer

    def refreshed_for(self, info: TopicInfo) -> TopicInfo:
        """The topic as stored now, kept for later sends when partitions were added: a
        send routed by the count before is refused by the insert's fence, and this is how
        the producer learns the new count (at the first send after the change)."""
        fresh = self.store.topics.get(info.name)
        if fresh.partitions != info.partitions:
            log.info(
                "topic %s now has %d partitions (was %d): routing by the new count",
                info.name,
                fresh.partitions,
                info.partitions,
            )
            self._reseed(fresh)
            self._topics.put(info.name, fresh)
        return fresh

    @overload
    def _insert(
        self, info: TopicInfo, prepared: Sequence[Prepared], deadline: float
    ) -> Sequence[RecordMetadata]: ...

    @overload
    def _insert(
        self,
        info: TopicInfo,
        prepared: Sequence[Prepared],
        deadline: float,
        *,
        named: int,
        pinned: frozenset[int],
    ) -> Sequence[RecordMetadata] | None: ...

    def _insert(
        self,
        info: TopicInfo,
        prepared: Sequence[Prepared],
        deadline: float,
        *,
        named: int | None = None,
        pinned: frozenset[int] = frozenset(),
    ) -> Sequence[RecordMetadata] | None:
        """Allocate, place and commit, trying again until the deadline while a server is
        away; where each message landed. Fresh offsets are taken only while no insert of
        these rows may have committed: _commit settles that before it returns. A write
        `named` by a token that another call stored meanwhile: None, nothing written."""
        counts = partition_counts(prepared)
        attempts = Attempts(deadline, self.settings.send_timeout)
        conflicts, reseed = 0, False
        while True:
            try:
                if reseed:
                    self._reseed(info)
                    reseed = False
                firsts = self._allocate(info, counts)
                # _new(Placed, ...): Placed(...) without a named tuple's Python __new__.
                placed = None if firsts is None else _new(Placed, (info.id, prepared, firsts))
                done = placed is not None and self._commit(placed, attempts, info.partitions, named)
                if done is None:
                    return None
                if done:
                    break
                if placed is not None:
                    fresh = self.refreshed_for(info)
                    if fresh.partitions != info.partitions:
                        # Partitions were added: the fence refused rows routed by the
                        # old count. Route them again; no offset of theirs was stored.
                        info, prepared = fresh, reroute(prepared, fresh.partitions, pinned)
                        counts = partition_counts(prepared)
                        continue
            except PASSING as exc:
                # An allocation whose reply was lost (RedisOutcomeUnknown) is not sent
                # again: it may have run. A lost Redis may also come back empty or as a
                # lagging replica, so the counters are re-seeded before the next range.
                reseed = reseed or isinstance(exc, RedisUnavailable)
                self._pause(attempts, exc)
                continue
            conflicts += 1
            if conflicts == CONFLICT_ATTEMPTS:
                raise offset_conflict(info, len(prepared))
            reseed = True
        assert placed is not None and firsts is not None
        self._wakeups.messages(info.id, last_offsets(firsts, counts))
        published(info.name).inc(len(prepared))  # once per group commit
        return metadata(info.name, placed)

    @staticmethod
    def _pause(attempts: Attempts, error: EmsError) -> None:
        """Wait before the next attempt; SendTimeout once the deadline has passed."""
        wait = attempts.pause_after(error, time.monotonic())
        if attempts.failures == 1:
            log.warning("a send waits for its servers (%s); trying again", error)
        time.sleep(wait)

    def _allocate(self, info: TopicInfo, counts: Mapping[int, int]) -> dict[int, int] | None:
        """The first offset of a fresh range per partition; None when a counter handed out
        a range ending at or below one it handed out before: Redis lost writes (a restart
        without persistence, a failover to a lagging replica), and the range may lie among
        stored or purged offsets. Ranges are taken under a lock so that the ends of one
        partition are seen in the order Redis gave them."""
        # acquire() and release(), not `with`: the same, at less than half the cost.
        self._allocating.acquire()
        try:
            firsts = (self._allocator or self.allocator).allocate(info.id, counts)
            if not self._ends.accept(info.id, firsts, counts):
                return None
        finally:
            self._allocating.release()
        return firsts

    def _reseed(self, info: TopicInfo) -> None:
        """Raise the counters to where each partition goes on: past its highest stored
        offset, never below its low watermark, and past every range this producer was
        handed (whose offsets may be in flight or holes), so no range repeats one."""
        seeds = self.store.messages.seed_offsets(info.id)
        with self._allocating:
            seeds = self._ends.floors(info.id, seeds)
        self.allocator.reseed(info.id, seeds)

    def _commit(
        self, placed: Placed, attempts: Attempts, routed: int, named: int | None = None
    ) -> bool | None:
        """Insert the write's rows; False if an offset was taken or lies below its partition's low
        watermark, and no attempt of ours is stored. A dropped connection leaves the
        outcome unknown, so the same rows are sent again, until the send's deadline, with
        the same random write token, stored on the write's first row; when an offset is
        then found taken (or purged past), that row holding our token means an earlier
        attempt committed (all of it: a write is atomic), and any other row there, however
        alike, means none did. Until that is known no other offsets are taken, so a
        message is never stored twice. A deadlock or a read-only refusal wrote nothing,
        and the same rows go again. At the deadline: SendTimeout, the outcome unknown.
        The rows were routed by `routed` partitions: the insert's fence refuses them
        (False) once the topic has more (see ems.partitions). A write `named` carries that
        token instead, and its name commits with it: refused, it is recognised by name,
        None when this call's attempts may not have stored it (another call did)."""
        token = write_token() if named is None else named
        tried = verify = False
        while True:
            try:
                if verify:
                    stored = self.store.messages.write_token_at(*first_place(placed))
                    return stored == token
                self.store.messages.insert(placed, token, partitions=routed, named=bool(named))
                return True
            except (DuplicateKey, BelowLowWatermark):
                if named is not None and self.store.messages.written(placed.topic_id, named):
                    return True if tried else None
                if not tried:
                    return False
                verify = True
            except PASSING as exc:
                tried = True
                self._pause(attempts, exc)
