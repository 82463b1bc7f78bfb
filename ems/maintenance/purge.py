"""Message purges: retention, and early deletion of what every cluster group consumed.

A topic is purged in rounds over its partitions. Each round takes, per partition still to
purge, the next range from its low watermark of at most `purge_chunk_rows / partitions`
rows (rounded up, and at least MIN_PARTITION_ROWS), and deletes them in short transactions
of about `purge_chunk_rows` rows (at the default of 50, one partition's range each), resting
after each transaction `purge_pause` times as long as its work took, so that publishers
never wait behind more than one short transaction. Rows of one time slice sit side by side
in the message table and its indexes whatever their partition, so a round empties pages
rather than thinning every page once per partition: a purge writes and rereads far fewer
pages than one that walks the partitions one after the other.

Each partition's range ends (exclusive) at the smallest of:

- past the last expired row before the first young one (retention; the first young row,
  and any hole just before it that a slow producer may still fill, stay);
- the lowest offset some group is retrying or has in flight (never purged);
- the lowest cursor committed by the topic's cluster groups (delete-consumed);
- the highest stored offset: the last row always stays, so the high watermark (which
  producers re-seed their counters from) survives a purge.

A partition's low watermark is raised to its range's end in the same transaction as its
DELETE; readers below the low watermark jump to it (ems/offsets/reader.py).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterable, Mapping

from ems.config import Settings
from ems.maintenance.checkpoint import checkpoint
from ems.store import Store
from ems.store.purge import Floors, Window

#: A round's transaction never deletes more than about this many rows, whatever the
#: settings say.
MAX_CHUNK_ROWS = 10_000
#: (partition, start, end): offsets [start, end) of one partition.
Range = tuple[int, int, int]


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


#: A round's DELETE of one partition may take this many rows even when an even share of
#: the chunk is smaller (many partitions), so each statement still removes a useful range.
MIN_PARTITION_ROWS = 50


def round_quota(chunk: int, partitions: int) -> int:
    """Rows per partition in a round: an even share of `chunk` over the partitions, but at
    least MIN_PARTITION_ROWS (or the whole chunk, when that is smaller)."""
    return max(-(-chunk // max(1, partitions)), min(chunk, MIN_PARTITION_ROWS))


def transactions(ranges: list[Range], chunk: int, quota: int) -> list[list[Range]]:
    """A round's ranges in consecutive transactions of at most about `chunk` rows."""
    size = max(1, chunk // quota)
    return [ranges[i : i + size] for i in range(0, len(ranges), size)]


def purge_topic(
    store: Store,
    topic_id: int,
    partitions: Mapping[int, int | None],
    *,
    cutoff: dt.datetime | None,
    chunk: int,
    dry_run: bool = False,
    pause: float = 0.0,
) -> dict[int, int]:
    """Delete, from each partition in `partitions` (partition -> offset the purge may not
    reach, or None), the rows created before `cutoff` (None: any age), in rounds; the rows
    deleted per partition (with dry_run: counted round by round the same way, and nothing
    deleted)."""
    purge = store.purge
    lows = purge.lows(topic_id)
    starts = {p: lows.get(p, 0) for p in partitions}
    deleted = dict.fromkeys(partitions, 0)
    while starts:
        checkpoint()
        began = time.monotonic()  # the round's reads count towards its first rest
        quota = round_quota(chunk, len(starts))
        floors = purge.floors(topic_id, starts)
        ranges: list[Range] = []
        for p, start in starts.items():
            end = _range_end(store, topic_id, p, start, quota, cutoff, floors.get(p), partitions[p])
            if end is not None:
                ranges.append((p, start, end))
        if not ranges:
            break
        if dry_run:
            for p, s, e in ranges:
                deleted[p] += purge.count(topic_id, p, s, e)
        else:
            for batch in transactions(ranges, chunk, quota):
                for p, n in purge.delete(topic_id, batch, cutoff).items():
                    deleted[p] += n
                began = _rest(began, pause)
        if dry_run:
            starts = {p: e for p, _, e in ranges}
        else:
            # Where each range really ended: a young row found inside one stops it.
            lows = purge.lows(topic_id)
            starts = {p: lows.get(p, e) for p, _, e in ranges}
    return deleted


def _range_end(
    store: Store,
    topic_id: int,
    partition: int,
    start: int,
    quota: int,
    cutoff: dt.datetime | None,
    floors: Floors | None,
    bound: int | None,
) -> int | None:
    if floors is None:  # the partition holds no message
        return None
    window = store.purge.window(topic_id, partition, start, quota, cutoff)
    last_old = None
    if window.first_young is not None and window.first_young > start:
        last_old = store.purge.last_before(topic_id, partition, start, window.first_young)
    return chunk_end(start, window, last_old, (floors.unsettled, floors.top, bound))


def _rest(began: float, ratio: float) -> float:
    """After each transaction, rest `ratio` times as long as the work since `began` took,
    so publishers get the server (its CPU, disk and row locks) for that share of the time
    while a purge runs. Resting after every transaction rather than once per round keeps
    each burst of purge work as short as one transaction: a publish that meets one waits
    for a short transaction, never for a whole round. Returns when the next work begins."""
    if ratio > 0:
        time.sleep((time.monotonic() - began) * ratio)
    return time.monotonic()


def _chunk(settings: Settings) -> int:
    return max(1, min(settings.purge_chunk_rows, MAX_CHUNK_ROWS))


def purge_retention(store: Store, settings: Settings, *, dry_run: bool = False) -> dict[str, int]:
    """Delete messages older than their topic's retention_hours, never one still being
    retried or in flight, nor the last row of a partition. dry_run: count them only."""
    targets = (
        (t.id, dict.fromkeys(range(t.partitions)), store.purge.cutoff(t.retention_hours))
        for t in store.topics.all()
    )
    return _purge_each(store, settings, targets, dry_run)


def delete_consumed(store: Store, settings: Settings, *, dry_run: bool = False) -> dict[str, int]:
    """For topics with delete_consumed set: delete the messages every cluster group of the
    topic has committed past (nothing for a topic without one), with the same rules.
    dry_run: count them only."""
    targets = (
        (topic_id, {p: low for p, low in store.purge.consumed(topic_id).items() if p < n}, None)
        for topic_id, n in store.purge.consumed_topics()
    )
    return _purge_each(store, settings, targets, dry_run)


#: (topic id, partition -> offset the purge may not reach or None, cutoff or None)
Target = tuple[int, Mapping[int, int | None], "dt.datetime | None"]


def _purge_each(
    store: Store, settings: Settings, targets: Iterable[Target], dry_run: bool
) -> dict[str, int]:
    """purge_topic for each target in turn (each is read just before its purge)."""
    chunk = _chunk(settings)
    counts = {"topics": 0, "partitions": 0, "deleted": 0}
    for topic_id, partitions, cutoff in targets:
        counts["topics"] += 1
        done = purge_topic(
            store,
            topic_id,
            partitions,
            cutoff=cutoff,
            chunk=chunk,
            dry_run=dry_run,
            pause=settings.purge_pause,
        )
        _add(counts, done)
    return counts


def _add(counts: dict[str, int], deleted: Mapping[int, int]) -> None:
    counts["deleted"] += sum(deleted.values())
    counts["partitions"] += sum(1 for n in deleted.values() if n)
