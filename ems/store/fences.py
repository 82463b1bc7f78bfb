"""The partitions' fences: what a producer's rows are checked against, and how they move.

No message may be stored below its partition's low watermark (a purge removed that range
and readers jump over it), routed by a count of partitions the topic no longer has (ems.
store.partitions), or in a topic being deleted. A producer reads, in one statement, each
partition's fence number (partition_head.fence), low watermark and the topic's count, and
checks its rows against them in Python (refusal); the write's first row in each partition
then carries that partition's fence (the others NULL, which is never checked), and
message's foreign key on (topic_id, partition_no, fence) refuses the INSERT when a fence
has moved on since. Every change a row must be checked against again moves
the fence (move, in the change's own transaction): a purge that raises a low watermark, a
partition change (on every old partition), a delete's fence.

Why that holds: the foreign-key check takes a shared lock on the parent's key entry until
the insert commits, and moving the fence changes that entry under an exclusive lock. So a
change waits for the inserts checked against the fence it replaces, and an insert that
comes after it finds no entry for its fence and is refused. One row per partition is
enough: a write is atomic (one statement, or several in one transaction with each
partition's fenced row in the first of them that holds the partition), so its refusal
refuses every row, and the lock its check took holds until every row has committed. A
refused producer reads the fences again: rows still above the watermarks and routed by
the current count go again at the same offsets (no hole); others are refused as the old
guard refused them.

The fence is a key value, so moving it is an UPDATE of a referenced key, made with the
foreign-key checks off for that statement: the rows stored before keep the old value, which
no later row can name. The check costs the server an index lookup per fenced row (about
7 us for a single-row INSERT, against about 55 us for the scalar subquery it replaces: any
table a statement reads costs that much, benchmarks/guard_cost.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ems.store.errors import BelowLowWatermark

#: Each partition's fence and low watermark (0: never purged) and the topic's count, in one
#: statement (one snapshot: a change writes all three in one transaction).
FENCES_QUERY = (
    "SELECT h.partition_no, h.fence, COALESCE(l.low_offset, 0), t.partitions "
    "FROM partition_head h JOIN topic t ON t.id = h.topic_id "
    "LEFT JOIN partition_low l ON l.topic_id = h.topic_id AND l.partition_no = h.partition_no "
    "WHERE h.topic_id = %s"
)
_MOVE = (
    "UPDATE partition_head SET fence = fence + 1 WHERE topic_id = %s AND partition_no IN ({}) "
    "ORDER BY partition_no"
)
#: Reads of a topic's fences one insert makes at most: each follows a change that moved
#: a fence of its partitions after the read before (a purge round, a partition change).
FENCE_READS = 8
_CHECKS_OFF = "SET SESSION foreign_key_checks = 0"
_CHECKS_ON = "SET SESSION foreign_key_checks = 1"
_BELOW = "an offset lies below its partition's low watermark"


@dataclass(frozen=True, slots=True)
class Fences:
    """A topic's fences as read together: by partition, the fence and the low watermark;
    and the topic's count of partitions."""

    partitions: int
    fences: tuple[int, ...]
    lows: tuple[int, ...]


def fences_of(rows: Iterable[Sequence[Any]]) -> Fences | None:
    """FENCES_QUERY's rows as Fences; None for a topic without partitions (gone). Only
    partitions 0, 1, ... up to the first one without a row are kept: rows of a partition
    past a missing one are refused as in a partition the topic does not have."""
    found = sorted((int(p), int(f), int(low), int(n)) for p, f, low, n in rows)
    if not found:
        return None
    fences: list[int] = []
    lows: list[int] = []
    for p, fence, low, _ in found:
        if p != len(fences):
            break
        fences.append(fence)
        lows.append(low)
    return Fences(partitions=found[0][3], fences=tuple(fences), lows=tuple(lows))


def refusal(firsts: Mapping[int, int], fences: Fences, routed: int | None) -> str | None:
    """Why a write whose ranges start at `firsts` (by partition) may not be stored by these
    fences (None: it may, each partition's first row carrying its fence): routed by another count
    than the topic's, in a partition it does not have, or below a partition's low
    watermark. A partition's rows take consecutive offsets from its first (ems.types.
    Placed), so its first stands for all: one check per partition, none per row."""
    if routed is not None and routed != fences.partitions:
        return "the topic's partitions changed since the rows were routed"
    lows = fences.lows
    if len(firsts) == 1:  # one partition (every single send): no generator
        ((partition, first),) = firsts.items()
        if partition >= len(lows):
            return f"the topic has no partition {partition}"
        return _BELOW if first < lows[partition] else None
    highest = max(firsts)
    if highest >= len(lows):
        return f"the topic has no partition {highest}"
    if any(first < lows[partition] for partition, first in firsts.items()):
        return _BELOW
    return None


def read_fences(topic_id: int, rows: Iterable[Sequence[Any]]) -> Fences:
    """FENCES_QUERY's rows of the topic as Fences; BelowLowWatermark for a topic without
    partitions (deleted)."""
    fences = fences_of(rows)
    if fences is None:
        raise BelowLowWatermark(f"topic {topic_id} has no partitions; nothing was inserted")
    return fences


class FenceCache:
    """Each topic's fences as a store last read them, by topic id."""

    def __init__(self) -> None:
        self._kept: dict[int, Fences] = {}
        #: The topic's fences as kept, or None: the dict's own get, which every insert
        #: calls (no Python frame).
        self.get: Callable[[int], Fences | None] = self._kept.get

    def keep(self, topic_id: int, rows: Iterable[Sequence[Any]]) -> Fences:
        """FENCES_QUERY's rows of the topic (read_fences), kept for the next inserts."""
        try:
            fences = read_fences(topic_id, rows)
        except BelowLowWatermark:
            self._kept.pop(topic_id, None)
            raise
        self._kept[topic_id] = fences
        return fences


def stale(firsts: Mapping[int, int], fences: Fences, routed: int | None, *, fresh: bool) -> bool:
    """Whether the fences must be read again before a write whose ranges start at
    `firsts` goes (False: it may go with these). Fences read for this insert (fresh) that
    refuse the write: BelowLowWatermark. Fences read before may refuse rows that newer
    ones pass (rows routed by a count learned since): those are read again."""
    why = refusal(firsts, fences, routed)
    if why is None:
        return False
    if fresh:
        raise BelowLowWatermark(f"{why}; nothing was inserted")
    return True


def moved_too_often(topic_id: int) -> BelowLowWatermark:
    """The refusal of an insert whose fences moved on FENCE_READS times."""
    return BelowLowWatermark(
        f"the fences of topic {topic_id}'s partitions moved on {FENCE_READS} times during "
        "one insert; nothing was inserted"
    )


def move(cursor: Any, topic_id: int, partitions: Iterable[int]) -> None:
    """Move the partitions' fences on, in the caller's transaction (in partition order,
    as a purge takes the watermarks), with the foreign-key checks off for this statement
    only: the session's setting is put back whatever happens (a connection whose checks
    stayed off would store unchecked rows)."""
    listed = sorted(set(partitions))
    if not listed:
        return
    cursor.execute(_CHECKS_OFF)
    try:
        cursor.execute(_MOVE.format(",".join(["%s"] * len(listed))), (topic_id, *listed))
    finally:
        cursor.execute(_CHECKS_ON)
