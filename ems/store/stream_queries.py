"""Positions of named Structured Streaming queries over ems topics (stream_query_position):
written by the ems source when Spark commits a micro-batch, read by `ems spark queries`
and the admin console, dropped by `ems spark queries drop` and pruned by the purge-log
job once a query has not committed for EMS_STREAM_QUERY_RETENTION."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ems.store.browse import like_prefix
from ems.store.database import Database

# A commit adds the offsets its batch skipped to what the partition's row already holds.
_RECORD = (
    "INSERT INTO stream_query_position (query_name, topic_id, partition_no, committed_offset, "
    "committed_at, skipped_offsets) VALUES (%s, %s, %s, %s, NOW(6), %s) ON DUPLICATE KEY UPDATE "
    "committed_offset = VALUES(committed_offset), committed_at = NOW(6), "
    "skipped_offsets = skipped_offsets + VALUES(skipped_offsets)"
)
# The high watermark of a recorded partition: one probe of the message table's key.
_HIGH = (
    "(SELECT COALESCE(MAX(m.offset_no) + 1, 0) FROM message m "
    "WHERE m.topic_id = q.topic_id AND m.partition_no = q.partition_no)"
)
_POSITIONS = (
    "SELECT q.query_name, t.name, q.partition_no, q.committed_offset, q.committed_at, "
    f"q.skipped_offsets, {_HIGH} "
    "FROM stream_query_position q JOIN topic t ON t.id = q.topic_id "
    "WHERE %s IS NULL OR q.query_name = %s ORDER BY q.query_name, t.name, q.partition_no"
)
#: Topics a query's summary names (topic_count counts them all): five names of at most
#: 128 characters fit MySQL's default group_concat_max_len (1,024 bytes), so a longer
#: list, cut there, never cuts one of them.
SUMMARY_TOPICS = 5
# Per query, over every partition it recorded: partitions, total lag (the groups' rule,
# never negative), last commit, offsets skipped, and its topics. {names} selects the
# queries; the aggregates are taken in the server, one row per query.
_SUMMARIES = (
    "SELECT r.query_name, COUNT(*), SUM(GREATEST(0, r.high - r.committed_offset)), "
    "MAX(r.committed_at), SUM(r.skipped_offsets), COUNT(DISTINCT r.topic), "
    "SUBSTRING_INDEX(GROUP_CONCAT(DISTINCT r.topic ORDER BY r.topic SEPARATOR ' '), ' ', "
    f"{SUMMARY_TOPICS}) "
    "FROM (SELECT q.query_name, t.name AS topic, q.committed_offset, q.committed_at, "
    f"q.skipped_offsets, {_HIGH} AS high "
    "FROM ({names}) n JOIN stream_query_position q ON q.query_name = n.query_name "
    "JOIN topic t ON t.id = q.topic_id) r GROUP BY r.query_name ORDER BY r.query_name"
)
_PAGE_NAMES = (
    "SELECT DISTINCT query_name FROM stream_query_position "
    "WHERE query_name LIKE %s ESCAPE '!' AND (%s IS NULL OR query_name > %s) "
    "ORDER BY query_name LIMIT %s"
)
_ONE_NAME = "SELECT %s AS query_name"
_PAGE = _SUMMARIES.format(names=_PAGE_NAMES)
_SUMMARY = _SUMMARIES.format(names=_ONE_NAME)
# One query's partitions after (topic, partition), by topic name and partition: the page's
# keys first, then a high watermark probe for each of them only.
_PARTITIONS = (
    "SELECT q.query_name, q.name, q.partition_no, q.committed_offset, q.committed_at, "
    f"q.skipped_offsets, {_HIGH} "
    "FROM (SELECT p.query_name, t.name, p.topic_id, p.partition_no, p.committed_offset, "
    "p.committed_at, p.skipped_offsets FROM stream_query_position p "
    "JOIN topic t ON t.id = p.topic_id WHERE p.query_name = %s "
    "AND (%s IS NULL OR (t.name, p.partition_no) > (%s, %s)) "
    "ORDER BY t.name, p.partition_no LIMIT %s) q ORDER BY q.name, q.partition_no"
)
_DROP = "DELETE FROM stream_query_position WHERE query_name = %s"
_PRUNE = (
    "DELETE FROM stream_query_position WHERE committed_at < NOW(6) - INTERVAL %s SECOND LIMIT %s"
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
    #: Offsets purged by retention that the query skipped (failOnDataLoss=false).
    skipped_offsets: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class QueryTotals:
    """One named streaming query over every partition it recorded."""

    query: str
    partitions: int
    #: Messages stored and not yet read (per partition never negative).
    lag: int
    #: UTC, without tzinfo.
    committed_at: dt.datetime
    skipped_offsets: int
    #: The first SUMMARY_TOPICS of its topics, by name.
    topics: tuple[str, ...]
    topic_count: int


class StreamQueryStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def record(
        self,
        query: str,
        positions: Sequence[tuple[int, int, int]],
        skipped: Mapping[tuple[int, int], int] | None = None,
    ) -> None:
        """(topic id, partition, next offset) of every partition the query read, in one
        transaction, adding `skipped` ((topic id, partition) -> offsets the committed
        batch skipped) to each partition's count."""
        if not positions:
            return
        gaps = skipped or {}
        rows = [(query, t, p, o, gaps.get((t, p), 0)) for t, p, o in positions]
        with self.db.transaction() as cursor:
            cursor.executemany(_RECORD, rows)

    def positions(self, query: str | None = None) -> list[QueryPosition]:
        """Every named query's positions (or one query's), by query, topic, partition."""
        return [_position(r) for r in self.db.select(_POSITIONS, (query, query))]

    def page(self, prefix: str, after: str | None, limit: int) -> list[QueryTotals]:
        """The first `limit` queries by name whose name starts with `prefix` (taken
        literally) and comes after `after`, each over all its partitions."""
        params = (like_prefix(prefix), after, after, limit)
        return [_totals(r) for r in self.db.select(_PAGE, params)]

    def totals(self, query: str) -> QueryTotals | None:
        """One query over all its partitions; None when it recorded none."""
        found = self.db.select(_SUMMARY, (query,))
        return _totals(found[0]) if found else None

    def partitions(
        self, query: str, after: tuple[str, int] | None, limit: int
    ) -> list[QueryPosition]:
        """One query's first `limit` partitions by topic name and partition after `after`
        (a topic name and a partition)."""
        topic, partition = after if after is not None else (None, None)
        params = (query, topic, topic, partition, limit)
        return [_position(r) for r in self.db.select(_PARTITIONS, params)]

    def drop(self, query: str) -> int:
        """Delete a query's positions; the rows deleted."""
        with self.db.single() as cursor:
            return int(cursor.execute(_DROP, (query,)))

    def prune(self, older_than: float, chunk: int) -> int:
        """Delete up to `chunk` positions not committed for older_than seconds."""
        with self.db.single() as cursor:
            return int(cursor.execute(_PRUNE, (int(older_than), chunk)))


def _position(r: tuple[Any, ...]) -> QueryPosition:
    return QueryPosition(
        query=r[0],
        topic=r[1],
        partition=int(r[2]),
        committed_offset=int(r[3]),
        committed_at=r[4],
        skipped_offsets=int(r[5]),
        high_watermark=int(r[6]),
    )


def _totals(r: tuple[Any, ...]) -> QueryTotals:
    return QueryTotals(
        query=r[0],
        partitions=int(r[1]),
        lag=int(r[2]),
        committed_at=r[3],
        skipped_offsets=int(r[4]),
        topic_count=int(r[5]),
        topics=tuple(str(r[6]).split(" ")),
    )
