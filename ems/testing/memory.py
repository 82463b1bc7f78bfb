"""The in-memory twin of the SDK's storage (ems.ports.Storage), table by table (the
rows in ems.testing.tables, the topic and message tables in ems.testing.messages).

Each method is one atomic step under one lock, as one statement or transaction is on the
server, and keeps the server's rules: leases and pauses on the twin's clock, leader
writes fenced by epoch, cursor commits fenced by owner, generation and live lease (all or
nothing), one log row per (group, partition, offset), retries claimed for a lease.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from ems.exceptions import UnknownGroup
from ems.store.errors import DuplicateKey, NotLeader, StaleGeneration
from ems.testing.messages import MemoryMessages, MemoryTopics
from ems.testing.tables import (
    ClientRow,
    Clock,
    DeadLetterRecord,
    LeaderRow,
    LogRow,
    ManualClock,
    RetryRow,
    Tables,
    after,
    utc_now,
)
from ems.types import (
    AssignmentRow,
    Delivery,
    Failure,
    GroupInfo,
    LeaderInfo,
    MemberInfo,
    Settlement,
    TopicInfo,
)
from ems.values.fetch import within_budget

__all__ = [
    "Clock",
    "DeadLetterRecord",
    "LogRow",
    "ManualClock",
    "MemoryStore",
    "RetryRow",
    "utc_now",
]


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
            self.t.leaders[group.id] = LeaderRow()
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
        if not stored or position == "earliest":  # the log's start, as the store's
            return self.t.lows.get((topic_id, partition), 0)
        return stored[-1] + 1

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
            until = self.t.paused_until[group_id] = after(now, seconds)
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
            if group_id not in self.t.groups:
                raise UnknownGroup(f"consumer group id {group_id} no longer exists")
            if client_id in self.t.clients:
                raise DuplicateKey(f"client {client_id!r} exists")
            self.t.clients[client_id] = ClientRow(group_id, host, pid, after(self.t.clock(), ttl))

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
            client.expires = after(now, ttl)
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
            row.client_id, row.expires = client_id, after(now, ttl)
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

    def open(self) -> None:
        pass

    def register(self, group_id: int, client_id: str, host: str, pid: int, ttl: float) -> None:
        self.leases.register(group_id, client_id, host, pid, ttl)

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
            self._start(group_id, client_id, deliveries)

    def _start(self, group_id: int, client_id: str, deliveries: Sequence[Delivery]) -> None:
        for d in deliveries:
            key = (group_id, d.partition, d.offset)
            row = self.t.log.get(key)
            attempts = d.attempt if row is None else max(row.attempts + 1, d.attempt)
            self.t.log[key] = LogRow(client_id, "start", attempts)

    def settle(
        self,
        group_id: int,
        topic_id: int,
        client_id: str,
        settlement: Settlement,
        started: Sequence[Delivery] = (),
    ) -> None:
        with self.t.lock:
            # The commit's fence first: when it refuses, nothing at all is written.
            self.groups.fence(group_id, client_id, settlement.cursors)
            self._start(group_id, client_id, started)
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
                    DeadLetterRecord(
                        group_id, f.partition, f.offset, message, f.attempts, f.error, f.traceback
                    )
                )
            self.t.retries.pop(key, None)
            state = "dead"
        else:
            due = after(self.t.clock(), f.delay)
            row = RetryRow(topic_id, f.message_id, f.attempts, due, f.error, f.traceback)
            self.t.retries[key] = row
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
                r.due = after(now, lease)
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
    """The twin of ems.store.Store for everything a consumer and a producer use
    (ems.ports.Storage)."""

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
