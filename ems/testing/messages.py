"""The in-memory twin of the topic and message tables (ems.ports.Topics and Messages):
what partition readers fetch, and what producers insert, under the server's unique key
(topic, partition, offset) and low watermarks."""

from __future__ import annotations

import bisect
import datetime as dt
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from ems.exceptions import PartitionsNotAdded, TopicExists, UnknownTopic
from ems.store.errors import BelowLowWatermark, DuplicateKey
from ems.testing.tables import Tables
from ems.types import (
    AssignmentRow,
    Fetched,
    FetchedRows,
    MessageRow,
    NewMessage,
    PartitionsAdded,
    PartitionStats,
    Placed,
    StoredMessage,
    TopicInfo,
    placed_messages,
)
from ems.values.fetch import within_budget


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

    def partition_changes(self, topic_id: int) -> list[PartitionsAdded]:
        with self.t.lock:
            return list(self.t.changes.get(topic_id, ()))

    def add_partitions(self, name: str, partitions: int) -> tuple[PartitionsAdded, list[int]]:
        """As the server's change (ems.store.partitions): PartitionsNotAdded unless the
        count grows; the old partitions' high watermarks recorded, and every cluster group
        given the new partitions, read from offset 0 and owned by no one. Returns the
        change and the ids of those groups."""
        with self.t.lock:
            topic = self.get(name)
            if partitions <= topic.partitions:
                raise PartitionsNotAdded(
                    f"topic {name!r} has {topic.partitions} partitions; partitions can only "
                    f"be added (asked for {partitions})"
                )
            watermarks = tuple(self.t.next_offset(topic.id, p) for p in range(topic.partitions))
            for p in range(topic.partitions):
                # The server writes the count on every old partition's low watermark row,
                # creating the missing ones at 0.
                self.t.fences[(topic.id, p)] = partitions
                self.t.lows.setdefault((topic.id, p), 0)
            self.t.topics[name] = replace(topic, partitions=partitions)
            change = PartitionsAdded(
                topic_id=topic.id,
                before=topic.partitions,
                after=partitions,
                watermarks=watermarks,
                created_at=self.t.clock(),
            )
            self.t.changes.setdefault(topic.id, []).append(change)
            groups = [
                g.id
                for g in self.t.groups.values()
                if g.topic_id == topic.id and g.mode == "cluster"
            ]
            for g in groups:
                for p in range(topic.partitions, partitions):
                    self.t.offsets[g][p] = 0
                    self.t.assignments[g][p] = AssignmentRow(
                        partition=p, client_id=None, generation=0, state="released"
                    )
            return change, groups

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

    def empty(self, topic: TopicInfo, partition: int, low: int) -> None:
        """What a purge that emptied the partition below `low` leaves: no rows, and a
        low watermark no producer writes below."""
        with self.t.lock:
            self.t.empty(topic.id, partition, low)

    # -- a producer's write step (ems.ports.MessageWrites) --------------------------------

    def insert(
        self,
        placed: Placed,
        token: int | None = None,
        *,
        partitions: int | None = None,
        named: bool = False,
    ) -> None:
        """All rows or none, as the server's INSERT: BelowLowWatermark if an offset lies
        below its partition's low watermark or the rows were routed by `partitions` and
        the topic has more now (the fence of a partition change), DuplicateKey if one is
        taken (or repeated), or if the write is named by a token already stored; the first
        row carries the write token."""
        if not placed.rows:
            return
        messages = placed_messages(placed)
        with self.t.lock:
            if partitions is not None:
                self._fence(messages, partitions)
            name = (placed.topic_id, token or 0)
            if named and name in self.t.named:
                raise DuplicateKey(f"a write named {token} is stored")
            self._check(messages)
            if named:
                self.t.named.add(name)
            for i, m in enumerate(messages):
                self.t.add(
                    m.topic_id,
                    m.partition,
                    m.offset,
                    m.body,
                    key=m.key,
                    headers=json.loads(m.headers) if m.headers else None,
                    token=token if i == 0 else None,
                )

    def _fence(self, messages: Sequence[NewMessage], routed: int) -> None:
        """As the server's guard: refused when a partition's row says another count than
        the one the rows were routed by (a partition never changed says nothing)."""
        fences = self.t.fences
        topic = self.t.topic(messages[0].topic_id)
        if topic is None or any(
            fences.get((m.topic_id, m.partition), routed) != routed for m in messages
        ):
            raise BelowLowWatermark("the topic's partitions changed since the rows were routed")

    def _check(self, messages: Sequence[NewMessage]) -> None:
        """The server's refusals, before any row is written."""
        lows = self.t.lows
        if any(m.offset < lows.get((m.topic_id, m.partition), 0) for m in messages):
            raise BelowLowWatermark(
                "an offset lies below its partition's low watermark; nothing was inserted"
            )
        places: set[tuple[int, int, int]] = set()
        for m in messages:
            place = (m.topic_id, m.partition, m.offset)
            if place in places or m.offset in self.t.rows(m.topic_id, m.partition):
                raise DuplicateKey(f"offset {m.offset} of partition {m.partition} is taken")
            places.add(place)

    def written(self, topic_id: int, token: int) -> bool:
        with self.t.lock:
            return (topic_id, token) in self.t.named

    def write_token_at(self, topic_id: int, partition: int, offset: int) -> int | None:
        with self.t.lock:
            m = self.t.rows(topic_id, partition).get(offset)
            return None if m is None else self.t.tokens.get(m.id)

    def seed_offsets(self, topic_id: int) -> dict[int, int]:
        """Past each partition's highest stored offset, never below its low watermark."""
        with self.t.lock:
            seeds = {p: low for (t, p), low in self.t.lows.items() if t == topic_id}
            for t, p in list(self.t.partitions):
                stored = self.t.stored_offsets(t, p) if t == topic_id else None
                if stored:
                    seeds[p] = max(stored[-1] + 1, seeds.get(p, 0))
            return seeds

    # -- a partition reader's (ems.ports.MessageLog) --------------------------------------

    def next_offset(self, topic_id: int, partition: int) -> int:
        with self.t.lock:
            return self.t.next_offset(topic_id, partition)

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
            topic = self.t.topic(topic_id)
        kept = within_budget([len(m.body) for m in window], max_bytes, at_least_one)
        count = None if topic is None else topic.partitions
        return Fetched(rows=window[:kept], cut=kept < len(window), partitions=count)

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
        fetched = self.fetch(
            topic_id, partition, from_offset, limit, max_bytes, at_least_one=at_least_one
        )
        return FetchedRows(
            rows=[message_row(m) for m in fetched.rows],
            cut=fetched.cut,
            partitions=fetched.partitions,
        )

    def fetch_rows_many(
        self,
        topic_id: int,
        reads: Sequence[tuple[int, int, int]],
        max_bytes: int,
        *,
        at_least_one: bool = True,
    ) -> dict[int, FetchedRows]:
        return {
            p: self.fetch_rows(topic_id, p, at, limit, max_bytes, at_least_one=at_least_one)
            for p, at, limit in reads
        }

    def low_offset(self, topic_id: int, partition: int) -> int | None:
        with self.t.lock:
            return self.t.lows.get((topic_id, partition))

    def low_offsets(self, topic_id: int) -> dict[int, int]:
        with self.t.lock:
            return {p: low for (t, p), low in self.t.lows.items() if t == topic_id}

    def now(self) -> dt.datetime:
        return self.t.clock()

    def insert_tombstones(self, topic_id: int, partition: int, offsets: Iterable[int]) -> None:
        with self.t.lock:
            for o in offsets:  # one row at a time, as the server's statements go
                self.t.add(topic_id, partition, o, b"", tombstone=True)

    def high_watermarks(self, topic: TopicInfo) -> dict[int, int]:
        return {p: self.next_offset(topic.id, p) for p in range(topic.partitions)}


def message_row(m: StoredMessage) -> MessageRow:
    """A stored message as the server's fetch returns its row: headers as JSON text."""
    headers = json.dumps(m.headers) if m.headers else None
    return (m.id, m.offset, m.key, headers, m.body, m.created_at, m.tombstone)
