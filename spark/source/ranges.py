"""Offset ranges of the ems source and the arithmetic of planning them (pure: no Spark).

A position is a map (topic, partition) -> offset: the next offset to read, as a Kafka
consumer's position. Spark keeps positions in its checkpoint as JSON of Kafka's shape,
{"topic": {"0": 42}}.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import pairwise

#: (topic name, partition)
Place = tuple[str, int]
Positions = dict[Place, int]


@dataclass(frozen=True, kw_only=True, slots=True)
class OffsetRange:
    """[start, end) of one partition: what one Spark task reads."""

    topic: str
    topic_id: int
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def to_json(positions: Mapping[Place, int]) -> dict[str, dict[str, int]]:
    """Positions as Spark keeps them (topics and partitions in order, so equal positions
    serialize equally)."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(positions.items()):
        out.setdefault(topic, {})[str(partition)] = offset
    return out


def from_json(offsets: Mapping[str, Mapping[str, int]]) -> Positions:
    return {(t, int(p)): int(o) for t, parts in offsets.items() for p, o in parts.items()}


def rate_limit(
    starts: Mapping[Place, int], highs: Mapping[Place, int], max_rows: int | None
) -> Positions:
    """Where each partition's range may end at most: at its high watermark, or, when
    that would be more than max_rows offsets in all, at a share of max_rows proportional
    to what each partition has available (Kafka's maxOffsetsPerTrigger), the remainder
    going to the largest fractions."""
    available = {p: max(0, highs.get(p, s) - s) for p, s in starts.items()}
    total = sum(available.values())
    if max_rows is None or total <= max_rows:
        return {p: s + available[p] for p, s in starts.items()}
    shares = {p: max_rows * a // total for p, a in available.items()}
    left = max_rows - sum(shares.values())
    by_fraction = sorted(available, key=lambda p: (-(max_rows * available[p] % total), p))
    for place in by_fraction[:left]:
        shares[place] += 1
    return {p: s + shares[p] for p, s in starts.items()}


def split(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """The non-empty ranges, each cut into equal parts so that there are at least
    min_partitions tasks when there are at least that many offsets (Kafka's
    minPartitions): a range gets parts in proportion to its size."""
    ranges = [r for r in ranges if r.size > 0]
    total = sum(r.size for r in ranges)
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    out: list[OffsetRange] = []
    for r in ranges:
        parts = max(1, min(r.size, -(-r.size * min_partitions // total)))
        bounds = [r.start + r.size * i // parts for i in range(parts + 1)]
        out.extend(
            OffsetRange(topic=r.topic, topic_id=r.topic_id, partition=r.partition, start=a, end=b)
            for a, b in pairwise(bounds)
        )
    return out
