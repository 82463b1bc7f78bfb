"""What an offset operation applies to: one cluster group on one topic, some of its
partitions, and the offsets each partition holds. Bad input raises before anything is
read twice or written."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ems.exceptions import UnknownPartition, UnsupportedGroup
from ems.store import Store
from ems.store.lookup import find_group
from ems.types import GroupInfo, TopicInfo


@dataclass(frozen=True, kw_only=True, slots=True)
class Span:
    """The offsets a partition holds: [earliest, high). earliest is the start of its log
    (Kafka's log start offset): its low watermark, or 0 when nothing was purged; high is
    one past the highest stored offset, never below earliest (Kafka's log end). Not the
    lowest stored offset: sends given lower offsets may still be in flight (offsets are
    handed out before their rows commit), and a cursor put past them would skip them."""

    earliest: int
    high: int

    def __contains__(self, offset: object) -> bool:
        return isinstance(offset, int) and self.earliest <= offset <= self.high


def spans(
    bounds: Mapping[int, tuple[int, int | None]], partitions: Iterable[int]
) -> dict[int, Span]:
    """Spans from ResetStore.bounds rows: (highest stored or -1, low watermark or None)
    per partition; a partition without a row is empty at 0."""
    out = {}
    for p in partitions:
        highest, low = bounds.get(p, (-1, None))
        earliest = low or 0
        out[p] = Span(earliest=earliest, high=max(highest + 1, earliest))
    return out


def resolve_group(store: Store, name: str, topic: str | None) -> tuple[GroupInfo, TopicInfo]:
    """The cluster group `name` on `topic`, which may be left out when the group consumes
    one topic only. UnknownGroup, UnknownTopic, ConflictingOptions (several topics and no
    --topic), or UnsupportedGroup (a broadcast group: its cursors live in its members)."""
    group, info = find_group(store, name, topic)
    if group.mode != "cluster":
        raise UnsupportedGroup(
            f"group {name!r} is a broadcast group: its members keep their cursors in memory, "
            "so there are no stored offsets to reset or replay"
        )
    return group, info


def chosen_partitions(topic: TopicInfo, partition: int | Sequence[int] | None) -> list[int]:
    """[partition] (or the partitions given, sorted, without repeats) when each exists in
    the topic, every partition when None. UnknownPartition otherwise, an empty choice
    included."""
    if partition is None:
        return list(range(topic.partitions))
    chosen = [partition] if isinstance(partition, int) else list(partition)
    if not chosen:
        raise UnknownPartition(f"choose at least one partition of topic {topic.name!r}")
    for p in chosen:
        if isinstance(p, bool) or not isinstance(p, int):
            raise UnknownPartition(f"topic {topic.name!r} has no partition {p!r}")
        if not 0 <= p < topic.partitions:
            raise UnknownPartition(f"topic {topic.name!r} has no partition {p}")
    return sorted(set(chosen))


def partition_spans(store: Store, topic: TopicInfo, partitions: Sequence[int]) -> dict[int, Span]:
    return spans(store.resets.bounds(topic.id), partitions)
