"""Replay: deliver a range of a partition once more to one cluster group, moving neither
that group's cursor nor any other group.

The range (offsets A..B of one partition, or the messages created in [since, until) of one
partition or all) is queued, in bounded chunks, as retries of that group due now; the
partition's owner claims them through its ordinary retry path (it looks every second),
logs each delivery and acks it, and the retry row goes. Only offsets below the group's
committed cursor are queued: the group has not consumed the others yet and the stream
delivers them anyway.
Tombstones are skipped. Ordered groups are refused: a retry comes out of offset order.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass

from ems.config import Settings
from ems.display import parse_when
from ems.exceptions import ConflictingOptions, InvalidOffset, OffsetOutOfRange, UnsupportedGroup
from ems.ops.scope import Span, chosen_partitions, partition_spans, resolve_group
from ems.store import Store
from ems.store.client import StoreClient
from ems.types import GroupInfo, TopicInfo

#: Messages queued per statement.
CHUNK = 1000


@dataclass(frozen=True, kw_only=True, slots=True)
class ReplayRange:
    """Offsets [first, last] (both included) of one partition, or messages created in
    [since, until) (naive UTC)."""

    first: int | None = None
    last: int | None = None
    since: dt.datetime | None = None
    until: dt.datetime | None = None

    @property
    def by_offset(self) -> bool:
        return self.first is not None

    @classmethod
    def choose(
        cls,
        *,
        from_offset: int | None,
        to_offset: int | None,
        since: str | None,
        until: str | None,
        now: Callable[[], dt.datetime],
    ) -> ReplayRange:
        """Offsets (--from-offset, --to-offset) or times (--since, --until), never both;
        ConflictingOptions, InvalidOffset or InvalidDatetime otherwise. --to-offset
        defaults to the last stored offset, --until to now (the database clock)."""
        offsets = from_offset is not None or to_offset is not None
        times = since is not None or until is not None
        if offsets == times:
            raise ConflictingOptions(
                "give either --from-offset [--to-offset] or --since [--until], not both"
            )
        if offsets:
            if from_offset is None:
                raise ConflictingOptions("--to-offset needs --from-offset")
            for value in (from_offset, to_offset):
                if value is not None and (isinstance(value, bool) or value < 0):
                    raise InvalidOffset(f"offset must be a non-negative integer, not {value!r}")
            if to_offset is not None and to_offset < from_offset:
                raise ConflictingOptions("--to-offset must not be below --from-offset")
            return cls(first=from_offset, last=to_offset)
        if since is None:
            raise ConflictingOptions("--until needs --since")
        clock = now()
        start = parse_when(since, clock)
        end = clock if until is None else parse_when(until, clock)
        if end <= start:
            raise ConflictingOptions("--since must come before --until")
        return cls(since=start, until=end)


@dataclass(frozen=True, kw_only=True, slots=True)
class PartitionReplay:
    partition: int
    #: The group's committed cursor: only offsets below it are queued.
    cursor: int
    #: Messages queued (or, in a dry run, that would be).
    messages: int


@dataclass(frozen=True, kw_only=True, slots=True)
class ReplayResult:
    group: str
    topic: str
    range: ReplayRange
    dry_run: bool
    partitions: tuple[PartitionReplay, ...]

    @property
    def messages(self) -> int:
        return sum(p.messages for p in self.partitions)


def checked_offsets(span: Span, first: int, last: int | None) -> tuple[int, int]:
    """[first, last] within the stored offsets [earliest, high - 1] (pure)."""
    end = span.high - 1 if last is None else last
    if first < span.earliest or end >= span.high or first > end:
        raise OffsetOutOfRange(
            f"offsets {first}..{end} are not within the stored offsets "
            f"{span.earliest}..{span.high - 1}"
        )
    return first, end


class Replayer(StoreClient):
    """Queues replays (for the CLI and the admin console)."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        store: Store | None = None,
    ) -> None:
        super().__init__(settings, store=store)

    def range(
        self,
        *,
        from_offset: int | None = None,
        to_offset: int | None = None,
        since: str | None = None,
        until: str | None = None,
    ) -> ReplayRange:
        """ReplayRange.choose, with ages counted back from the database clock."""
        return ReplayRange.choose(
            from_offset=from_offset,
            to_offset=to_offset,
            since=since,
            until=until,
            now=self.store.messages.now,
        )

    def replay(
        self,
        group: str,
        span: ReplayRange,
        *,
        topic: str | None = None,
        partition: int | None = None,
        dry_run: bool = False,
    ) -> ReplayResult:
        """Queue the range for redelivery to `group` (count only, with dry_run). An offset
        range names one partition (ConflictingOptions without one on a topic of several)
        and must lie within the stored offsets (OffsetOutOfRange)."""
        info, topic_info = resolve_group(self.store, group, topic)
        if info.ordered:
            raise UnsupportedGroup(
                f"group {group!r} is ordered: a replay would come out of offset order; "
                "reset its offsets (ems group reset-offsets) to consume again in order"
            )
        if span.by_offset and partition is None and topic_info.partitions > 1:
            raise ConflictingOptions("an offset range names one partition: pass --partition")
        parts = chosen_partitions(
            topic_info, 0 if partition is None and span.by_offset else partition
        )
        spans = partition_spans(self.store, topic_info, parts)
        offsets = None
        if span.by_offset:
            assert span.first is not None
            offsets = checked_offsets(spans[parts[0]], span.first, span.last)
        cursors = self.store.groups.offsets(info.id)
        done = tuple(
            PartitionReplay(
                partition=p,
                cursor=cursors[p],
                messages=self._partition(info, topic_info, p, span, offsets, cursors[p], dry_run),
            )
            for p in parts
        )
        return ReplayResult(
            group=info.name, topic=topic_info.name, range=span, dry_run=dry_run, partitions=done
        )

    def _partition(
        self,
        group: GroupInfo,
        topic: TopicInfo,
        partition: int,
        span: ReplayRange,
        offsets: tuple[int, int] | None,
        cursor: int,
        dry_run: bool,
    ) -> int:
        count = 0
        if offsets is not None:
            after, last = offsets[0] - 1, min(offsets[1], cursor - 1)
            while after < last:
                rows = self.store.replays.by_offset(topic.id, partition, after, last, CHUNK)
                if not rows:
                    break
                count += self._queue(group, [i for i, _ in rows], dry_run)
                after = rows[-1][1]
            return count
        assert span.since is not None and span.until is not None
        key = (span.since, 0)
        while True:
            found = self.store.replays.by_time(topic.id, partition, key, span.until, cursor, CHUNK)
            if not found:
                return count
            count += self._queue(group, [i for i, _, _ in found], dry_run)
            key = (found[-1][2], found[-1][0])

    def _queue(self, group: GroupInfo, ids: list[int], dry_run: bool) -> int:
        return len(ids) if dry_run else self.store.replays.queue(group.id, ids)
