"""Streaming queries for the admin console: a page of named queries (name, topics,
partitions, total lag, last commit, offsets skipped) and one query's partitions by pages,
as ems.stream_queries describes them for `ems spark queries` (the groups' lag rule,
ems.groups.lag).

Each read is one statement, however many queries or partitions it shows: the list's and
the detail's figures over every partition are aggregates taken in the server, and a page
shows at most 100 rows. Names are checked as text, not as ems names: the console shows
whatever the table holds, a row written by hand included (and renders it escaped).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from ems.display import shown
from ems.exceptions import InvalidCursor, InvalidName, UnknownStreamQuery
from ems.groups import utc
from ems.ops.browse_input import (
    DEFAULT_PAGE,
    MAX_PREFIX,
    QUERY_PARTITIONS,
    check_page_limit,
    check_partitions_limit,
    check_prefix,
    topic_partition_cursor,
)
from ems.store.client import StoreClient
from ems.store.stream_queries import QueryTotals
from ems.stream_queries import QueryPartition, describe_queries
from ems.values.browse import Page


@dataclass(frozen=True, kw_only=True, slots=True)
class StreamQuerySummary:
    query: str
    #: The first few topics it reads, by name (topic_count: all of them).
    topics: tuple[str, ...]
    topic_count: int
    partitions: int
    #: Messages stored and not yet read, over every partition.
    lag: int
    #: When the query last committed a micro-batch.
    committed_at: dt.datetime
    #: Offsets it skipped (failOnDataLoss=false), over every partition.
    skipped_offsets: int


@dataclass(frozen=True, kw_only=True, slots=True)
class StreamQueryDetail:
    """A query's figures over every partition, and one page of its partitions."""

    query: str
    #: Partitions by topic name and partition, after the page's cursor.
    partitions: tuple[QueryPartition, ...]
    partition_count: int
    lag: int
    committed_at: dt.datetime
    skipped_offsets: int
    #: Pass as `after` for the next page ("<topic>/<partition>"); None on the last.
    next_after: str | None


class StreamQueryReader(StoreClient):
    """The console's streaming queries: pages of them, one query's figures and
    partitions, and dropping one's positions."""

    def page(
        self, prefix: str = "", after: str | None = None, limit: int = DEFAULT_PAGE
    ) -> Page[StreamQuerySummary]:
        """Named queries by name whose name starts with `prefix`, after the name `after`.
        InvalidName, InvalidCursor, InvalidSetting."""
        check_prefix(prefix)
        cursor = None if after is None else _check_query(after, InvalidCursor)
        check_page_limit(limit)
        found = self.store.stream_queries.page(prefix, cursor, limit + 1)
        items = tuple(summary(t) for t in found[:limit])
        more = len(found) > limit
        return Page(items=items, next_after=items[-1].query if more and items else None)

    def detail(
        self, name: str, after: str | None = None, limit: int = QUERY_PARTITIONS
    ) -> StreamQueryDetail:
        """One query's figures and its partitions after `after` (a next_after), `limit`
        of them: InvalidName, InvalidCursor, InvalidSetting, or UnknownStreamQuery when
        it recorded none."""
        _check_query(name, InvalidName)
        cursor = topic_partition_cursor(after)
        check_partitions_limit(limit, QUERY_PARTITIONS)
        totals = self.totals(name)
        rows = self.store.stream_queries.partitions(name, cursor, limit + 1)
        described = describe_queries(rows[:limit])
        parts = described[0].partitions if described else ()
        last = parts[-1] if parts and len(rows) > limit else None
        return StreamQueryDetail(
            query=totals.query,
            partitions=parts,
            partition_count=totals.partitions,
            lag=totals.lag,
            committed_at=utc(totals.committed_at),
            skipped_offsets=totals.skipped_offsets,
            next_after=None if last is None else f"{last.topic}/{last.partition}",
        )

    def totals(self, name: str) -> QueryTotals:
        """One query's figures over every partition: InvalidName, or UnknownStreamQuery
        when it recorded none."""
        _check_query(name, InvalidName)
        found = self.store.stream_queries.totals(name)
        if found is None:
            raise _unknown(name)
        return found

    def drop(self, name: str) -> int:
        """Delete the query's recorded positions (whatever its name, a row written by hand
        included); the partitions dropped. InvalidName, UnknownStreamQuery."""
        _check_query(name, InvalidName)
        dropped = self.store.stream_queries.drop(name)
        if not dropped:
            raise _unknown(name)
        return dropped


def _unknown(name: str) -> UnknownStreamQuery:
    return UnknownStreamQuery(
        f"no streaming query named {shown(name)} has committed a micro-batch "
        "(the ems source records positions for queries given ems.query.name)"
    )


def summary(t: QueryTotals) -> StreamQuerySummary:
    return StreamQuerySummary(
        query=t.query,
        topics=t.topics,
        topic_count=t.topic_count,
        partitions=t.partitions,
        lag=t.lag,
        committed_at=utc(t.committed_at),
        skipped_offsets=t.skipped_offsets,
    )


def _check_query(name: object, error: type[InvalidName] | type[InvalidCursor]) -> str:
    """A query name as the table may hold it: text of 1 to 128 characters."""
    if not isinstance(name, str) or not 1 <= len(name) <= MAX_PREFIX:
        raise error(f"{shown(name)} is not a streaming query name (1 to 128 characters)")
    return name
