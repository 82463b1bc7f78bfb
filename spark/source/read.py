"""The executors' half of the ems source: the rows of one planned range.

A planned range holds a row at every offset (its end is a gap-free end), so reading it
needs no gap rule: it is read in pages by the fetch every partition reader uses,
tombstones are dropped, and an offset that is missing can only have been purged by
retention since the range was planned.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterator

from ems.exceptions import OffsetsPurged
from ems.store import Store
from ems.types import StoredMessage
from spark.source.ranges import OffsetRange

log = logging.getLogger(__name__)

#: Rows, and bytes of bodies, per fetch.
PAGE_ROWS = 2_000
PAGE_BYTES = 16 * 1024 * 1024
#: Kafka's timestampType for a time the log set on append (ems: the database's clock).
LOG_APPEND_TIME = 1

Row = tuple[object, ...]


def read_range(
    store: Store, r: OffsetRange, *, fail_on_data_loss: bool, include_headers: bool
) -> Iterator[Row]:
    """The messages of the range in offset order, as rows of the source's schema."""
    position = r.start
    while position < r.end:
        fetched = store.messages.fetch(
            r.topic_id, r.partition, position, min(PAGE_ROWS, r.end - position), PAGE_BYTES
        )
        rows = [m for m in fetched.rows if m.offset < r.end]
        if not rows:
            _lost(r, position, r.end, fail_on_data_loss)
            return
        for m in rows:
            if m.offset != position:
                _lost(r, position, m.offset, fail_on_data_loss)
            position = m.offset + 1
            if not m.tombstone:
                yield as_row(m, r.topic, include_headers)


def as_row(m: StoredMessage, topic: str, include_headers: bool) -> Row:
    """key, value, topic, partition, offset, timestamp, timestampType[, headers]."""
    row: Row = (
        m.key,
        m.body,
        topic,
        m.partition,
        m.offset,
        m.created_at.replace(tzinfo=dt.UTC),
        LOG_APPEND_TIME,
    )
    if include_headers:
        headers = [(k, v.encode()) for k, v in m.headers.items()] or None
        return (*row, headers)
    return row


def _lost(r: OffsetRange, first: int, end: int, fail: bool) -> None:
    what = f"topic {r.topic!r} partition {r.partition}: offsets {first}..{end - 1}"
    if fail:
        raise OffsetsPurged(
            f"{what} were purged by retention after the batch was planned; "
            "failOnDataLoss=false skips them"
        )
    log.warning("ems source: %s were purged by retention; skipped %d", what, end - first)
