"""The driver's half of the ems source: which topics and partitions, where a query starts,
and where each micro-batch (or a batch query) ends.

Ends are planned here, once, and kept in Spark's checkpoint; executors then read exactly
those ranges. An end is always a gap-free end (ems.offsets.ends), so a range holds a row
(a message or a tombstone) at every offset and reads the same whenever it is read again,
unless retention purges it meanwhile.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping

from ems.config import Settings
from ems.exceptions import ConflictingOptions, InvalidOffset, OffsetsPurged, UnknownPartition
from ems.offsets.ends import RangePlanner
from ems.store import Store
from ems.types import TopicInfo
from spark.source.options import EARLIEST, LATEST, Position, SourceOptions
from spark.source.ranges import OffsetRange, Place, Positions, rate_limit, split

log = logging.getLogger(__name__)

#: Planned micro-batches whose skips wait for their commit (Spark has at most two: the
#: one committed next and the one planned after it); older ones are forgotten.
MAX_PLANNED = 8


class Planner:
    def __init__(self, options: SourceOptions, settings: Settings) -> None:
        self.options = options
        self.store = Store(settings)
        self._ranges = RangePlanner(self.store.messages, settings.gap_timeout)
        self._ids: dict[str, int] = {}
        #: The high watermarks the last micro-batch was planned against.
        self.highs: Positions = {}
        #: Offsets purged by retention that the query skipped (failOnDataLoss=false).
        self.skipped = 0
        #: Per planned micro-batch (by its end), the offsets it skips per partition, until
        #: its commit records them: Spark commits a batch after planning the next one.
        self._planned_skips: dict[tuple[tuple[Place, int], ...], dict[Place, int]] = {}

    def close(self) -> None:
        self.store.close()

    def topics(self) -> list[TopicInfo]:
        """The topics the query reads now (UnknownTopic for a named one that is missing)."""
        if self.options.pattern is not None:
            found = [t for t in self.store.topics.all() if self.options.matches(t.name)]
        else:
            found = [self.store.topics.get(name) for name in self.options.topics]
        self._ids.update({t.name: t.id for t in found})
        return found

    def topic_id(self, name: str) -> int:
        if name not in self._ids:
            self._ids[name] = self.store.topics.get(name).id
        return self._ids[name]

    def spans(self) -> dict[Place, tuple[int, int]]:
        """(earliest, high watermark) of every partition the query reads."""
        spans: dict[Place, tuple[int, int]] = {}
        for topic in self.topics():
            for s in self.store.topics.partition_stats(topic):
                earliest = s.high_watermark if s.low_watermark is None else s.low_watermark
                spans[(topic.name, s.partition)] = (
                    min(earliest, s.high_watermark),
                    s.high_watermark,
                )
        return spans

    def resolve(self, position: Position, missing: int) -> Positions:
        """Offsets of every partition for earliest, latest or a JSON map (partitions the
        map leaves out: `missing`, EARLIEST or LATEST)."""
        spans = self.spans()
        if isinstance(position, dict):
            _check_map(position, spans)
        out: Positions = {}
        for place, (earliest, high) in spans.items():
            if isinstance(position, str):
                out[place] = earliest if position == "earliest" else high
                continue
            given = position.get(place[0], {}).get(place[1], missing)
            out[place] = earliest if given == EARLIEST else high if given == LATEST else given
        return out

    def start(self) -> Positions:
        """Where the query starts: at startingTimestamp if given (Kafka's precedence),
        else at startingOffsets."""
        millis = self.options.starting_timestamp
        if millis is None:
            return self.resolve(self.options.starting, EARLIEST)
        return self.at_time(millis, self.options.timestamp_strategy == "latest", "starting")

    def at_time(self, millis: int, lenient: bool, which: str) -> Positions:
        """Per partition, the first offset of a message stored at or after the time
        (through the time index); a partition with none: its high watermark if lenient,
        else InvalidOffset."""
        at = dt.datetime.fromtimestamp(millis / 1000, dt.UTC).replace(tzinfo=None)
        out: Positions = {}
        for (topic, partition), (earliest, high) in self.spans().items():
            found = self.store.resets.first_at(self.topic_id(topic), partition, at, earliest, high)
            if found is None and not lenient:
                raise InvalidOffset(
                    f"topic {topic!r} partition {partition} holds no message stored at or "
                    f"after {at.isoformat()}Z ({which}Timestamp {millis}); "
                    "startingOffsetsByTimestampStrategy=latest starts such partitions at "
                    "their end"
                )
            out[(topic, partition)] = high if found is None else found
        return out

    def latest(
        self, start: Positions, max_rows: int | None, cap: Mapping[Place, int] | None = None
    ) -> Positions:
        """The end of the next micro-batch from `start`: per partition the gap-free end,
        within max_rows offsets in all and at most `cap` (Trigger.AvailableNow's target).
        A partition new to the query joins at its earliest offset (read from the next
        batch on, so that every batch's start is in the checkpoint)."""
        spans = self.spans()
        self.highs = {place: high for place, (_, high) in spans.items()}
        end = dict(start)
        froms: Positions = {}
        highs: Positions = {}
        for place, (earliest, high) in spans.items():
            if place not in start:
                end[place] = earliest
                continue
            froms[place] = self._past_purge(place, start[place])
            highs[place] = high if cap is None else min(high, cap.get(place, earliest))
        for place, bound in rate_limit(froms, highs, max_rows).items():
            topic, partition = place
            first = froms[place]
            end[place] = self._ranges.gap_free_end(self.topic_id(topic), partition, first, bound)
        skips = {
            place: froms[place] - start[place] for place in froms if froms[place] > start[place]
        }
        if skips:
            self._planned_skips[_batch(end)] = skips
            while len(self._planned_skips) > MAX_PLANNED:
                del self._planned_skips[next(iter(self._planned_skips))]
        return end

    def record(self, query: str, end: Positions) -> None:
        """A committed micro-batch's end, as the query's position (store.stream_queries),
        with the offsets this planner saw the batch skip (failOnDataLoss=false), counted
        once: a batch planned by an earlier driver, or committed again, adds none."""
        rows = [(self.topic_id(t), p, offset) for (t, p), offset in sorted(end.items())]
        skips = self._planned_skips.pop(_batch(end), {})
        skipped = {(self.topic_id(t), p): n for (t, p), n in skips.items()}
        self.store.stream_queries.record(query, rows, skipped)

    def ranges(self, start: Positions, end: Positions) -> list[OffsetRange]:
        """The ranges between two positions, split for minPartitions."""
        ranges = [
            OffsetRange(
                topic=topic,
                topic_id=self.topic_id(topic),
                partition=partition,
                start=start.get((topic, partition), last),
                end=last,
            )
            for (topic, partition), last in sorted(end.items())
        ]
        return split(ranges, self.options.min_partitions)

    def batch(self) -> list[OffsetRange]:
        """A batch query's ranges: startingOffsets to endingOffsets, each end no further
        than the partition's gap-free end."""
        start = self.start()
        if self.options.ending_timestamp is None:
            bounds = self.resolve(self.options.ending, LATEST)
        else:
            bounds = self.at_time(self.options.ending_timestamp, True, "ending")
        end = {}
        for place, first in start.items():
            origin = self._past_purge(place, first)
            bound = bounds[place]
            end[place] = self._ranges.gap_free_end(self.topic_id(place[0]), place[1], origin, bound)
        return self.ranges(start, end)

    def _past_purge(self, place: Place, offset: int) -> int:
        """offset, or the low watermark when retention purged the partition past it:
        OffsetsPurged under failOnDataLoss, else the purged offsets are skipped (logged)."""
        topic, partition = place
        low = self.store.messages.low_offset(self.topic_id(topic), partition)
        if low is None or offset >= low:
            return offset
        if self.options.fail_on_data_loss:
            raise OffsetsPurged(
                f"topic {topic!r} partition {partition}: offsets {offset}..{low - 1} were "
                f"purged by retention before the query read them (the partition starts at "
                f"{low} now); failOnDataLoss=false skips them"
            )
        self.skipped += low - offset
        log.warning(
            "ems source: topic %r partition %d: skipping %d offsets purged by retention (%d..%d)",
            topic,
            partition,
            low - offset,
            offset,
            low - 1,
        )
        return low


def _batch(end: Positions) -> tuple[tuple[Place, int], ...]:
    """A micro-batch's key: its end offsets, in order."""
    return tuple(sorted(end.items()))


def _check_map(position: Mapping[str, Mapping[int, int]], spans: Mapping[Place, object]) -> None:
    topics = {t for t, _ in spans}
    for topic, partitions in position.items():
        if topic not in topics:
            raise ConflictingOptions(
                f"the offsets name topic {topic!r}, which the query does not read"
            )
        for partition in partitions:
            if (topic, partition) not in spans:
                raise UnknownPartition(f"topic {topic!r} has no partition {partition}")
