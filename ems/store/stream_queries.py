"""Positions of named Structured Streaming queries over ems topics (stream_query_position):
written by the ems source when Spark commits a micro-batch, read by `ems spark queries`."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ems.store.browse import like_prefix
from ems.store.database import Database

_RECORD = (
    "INSERT INTO stream_query_position (query_name, topic_id, partition_no, committed_offset, "
    "committed_at) VALUES (%s, %s, %s, %s, NOW(6)) ON DUPLICATE KEY UPDATE "
    "committed_offset = VALUES(committed_offset), committed_at = NOW(6)"
)
# The high watermark of each recorded partition: one probe of the message table's key.
_POSITIONS = (
    "SELECT q.query_name, t.name, q.partition_no, q.committed_offset, q.committed_at, "
    "(SELECT COALESCE(MAX(m.offset_no) + 1, 0) FROM message m "
    "WHERE m.topic_id = q.topic_id AND m.partition_no = q.partition_no) "
    "FROM stream_query_position q JOIN topic t ON t.id = q.topic_id "
    "WHERE %s IS NULL OR q.query_name = %s ORDER BY q.query_name, t.name, q.partition_no"
)
# A page of queries (the admin console's): the names first, then their rows, in one statement.
_PAGE = (
    "SELECT q.query_name, t.name, q.partition_no, q.committed_offset, q.committed_at, "
    "(SELECT COALESCE(MAX(m.offset_no) + 1, 0) FROM message m "
    "WHERE m.topic_id = q.topic_id AND m.partition_no = q.partition_no) "
    "FROM (SELECT DISTINCT query_name FROM stream_query_position "
    "WHERE query_name LIKE %s ESCAPE '!' AND (%s IS NULL OR query_name > %s) "
    "ORDER BY query_name LIMIT %s) n "
    "JOIN stream_query_position q ON q.query_name = n.query_name "
    "JOIN topic t ON t.id = q.topic_id ORDER BY q.query_name, t.name, q.partition_no"
)


@dataclass(frozen=True, kw_only=True, slots=True)
class QueryPosition:
    """One partition of a named streaming query."""

    query: str
    topic: str
    partition: int
    #: The next offset the query reads.
    committed_offset: int
    #: UTC, without tzinfo.
    committed_at: dt.datetime
    #: One past the partition's highest stored offset (0 when it holds none).
    high_watermark: int


class StreamQueryStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def record(self, query: str, positions: Sequence[tuple[int, int, int]]) -> None:
        """(topic id, partition, next offset) of every partition the query read, in one
        transaction."""
        if not positions:
            return
        with self.db.transaction() as cursor:
            cursor.executemany(_RECORD, [(query, t, p, o) for t, p, o in positions])

    def positions(self, query: str | None = None) -> list[QueryPosition]:
        """Every named query's positions (or one query's), by query, topic, partition."""
        return [_position(r) for r in self.db.select(_POSITIONS, (query, query))]

    def page(self, prefix: str, after: str | None, limit: int) -> list[QueryPosition]:
        """The positions of the first `limit` queries by name whose name starts with
        `prefix` (taken literally) and comes after `after`, by query, topic, partition."""
        params = (like_prefix(prefix), after, after, limit)
        return [_position(r) for r in self.db.select(_PAGE, params)]


def _position(r: tuple[Any, ...]) -> QueryPosition:
    return QueryPosition(
        query=r[0],
        topic=r[1],
        partition=int(r[2]),
        committed_offset=int(r[3]),
        committed_at=r[4],
        high_watermark=int(r[5]),
    )
