"""The per-message histogram and the publish counter expose exactly what
prometheus_client's Histogram and Counter do, and the consumer metrics count a settlement
by outcome."""

from __future__ import annotations

import gc
import threading
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from ems.metrics import LAG, REGISTRY, ConsumerMetrics, FastCounter, FastHistogram
from ems.types import Failure, Settlement

BUCKETS = (0.001, 0.01, 0.1, 1.0, 10.0)


def samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in registry.collect()
        for s in family.samples
        if not s.name.endswith("_created")
    }


@given(st.lists(st.sampled_from(BUCKETS) | st.floats(0, 20, allow_nan=False), max_size=50))
def test_the_fast_histogram_matches_prometheus_client(values: list[float]) -> None:
    theirs, ours = CollectorRegistry(), CollectorRegistry()
    reference = Histogram("h", "doc", ["group"], buckets=BUCKETS, registry=theirs)
    fast = FastHistogram("h", "doc", ["group"], buckets=BUCKETS, registry=ours)
    for v in values:
        reference.labels("g").observe(v)
        fast.labels("g").observe(v)
    expected, got = samples(theirs), samples(ours)
    sums = [k for k in expected if k[0] == "h_sum"]
    for k in sums:
        assert abs(expected.pop(k) - got.pop(k)) < 1e-9
    assert got == expected


@given(st.lists(st.tuples(st.sampled_from(["a", "b", 'q"\\n']), st.integers(0, 10**6))))
def test_the_fast_counter_matches_prometheus_client(incs: list[tuple[str, int]]) -> None:
    theirs, ours = CollectorRegistry(), CollectorRegistry()
    reference = Counter("c", "doc", ["topic"], registry=theirs)
    fast = FastCounter("c", "doc", ["topic"], ours)
    for label, amount in incs:
        reference.labels(label).inc(amount)
        fast.labels(label).inc(amount)
    assert samples(ours) == samples(theirs)
    # The same text, but for the _created timestamps (each counter's own).
    text = [line for line in generate_latest(ours).splitlines() if b"_created{" not in line]
    assert text == [
        line for line in generate_latest(theirs).splitlines() if b"_created{" not in line
    ]
    created = {s.labels["topic"] for f in ours.collect() for s in f.samples if "created" in s.name}
    assert created == {label for label, _ in incs}


def test_the_fast_counter_only_goes_up_and_counts_every_thread() -> None:
    counter = FastCounter("c", "doc", ["topic"], CollectorRegistry())
    child = counter.labels("t")
    with pytest.raises(ValueError, match="only goes up"):
        child.inc(-1)
    threads = [
        threading.Thread(target=lambda: [child.inc() for _ in range(20_000)]) for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert child.value() == 80_000


def test_a_settlement_is_counted_by_outcome() -> None:
    group = f"g{uuid.uuid4().hex[:8]}"
    metrics = ConsumerMetrics(group, "t")
    metrics.settled(
        Settlement(
            done=[(0, 1), (0, 2), (1, 5)],
            failed=[Failure(0, 3, 9, 1, "e", 10.0), Failure(0, 4, 9, 16, "e", None)],
            logged_only=[Failure(1, 6, 9, 1, "e", 1.0)],
        )
    )
    labels = {"group": group, "topic": "t"}

    def get(name: str, **more: str) -> float | None:
        return REGISTRY.get_sample_value(name, {**labels, **more})

    assert get("ems_consumed_messages_total", outcome="done") == 3
    assert get("ems_consumed_messages_total", outcome="retry") == 2
    assert get("ems_consumed_messages_total", outcome="dead") == 1
    assert get("ems_retries_total") == 2
    assert get("ems_dead_letters_total") == 1


class Lags:
    """A consumer's lag source: its partitions and their lag change between scrapes."""

    def __init__(self) -> None:
        self.now: dict[int, int] | None = {0: 5, 1: 7}

    def read(self) -> dict[int, int] | None:
        return self.now


def lag(group: str, partition: str) -> float | None:
    labels = {"group": group, "topic": "t", "partition": partition}
    return REGISTRY.get_sample_value("ems_lag_messages", labels)


def test_the_lag_gauge_is_read_at_each_scrape_until_the_client_leaves() -> None:
    group = f"g{uuid.uuid4().hex[:8]}"
    metrics, lags = ConsumerMetrics(group, "t"), Lags()
    metrics.track_lag(lags.read)
    assert (lag(group, "0"), lag(group, "1")) == (5, 7)
    lags.now = {1: 3}  # partition 0 handed off, 1 caught up: no call to the metrics
    assert (lag(group, "0"), lag(group, "1")) == (None, 3)
    lags.now = None  # a session that keeps no cursor
    assert lag(group, "1") is None
    lags.now = {2: 1}
    metrics.left()
    assert lag(group, "2") is None


def test_a_lag_source_dropped_without_leaving_leaves_the_gauge() -> None:
    group = f"g{uuid.uuid4().hex[:8]}"
    metrics, lags = ConsumerMetrics(group, "t"), Lags()
    metrics.track_lag(lags.read)
    assert lag(group, "0") == 5
    del lags
    gc.collect()
    assert lag(group, "0") is None
    assert metrics not in LAG._sources  # forgotten, not kept for every scrape
