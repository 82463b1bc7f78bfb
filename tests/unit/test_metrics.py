"""The per-message histogram exposes exactly what prometheus_client's Histogram does, and
the consumer metrics count a settlement by outcome."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Histogram

from ems.metrics import REGISTRY, ConsumerMetrics, FastHistogram
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
    metrics.set_lag({0: 5, 1: 7})
    metrics.set_lag({1: 3})
    assert get("ems_lag_messages", partition="0") is None
    assert get("ems_lag_messages", partition="1") == 3
