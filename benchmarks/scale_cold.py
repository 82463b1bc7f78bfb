"""The scale suite's cold drain: a new group reads the large topic from its first offsets,
as a new consumer of an existing stream does, while the buffer pool holds a small part of
the table.

One member process of a new cluster group (start earliest) holds all 16 partitions and
runs the push form with a handler that only counts, for COLD_SECONDS (or until it has drained
the whole topic, which a topic of a few million rows allows). The parent samples
the sum of the group's committed cursors and the server's disk page reads
(Innodb_buffer_pool_reads) every WINDOW seconds. Cold start: the rate over the first
COLD_START seconds; sustained: the rate over the last SUSTAINED seconds. Rows clustered by
a global id put a partition's rows on pages shared with the fifteen others, so as the
partitions' readers drift apart each page is read from disk for a sixteenth of its rows;
rows clustered by (topic, partition, offset) give each reader whole pages of its own.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from itertools import pairwise
from multiprocessing.synchronize import Barrier
from typing import Any

from benchmarks.aio_consume import counting_member
from benchmarks.consumer_procs import Fleet
from benchmarks.consumer_workers import GroupSpec
from benchmarks.harness import BenchConfig, query
from benchmarks.scale_drain import page_io
from ems.store import Store
from ems.types import TopicInfo

COLD_SECONDS = 60.0
WINDOW = 5.0
COLD_START = 10.0
SUSTAINED = 30.0

_COMMITTED = (
    "SELECT COALESCE(SUM(o.committed_offset), 0) FROM group_offset o "
    "JOIN consumer_group g ON g.id = o.group_id WHERE g.name = %s"
)


@dataclass(frozen=True, kw_only=True)
class ColdDrain:
    layout: str
    #: (seconds since the member was ready, committed messages, disk page reads so far)
    samples: tuple[tuple[float, int, int], ...]

    def rate(self, since: float, until: float) -> float:
        """Committed messages per second between the samples nearest two times."""
        return self._per_second(1, since, until)

    def page_reads(self, since: float, until: float) -> float:
        """Disk page reads per second between the samples nearest two times."""
        return self._per_second(2, since, until)

    def window_rates(self) -> list[float]:
        """Committed messages per second from each sample to the next."""
        return [
            (b[1] - a[1]) / (b[0] - a[0]) if b[0] > a[0] else 0.0 for a, b in pairwise(self.samples)
        ]

    def _per_second(self, field: int, since: float, until: float) -> float:
        a, b = self._at(since), self._at(until)
        return (b[field] - a[field]) / (b[0] - a[0]) if b[0] > a[0] else 0.0

    def _at(self, t: float) -> tuple[float, int, int]:
        return min(self.samples, key=lambda s: abs(s[0] - t))

    @property
    def end(self) -> float:
        return self.samples[-1][0]

    @property
    def cold(self) -> float:
        return self.rate(0.0, COLD_START)

    @property
    def sustained(self) -> float:
        return self.rate(self.end - SUSTAINED, self.end)

    @property
    def kept(self) -> float:
        """The sustained rate over the cold-start rate."""
        return self.sustained / self.cold if self.cold else 0.0

    @property
    def delivered(self) -> int:
        return self.samples[-1][1]


def member(events: Any, index: int, spec: GroupSpec, barrier: Barrier, stop: Any) -> None:
    """A new group's only member, from the first offsets."""
    counting_member(events, index, spec, barrier, stop, start="earliest")


def _sample(cfg: BenchConfig, group: str, since: float) -> tuple[float, int, int]:
    ((committed,),) = query(cfg.settings.database_url, _COMMITTED, (group,))
    return time.monotonic() - since, int(committed), page_io(cfg)[0]


def cold_drain(
    cfg: BenchConfig, store: Store, topic: TopicInfo, group: str, layout: str
) -> ColdDrain:
    """A new group drains the topic from its start for COLD_SECONDS (see the docstring)."""
    highs = store.messages.high_watermarks(topic)
    # The whole topic: far more than COLD_SECONDS can drain, so the member never finishes.
    spec = GroupSpec(cfg=cfg, group=group, workers=1, counts=dict(highs))
    fleet = Fleet()
    barrier = fleet.ctx.Barrier(1)  # held here until the child has it
    try:
        fleet.spawn(0, member, spec, barrier, fleet.stop)
        fleet.wait("ready", [0], 120)
        since = time.monotonic()
        samples = [_sample(cfg, group, since)]
        total = sum(highs.values())
        # Until COLD_SECONDS or the whole topic (a small topic drains in less).
        while samples[-1][0] < COLD_SECONDS and samples[-1][1] < total:
            fleet.pump(max(0.0, since + len(samples) * WINDOW - time.monotonic()))
            samples.append(_sample(cfg, group, since))
        fleet.stop.value = 1
        fleet.wait("done", [0], 120)
    finally:
        fleet.close()
    return ColdDrain(layout=layout, samples=tuple(samples))
