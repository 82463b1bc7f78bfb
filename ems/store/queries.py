"""Statements of message queries: one message by place or id, messages by key or by time.

Every query is an index range read: (topic, partition, offset) is the message table's
unique key, key lookups use (topic_id, msg_key, created_at) and time ranges use
(topic_id, partition_no, created_at). Tombstones never match a key (they have none) and are
left out of time ranges.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

from ems.store.database import Database
from ems.types import StoredMessage
from ems.values.messages import SUMMARY_HEAD, MessageSummary
from ems.values.rows import PartitionSpan

#: Stand-ins for an open end of a time range (DATETIME's own bounds), so that each query
#: keeps one statement text.
EARLIEST = dt.datetime(1000, 1, 1)
LATEST = dt.datetime(9999, 12, 31, 23, 59, 59)
#: Partitions read by one UNION ALL statement of a time-range query.
PARTITIONS_PER_STATEMENT = 64

_COLUMNS = (
    "id, topic_id, partition_no, offset_no, msg_key, headers, body, created_at, tombstone, "
    "transactional"
)
_AT = f"SELECT {_COLUMNS} FROM message WHERE topic_id = %s AND partition_no = %s AND offset_no = %s"
_BY_ID = f"SELECT {_COLUMNS} FROM message WHERE id = %s"
_BY_IDS = f"SELECT {_COLUMNS} FROM message WHERE id IN ({{ids}})"
# Ordered by the index itself: (created_at, id) follows (topic_id, msg_key, created_at).
# Keyset order: a query goes on after (created_at, id) of the last row seen. The lower
# bound is raised to that created_at, so the index range starts there, and the rows of
# that same instant up to the last id are skipped (many rows can share one instant).
_AFTER = "AND (created_at > %s OR id > %s)"
_BY_KEY = (
    f"SELECT {_COLUMNS} FROM message WHERE topic_id = %s AND msg_key = %s "
    f"AND created_at >= %s AND created_at < %s {{partition}} {_AFTER} "
    "ORDER BY created_at, id LIMIT %s"
)
_IN_PARTITION = "AND partition_no = %s"
# One branch per partition, each an ordered range read of (topic_id, partition_no,
# created_at) that stops after `limit` rows; only ids travel, the rows follow by id.
_KEYS_IN_RANGE = (
    "(SELECT created_at, id FROM message WHERE topic_id = %s AND partition_no = %s "
    f"AND created_at >= %s AND created_at < %s AND tombstone = 0 {_AFTER} "
    "ORDER BY created_at, id LIMIT %s)"
)
# Keyset pages of summaries (the head of the body only), in the same order.
_SUMMARY = (
    "id, topic_id, partition_no, offset_no, msg_key, LENGTH(body), created_at, "
    f"SUBSTRING(body, 1, {SUMMARY_HEAD})"
)
_KEY_PAGE = (
    f"SELECT {_SUMMARY} FROM message WHERE topic_id = %s AND msg_key = %s "
    f"AND created_at >= %s AND created_at < %s {{partition}} {_AFTER} "
    "ORDER BY created_at, id LIMIT %s"
)
_RANGE_PAGE_KEYS = (
    "(SELECT created_at, id FROM message WHERE topic_id = %s AND partition_no = %s "
    f"AND created_at >= %s AND created_at < %s AND tombstone = 0 {_AFTER} "
    "ORDER BY created_at, id LIMIT %s)"
)
_SUMMARIES_BY_IDS = f"SELECT {_SUMMARY} FROM message WHERE id IN ({{ids}})"
# A partition by offset: a range read of the unique key (topic_id, partition_no, offset_no).
_OFFSET_PAGE = (
    f"SELECT {_SUMMARY} FROM message WHERE topic_id = %s AND partition_no = %s "
    "AND offset_no > %s AND tombstone = 0 ORDER BY offset_no LIMIT %s"
)
_SPAN = (
    "SELECT MIN(offset_no), MAX(offset_no) FROM message WHERE topic_id = %s AND partition_no = %s"
)
_LOW = "SELECT low_offset FROM partition_low WHERE topic_id = %s AND partition_no = %s"


def stored_message(row: Sequence[Any]) -> StoredMessage:
    return StoredMessage(
        id=int(row[0]),
        topic_id=int(row[1]),
        partition=int(row[2]),
        offset=int(row[3]),
        key=None if row[4] is None else bytes(row[4]),
        headers=json.loads(row[5]) if row[5] else {},
        body=bytes(row[6]),
        created_at=row[7],
        tombstone=bool(row[8]),
        transactional=bool(row[9]),
    )


def message_summary(row: Sequence[Any]) -> MessageSummary:
    return MessageSummary(
        id=int(row[0]),
        topic_id=int(row[1]),
        partition=int(row[2]),
        offset=int(row[3]),
        key=None if row[4] is None else bytes(row[4]),
        size=int(row[5]),
        created_at=row[6],
        head=bytes(row[7]),
    )


#: Where a time-ordered page starts: after this (created_at, id); None: from the start.
After = tuple[dt.datetime, int] | None


def _bounds(
    since: dt.datetime | None, until: dt.datetime | None, after: After
) -> tuple[dt.datetime, dt.datetime, dt.datetime, int]:
    """(lower, upper, after_at, after_id) of a keyset page's statement."""
    lower = since or EARLIEST
    if after is None:
        return lower, until or LATEST, lower, 0  # every id is above 0
    return max(lower, after[0]), until or LATEST, after[0], after[1]


def by_key_query(
    template: str,
    topic_id: int,
    key: bytes,
    since: dt.datetime | None,
    until: dt.datetime | None,
    after: After,
    limit: int,
    partition: int | None,
) -> tuple[str, tuple[object, ...]]:
    """A keyset page of the messages with this key (template: _BY_KEY, _KEY_PAGE), of
    one partition or all."""
    sql = template.format(partition="" if partition is None else _IN_PARTITION)
    lower, upper, at, last_id = _bounds(since, until, after)
    where = (topic_id, key, lower, upper, *(() if partition is None else (partition,)))
    return sql, (*where, at, last_id, limit)


def range_keys_query(
    template: str,
    topic_id: int,
    partitions: Sequence[int],
    bounds: tuple[dt.datetime, dt.datetime, dt.datetime, int],
    limit: int,
) -> tuple[str, tuple[object, ...]]:
    """The (created_at, id) of a keyset page of each partition (template:
    _KEYS_IN_RANGE, _RANGE_PAGE_KEYS), in one UNION ALL; bounds as _bounds gives them."""
    sql = " UNION ALL ".join([template] * len(partitions))
    return sql, tuple(v for p in partitions for v in (topic_id, p, *bounds, limit))


def by_ids_query(template: str, ids: Sequence[int]) -> tuple[str, tuple[object, ...]]:
    """Rows by id (template: _BY_IDS, _SUMMARIES_BY_IDS)."""
    return template.format(ids=", ".join(["%s"] * len(ids))), tuple(ids)


class QueryStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def at(self, topic_id: int, partition: int, offset: int) -> StoredMessage | None:
        """The row at this place (a tombstone too), or None."""
        rows = self.db.select(_AT, (topic_id, partition, offset))
        return stored_message(rows[0]) if rows else None

    def by_id(self, message_id: int) -> StoredMessage | None:
        rows = self.db.select(_BY_ID, (message_id,))
        return stored_message(rows[0]) if rows else None

    def by_key(
        self,
        topic_id: int,
        key: bytes,
        since: dt.datetime | None,
        until: dt.datetime | None,
        limit: int,
        partition: int | None = None,
        after: After = None,
    ) -> list[StoredMessage]:
        """Messages with this key created in [since, until), after the cursor, oldest
        first, at most limit."""
        query = by_key_query(_BY_KEY, topic_id, key, since, until, after, limit, partition)
        return [stored_message(r) for r in self.db.select(*query)]

    def in_range(
        self,
        topic_id: int,
        partitions: Sequence[int],
        since: dt.datetime | None,
        until: dt.datetime | None,
        limit: int,
        after: After = None,
    ) -> list[StoredMessage]:
        """Messages (no tombstones) of these partitions created in [since, until), after
        the cursor, merged in (created_at, id) order, at most limit. Each partition
        contributes at most `limit` index entries, so the cost does not grow with the
        range's size."""
        keys = self._range_keys(_KEYS_IN_RANGE, topic_id, partitions, since, until, after, limit)
        chosen = [message_id for _, message_id in sorted(keys)[:limit]]
        return self.by_ids(chosen)

    def _range_keys(
        self,
        template: str,
        topic_id: int,
        partitions: Sequence[int],
        since: dt.datetime | None,
        until: dt.datetime | None,
        after: After,
        limit: int,
    ) -> list[tuple[dt.datetime, int]]:
        """The keys of up to `limit` rows of each partition, PARTITIONS_PER_STATEMENT
        partitions per statement."""
        bounds = _bounds(since, until, after)
        keys: list[tuple[dt.datetime, int]] = []
        for i in range(0, len(partitions), PARTITIONS_PER_STATEMENT):
            chunk = partitions[i : i + PARTITIONS_PER_STATEMENT]
            query = range_keys_query(template, topic_id, chunk, bounds, limit)
            keys += [(r[0], int(r[1])) for r in self.db.select(*query)]
        return keys

    def by_ids(self, ids: Sequence[int]) -> list[StoredMessage]:
        """The rows with these ids, in the order given (ids not found are left out)."""
        if not ids:
            return []
        found = {m.id: m for m in map(stored_message, self.db.select(*by_ids_query(_BY_IDS, ids)))}
        return [found[i] for i in ids if i in found]

    def span(self, topic_id: int, partition: int) -> PartitionSpan:
        """Lowest and highest stored offsets and the purge watermark of a partition."""
        (first, last), *_ = self.db.select(_SPAN, (topic_id, partition))
        low = self.db.select(_LOW, (topic_id, partition))
        return PartitionSpan(
            first=None if first is None else int(first),
            last=None if last is None else int(last),
            purged_below=int(low[0][0]) if low else None,
        )

    def key_page(
        self,
        topic_id: int,
        key: bytes,
        since: dt.datetime | None,
        until: dt.datetime | None,
        after: After,
        limit: int,
        partition: int | None = None,
    ) -> list[MessageSummary]:
        """Summaries of the messages with this key created in [since, until), after the
        cursor, in (created_at, id) order, at most limit: one range read of the key index."""
        query = by_key_query(_KEY_PAGE, topic_id, key, since, until, after, limit, partition)
        rows = self.db.select(*query)
        return [message_summary(r) for r in rows]

    def range_page(
        self,
        topic_id: int,
        partitions: Sequence[int],
        since: dt.datetime | None,
        until: dt.datetime | None,
        after: After,
        limit: int,
    ) -> list[MessageSummary]:
        """Summaries of the messages (no tombstones) of these partitions created in
        [since, until), after the cursor, merged in (created_at, id) order, at most limit.
        Each partition contributes at most `limit` index entries."""
        keys = self._range_keys(_RANGE_PAGE_KEYS, topic_id, partitions, since, until, after, limit)
        return self.summaries([message_id for _, message_id in sorted(keys)[:limit]])

    def offset_page(
        self, topic_id: int, partition: int, after: int | None, limit: int
    ) -> list[MessageSummary]:
        """Summaries of a partition's messages (no tombstones) above offset `after`
        (None: from the first), in offset order, at most limit."""
        params = (topic_id, partition, -1 if after is None else after, limit)
        return [message_summary(r) for r in self.db.select(_OFFSET_PAGE, params)]

    def summaries(self, ids: Sequence[int]) -> list[MessageSummary]:
        """The summaries of these ids, in the order given (ids not found are left out)."""
        if not ids:
            return []
        rows = self.db.select(*by_ids_query(_SUMMARIES_BY_IDS, ids))
        found = {m.id: m for m in map(message_summary, rows)}
        return [found[i] for i in ids if i in found]
