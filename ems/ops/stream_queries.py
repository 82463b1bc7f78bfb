"""Streaming queries for the admin console: a page of named queries (name, topics,
partitions, total lag, last commit) and one query's partitions, as ems.stream_queries
describes them for `ems spark queries` (the groups' lag rule, ems.groups.lag).

Each read is one statement, however many queries or partitions it shows. Names are
checked as text, not as ems names: the console shows whatever the table holds, a row
written by hand included (and renders it escaped).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from ems.display import shown
from ems.exceptions import InvalidCursor, InvalidName, UnknownStreamQuery
from ems.ops.browse_input import DEFAULT_PAGE, MAX_PREFIX, check_page_limit, check_prefix
from ems.store.client import StoreClient
from ems.stream_queries import StreamQueryDescription, describe_queries
from ems.values.browse import Page


@dataclass(frozen=True, kw_only=True, slots=True)
class StreamQuerySummary:
    query: str
    #: The topics it reads, by name.
    topics: tuple[str, ...]
    partitions: int
    #: Messages stored and not yet read, over every partition.
    lag: int
    #: When the query last committed a micro-batch.
    committed_at: dt.datetime


class StreamQueryReader(StoreClient):
    def page(
        self, prefix: str = "", after: str | None = None, limit: int = DEFAULT_PAGE
    ) -> Page[StreamQuerySummary]:
        """Named queries by name whose name starts with `prefix`, after the name `after`.
        InvalidName, InvalidCursor, InvalidSetting."""
        check_prefix(prefix)
        cursor = None if after is None else _check_query(after, InvalidCursor)
        check_page_limit(limit)
        found = describe_queries(self.store.stream_queries.page(prefix, cursor, limit + 1))
        items = tuple(summary(d) for d in found[:limit])
        more = len(found) > limit
        return Page(items=items, next_after=items[-1].query if more and items else None)

    def detail(self, name: str) -> StreamQueryDescription:
        """One query's partitions: InvalidName, or UnknownStreamQuery when it recorded
        none."""
        _check_query(name, InvalidName)
        found = describe_queries(self.store.stream_queries.positions(name))
        if not found:
            raise UnknownStreamQuery(
                f"no streaming query named {shown(name)} has committed a micro-batch "
                "(the ems source records positions for queries given ems.query.name)"
            )
        return found[0]


def summary(d: StreamQueryDescription) -> StreamQuerySummary:
    return StreamQuerySummary(
        query=d.query,
        topics=tuple(sorted({p.topic for p in d.partitions})),
        partitions=len(d.partitions),
        lag=d.lag,
        committed_at=d.committed_at,
    )


def _check_query(name: object, error: type[InvalidName] | type[InvalidCursor]) -> str:
    """A query name as the table may hold it: text of 1 to 128 characters."""
    if not isinstance(name, str) or not 1 <= len(name) <= MAX_PREFIX:
        raise error(f"{shown(name)} is not a streaming query name (1 to 128 characters)")
    return name
