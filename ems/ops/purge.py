"""Message purges: retention, and early deletion of what every cluster group consumed.

Per partition, a purge walks forward from the low watermark in chunks of at most
`purge_chunk_rows` (<= 10,000) rows. Each chunk's end (exclusive) is the smallest of:

- past the last expired row before the first young one (retention; the first young row,
  and any hole just before it that a slow producer may still fill, stay);
- the lowest offset some group is retrying or has in flight (never purged);
- the lowest cursor committed by the topic's cluster groups (delete-consumed);
- the highest stored offset: the last row always stays, so the high watermark (which
  producers re-seed their counters from) survives a purge.

The chunk raises the low watermark to its end and deletes its range in one short
transaction; readers below the low watermark jump to it (ems/offsets/reader.py).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterable

from ems.config import Settings
from ems.ops.checkpoint import checkpoint
from ems.store import Store
from ems.store.purge import Window

#: A DELETE never removes more rows than this, whatever the settings say.
MAX_CHUNK_ROWS = 10_000


def chunk_end(
    start: int, window: Window, last_old: int | None, limits: Iterable[int | None]
) -> int | None:
    """End (exclusive) of the next range to delete from `start`, or None when there is
    nothing to delete. `window`: the next rows from start; `last_old`: the highest stored
    offset below window.first_young; `limits`: offsets the range may not reach past."""
    if window.last is None:
        return None
    if window.first_young is None:
        end = window.last + 1
    elif last_old is None:
        return None
    else:
        end = last_old + 1
    for limit in limits:
        if limit is not None:
            end = min(end, limit)
    return end if end > start else None


def purge_partition(
    store: Store,
    topic_id: int,
    partition: int,
    *,
    cutoff: dt.datetime | None,
    consumed: int | None,
    chunk: int,
    dry_run: bool = False,
    pause: float = 0.0,
) -> int:
    """Delete the partition's rows created before `cutoff` (None: any age) and below
    `consumed` (None: no such bound), in chunks; the rows deleted (with dry_run: counted
    chunk by chunk the same way, and nothing deleted)."""
    purge = store.purge
    start = purge.low(topic_id, partition) or 0
    deleted = 0
    while True:
        checkpoint()
        window = purge.window(topic_id, partition, start, chunk, cutoff)
        last_old = None
        if window.first_young is not None and window.first_young > start:
            last_old = purge.last_before(topic_id, partition, start, window.first_young)
        floors = purge.floors(topic_id, partition)
        end = chunk_end(start, window, last_old, (floors.unsettled, floors.top, consumed))
        if end is None:
            return deleted
        if dry_run:
            deleted += purge.count(topic_id, partition, start, end)
        else:
            began = time.monotonic()
            deleted += purge.delete(topic_id, partition, start, end)
            _yield(time.monotonic() - began, pause)
        start = end


def _yield(busy: float, ratio: float) -> None:
    """Rest for `ratio` times the chunk's own duration, so publishers get the server (its
    CPU, redo log and row locks) for that share of the time while a purge runs."""
    if ratio > 0:
        time.sleep(busy * ratio)


def _chunk(settings: Settings) -> int:
    return max(1, min(settings.purge_chunk_rows, MAX_CHUNK_ROWS))


def purge_retention(store: Store, settings: Settings, *, dry_run: bool = False) -> dict[str, int]:
    """Delete messages older than their topic's retention_hours, never one still being
    retried or in flight, nor the last row of a partition. dry_run: count them only."""
    chunk = _chunk(settings)
    counts = {"topics": 0, "partitions": 0, "deleted": 0}
    for topic in store.topics.all():
        cutoff = store.purge.cutoff(topic.retention_hours)
        counts["topics"] += 1
        for partition in range(topic.partitions):
            n = purge_partition(
                store,
                topic.id,
                partition,
                cutoff=cutoff,
                consumed=None,
                chunk=chunk,
                dry_run=dry_run,
                pause=settings.purge_pause,
            )
            counts["deleted"] += n
            counts["partitions"] += 1 if n else 0
    return counts


def delete_consumed(store: Store, settings: Settings, *, dry_run: bool = False) -> dict[str, int]:
    """For topics with delete_consumed set: delete the messages every cluster group of the
    topic has committed past (nothing for a topic without one), with the same rules.
    dry_run: count them only."""
    chunk = _chunk(settings)
    counts = {"topics": 0, "partitions": 0, "deleted": 0}
    for topic_id, partitions in store.purge.consumed_topics():
        bounds = store.purge.consumed(topic_id)
        counts["topics"] += 1
        for partition in range(partitions):
            if partition not in bounds:
                continue
            n = purge_partition(
                store,
                topic_id,
                partition,
                cutoff=None,
                consumed=bounds[partition],
                chunk=chunk,
                dry_run=dry_run,
                pause=settings.purge_pause,
            )
            counts["deleted"] += n
            counts["partitions"] += 1 if n else 0
    return counts
