"""Statements of the admin console's series (ems.ops.browse): a group's lag and a topic's
volume over a window, sampled, not scanned: one dive per partition and bucket of the
window, so their cost does not grow with the capture rate or the rows stored."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from ems.store.database import Database

# A series samples its window: per bucket, the last capture in it (one dive into the
# captured_at index, which MIN/MAX answers while the statement is optimized: every capture
# writes one captured_at for all its rows), then per partition that capture's row (one
# lookup of the (owner, partition_no, captured_at) unique key, a join in that order: a
# join's lookup costs a third of a correlated subquery's, and the captured_at index, which
# holds every owner's rows of a capture, is never the one read). Each bucket is its own
# SELECT with constant bounds, so no plan depends on the optimizer's estimates.
_CAPTURE_IN = (
    "SELECT {n} AS n, (SELECT MAX(captured_at) FROM {table} WHERE {lower}captured_at <= %s) AS at"
)
_SAMPLED = (
    "SELECT STRAIGHT_JOIN c.n, c.at, SUM({value}), COUNT(*) FROM ({captures}) c "
    "JOIN partition_head h ON h.topic_id = %s "
    "JOIN {table} s FORCE INDEX ({key}) ON s.{owner} = %s "
    "AND s.partition_no = h.partition_no AND s.captured_at = c.at "
    "WHERE c.at IS NOT NULL GROUP BY c.n, c.at ORDER BY c.n"
)
_LAG = "GREATEST(s.high_watermark - s.committed_offset, 0)"
_VOLUME = "s.high_watermark"
_AFTER_CAPTURE = "captured_at > %s AND "
_KEY = "uq_{table}_{owner}_partition_no_captured_at"

#: A series bucket: (start, end]; no start: everything up to the end.
Bucket = tuple[dt.datetime | None, dt.datetime]
#: Per bucket whose last capture holds rows of the group or topic: the bucket's number,
#: that capture's time, the summed value and the partitions it has rows for.
SeriesRow = tuple[int, dt.datetime, int, int]


def series_query(
    table: str, owner: str, value: str, owner_id: int, topic_id: int, buckets: Sequence[Bucket]
) -> tuple[str, tuple[object, ...]]:
    """A series sampled from `table` (rows of `owner` = owner_id): one SELECT per bucket."""
    captures, params = [], []
    for n, (start, end) in enumerate(buckets):
        lower = "" if start is None else _AFTER_CAPTURE
        captures.append(_CAPTURE_IN.format(n=n, table=table, lower=lower))
        params += [end] if start is None else [start, end]
    sql = _SAMPLED.format(
        value=value,
        table=table,
        key=_KEY.format(table=table, owner=owner),
        owner=owner,
        captures=" UNION ALL ".join(captures),
    )
    return sql, (*params, topic_id, owner_id)


class SeriesStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def lag(self, group_id: int, topic_id: int, buckets: Sequence[Bucket]) -> list[SeriesRow]:
        """The group's summed lag (never negative per partition) at the last offset
        snapshot of each bucket."""
        return self._series("offset_snapshot", "group_id", _LAG, group_id, topic_id, buckets)

    def volume(self, topic_id: int, buckets: Sequence[Bucket]) -> list[SeriesRow]:
        """The topic's summed high watermark at the last watermark capture of each bucket."""
        return self._series("topic_watermark", "topic_id", _VOLUME, topic_id, topic_id, buckets)

    def _series(
        self,
        table: str,
        owner: str,
        value: str,
        owner_id: int,
        topic_id: int,
        buckets: Sequence[Bucket],
    ) -> list[SeriesRow]:
        if not buckets:
            return []
        rows = self.db.select(*series_query(table, owner, value, owner_id, topic_id, buckets))
        return [(int(r[0]), r[1], int(r[2]), int(r[3])) for r in rows if r[3]]
