"""Statements on the message table.

The two hot statements (insert, fetch) are plain driver SQL: they run for every message.
The INSERT is formatted by ems.store.inserts, with every binary value as a hex literal.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from operator import itemgetter
from typing import Any

from ems.store.database import Database
from ems.store.errors import ParentMissing
from ems.store.fences import (
    FENCE_READS,
    FENCES_QUERY,
    FenceCache,
    Fences,
    moved_too_often,
    stale,
)
from ems.store.inserts import ESCAPED_INSERT, escaped_params, insert_statements
from ems.store.watermarks import HighWatermarks, all_high_watermarks
from ems.types import (
    ROW_BODY,
    ROW_HEADERS,
    ROW_OFFSET,
    Fetched,
    FetchedRows,
    Placed,
    StoredMessage,
    TopicInfo,
    stored_messages,
)
from ems.values.fetch import decode_headers, within_budget
from ems.values.lifecycle import check_not_fenced

_INSERT_TOMBSTONE = (
    "INSERT INTO message (topic_id, partition_no, offset_no, body, tombstone) "
    "VALUES (%s, %s, %s, '', 1)"
)
# A fetch is bounded by rows and by the bytes of its bodies, in one range read of the key
# as a plain fetch is: every row comes with its body when that is at most the budget's
# share of one row (max_bytes / limit), else with the body's length, so that what comes
# inline totals at most max_bytes whatever the rows hold. The client keeps the rows
# while the running total of the lengths stays within the budget
# (ems.values.fetch.within_budget) and reads the larger bodies it keeps with one more
# statement, by offset: a body past the budget never leaves the server unless it is
# small, and a fetch moves at most twice the budget. The rows up to the first body always
# come back, and that body with them when at_least_one is set (a message larger than the
# budget then comes alone: the bound is soft, as Kafka's fetch.max.bytes). The server
# reads a large body (stored off its row's page) to take its length, so the reader keeps
# the row limit near what the budget takes (ems.offsets.budget.rows_to_scan).
#
# The first row also carries the topic's partition count, read in the same statement (one
# snapshot, the subquery evaluated once): a row written after partitions were added comes
# with the new count, so an ordered group learns of the change before it hands such a row
# out (ems.partitions). Only the row at the read's first offset carries it: a read hands
# out nothing unless its rows start there.
#
# The columns are those of a MessageRow (ems.types), then the body's length and the count.
# Every value a row need not carry is NULL, which the driver reads for the cost of one
# byte and converts not at all: the tombstone flag of a message, the length of a body
# that came inline (the client has it), the count after the first row. Per message read,
# that is a sixth of the driver's work.
_FETCH_COLUMNS = (
    "SELECT id, offset_no, msg_key, headers, IF(LENGTH(body) <= %s, body, NULL), "
    "created_at, NULLIF(tombstone, 0), IF(LENGTH(body) <= %s, NULL, LENGTH(body)), "
    "IF(offset_no = %s, (SELECT partitions FROM topic WHERE id = %s), NULL)"
)
_FETCH_RANGE = (
    "FROM message WHERE topic_id = %s AND partition_no = %s AND offset_no >= %s "
    "ORDER BY offset_no LIMIT %s"
)
_FETCH = f"{_FETCH_COLUMNS} {_FETCH_RANGE}"
# Several partitions' fetches as one statement (one round trip): each one the fetch above
# in parentheses, with its own order and limit, and the partition as the last column.
_FETCH_PART = f"({_FETCH_COLUMNS}, partition_no {_FETCH_RANGE})"
#: The columns after a MessageRow's: the length of a body not inline, the partition count,
#: and in a fetch of several partitions the partition.
_LENGTH, _COUNT, _PARTITION = 7, 8, 9
_SIZE = itemgetter(_LENGTH)
_BODY = itemgetter(ROW_BODY)
_OFFSET = itemgetter(ROW_OFFSET)
_BODIES = (
    "SELECT offset_no, body FROM message "
    "WHERE topic_id = %s AND partition_no = %s AND offset_no IN ({offsets})"
)
# The keys of a fetch without its bodies: what planning a range of a partition needs (the
# gap-free end), read from the row but never a body stored off its page.
_FETCH_KEYS = (
    "SELECT id, offset_no, created_at, tombstone FROM message "
    "WHERE topic_id = %s AND partition_no = %s AND offset_no >= %s "
    "ORDER BY offset_no LIMIT %s"
)
# A write named by its writer (see MessageStore.insert's `named`): its row commits in the
# write's transaction, first, so that a second write of the same name fails on its key
# before it inserts a message.
_NAMED = b"INSERT INTO message_write (topic_id, write_token, messages) VALUES (%d, %d, %d)"
_WRITTEN = "SELECT 1 FROM message_write WHERE topic_id = %s AND write_token = %s"
_PURGE_WRITES = "DELETE FROM message_write WHERE created_at < NOW(6) - INTERVAL %s SECOND LIMIT %s"
_TOKEN_AT = (
    "SELECT write_token FROM message WHERE topic_id = %s AND partition_no = %s AND offset_no = %s"
)

#: One less than the next offset of every partition of a topic that has rows. Grouping by
#: the whole key prefix lets MySQL answer with a loose index scan, one index dive per
#: partition, however many rows the topic holds (the asyncio producer runs it too).
NEXT_OFFSETS = (
    "SELECT partition_no, MAX(offset_no) FROM message WHERE topic_id = %s "
    "GROUP BY topic_id, partition_no"
)
_NOW = "SELECT NOW(6)"
_LOW = "SELECT low_offset FROM partition_low WHERE topic_id = %s AND partition_no = %s"
_LOWS = "SELECT partition_no, low_offset FROM partition_low WHERE topic_id = %s"
_ALL_LOWS = "SELECT topic_id, partition_no, low_offset FROM partition_low"


def bodies_query(
    topic_id: int, partition: int, offsets: Sequence[int]
) -> tuple[str, tuple[object, ...]]:
    """The read of the bodies a fetch left out, by offset."""
    sql = _BODIES.format(offsets=", ".join(["%s"] * len(offsets)))
    return sql, (topic_id, partition, *offsets)


def _fetch_params(
    topic_id: int, partition: int, from_offset: int, limit: int, max_bytes: int
) -> tuple[int, ...]:
    """A fetch's values, in _FETCH's order: each body inline up to its share of the
    budget (max_bytes / limit)."""
    inline = max(1, max_bytes // limit)
    return (inline, inline, from_offset, topic_id, topic_id, partition, from_offset, limit)


class MessageStore:
    def __init__(self, db: Database) -> None:
        self.db = db
        self._fences = FenceCache()

    def insert(
        self,
        placed: Placed,
        token: int | None = None,
        *,
        partitions: int | None = None,
        named: bool = False,
    ) -> None:
        """Insert the write's rows in one transaction, the first with the write token (see
        write_token_at); DuplicateKey if any offset is taken, BelowLowWatermark if any
        lies below its partition's low watermark, or if the rows were routed by a count of
        `partitions` the topic no longer has (see ems.store.partitions). named: the token
        names the write (see written), and a write of that name stored before makes this
        one fail with DuplicateKey, inserting nothing."""
        if not placed.rows:
            return
        topic_id = placed.topic_id
        mark = None
        if named:
            assert token is not None
            mark = _NAMED % (topic_id, token, len(placed.rows))
        fences = self._fences.get(topic_id)
        fresh = False
        for _ in range(FENCE_READS):
            if fences is None:
                fences, fresh = self.fences(topic_id), True
            if stale(placed.firsts, fences, partitions, fresh=fresh):
                fences = None
                continue
            statements = insert_statements(placed, token, fences.fences)
            try:
                if statements is None:
                    self._insert_escaped(escaped_params(placed, token, fences.fences), mark)
                else:
                    self.db.direct.execute(statements if mark is None else [mark, *statements])
                return
            except ParentMissing:
                fences = None  # a fence moved on since the read: read them again
        raise moved_too_often(topic_id)

    def fences(self, topic_id: int) -> Fences:
        """The topic's fences as stored now (kept for the next inserts); BelowLowWatermark
        for a topic without partitions (deleted)."""
        return self._fences.keep(topic_id, self.db.select(FENCES_QUERY, (topic_id,)))

    def written(self, topic_id: int, token: int) -> bool:
        """Whether a write named by this token (insert's `named`) is stored: all of it."""
        return bool(self.db.select(_WRITTEN, (topic_id, token)))

    def purge_writes(self, older_than: float, limit: int = 10_000) -> int:
        """Forget up to `limit` write names older than `older_than` seconds (a write
        retried after that is stored again); how many were forgotten."""
        with self.db.single() as cursor:
            return int(cursor.execute(_PURGE_WRITES, (int(older_than), limit)))

    def _insert_escaped(self, params: list[tuple[object, ...]], mark: bytes | None) -> None:
        """The driver's own escaping and batching (escaped_params), for rows too large for
        hex literals, in one transaction: the rows carry their fences as the hex path's do."""
        with self.db.transaction() as cursor:
            if mark is not None:
                cursor.execute(mark.decode())
            cursor.executemany(ESCAPED_INSERT, params)

    def insert_tombstones(self, topic_id: int, partition: int, offsets: Iterable[int]) -> None:
        params = [(topic_id, partition, o) for o in offsets]
        with self.db.single() as cursor:
            cursor.executemany(_INSERT_TOMBSTONE, params)

    def now(self) -> dt.datetime:
        """The database clock, which judges the age of a hole."""
        return self.db.select(_NOW, ())[0][0]  # type: ignore[no-any-return]

    def low_offset(self, topic_id: int, partition: int) -> int | None:
        """The partition's low watermark: every offset below it was purged (None: none)."""
        rows = self.db.select(_LOW, (topic_id, partition))
        return int(rows[0][0]) if rows else None

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
        """Up to `limit` rows from from_offset on, in offset order, while their bodies
        total at most max_bytes; with at_least_one, the rows up to the first body come
        whatever its size. cut: rows past the last one were left out for the budget."""
        fetched = self.fetch_rows(
            topic_id, partition, from_offset, limit, max_bytes, at_least_one=at_least_one
        )
        rows = fetched.rows
        headers = decode_headers([r[ROW_HEADERS] for r in rows])
        return Fetched(
            rows=stored_messages(topic_id, partition, rows, headers),
            cut=fetched.cut,
            partitions=fetched.partitions,
        )

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
        """fetch(), its rows as the driver returns them (ems.types.MessageRow)."""
        params = _fetch_params(topic_id, partition, from_offset, limit, max_bytes)
        raw = self.db.select(_FETCH, params)
        return self._within_budget(topic_id, partition, raw, max_bytes, at_least_one)

    def fetch_rows_many(
        self,
        topic_id: int,
        reads: Sequence[tuple[int, int, int]],
        max_bytes: int,
        *,
        at_least_one: bool = True,
    ) -> dict[int, FetchedRows]:
        """fetch_rows() of several partitions, each (partition, from_offset, limit) with
        the whole budget of max_bytes, in one statement: {partition: its rows}."""
        if len(reads) == 1:
            ((partition, from_offset, limit),) = reads
            rows = self.fetch_rows(
                topic_id, partition, from_offset, limit, max_bytes, at_least_one=at_least_one
            )
            return {partition: rows}
        params = [
            value
            for partition, from_offset, limit in reads
            for value in _fetch_params(topic_id, partition, from_offset, limit, max_bytes)
        ]
        raw = self.db.select(" UNION ALL ".join([_FETCH_PART] * len(reads)), tuple(params))
        by_partition: dict[int, list[tuple[Any, ...]]] = {p: [] for p, _, _ in reads}
        for row in raw:
            by_partition[row[_PARTITION]].append(row)
        return {
            p: self._within_budget(topic_id, p, sorted(rows, key=_OFFSET), max_bytes, at_least_one)
            for p, rows in by_partition.items()
        }

    def _within_budget(
        self,
        topic_id: int,
        partition: int,
        raw: Sequence[tuple[Any, ...]],
        max_bytes: int,
        at_least_one: bool,
    ) -> FetchedRows:
        """A fetch's rows kept within the byte budget, with the bodies that did not come
        inline read by offset."""
        if any(map(_SIZE, raw)):  # some body did not come inline
            sizes = [len(r[ROW_BODY]) if r[_LENGTH] is None else int(r[_LENGTH]) for r in raw]
        else:
            sizes = list(map(len, map(_BODY, raw)))
        kept = raw[: within_budget(sizes, max_bytes, at_least_one)]
        count = raw[0][_COUNT] if raw else None
        later = [r[ROW_OFFSET] for r in kept if r[ROW_BODY] is None]
        if not later:
            return FetchedRows(rows=kept, cut=len(kept) < len(raw), partitions=count)
        bodies = self._bodies(topic_id, partition, later)
        rows = []
        for r in kept:
            if r[ROW_BODY] is None:
                body = bodies.get(r[ROW_OFFSET])
                if body is None:
                    # A body a purge deleted between the two statements ends the rows kept
                    # before it: the read is cut there, and the next one meets the purge as
                    # any read does.
                    break
                r = (*r[:ROW_BODY], body, *r[ROW_BODY + 1 :])
            rows.append(r)
        return FetchedRows(rows=rows, cut=len(rows) < len(raw), partitions=count)

    def fetch_keys(
        self, topic_id: int, partition: int, from_offset: int, limit: int
    ) -> list[StoredMessage]:
        """Up to `limit` rows from from_offset on, in offset order, as fetch returns them
        but without key, headers or body: their offsets, times and tombstone flags."""
        raw = self.db.select(_FETCH_KEYS, (topic_id, partition, from_offset, limit))
        return [
            StoredMessage(
                id=r[0],
                topic_id=topic_id,
                partition=partition,
                offset=r[1],
                key=None,
                body=b"",
                created_at=r[2],
                tombstone=bool(r[3]),
            )
            for r in raw
        ]

    def _bodies(self, topic_id: int, partition: int, offsets: list[int]) -> dict[int, bytes]:
        """The bodies at these offsets of the partition, by offset."""
        if not offsets:
            return {}
        rows = self.db.select(*bodies_query(topic_id, partition, offsets))
        return {int(o): b for o, b in rows}

    def write_token_at(self, topic_id: int, partition: int, offset: int) -> int | None:
        """The write token stored with the row at this place (None: no row, or a row
        written without one): whether a write whose reply was lost committed."""
        rows = self.db.select(_TOKEN_AT, (topic_id, partition, offset))
        return None if not rows or rows[0][0] is None else int(rows[0][0])

    def next_offsets(self, topic_id: int) -> dict[int, int]:
        """One past the highest stored offset, per partition that has rows."""
        rows = self.db.select(NEXT_OFFSETS, (topic_id,))
        return {int(p): int(top) + 1 for p, top in rows}

    def low_offsets(self, topic_id: int) -> dict[int, int]:
        """Per partition of the topic that has been purged, its low watermark."""
        return {int(p): int(low) for p, low in self.db.select(_LOWS, (topic_id,))}

    def seed_offsets(self, topic_id: int) -> dict[int, int]:
        """Where a partition's counter must start: past its highest stored offset and
        never below its low watermark (a purge may have emptied it)."""
        lows = self.low_offsets(topic_id)
        check_not_fenced(topic_id, lows)
        return seed_offsets(self.next_offsets(topic_id), lows)

    def all_high_watermarks(self) -> HighWatermarks:
        """Every non-empty partition's high watermark, of every topic."""
        return all_high_watermarks(self.db)

    def high_watermarks(self, topic: TopicInfo) -> dict[int, int]:
        """The next offset of every partition of the topic: past its highest stored offset
        and never below its low watermark (a purge may have emptied it); 0 for one never
        written."""
        return high_watermarks(topic, self.seed_offsets(topic.id))

    def every_high_watermark(self, topics: Iterable[TopicInfo]) -> dict[int, dict[int, int]]:
        """high_watermarks() of each topic, by topic id, in two statements however many
        topics (one loose index scan of the message key, one read of partition_low)."""
        nexts = all_high_watermarks(self.db)
        lows = self.db.select(_ALL_LOWS, ())
        by_topic: dict[int, tuple[dict[int, int], dict[int, int]]] = {}
        for (t, p), high in nexts.items():
            by_topic.setdefault(t, ({}, {}))[0][p] = high
        for t, p, low in lows:
            by_topic.setdefault(int(t), ({}, {}))[1][int(p)] = int(low)
        return {
            t.id: high_watermarks(t, seed_offsets(*by_topic.get(t.id, ({}, {})))) for t in topics
        }


def seed_offsets(next_offsets: Mapping[int, int], lows: Mapping[int, int]) -> dict[int, int]:
    """Per partition: past its highest stored offset, never below its low watermark."""
    seeds = dict(lows)
    for p, high in next_offsets.items():
        seeds[p] = max(high, seeds.get(p, 0))
    return seeds


def high_watermarks(topic: TopicInfo, seeds: Mapping[int, int]) -> dict[int, int]:
    """Every partition of the topic with its seed offset; 0 for one never written."""
    return {p: seeds.get(p, 0) for p in range(topic.partitions)}
