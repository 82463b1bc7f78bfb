"""The asyncio producer: the thread-safe Producer's steps (ems.producer.planning), awaited,
with the sends of concurrent tasks committed together (ems.aio.group)."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Self

from ems.aio.backend import AsyncBackend, mysql_aio_backend
from ems.aio.group import AsyncGroupCommit
from ems.config import Settings
from ems.exceptions import EmsError, InvalidSchedule, InvalidTransaction, RedisUnavailable
from ems.metrics import published
from ems.ports import AsyncOffsetAllocator
from ems.producer import Producer as ThreadProducer
from ems.producer.deadline import PASSING, Attempts
from ems.producer.metadata import TopicCache
from ems.producer.partitioner import RoundRobin
from ems.producer.planning import (
    CONFLICT_ATTEMPTS,
    GROUP_MAX,
    Outgoing,
    RangeEnds,
    last_offsets,
    metadata,
    offset_conflict,
    partition_counts,
    prepare,
    prepare_batch,
    reroute,
)
from ems.producer.scheduling import Delay, schedule_of
from ems.producer.tokens import write_token
from ems.producer.transactional import UNKNOWN_OFFSET
from ems.store import aio_outbox
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

log = logging.getLogger(__name__)


class Producer:
    """Publishes messages to topics from asyncio code. Share one per process: every task
    of its event loop may use it at once.

    `await send(...)` and `await send_batch(...)` return only after the rows are committed
    in MySQL. Sends awaited at the same time by several tasks are committed together (one
    offset range per partition, one INSERT); linger (seconds, default 0) makes a group
    wait that long for more. A send cancelled before its group is taken writes nothing;
    once taken, the group is committed for the others, and the cancelled send raises
    CancelledError either way: it never reports a message it did not see committed.

    As ems.Producer's, a send rides out a lost Redis master, a lost database node and a
    server that takes no writes for up to `settings.send_timeout` seconds
    (EMS_SEND_TIMEOUT), then raises SendTimeout; bad input raises at once.

    It runs on MySQL and Redis (`settings`, or the environment), or on the `backend`
    given (whose settings it then uses), such as ems.testing's in-memory twin.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        linger: float = 0.0,
        backend: AsyncBackend | None = None,
    ) -> None:
        if backend is None:
            backend = mysql_aio_backend(settings or Settings.from_env())
        self.backend = backend
        self.settings = backend.settings
        self.linger = linger
        self.store = backend.store
        self._allocator: AsyncOffsetAllocator | None = None
        self._topics = TopicCache(self.settings.metadata_max_age)
        #: Topics looked up by transactional sends, which take no offset: not re-seeded.
        self._looked_up = TopicCache(self.settings.metadata_max_age)
        self._loading: dict[str, asyncio.Future[TopicInfo]] = {}
        self._round_robin = RoundRobin()
        #: One per topic and partition count its messages were routed by.
        self._committers: dict[tuple[int, int], AsyncGroupCommit[Prepared, RecordMetadata]] = {}
        self._wakeups = backend.notifier
        self._ends = RangeEnds()
        self._allocating = asyncio.Lock()
        self._relay: ThreadProducer | None = None

    @property
    def allocator(self) -> AsyncOffsetAllocator:
        """Created on first use (no connection is opened before the first command)."""
        if self._allocator is None:
            self._allocator = self.backend.allocator()
        return self._allocator

    # -- public API ------------------------------------------------------------------

    async def send(
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
        With a transaction (a SQLAlchemy AsyncSession or AsyncConnection on the server of
        this ems database): as ems.Producer.send's, published if and only if it commits.
        With delay or deliver_at: as ems.Producer.send's, scheduled (offset -1)."""
        if transaction is not None or delay is not None or deliver_at is not None:
            record = (Record(body, key, headers),)
            schedule = self._schedule(delay, deliver_at)
            return (await self._send_later(transaction, topic, record, schedule))[0]
        deadline = time.monotonic() + self.settings.send_timeout
        info = self._topics.get(topic) or await self._topic(topic, deadline)
        prepared = prepare(info, body, key, headers, self._round_robin)
        # _committer(info), found with one lookup once made (as every send but the first).
        committer = self._committers.get((info.id, info.partitions)) or self._committer(info)
        (landed,) = await committer.submit((prepared,), deadline)
        return landed

    async def send_batch(
        self,
        topic: str,
        records: Iterable[Outgoing],
        *,
        transaction: object = None,
        delay: Delay | None = None,
        deliver_at: dt.datetime | None = None,
    ) -> Sequence[RecordMetadata]:
        """Publish messages with one allocation per partition and one multi-row INSERT
        (shared with concurrent sends). All or none are committed; results in input order,
        as ems.Producer.send_batch returns them (made when read).
        Messages take the forms ems.Producer.send_batch takes (a Record, a plain tuple of
        its fields, a body, a mapping). With a transaction, a delay or a deliver_at: as
        send's."""
        schedule = self._schedule(delay, deliver_at)
        if transaction is not None or schedule is not None:
            return await self._send_later(transaction, topic, records, schedule)
        deadline = time.monotonic() + self.settings.send_timeout
        info = self._topics.get(topic) or await self._topic(topic, deadline)
        prepared = prepare_batch(info, records, self._round_robin)
        if not prepared:
            return []
        return await self._committer(info).submit(prepared, deadline)

    async def close(self) -> None:
        """Let the groups under way finish, then close the connections."""
        for committer in list(self._committers.values()):
            await committer.wait_idle()
        await self._wakeups.close()
        if self._relay is not None:
            await asyncio.to_thread(self._relay.close)
        if self._allocator is not None:
            await self._allocator.close()
        await self.store.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- steps -----------------------------------------------------------------------

    def _schedule(self, delay: Delay | None, deliver_at: dt.datetime | None) -> Schedule | None:
        if delay is None and deliver_at is None:
            return None
        now = dt.datetime.now(dt.UTC)
        return schedule_of(delay, deliver_at, self.settings.max_delay, now)

    async def _send_later(
        self,
        tx: object,
        topic: str,
        records: Iterable[Outgoing],
        schedule: Schedule | None,
    ) -> Sequence[RecordMetadata]:
        """A transactional send: validated and partitioned as any, written in tx by the
        relay producer's outbox writer, awaited; no offset is taken. A scheduled send
        without tx: written by the relay producer in a thread (one INSERT)."""
        relay = self._relay_producer(tx is None)
        info = self._topics.get(topic) or self._looked_up.get(topic)
        if info is None:
            info = await self.store.topic(check_name(topic, "topic"))
            self._looked_up.put(topic, info)
        prepared = prepare_batch(info, records, self._round_robin)
        if tx is None:
            assert schedule is not None
            return await asyncio.to_thread(relay.transactions.schedule, info, prepared, schedule)
        writer, wake = relay.transactions.writer()
        if prepared:
            await aio_outbox.write(writer, tx, info.id, prepared, wake, schedule)
        return [RecordMetadata(info.name, p[0], UNKNOWN_OFFSET) for p in prepared]

    def _relay_producer(self, scheduled: bool = False) -> ThreadProducer:
        if self._relay is None:
            if self.backend.relay is None:
                if scheduled:
                    raise InvalidSchedule("this producer's backend takes no scheduled sends")
                raise InvalidTransaction("this producer's backend takes no transactional sends")
            self._relay = self.backend.relay()
        return self._relay

    async def _topic(self, name: str, deadline: float) -> TopicInfo:
        """The topic, looked up once however many tasks ask at the same time (within the
        first one's deadline: the earliest of theirs). The lookup is shielded: a caller
        cancelled meanwhile does not cancel it for the others."""
        check_name(name, "topic")
        loading = self._loading.get(name)
        if loading is None:
            loading = asyncio.ensure_future(self._load(name, deadline))
            self._loading[name] = loading
            loading.add_done_callback(lambda _: self._loading.pop(name, None))
        return await asyncio.shield(loading)

    async def _load(self, name: str, deadline: float) -> TopicInfo:
        attempts = self._attempts(deadline)
        while True:
            try:
                info = await self.store.topic(name)
                # Redis is not trusted to remember: seed the counters from MySQL first
                # (once per topic id: a refresh of the same topic needs none).
                previous = self._topics.previous(name)
                if previous is None or previous.id != info.id:
                    await self._reseed(info)
            except PASSING as exc:
                await self._pause(attempts, exc)
                continue
            self._topics.put(name, info)
            return info

    def _committer(self, info: TopicInfo) -> AsyncGroupCommit[Prepared, RecordMetadata]:
        """As Producer._committer: one per topic and partition count routed by."""
        place_key = (info.id, info.partitions)
        committer = self._committers.get(place_key)
        if committer is None:

            async def flush(items: list[Prepared], deadline: float) -> Sequence[RecordMetadata]:
                return await self._insert(info, items, deadline)

            committer = AsyncGroupCommit(flush, GROUP_MAX, linger=self.linger)
            self._committers[place_key] = committer
        return committer

    async def _refreshed(self, info: TopicInfo) -> TopicInfo:
        """As Producer.refreshed: the topic as stored now, kept when its count grew."""
        fresh = await self.store.topic(info.name)
        if fresh.partitions != info.partitions:
            log.info("topic %s now has %d partitions", info.name, fresh.partitions)
            await self._reseed(fresh)
            self._topics.put(info.name, fresh)
        return fresh

    async def _insert(
        self, info: TopicInfo, prepared: Sequence[Prepared], deadline: float
    ) -> Sequence[RecordMetadata]:
        """As Producer._insert: allocate, place and commit, trying again until the
        deadline while a server is away; fresh offsets only once no insert of these rows
        may have committed."""
        counts = partition_counts(prepared)
        attempts = self._attempts(deadline)
        conflicts, reseed = 0, False
        while True:
            try:
                if reseed:
                    await self._reseed(info)
                    reseed = False
                firsts = await self._allocate(info, counts)
                placed = None if firsts is None else Placed(info.id, prepared, firsts)
                if placed is not None and await self._commit(placed, attempts, info.partitions):
                    break
                if placed is not None:
                    fresh = await self._refreshed(info)
                    if fresh.partitions != info.partitions:
                        # As Producer._insert: refused by the fence, routed again.
                        info, prepared = fresh, reroute(prepared, fresh.partitions)
                        counts = partition_counts(prepared)
                        continue
            except PASSING as exc:
                # As Producer._insert: a lost allocation is not sent again, and the
                # counters are re-seeded after any Redis failure.
                reseed = reseed or isinstance(exc, RedisUnavailable)
                await self._pause(attempts, exc)
                continue
            conflicts += 1
            if conflicts == CONFLICT_ATTEMPTS:
                raise offset_conflict(info, len(prepared))
            reseed = True
        assert placed is not None and firsts is not None
        await self._wakeups.messages(info.id, last_offsets(firsts, counts))
        published(info.name).inc(len(prepared))  # once per group commit
        return metadata(info.name, placed)

    def _attempts(self, deadline: float) -> Attempts:
        return Attempts(deadline, self.settings.send_timeout)

    @staticmethod
    async def _pause(attempts: Attempts, error: EmsError) -> None:
        """Wait before the next attempt; SendTimeout once the deadline has passed."""
        wait = attempts.pause_after(error, time.monotonic())
        if attempts.failures == 1:
            log.warning("a send waits for its servers (%s); trying again", error)
        await asyncio.sleep(wait)

    async def _allocate(self, info: TopicInfo, counts: Mapping[int, int]) -> dict[int, int] | None:
        """As Producer._allocate: None when the counter went back. Under a lock, so the
        ends of a partition are seen in the order Redis handed them out (two flushes may
        allocate at once)."""
        async with self._allocating:
            firsts = await self.allocator.allocate(info.id, counts)
            if not self._ends.accept(info.id, firsts, counts):
                return None
        return firsts

    async def _reseed(self, info: TopicInfo) -> None:
        seeds = await self.store.seed_offsets(info.id)
        async with self._allocating:
            seeds = self._ends.floors(info.id, seeds)
            await self.allocator.reseed(info.id, seeds)

    async def _commit(self, placed: Placed, attempts: Attempts, routed: int) -> bool:
        """As Producer._commit: False if an offset was taken or lies below its partition's
        low watermark and no attempt of ours is stored; a lost connection sends the same
        rows again, until the deadline, with the same write token, whose presence at the
        first row's place then tells whether an earlier attempt committed."""
        token = write_token()
        tried = verify = False
        while True:
            try:
                if verify:
                    stored = await self.store.write_token_at(*first_place(placed))
                    return stored == token
                await self.store.insert(placed, token, partitions=routed)
                return True
            except (DuplicateKey, BelowLowWatermark):
                if not tried:
                    return False
                verify = True
            except PASSING as exc:
                tried = True
                await self._pause(attempts, exc)
