"""The in-memory twin of the consume path's storage (ems.ports), table by table.

Each method is one atomic step under one lock, as one statement or transaction is on the
server, and keeps the server's rules: leases and pauses on the twin's clock, leader
writes fenced by epoch, cursor commits fenced by owner, generation and live lease (all or
nothing), one log row per (group, partition, offset), retries claimed for a lease.
"""

from __future__ import annotations

import bisect
import datetime as dt
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from ems.exceptions import (
    DuplicateKey,
    NotLeader,
    StaleGeneration,
    TopicExists,
    UnknownTopic,
)
from ems.types import (
    AssignmentRow,
    Delivery,
    Failure,
    Fetched,
    GroupInfo,
    LeaderInfo,
    MemberInfo,
    PartitionStats,
    Settlement,
    StoredMessage,
    TopicInfo,
)
from ems.values.fetch import within_budget

Clock = Callable[[], dt.datetime]


def utc_now() -> dt.datetime:
    """Naive UTC, as the server's NOW(6) reads in an ems session."""
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


class ManualClock:
    """A clock that moves only when told: leases expire and retries fall due on cue."""

    def __init__(self, start: dt.datetime | None = None) -> None:
        self._now = start or utc_now()
        self._lock = threading.Lock()

    def __call__(self) -> dt.datetime:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += dt.timedelta(seconds=seconds)


def _after(now: dt.datetime, seconds: float) -> dt.datetime:
    return now + dt.timedelta(seconds=seconds)


@dataclass
class _Client:
    group_id: int
    host: str
    pid: int
    expires: dt.datetime
    cpu_percent: float | None = None
    load_rate: float | None = None


@dataclass
class _Leader:
    client_id: str | None = None
    epoch: int = 0
    expires: dt.datetime = dt.datetime(1970, 1, 2)


@dataclass
class LogRow:
    """A consumption-log row: the last delivery of one message to one group."""

    client_id: str
    state: str
    attempts: int
    error: str | None = None


@dataclass
class RetryRow:
    topic_id: int
    message_id: int
    attempts: int
    due: dt.datetime
    error: str


@dataclass(frozen=True)
class DeadLetter:
    """A message a group gave up on, with its own copy of the message."""

    group_id: int
    partition: int
    offset: int
    message: StoredMessage
    attempts: int
    error: str


@dataclass
class Tables:
    """Every row of the twin, and the lock that makes each step atomic."""

    clock: Clock = utc_now
    lock: threading.RLock = field(default_factory=threading.RLock)
    topics: dict[str, TopicInfo] = field(default_factory=dict)
    #: (topic id, partition) -> offset -> row (tombstones too).
    partitions: dict[tuple[int, int], dict[int, StoredMessage]] = field(default_factory=dict)
    #: (topic id, partition) -> low watermark, for partitions a purge emptied below it.
    lows: dict[tuple[int, int], int] = field(default_factory=dict)
    groups: dict[int, GroupInfo] = field(default_factory=dict)
    paused_until: dict[int, dt.datetime] = field(default_factory=dict)
    leaders: dict[int, _Leader] = field(default_factory=dict)
    clients: dict[str, _Client] = field(default_factory=dict)
    assignments: dict[int, dict[int, AssignmentRow]] = field(default_factory=dict)
    offsets: dict[int, dict[int, int]] = field(default_factory=dict)
    #: (group id, partition, offset) -> row.
    log: dict[tuple[int, int, int], LogRow] = field(default_factory=dict)
    retries: dict[tuple[int, int, int], RetryRow] = field(default_factory=dict)
    dead: list[DeadLetter] = field(default_factory=list)
    _ids: dict[str, int] = field(default_factory=dict)
    #: (topic id, partition) -> its stored offsets in order; message id -> row: the
    #: indexes a fetch, a watermark and a dead letter's copy use, as on the server.
    _sorted: dict[tuple[int, int], list[int]] = field(default_factory=dict)
    _by_id: dict[int, StoredMessage] = field(default_factory=dict)

    def next_id(self, table: str) -> int:
        self._ids[table] = self._ids.get(table, 0) + 1
        return self._ids[table]

    def rows(self, topic_id: int, partition: int) -> dict[int, StoredMessage]:
        return self.partitions.setdefault((topic_id, partition), {})

    def stored_offsets(self, topic_id: int, partition: int) -> list[int]:
        """The partition's stored offsets (tombstones too), in order."""
        return self._sorted.setdefault((topic_id, partition), [])

    def add(
        self,
        topic_id: int,
        partition: int,
        offset: int,
        body: bytes,
        *,
        key: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        tombstone: bool = False,
    ) -> StoredMessage:
        """Store one row at its offset; DuplicateKey when the offset is taken."""
        rows = self.rows(topic_id, partition)
        if offset in rows:
            raise DuplicateKey(f"offset {offset} of partition {partition} is taken")
        m = StoredMessage(
            id=self.next_id("message"),
            topic_id=topic_id,
            partition=partition,
            offset=offset,
            key=key,
            headers=dict(headers or {}),
            body=body,
            created_at=self.clock(),
            tombstone=tombstone,
        )
        rows[offset] = self._by_id[m.id] = m
        bisect.insort(self.stored_offsets(topic_id, partition), offset)
        return m

    def message(self, message_id: int) -> StoredMessage | None:
        return self._by_id.get(message_id)

    def live(self, client_id: str, now: dt.datetime) -> bool:
        client = self.clients.get(client_id)
        return client is not None and client.expires > now


class MemoryTopics:
    def __init__(self, t: Tables) -> None:
        self.t = t

    def create(
        self, name: str, partitions: int, retention_hours: int, max_body_bytes: int
    ) -> TopicInfo:
        with self.t.lock:
            if name in self.t.topics:
                raise TopicExists(f"topic {name!r} already exists")
            info = TopicInfo(
                id=self.t.next_id("topic"),
                name=name,
                partitions=partitions,
                retention_hours=retention_hours,
                max_body_bytes=max_body_bytes,
                created_at=self.t.clock(),
            )
            self.t.topics[name] = info
            return info

    def get(self, name: str) -> TopicInfo:
        with self.t.lock:
            info = self.t.topics.get(name)
        if info is None:
            raise UnknownTopic(f"unknown topic {name!r}")
        return info

    def partition_stats(self, topic: TopicInfo, *, exact: bool = False) -> list[PartitionStats]:
        with self.t.lock:
            stats = []
            for p in range(topic.partitions):
                rows, stored = self.t.rows(topic.id, p), self.t.stored_offsets(topic.id, p)
                low = stored[0] if stored else None
                high = stored[-1] + 1 if stored else self.t.lows.get((topic.id, p), 0)
                tombstones = sum(1 for m in rows.values() if m.tombstone)
                stats.append(
                    PartitionStats(
                        partition=p,
                        low_watermark=low,
                        high_watermark=high,
                        messages=len(rows) - tombstones if exact else _span(low, high),
                        tombstones=tombstones if exact else None,
                    )
                )
            return stats


def _span(low: int | None, high: int) -> int:
    """Stored offsets between the watermarks, tombstones included (the server's rule)."""
    return high - low if low is not None else 0


class MemoryMessages:
    def __init__(self, t: Tables) -> None:
        self.t = t

    def put(
        self,
        topic: TopicInfo,
        partition: int,
        offset: int,
        body: bytes,
        key: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> StoredMessage:
        """Store one message at a given offset (DuplicateKey when it is taken): a test
        leaves holes by skipping offsets."""
        with self.t.lock:
            return self.t.add(topic.id, partition, offset, body, key=key, headers=headers)

    def next_offset(self, topic_id: int, partition: int) -> int:
        with self.t.lock:
            stored = self.t.stored_offsets(topic_id, partition)
            return stored[-1] + 1 if stored else self.t.lows.get((topic_id, partition), 0)

    def fetch(
        self,
        topic_id: int,
        partition: int,
        from_offset: int,
        limit: int,
        max_bytes: int,
        *,
        at_least_one: bool = True,
    ) -> Fetched:
        with self.t.lock:
            rows, stored = (
                self.t.rows(topic_id, partition),
                self.t.stored_offsets(topic_id, partition),
            )
            start = bisect.bisect_left(stored, from_offset)
            window = [rows[o] for o in stored[start : start + limit]]
        kept = within_budget([len(m.body) for m in window], max_bytes, at_least_one)
        return Fetched(rows=window[:kept], cut=kept < len(window))

    def low_offset(self, topic_id: int, partition: int) -> int | None:
        with self.t.lock:
            return self.t.lows.get((topic_id, partition))

    def now(self) -> dt.datetime:
        return self.t.clock()

    def insert_tombstones(self, topic_id: int, partition: int, offsets: Iterable[int]) -> None:
        with self.t.lock:
            for o in offsets:  # one row at a time, as the server's statements go
                self.t.add(topic_id, partition, o, b"", tombstone=True)

    def high_watermarks(self, topic: TopicInfo) -> dict[int, int]:
        return {p: self.next_offset(topic.id, p) for p in range(topic.partitions)}


class MemoryGroups:
    def __init__(self, t: Tables) -> None:
        self.t = t

    def get(self, name: str, topic_id: int) -> GroupInfo | None:
        with self.t.lock:
            for g in self.t.groups.values():
                if g.name == name and g.topic_id == topic_id:
                    return g
            return None

    def create(self, spec: GroupInfo, topic: TopicInfo) -> GroupInfo:
        with self.t.lock:
            if self.get(spec.name, topic.id) is not None:
                raise DuplicateKey(f"group {spec.name!r} exists")
            group = replace(spec, id=self.t.next_id("group"), topic_id=topic.id, generation=0)
            self.t.groups[group.id] = group
            self.t.leaders[group.id] = _Leader()
            if group.mode == "cluster":
                self.t.offsets[group.id] = {
                    p: self._start(topic.id, p, group.start_position)
                    for p in range(topic.partitions)
                }
                self.t.assignments[group.id] = {
                    p: AssignmentRow(partition=p, client_id=None, generation=0, state="released")
                    for p in range(topic.partitions)
                }
            return group

    def _start(self, topic_id: int, partition: int, position: str) -> int:
        stored = self.t.stored_offsets(topic_id, partition)
        if not stored:
            return self.t.lows.get((topic_id, partition), 0)
        return stored[0] if position == "earliest" else stored[-1] + 1

    def offsets(self, group_id: int) -> dict[int, int]:
        with self.t.lock:
            return dict(self.t.offsets.get(group_id, {}))

    def commit(self, group_id: int, client_id: str, cursors: Mapping[int, tuple[int, int]]) -> None:
        with self.t.lock:
            self.fence(group_id, client_id, cursors)
            self.t.offsets[group_id].update({p: o for p, (o, _) in cursors.items()})

    def fence(self, group_id: int, client_id: str, cursors: Mapping[int, tuple[int, int]]) -> None:
        """StaleGeneration unless client_id, with a live lease, owns every partition at
        its generation (the condition of the server's commit)."""
        if not cursors:
            return
        rows = self.t.assignments.get(group_id, {})
        live = self.t.live(client_id, self.t.clock())
        for p, (_, generation) in cursors.items():
            a = rows.get(p)
            owned = a is not None and a.client_id == client_id and a.state != "released"
            if not (live and owned and a is not None and a.generation == generation):
                raise StaleGeneration(
                    f"{client_id} no longer owns all of partitions {sorted(cursors)} at the "
                    "generations it committed with; nothing was committed"
                )

    def pause(self, group_id: int, seconds: float) -> dt.datetime | None:
        with self.t.lock:
            now = self.t.clock()
            if self.t.paused_until.get(group_id, now) > now:
                return None
            until = self.t.paused_until[group_id] = _after(now, seconds)
            return until

    def pause_left(self, group_id: int) -> float | None:
        with self.t.lock:
            until = self.t.paused_until.get(group_id)
            now = self.t.clock()
            return None if until is None or until <= now else (until - now).total_seconds()

    def resume(self, group_id: int, until: dt.datetime) -> None:
        with self.t.lock:
            if self.t.paused_until.get(group_id) == until:
                del self.t.paused_until[group_id]


class MemoryLeases:
    def __init__(self, t: Tables) -> None:
        self.t = t

    def register(self, group_id: int, client_id: str, host: str, pid: int, ttl: float) -> None:
        with self.t.lock:
            if client_id in self.t.clients:
                raise DuplicateKey(f"client {client_id!r} exists")
            self.t.clients[client_id] = _Client(group_id, host, pid, _after(self.t.clock(), ttl))

    def renew(
        self,
        client_id: str,
        ttl: float,
        *,
        cpu_percent: float | None = None,
        load_rate: float | None = None,
    ) -> bool:
        with self.t.lock:
            now = self.t.clock()
            if not self.t.live(client_id, now):
                return False
            client = self.t.clients[client_id]
            client.expires = _after(now, ttl)
            if cpu_percent is not None:
                client.cpu_percent = cpu_percent
            if load_rate is not None:
                client.load_rate = load_rate
            return True

    def heartbeat(self) -> MemoryHeartbeat:
        return MemoryHeartbeat(self)

    def delete(self, client_id: str) -> None:
        with self.t.lock:
            self.t.clients.pop(client_id, None)

    def members(self, group_id: int) -> list[MemberInfo]:
        with self.t.lock:
            now = self.t.clock()
            return [
                MemberInfo(
                    client_id=cid,
                    host=c.host,
                    pid=c.pid,
                    lease_expires_at=c.expires,
                    expires_in=(c.expires - now).total_seconds(),
                )
                for cid, c in sorted(self.t.clients.items())
                if c.group_id == group_id
            ]

    def lead(self, group_id: int, client_id: str, ttl: float) -> int | None:
        with self.t.lock:
            now = self.t.clock()
            row = self.t.leaders[group_id]
            holds = row.client_id == client_id and row.expires > now
            if not (holds or row.client_id is None or row.expires <= now):
                return None
            if not holds:
                row.epoch += 1
            row.client_id, row.expires = client_id, _after(now, ttl)
            return row.epoch

    def leader(self, group_id: int) -> LeaderInfo | None:
        with self.t.lock:
            row = self.t.leaders.get(group_id)
            if row is None:
                return None
            return LeaderInfo(
                client_id=row.client_id,
                epoch=row.epoch,
                lease_expires_at=row.expires,
                expires_in=(row.expires - self.t.clock()).total_seconds(),
            )

    def resign(self, group_id: int, client_id: str, epoch: int) -> None:
        with self.t.lock:
            row = self.t.leaders[group_id]
            if row.client_id == client_id and row.epoch == epoch:
                row.expires = self.t.clock()


class MemoryHeartbeat:
    """Renewals through the tables' lock, which nothing holds for long."""

    def __init__(self, leases: MemoryLeases) -> None:
        self.leases = leases

    def renew(
        self,
        client_id: str,
        ttl: float,
        *,
        cpu_percent: float | None = None,
        load_rate: float | None = None,
    ) -> bool:
        return self.leases.renew(client_id, ttl, cpu_percent=cpu_percent, load_rate=load_rate)

    def close(self) -> None:
        pass


class MemoryAssignments:
    def __init__(self, t: Tables) -> None:
        self.t = t

    def rows(self, group_id: int) -> list[AssignmentRow]:
        with self.t.lock:
            return [a for _, a in sorted(self.t.assignments.get(group_id, {}).items())]

    def apply(
        self,
        group_id: int,
        leader: tuple[str, int],
        grants: Mapping[int, str],
        revokes: Iterable[int],
    ) -> int:
        client_id, epoch = leader
        with self.t.lock:
            now = self.t.clock()
            row = self.t.leaders[group_id]
            if not (row.client_id == client_id and row.epoch == epoch and row.expires > now):
                raise NotLeader(f"{client_id} no longer leads group {group_id} at epoch {epoch}")
            for cid in [c for c, v in self.t.clients.items() if v.group_id == group_id]:
                if self.t.clients[cid].expires <= now:
                    del self.t.clients[cid]
            group = self.t.groups[group_id]
            generation = group.generation + 1
            self.t.groups[group_id] = replace(group, generation=generation)
            rows = self.t.assignments[group_id]
            for p, c in grants.items():
                rows[p] = AssignmentRow(
                    partition=p, client_id=c, generation=generation, state="assigned"
                )
            for p in revokes:
                if rows[p].state == "assigned":
                    rows[p] = replace(rows[p], state="revoking")
            return generation

    def release(self, group_id: int, client_id: str, partitions: Mapping[int, int]) -> None:
        with self.t.lock:
            rows = self.t.assignments[group_id]
            for p, generation in partitions.items():
                a = rows[p]
                mine = a.client_id == client_id and a.generation == generation
                if mine and a.state == "revoking":
                    rows[p] = replace(a, state="released")


class MemoryConsumption:
    def __init__(self, t: Tables, groups: MemoryGroups) -> None:
        self.t = t
        self.groups = groups

    def start(
        self, group_id: int, topic_id: int, client_id: str, deliveries: Sequence[Delivery]
    ) -> None:
        with self.t.lock:
            for d in deliveries:
                key = (group_id, d.partition, d.offset)
                row = self.t.log.get(key)
                attempts = d.attempt if row is None else max(row.attempts + 1, d.attempt)
                self.t.log[key] = LogRow(client_id, "start", attempts)

    def settle(self, group_id: int, topic_id: int, client_id: str, settlement: Settlement) -> None:
        with self.t.lock:
            # The commit's fence first: when it refuses, nothing at all is written.
            self.groups.fence(group_id, client_id, settlement.cursors)
            for p, o in settlement.done:
                row = self.t.log.get((group_id, p, o))
                if row is not None and row.client_id == client_id and row.state == "start":
                    row.state = "done"
            for f in settlement.failed:
                self._fail(group_id, topic_id, client_id, f)
            for f in settlement.logged_only:
                self._log_failure(group_id, client_id, f, "retry")
            for p, o in settlement.cleared:
                self.t.retries.pop((group_id, p, o), None)
            for p, first, last in settlement.handed_back:
                for o in range(first, last + 1):
                    row = self.t.log.get((group_id, p, o))
                    if row is not None and row.client_id == client_id and row.state == "start":
                        del self.t.log[(group_id, p, o)]
            self.t.offsets[group_id].update({p: o for p, (o, _) in settlement.cursors.items()})

    def _fail(self, group_id: int, topic_id: int, client_id: str, f: Failure) -> None:
        key = (group_id, f.partition, f.offset)
        if f.delay is None:
            message = self.t.message(f.message_id)
            if message is not None:
                self.t.dead.append(
                    DeadLetter(group_id, f.partition, f.offset, message, f.attempts, f.error)
                )
            self.t.retries.pop(key, None)
            state = "dead"
        else:
            due = _after(self.t.clock(), f.delay)
            self.t.retries[key] = RetryRow(topic_id, f.message_id, f.attempts, due, f.error)
            state = "retry"
        self._log_failure(group_id, client_id, f, state)

    def _log_failure(self, group_id: int, client_id: str, f: Failure, state: str) -> None:
        row = self.t.log.get((group_id, f.partition, f.offset))
        if row is not None and row.client_id == client_id:
            row.state, row.attempts, row.error = state, f.attempts, f.error

    def claim_due(
        self,
        group_id: int,
        topic: str,
        partitions: Sequence[int],
        limit: int,
        lease: float,
        max_bytes: int,
    ) -> list[Delivery]:
        with self.t.lock:
            now = self.t.clock()
            due = sorted(
                (r.due, key)
                for key, r in self.t.retries.items()
                if key[0] == group_id and key[1] in partitions and r.due <= now
            )
            # As the server's join: a retry whose message is gone is not among them.
            found = [
                (key, m)
                for _, key in due
                if (m := self.t.message(self.t.retries[key].message_id)) is not None
            ][:limit]
            found = found[: within_budget([len(m.body) for _, m in found], max_bytes, True)]
            out = []
            for key, m in found:
                r = self.t.retries[key]
                r.due = _after(now, lease)
                out.append(
                    Delivery(
                        topic=topic,
                        partition=m.partition,
                        offset=m.offset,
                        key=m.key,
                        headers=dict(m.headers),
                        body=m.body,
                        timestamp=m.created_at,
                        attempt=r.attempts + 1,
                        message_id=m.id,
                    )
                )
            return out


class MemoryStore:
    """The twin of ems.store.Store for everything a consumer uses (ems.ports.ConsumeStore)."""

    def __init__(self, clock: Clock = utc_now) -> None:
        self.tables = Tables(clock=clock)
        self.topics = MemoryTopics(self.tables)
        self.messages = MemoryMessages(self.tables)
        self.groups = MemoryGroups(self.tables)
        self.leases = MemoryLeases(self.tables)
        self.assignments = MemoryAssignments(self.tables)
        self.consumption = MemoryConsumption(self.tables, self.groups)

    def close(self) -> None:
        pass
