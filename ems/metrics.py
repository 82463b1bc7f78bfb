"""Prometheus metrics of producers, consumers and the scheduler, and the endpoint.

Every metric lives in one registry, so a process serves exactly what it uses. Names follow
Prometheus conventions (`_total` counters, base units: seconds, messages).
"""

from __future__ import annotations

import bisect
import functools
import itertools
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    start_http_server,
)
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

if TYPE_CHECKING:
    from ems.types import Settlement


class _HistogramChild:
    """Bucket counts of one label set. observe() is one bisect and one lock: a few
    times cheaper than prometheus_client's Histogram, which matters once per message."""

    __slots__ = ("_bounds", "_counts", "_lock", "_sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self._bounds = bounds
        self._counts = [0] * (len(bounds) + 1)
        self._sum = 0.0
        self._lock = threading.Lock()

    def observe(self, value: float) -> None:
        i = bisect.bisect_left(self._bounds, value)  # the first bound >= value: "le"
        with self._lock:
            self._counts[i] += 1
            self._sum += value

    def snapshot(self) -> tuple[list[int], float]:
        with self._lock:
            return list(self._counts), self._sum


#: A labelled metric's child type.
C = TypeVar("C")


class _Labelled(Collector, Generic[C]):
    """A labelled metric of ems's own: a child per label set, made on first use, and
    read under the lock when scraped."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str],
        registry: CollectorRegistry,
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self._children: dict[tuple[str, ...], C] = {}
        self._lock = threading.Lock()
        registry.register(self)

    def labels(self, *values: str) -> C:
        key = tuple(str(v) for v in values)
        with self._lock:
            child = self._children.get(key)
            if child is None:
                child = self._children[key] = self._child()
            return child

    def _child(self) -> C:
        """A new label set's child."""
        raise NotImplementedError

    def _children_now(self) -> list[tuple[tuple[str, ...], C]]:
        with self._lock:
            return list(self._children.items())


class FastHistogram(_Labelled[_HistogramChild]):
    """A labelled histogram for per-message observations, exposed like a Histogram
    (name_bucket{le=...}, name_count, name_sum)."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str],
        buckets: Sequence[float],
        registry: CollectorRegistry,
    ) -> None:
        self.bounds = tuple(float(b) for b in buckets)
        super().__init__(name, documentation, labelnames, registry)

    def _child(self) -> _HistogramChild:
        return _HistogramChild(self.bounds)

    def describe(self) -> list[Metric]:
        return [HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)]

    def collect(self) -> list[Metric]:
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for values, child in self._children_now():
            counts, total = child.snapshot()
            cumulative = list(itertools.accumulate(counts))
            les = [*map(floatToGoString, self.bounds), "+Inf"]
            family.add_metric(list(values), list(zip(les, cumulative, strict=True)), total)
        return [family]


class _CounterChild:
    """The count of one label set. inc() is one lock and one add: a third of what
    prometheus_client's Counter child costs, which a single send pays once."""

    __slots__ = ("_lock", "_value", "created")

    def __init__(self) -> None:
        self._value = 0.0
        self._lock = threading.Lock()
        self.created = time.time()

    def inc(self, amount: float = 1) -> None:
        if amount < 0:
            raise ValueError("a counter only goes up")
        # acquire() and release(), not `with`: the same, at less than half the cost.
        self._lock.acquire()
        try:
            self._value += amount
        finally:
            self._lock.release()

    def value(self) -> float:
        with self._lock:
            return self._value


class FastCounter(_Labelled[_CounterChild]):
    """A labelled counter for the publish path, exposed like a Counter (name_total and
    name_created per label set)."""

    def _child(self) -> _CounterChild:
        return _CounterChild()

    def describe(self) -> list[Metric]:
        return [CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)]

    def collect(self) -> list[Metric]:
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for values, child in self._children_now():
            family.add_metric(list(values), child.value(), created=child.created)
        return [family]


#: Lag per owned partition, or None when the consumer keeps no cursor.
LagSource = Callable[[], Mapping[int, int] | None]


class LagGauge(Collector):
    """Lag per (group, topic, partition), read from each consumer when scraped.

    A consumer whose handler blocks does not reach its consume loop, yet wake-ups keep
    announcing new messages: read at scrape time, the gauge shows the partition falling
    behind. Sources are held weakly, so a consumer dropped without close() leaves the
    gauge rather than freezing in it."""

    def __init__(self, name: str, documentation: str, registry: CollectorRegistry) -> None:
        self.name = name
        self.documentation = documentation
        self._sources: dict[object, tuple[tuple[str, str], weakref.WeakMethod[LagSource]]] = {}
        self._lock = threading.Lock()
        registry.register(self)

    def track(self, owner: object, labels: tuple[str, str], source: LagSource) -> None:
        """Read `source` (a bound method) for `owner`'s partitions until untrack."""
        with self._lock:
            self._sources[owner] = (labels, weakref.WeakMethod(source))

    def untrack(self, owner: object) -> None:
        with self._lock:
            self._sources.pop(owner, None)

    def describe(self) -> list[Metric]:
        return [self._family()]

    def collect(self) -> list[Metric]:
        with self._lock:
            sources = list(self._sources.items())
        samples: dict[tuple[str, str, str], int] = {}
        for owner, (labels, ref) in sources:
            source = ref()
            if source is None:
                self.untrack(owner)  # its consumer is gone
                continue
            for p, lag in (source() or {}).items():
                samples[(*labels, str(p))] = lag
        family = self._family()
        for values, lag in sorted(samples.items()):
            family.add_metric(list(values), lag)
        return [family]

    def _family(self) -> GaugeMetricFamily:
        return GaugeMetricFamily(
            self.name, self.documentation, labels=("group", "topic", "partition")
        )


REGISTRY = CollectorRegistry(auto_describe=True)

PUBLISHED = FastCounter("ems_published_messages", "Messages published.", ["topic"], REGISTRY)
CONSUMED = Counter(
    "ems_consumed_messages",
    "Messages a cluster or broadcast consumer finished, by outcome (done, retry, dead).",
    ["group", "topic", "outcome"],
    registry=REGISTRY,
)
HANDLER_SECONDS = FastHistogram(
    "ems_handler_seconds",
    "Time the handler took per message.",
    ["group", "topic"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
    registry=REGISTRY,
)
LAG = LagGauge(
    "ems_lag_messages",
    "High watermark minus committed offset, per partition.",
    registry=REGISTRY,
)
REBALANCES = Counter(
    "ems_rebalances",
    "Changes of the partitions this client owns.",
    ["group", "topic"],
    registry=REGISTRY,
)
LEADER_EPOCH = Gauge(
    "ems_leader_epoch",
    "Epoch of the group leader row this client holds (0 when it does not lead).",
    ["group", "topic"],
    registry=REGISTRY,
)
RETRIES = Counter(
    "ems_retries", "Messages sent to the retry table.", ["group", "topic"], registry=REGISTRY
)
DEAD_LETTERS = Counter(
    "ems_dead_letters",
    "Messages moved to the dead-letter table.",
    ["group", "topic"],
    registry=REGISTRY,
)
JOB_RUNS = Counter(
    "ems_job_runs",
    "Cleanup job runs by outcome (done, failed).",
    ["job", "status"],
    registry=REGISTRY,
)
JOB_SECONDS = Histogram(
    "ems_job_seconds", "Duration of cleanup job runs.", ["job"], registry=REGISTRY
)
SCHEDULER_ACTIVE = Gauge(
    "ems_scheduler_active",
    "1 while this scheduler holds the scheduler lease, else 0.",
    registry=REGISTRY,
)


def serve(port: int, addr: str = "0.0.0.0") -> int:
    """Serve /metrics on port (0 picks a free one); returns the port."""
    return start_server(port, addr).port


class MetricsServer:
    """A running /metrics endpoint; close() stops it and frees the port."""

    def __init__(self, server: Any, thread: threading.Thread) -> None:
        self._server = server
        self._thread = thread
        self.port = int(server.server_port)
        #: (host, port) the endpoint listens on.
        self.address: tuple[str, int] = (str(server.server_address[0]), self.port)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def start_server(
    port: int, addr: str = "0.0.0.0", registry: CollectorRegistry | None = None
) -> MetricsServer:
    """Serve /metrics of `registry` (default REGISTRY) on port (0 picks a free one) in a
    daemon thread."""
    server, thread = start_http_server(port, addr=addr, registry=registry or REGISTRY)
    return MetricsServer(server, thread)


@functools.cache
def published(topic: str) -> _CounterChild:
    """The PUBLISHED child of a topic, bound once: the publish path pays one inc()."""
    return PUBLISHED.labels(topic)


class ConsumerMetrics:
    """The metrics of one consumer, with their (group, topic) children bound once, so
    the consume path pays an inc() or observe() and no label lookup."""

    def __init__(self, group: str, topic: str) -> None:
        self.labels = (group, topic)
        self.done = CONSUMED.labels(group, topic, "done")
        self.retry = CONSUMED.labels(group, topic, "retry")
        self.dead = CONSUMED.labels(group, topic, "dead")
        self.handler_seconds = HANDLER_SECONDS.labels(group, topic)
        self.retries = RETRIES.labels(group, topic)
        self.dead_letters = DEAD_LETTERS.labels(group, topic)
        self.rebalances = REBALANCES.labels(group, topic)
        self.leader_epoch = LEADER_EPOCH.labels(group, topic)

    def settled(self, settlement: Settlement) -> None:
        """Count an ack batch by outcome: done, retry (the retry table, or in place for
        ordered groups) and dead."""
        dead = sum(1 for f in settlement.failed if f.delay is None)
        retried = len(settlement.failed) - dead + len(settlement.logged_only)
        if settlement.done:
            self.done.inc(len(settlement.done))
        if retried:
            self.retry.inc(retried)
            self.retries.inc(retried)
        if dead:
            self.dead.inc(dead)
            self.dead_letters.inc(dead)

    def broadcast(self, handled: int) -> None:
        """Broadcast groups keep no retry or dead letter: every delivery is done."""
        if handled:
            self.done.inc(handled)

    def track_lag(self, source: LagSource) -> None:
        """Report the lag `source` (a bound method) gives, read at each scrape, until
        left()."""
        LAG.track(self, self.labels, source)

    def left(self) -> None:
        """The client left its group: it leads nothing and owns no partition."""
        LAG.untrack(self)
        self.leader_epoch.set(0)
