"""The lag exporter: Prometheus metrics of every consumer group read from the database, so
a group's lag stays visible when its consumers are gone (Burrow and kafka-lag-exporter
do the same for Kafka). `ems exporter` serves it; `ems scheduler --lag-metrics` adds it
to the scheduler's /metrics.

A read runs a fixed number of statements whatever the number of groups (see LagReader)
and is shaped by the pure functions `ems group describe` uses (ems.groups.describe_group),
so both say the same lag. The collector answers scrapes from its last read for
`cache_seconds`: many scrapers cost one read per that long.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ems.config import Settings
from ems.exceptions import EmsError
from ems.groups import GroupDescription, describe_group
from ems.store import Store
from ems.store.client import StoreClient
from ems.types import GroupInfo, MemberInfo, TopicInfo

log = logging.getLogger(__name__)

PARTITION_LABELS = ("group", "topic", "partition")
GROUP_LABELS = ("group", "topic")


@dataclass(frozen=True, kw_only=True, slots=True)
class GroupLagState:
    """One group on one topic as the exporter reports it."""

    #: What `ems group describe` computes: lag per partition (None for a partition
    #: without a cursor, and for broadcast groups), the members and whether each is live.
    description: GroupDescription
    #: Per partition of a cluster group: seconds since the oldest unconsumed message was
    #: written; 0 where nothing waits.
    lag_seconds: Mapping[int, float] = field(default_factory=dict)
    #: Messages in the retry table, and dead letters not resent (exact counts).
    retries_waiting: int = 0
    dead_letters: int = 0

    @property
    def live_members(self) -> int:
        return sum(1 for m in self.description.members if m.live)


def gather(
    *,
    groups: Sequence[GroupInfo],
    topics: Mapping[int, TopicInfo],
    committed: Mapping[int, Mapping[int, int]],
    high_watermarks: Mapping[int, Mapping[int, int]],
    members: Mapping[int, Sequence[MemberInfo]],
    ages: Mapping[int, Mapping[int, float]],
    waiting: Mapping[int, tuple[int, int]],
) -> list[GroupLagState]:
    """Join the rows read for every group (pure). A group whose topic is gone is left out."""
    out = []
    for g in groups:
        topic = topics.get(g.topic_id)
        if topic is None:
            continue
        described = describe_group(
            group=g,
            topic=topic,
            leader=None,
            members=members.get(g.id, ()),
            assignments=(),
            committed=committed.get(g.id, {}),
            high_watermarks=high_watermarks.get(g.topic_id, {}),
        )
        found = ages.get(g.id, {})
        seconds = {
            p.partition: found.get(p.partition, 0.0) if p.lag else 0.0
            for p in described.partitions
            if p.lag is not None
        }
        retries, dead = waiting.get(g.id, (0, 0))
        out.append(
            GroupLagState(
                description=described,
                lag_seconds=seconds,
                retries_waiting=retries,
                dead_letters=dead,
            )
        )
    return out


class LagReader(StoreClient):
    """Reads every group's lag state: nine statements however many groups there are."""

    def __init__(self, settings: Settings | None = None, *, store: Store | None = None) -> None:
        super().__init__(settings, store=store)

    def read(self) -> list[GroupLagState]:
        s = self.store
        groups = s.groups.all()
        topics = {t.id: t for t in s.topics.all()}
        # Cursors are read before the watermarks, as describe reads them: watermarks only
        # grow, so a cursor that moves in between cannot show up as a negative lag.
        committed = s.groups.all_offsets()
        ages = s.lag_metrics.lag_ages()
        return gather(
            groups=groups,
            topics=topics,
            committed=committed,
            high_watermarks=s.messages.every_high_watermark(topics.values()),
            members=s.leases.every_member(),
            ages=ages,
            waiting=s.lag_metrics.waiting(),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class _Reading:
    states: tuple[GroupLagState, ...]
    up: bool
    seconds: float
    monotonic_at: float


class LagCollector(Collector):
    """Prometheus collector of the groups' lag, read through `read` at most once per
    `cache_seconds` (0: every scrape). A failed read is reported as ems_exporter_up 0 with
    no group samples (a stale value would look current) and cached as long."""

    def __init__(
        self,
        read: Callable[[], Sequence[GroupLagState]],
        cache_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read = read
        self._cache = cache_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._last: _Reading | None = None

    def describe(self) -> list[Metric]:
        return list(families().values())

    def collect(self) -> list[Metric]:
        reading = self.reading()
        return render(
            reading.states, reading.up, reading.seconds, self._clock() - reading.monotonic_at
        )

    def reading(self) -> _Reading:
        """The last read, or a new one once it is older than cache_seconds. Scrapes that
        arrive during a read wait for it and share it."""
        with self._lock:
            last = self._last
            if last is None or self._clock() - last.monotonic_at >= self._cache:
                last = self._last = self._read_now()
            return last

    def _read_now(self) -> _Reading:
        start = self._clock()
        try:
            states, up = tuple(self._read()), True
        except EmsError as exc:
            log.warning("lag exporter: reading the database failed: %s", exc)
            states, up = (), False
        end = self._clock()
        return _Reading(states=states, up=up, seconds=end - start, monotonic_at=end)


def families() -> dict[str, GaugeMetricFamily]:
    """The exporter's metric families, without samples."""
    partition = PARTITION_LABELS
    group = GROUP_LABELS
    return {
        "lag": GaugeMetricFamily(
            "ems_group_lag_messages",
            "High watermark minus the group's committed offset, per partition (read from "
            "the database: stays while no consumer runs).",
            labels=partition,
        ),
        "lag_seconds": GaugeMetricFamily(
            "ems_group_lag_seconds",
            "Age of the partition's oldest unconsumed message (0 when nothing waits).",
            labels=partition,
        ),
        "retries": GaugeMetricFamily(
            "ems_group_retries_waiting",
            "Messages of the group waiting in the retry table (exact).",
            labels=group,
        ),
        "dead": GaugeMetricFamily(
            "ems_group_dead_letters",
            "Dead letters of the group not resent (exact).",
            labels=group,
        ),
        "members": GaugeMetricFamily(
            "ems_group_live_members",
            "Members of the group whose lease runs.",
            labels=group,
        ),
        "up": GaugeMetricFamily(
            "ems_exporter_up", "1 when the exporter's last read of the database succeeded."
        ),
        "duration": GaugeMetricFamily(
            "ems_exporter_scrape_duration_seconds",
            "Seconds the exporter's last read of the database took.",
        ),
        "age": GaugeMetricFamily(
            "ems_exporter_data_age_seconds",
            "Seconds since that read (scrapes within the cache time share one read).",
        ),
    }


def render(states: Sequence[GroupLagState], up: bool, seconds: float, age: float) -> list[Metric]:
    """The metric families of one reading (pure)."""
    f = families()
    for state in states:
        d = state.description
        labels = [d.group, d.topic]
        for p in d.partitions:
            if p.lag is not None:
                f["lag"].add_metric([*labels, str(p.partition)], p.lag)
        for partition, age_seconds in sorted(state.lag_seconds.items()):
            f["lag_seconds"].add_metric([*labels, str(partition)], age_seconds)
        if d.mode == "cluster":
            f["retries"].add_metric(labels, state.retries_waiting)
            f["dead"].add_metric(labels, state.dead_letters)
        f["members"].add_metric(labels, state.live_members)
    f["up"].add_metric([], 1 if up else 0)
    f["duration"].add_metric([], seconds)
    f["age"].add_metric([], max(0.0, age))
    return list(f.values())


def lag_collector(store: Store, cache_seconds: float) -> LagCollector:
    """A collector reading through `store` (which stays the caller's to close)."""
    return LagCollector(LagReader(store.settings, store=store).read, cache_seconds)
