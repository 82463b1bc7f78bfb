"""Structured Streaming queries over ems topics, as operators see them: per partition the
offset a named query committed, the high watermark and the lag between them, shaped like
a consumer group's partitions (ems.groups.lag).

A streaming query is not a group member: Spark's checkpoint holds its position and it
takes no lease. The ems source records the position it commits for queries named by its
ems.query.name option (store.stream_queries), with the offsets each committed batch
skipped under failOnDataLoss=false; StreamQueries reads them back, and drops those of a
query that will not run again.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import groupby

from ems.exceptions import UnknownStreamQuery
from ems.groups import lag, utc
from ems.store.client import StoreClient
from ems.store.stream_queries import QueryPosition
from ems.validation import check_name


@dataclass(frozen=True, kw_only=True, slots=True)
class QueryPartition:
    topic: str
    partition: int
    #: The next offset the query reads.
    committed_offset: int
    #: One past the highest stored offset.
    high_watermark: int
    lag: int
    committed_at: dt.datetime
    #: Offsets retention purged before the query read them, which it skipped
    #: (failOnDataLoss=false), over its committed micro-batches.
    skipped_offsets: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class StreamQueryDescription:
    query: str
    partitions: tuple[QueryPartition, ...]
    #: Messages stored and not yet read, over every partition.
    lag: int
    #: When the query last committed a micro-batch.
    committed_at: dt.datetime
    #: Offsets it skipped (failOnDataLoss=false), over every partition.
    skipped_offsets: int = 0


class StreamQueries(StoreClient):
    def describe(self, name: str | None = None) -> list[StreamQueryDescription]:
        """Every named query (or the one named): UnknownStreamQuery when it recorded none."""
        if name is not None:
            check_name(name, "query name")
        described = describe_queries(self.store.stream_queries.positions(name))
        if name is not None and not described:
            raise UnknownStreamQuery(
                f"no streaming query named {name!r} has committed a micro-batch "
                "(the ems source records positions for queries given ems.query.name)"
            )
        return described

    def drop(self, name: str) -> int:
        """Forget a query's recorded positions (a query that will not run again); the
        partitions dropped. InvalidName, or UnknownStreamQuery when it recorded none.
        Spark's checkpoint is untouched: a query still running records its position
        again at its next commit."""
        check_name(name, "query name")
        dropped = self.store.stream_queries.drop(name)
        if not dropped:
            raise UnknownStreamQuery(f"no streaming query named {name!r} has recorded a position")
        return dropped


def describe_queries(positions: Sequence[QueryPosition]) -> list[StreamQueryDescription]:
    """Rows of store.stream_queries.positions (ordered by query) as one description per
    query."""
    out = []
    for query, rows in groupby(positions, key=lambda p: p.query):
        parts = tuple(_partition(p) for p in rows)
        out.append(
            StreamQueryDescription(
                query=query,
                partitions=parts,
                lag=sum(p.lag for p in parts),
                committed_at=max(p.committed_at for p in parts),
                skipped_offsets=sum(p.skipped_offsets for p in parts),
            )
        )
    return out


def _partition(p: QueryPosition) -> QueryPartition:
    return QueryPartition(
        topic=p.topic,
        partition=p.partition,
        committed_offset=p.committed_offset,
        high_watermark=p.high_watermark,
        lag=lag(p.high_watermark, p.committed_offset),
        committed_at=utc(p.committed_at),
        skipped_offsets=p.skipped_offsets,
    )
