"""The narrow interfaces the SDK needs from storage, offset counters and wake-ups.

Coordination, the consumer and both producers depend on these Protocols, never on the
whole Store. Two things implement them: MySQL and Redis (ems.store and ems.offsets, by
structure: they import nothing from here but the allocator ports) and the in-memory twin
in ems.testing, which runs the same producer, membership, handoff and session logic at
unit speed and lets users test their handlers without servers. ems.backend (and
ems.aio.backend) bundle one implementation of each for a client.

Every time below (lease expiries, pause ends, hole ages) is on the storage's clock, never
the caller's: for MySQL that is NOW(6).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Protocol

from ems.types import (
    AssignmentRow,
    Delivery,
    FetchedRows,
    GroupInfo,
    LeaderInfo,
    MemberInfo,
    OutboxPlace,
    OutboxRow,
    OutboxWaiting,
    PartitionsAdded,
    PartitionStats,
    Placed,
    Schedule,
    Settlement,
    TopicInfo,
)


class Heartbeat(Protocol):
    """One member's lease renewals, which wait for nothing else the member does."""

    def open(self) -> None:
        """Be ready to register and renew at once (for MySQL: open the connection now),
        before a lease starts: what its first statement would wait for comes off no lease.
        """

    def register(self, group_id: int, client_id: str, host: str, pid: int, ttl: float) -> None:
        """As Leases.register, where the renewals run."""

    def renew(
        self,
        client_id: str,
        ttl: float,
        *,
        cpu_percent: float | None = None,
        load_rate: float | None = None,
    ) -> bool:
        """As Leases.renew."""

    def close(self) -> None: ...


class Leases(Protocol):
    """Client rows (one per member, renewed within its TTL) and the group's leader row."""

    def register(self, group_id: int, client_id: str, host: str, pid: int, ttl: float) -> None:
        """A new client row whose lease runs for ttl seconds."""

    def renew(
        self,
        client_id: str,
        ttl: float,
        *,
        cpu_percent: float | None = None,
        load_rate: float | None = None,
    ) -> bool:
        """Extend a live lease (with the member's load report); False once it expired."""

    def heartbeat(self) -> Heartbeat:
        """Renewals for one member (for MySQL: on a connection of their own)."""

    def delete(self, client_id: str) -> None: ...

    def members(self, group_id: int) -> list[MemberInfo]:
        """Every client row of the group, live or expired, in client id order."""

    def lead(self, group_id: int, client_id: str, ttl: float) -> int | None:
        """Take or renew the leader row: the epoch held (it grows on every takeover, never
        on a renewal), or None while another client leads."""

    def leader(self, group_id: int) -> LeaderInfo | None: ...

    def resign(self, group_id: int, client_id: str, epoch: int) -> None:
        """Let the leader row expire now, if this client still holds it at this epoch."""


class Assignments(Protocol):
    """Which client owns each partition of a cluster group, at which generation."""

    def rows(self, group_id: int) -> list[AssignmentRow]: ...

    def apply(
        self,
        group_id: int,
        leader: tuple[str, int],
        grants: Mapping[int, str],
        revokes: Iterable[int],
    ) -> int:
        """As leader (client id, epoch), in one step fenced by the epoch (NotLeader):
        delete expired clients, bump the group's generation, grant partitions at it and
        ask owners to revoke others. Returns the new generation."""

    def release(self, group_id: int, client_id: str, partitions: Mapping[int, int]) -> None:
        """As owner: hand back revoking partitions {partition: generation}."""


class Cursors(Protocol):
    """The group's committed cursors and its pause (an offset reset in progress)."""

    def offsets(self, group_id: int) -> dict[int, int]:
        """Committed cursor (next offset to consume) per partition."""

    def commit(self, group_id: int, client_id: str, cursors: Mapping[int, tuple[int, int]]) -> None:
        """Commit {partition: (next offset, generation)} all together or none:
        StaleGeneration unless this client, with a live lease, owns every one of them
        at that generation."""

    def pause_left(self, group_id: int) -> float | None:
        """Seconds the group stays paused, or None when it is not."""


class ConsumptionLog(Protocol):
    """Per-delivery state (start, done, retry, dead), retries and dead letters."""

    def start(
        self, group_id: int, topic_id: int, client_id: str, deliveries: Sequence[Delivery]
    ) -> None: ...

    def settle(
        self,
        group_id: int,
        topic_id: int,
        client_id: str,
        settlement: Settlement,
        started: Sequence[Delivery] = (),
    ) -> None:
        """One ack batch, all or nothing, with its cursors committed as Cursors.commit
        does (StaleGeneration: nothing written); the start rows of `started` first, as
        start() writes them, in the same transaction."""

    def claim_due(
        self,
        group_id: int,
        topic: str,
        partitions: Sequence[int],
        limit: int,
        lease: float,
        max_bytes: int,
    ) -> list[Delivery]:
        """Due retries of these partitions, oldest due first, claimed for lease seconds:
        at most `limit`, while their bodies total at most max_bytes (the first whatever
        its size)."""


class MessageLog(Protocol):
    """What a partition reader needs: rows in offset order, the clock that ages holes,
    and tombstones to close old holes."""

    def fetch_rows(
        self,
        topic_id: int,
        partition: int,
        from_offset: int,
        limit: int,
        max_bytes: int,
        *,
        at_least_one: bool = True,
    ) -> FetchedRows:
        """Stored rows (tombstones too) from from_offset on, in offset order, as
        MessageRow tuples; a hole in the offsets is simply not there. At most `limit`
        rows, and only while their bodies total at most max_bytes, except that with
        at_least_one the rows up to the first body come whatever its size (a message
        larger than the budget comes alone). FetchedRows.cut tells that rows were left
        out for the budget; its partition count may be told only when the first row is
        at from_offset."""

    def fetch_rows_many(
        self,
        topic_id: int,
        reads: Sequence[tuple[int, int, int]],
        max_bytes: int,
        *,
        at_least_one: bool = True,
    ) -> dict[int, FetchedRows]:
        """fetch_rows() of each (partition, from_offset, limit), each with the whole
        budget of max_bytes, at once where the log can: {partition: its rows}."""

    def low_offset(self, topic_id: int, partition: int) -> int | None:
        """The partition's low watermark after a purge (None when never purged)."""

    def low_offsets(self, topic_id: int) -> dict[int, int]:
        """Per partition of the topic that has been purged, its low watermark."""

    def now(self) -> dt.datetime: ...

    def insert_tombstones(self, topic_id: int, partition: int, offsets: Iterable[int]) -> None:
        """Close holes, one offset after the other; DuplicateKey at the first one a
        message (or another reader) got to first, the ones before it staying closed."""

    def high_watermarks(self, topic: TopicInfo) -> dict[int, int]: ...


class TopicLookup(Protocol):
    def get(self, name: str) -> TopicInfo:
        """UnknownTopic when there is none of that name."""


class Topics(TopicLookup, Protocol):
    def partition_stats(self, topic: TopicInfo, *, exact: bool = False) -> list[PartitionStats]:
        """Per partition: watermarks and counts."""

    def partition_changes(self, topic_id: int) -> list[PartitionsAdded]:
        """The topic's partition changes, oldest first (see ems.partitions)."""


class Groups(Cursors, Protocol):
    def get(self, name: str, topic_id: int) -> GroupInfo | None: ...

    def create(self, spec: GroupInfo, topic: TopicInfo) -> GroupInfo:
        """The group with its leader row, cursors at the start position (cluster groups)
        and released assignment rows; DuplicateKey when it exists."""


class ConsumeStore(Protocol):
    """Everything a Consumer reads and writes, by concern."""

    @property
    def topics(self) -> Topics: ...

    @property
    def messages(self) -> MessageLog: ...

    @property
    def groups(self) -> Groups: ...

    @property
    def leases(self) -> Leases: ...

    @property
    def assignments(self) -> Assignments: ...

    @property
    def consumption(self) -> ConsumptionLog: ...

    def close(self) -> None: ...


class CoordinationStore(Protocol):
    """What a membership needs: leases, assignments and the group's pause."""

    @property
    def leases(self) -> Leases: ...

    @property
    def assignments(self) -> Assignments: ...

    @property
    def groups(self) -> Cursors: ...


# -- publishing ------------------------------------------------------------------------


class MessageWrites(Protocol):
    """The producer's write step and what it reads back around it. The rows of one call
    are one atomic write: the message table's unique key (topic, partition, offset) and
    the partitions' low watermarks judge it, never the producer."""

    def insert(
        self,
        placed: Placed,
        token: int | None = None,
        *,
        partitions: int | None = None,
        named: bool = False,
    ) -> None:
        """Store all the write's rows or none, the first carrying the write token:
        DuplicateKey if an offset is taken, BelowLowWatermark if one lies below its
        partition's low watermark, or if the topic's partition count is no longer
        `partitions` (the count the rows were routed by, when given). named: the token
        names the write, and DuplicateKey also refuses a second write of that name on the
        topic."""

    def written(self, topic_id: int, token: int) -> bool:
        """Whether a write named by this token (insert's `named`) is stored."""

    def write_token_at(self, topic_id: int, partition: int, offset: int) -> int | None:
        """The write token of the row at this place (None: no row, or one written without
        a token): whether a write whose reply was lost committed."""

    def seed_offsets(self, topic_id: int) -> dict[int, int]:
        """Where each partition's counter must start: past its highest stored offset
        (tombstones too) and never below its low watermark; partitions never written or
        purged are left out."""


class Messages(MessageLog, MessageWrites, Protocol):
    """The message table as a whole: read by partition readers, written by producers."""


class PublishStore(Protocol):
    """Everything a Producer reads and writes."""

    @property
    def topics(self) -> TopicLookup: ...

    @property
    def messages(self) -> MessageWrites: ...

    def close(self) -> None: ...


class Storage(ConsumeStore, PublishStore, Protocol):
    """What a backend stores in: both clients' needs, on one set of tables."""

    @property
    def topics(self) -> Topics: ...

    @property
    def messages(self) -> Messages: ...


class OffsetAllocator(Protocol):
    """The counters that hand out offset ranges (Redis INCRBY, partition_head rows, or
    the twin's dict). Not trusted alone: the unique key is the final arbiter, and a
    producer whose insert hits it re-seeds the counters and tries again."""

    def allocate(self, topic_id: int, counts: Mapping[int, int]) -> dict[int, int]:
        """Reserve counts[p] offsets in each partition p; return the first offset of each."""

    def reseed(self, topic_id: int, next_offsets: Mapping[int, int]) -> None:
        """Make sure the next offsets handed out are at least next_offsets[p]. Reaches
        the counters' server even with nothing to raise (RedisUnavailable if it cannot):
        a producer re-seeds after an allocation whose outcome it does not know, and must
        learn there whether the server answers at all."""

    def close(self) -> None: ...


class AsyncPublishStore(Protocol):
    """PublishStore for ems.aio's Producer, flat and awaited: the same rules."""

    async def topic(self, name: str) -> TopicInfo:
        """As TopicLookup.get."""

    async def insert(
        self, placed: Placed, token: int | None, *, partitions: int | None = None
    ) -> None:
        """As MessageWrites.insert."""

    async def write_token_at(self, topic_id: int, partition: int, offset: int) -> int | None:
        """As MessageWrites.write_token_at."""

    async def seed_offsets(self, topic_id: int) -> dict[int, int]:
        """As MessageWrites.seed_offsets."""

    async def close(self) -> None: ...


class AsyncOffsetAllocator(Protocol):
    """As OffsetAllocator, awaited."""

    async def allocate(self, topic_id: int, counts: Mapping[int, int]) -> dict[int, int]:
        """Reserve counts[p] offsets in each partition p; return the first offset of each."""

    async def reseed(self, topic_id: int, next_offsets: Mapping[int, int]) -> None:
        """Make sure the next offsets handed out are at least next_offsets[p]."""

    async def close(self) -> None: ...


# -- transactional publishing -----------------------------------------------------------

#: (partition, key, headers JSON, body) of a validated message.
OutboxItem = tuple[int, bytes | None, str | None, bytes]


class OutboxWrites(Protocol):
    def write(
        self,
        tx: object,
        topic_id: int,
        items: Sequence[OutboxItem],
        on_commit: Callable[[], None] | None = None,
        schedule: Schedule | None = None,
    ) -> None:
        """Write the items into the outbox inside the caller's transaction tx (scheduled,
        with a schedule), and call on_commit when it commits (where the caller's library
        tells): InvalidTransaction when tx cannot carry them, ForeignTransaction when it
        runs on another server."""


class RelayBatch(Protocol):
    """A topic's oldest committed outbox rows, held by one relay's transaction."""

    rows: list[OutboxRow]

    def move(self, places: Sequence[OutboxPlace], *, partitions: int | None = None) -> None:
        """Insert the rows at their places (partition and offset, by row id, in the
        order the rows were given) and delete them from the outbox, at the transaction's
        commit: DuplicateKey or BelowLowWatermark as MessageWrites.insert (routed by
        `partitions`)."""


class Outbox(Protocol):
    """Transactional publishing's table: written in callers' transactions, emptied by
    relays into the message table."""

    @property
    def writer(self) -> OutboxWrites: ...

    def waiting(self) -> OutboxWaiting:
        """The topics whose outbox holds committed rows to move now (undelayed or due),
        and the seconds until the soonest scheduled row comes due."""

    def schedule(self, topic_id: int, items: Sequence[OutboxItem], schedule: Schedule) -> None:
        """Write a scheduled send's rows, in a transaction of the outbox's own."""

    def relay(
        self, topic_id: int, limit: int, *, scheduled: bool = False
    ) -> AbstractContextManager[RelayBatch | None]:
        """Up to limit of the topic's oldest committed undelayed rows (with scheduled:
        its due scheduled rows, by time) in a transaction that commits when the block
        ends; None while another relay holds the topic."""


class SettlementsThrough(Protocol):
    """Exactly-once settlement: an ack batch written through the caller's transaction."""

    def ready(self) -> None:
        """Read through ems's own connections, once, what write checks the caller's
        connection against: so that write itself makes round trips only through tx
        (which may be an asyncio connection, driven from its event loop)."""

    def write(
        self,
        tx: object,
        group_id: int,
        topic_id: int,
        client_id: str,
        settlement: Settlement,
        expected: Mapping[int, int],
    ) -> None:
        """Write the settlement's statements inside the caller's transaction tx, fenced:
        StaleGeneration when a row is no longer as this client left it, or a cursor no
        longer at its expected value ({partition: stored cursor}) (the caller's
        transaction must roll back); InvalidTransaction or ForeignTransaction as
        OutboxWrites.write."""


# -- wake-ups ----------------------------------------------------------------------------


class Notifier(Protocol):
    """Wake-ups sent: fire and forget, never an error (readers fall back to polling)."""

    def messages(self, topic_id: int, last_offsets: Mapping[int, int]) -> None: ...

    def group(self, group_id: int) -> None: ...

    def close(self) -> None: ...


class Subscription(Protocol):
    """Wake-ups received on callbacks from a thread of its own, from start() to stop()."""

    @property
    def connected(self) -> _Flag: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def follow(self, channel: str, partitions: Collection[int] | None) -> None:
        """Of a topic's channel (one of the callbacks'), the wake-ups of these partitions
        are wanted (None: every partition's). A hint: others may still come."""


class _Flag(Protocol):
    def is_set(self) -> bool: ...


#: Channel name -> callback taking the payload: what a Subscription is opened with.
Callbacks = Mapping[str, Callable[[str], None]]


class AsyncNotifier(Protocol):
    """Notifier's messages wake-up for ems.aio's Producer: a hint, never an error."""

    async def messages(self, topic_id: int, last_offsets: Mapping[int, int]) -> None: ...

    async def close(self) -> None: ...
