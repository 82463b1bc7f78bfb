"""The lag exporter (ems.ops.lag_exporter) on the real server: what it exports equals what
`ems group describe` says, a group whose consumers are gone keeps its lag, a read costs
the same statements for 3 groups as for 2,000, and scrapes share a read for the cache
time."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ems.config import Settings
from ems.groups import GroupAdmin
from ems.ops.lag_exporter import GroupLagState, LagCollector, LagReader, lag_collector
from ems.store import Store
from ems.topics import TopicAdmin
from tests.admin.test_statements import sent_statements
from tests.conftest import connect
from tests.integration import seed
from tests.integration.sql_seed import Seeded, seed_all

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def exported(collector: LagCollector) -> Samples:
    registry = CollectorRegistry(auto_describe=True)
    registry.register(collector)
    body = generate_latest(registry).decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }


def at(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def by_group(states: list[GroupLagState]) -> dict[str, GroupLagState]:
    return {f"{s.description.group}/{s.description.topic}": s for s in states}


def test_the_exporter_says_what_group_describe_says(store: Store) -> None:
    """The seeded billing group: a dead and a live member, a purged partition, a cursor
    past the watermark, two retries and a dead letter not resent (one resent)."""
    seeded: Seeded = seed_all(store)
    states = by_group(LagReader(store=store).read())
    assert set(states) == {"billing/orders", "audit/orders"}
    (described,) = GroupAdmin(store=store).describe("billing")
    billing = states["billing/orders"]
    assert [
        (p.partition, p.committed_offset, p.high_watermark, p.lag)
        for p in (billing.description.partitions)
    ] == [(p.partition, p.committed_offset, p.high_watermark, p.lag) for p in described.partitions]
    assert billing.description.total_lag == described.total_lag == 8
    assert (
        (billing.retries_waiting, billing.dead_letters)
        == (
            described.retries_waiting,
            described.dead_letters,
        )
        == (2, 1)
    )
    assert billing.live_members == sum(m.live for m in described.members) == 1
    assert described.lag_age_seconds is not None
    assert max(billing.lag_seconds.values()) == pytest.approx(described.lag_age_seconds, abs=5)
    # Caught-up partitions are 0 s behind; those with lag have an age.
    assert billing.lag_seconds[2] == billing.lag_seconds[3] == 0
    assert billing.lag_seconds[0] > 0 and billing.lag_seconds[1] > 0

    samples = exported(lag_collector(store, 0))
    labels = {"group": "billing", "topic": "orders"}
    for p in described.partitions:
        got = at(samples, "ems_group_lag_messages", **labels, partition=str(p.partition))
        assert got == p.lag
    assert at(samples, "ems_group_retries_waiting", **labels) == 2
    assert at(samples, "ems_group_dead_letters", **labels) == 1
    assert at(samples, "ems_group_live_members", **labels) == 1
    assert at(samples, "ems_exporter_up") == 1
    # The broadcast group keeps no cursor: members, no lag, no retries.
    audit = {"group": "audit", "topic": "orders"}
    assert at(samples, "ems_group_live_members", **audit) == 1
    assert at(samples, "ems_group_lag_messages", **audit, partition="0") is None
    assert at(samples, "ems_group_retries_waiting", **audit) is None
    assert seeded.audit.mode == "broadcast"


def test_a_group_without_consumers_keeps_its_lag(store: Store, settings: Settings) -> None:
    """No consumer process runs, so nothing in a consumer can report the lag: the exporter
    reads it from the stored high watermark and the committed cursors."""
    topic = TopicAdmin(store=store).create("readings", 2)
    seed.messages(store, topic, 0, range(5), age_hours=1)
    seed.messages(store, topic, 1, range(4), age_hours=2)
    group = seed.group(store, "handlers", topic)
    seed.commit(store, group, 0, 2)
    store.leases.register(group.id, "gone", "host-a", 7, 30)
    store.leases.delete("gone")
    samples = exported(lag_collector(store, 0))
    labels = {"group": "handlers", "topic": "readings"}
    assert at(samples, "ems_group_live_members", **labels) == 0
    (described,) = GroupAdmin(store=store).describe("handlers")
    assert described.members == ()
    for p in described.partitions:
        assert p.lag is not None and p.lag > 0
        got = at(samples, "ems_group_lag_messages", **labels, partition=str(p.partition))
        assert got == p.lag
    assert described.total_lag == 9 - 2
    ages = [at(samples, "ems_group_lag_seconds", **labels, partition=p) for p in "01"]
    assert ages == [pytest.approx(3600, abs=60), pytest.approx(7200, abs=60)]


def _many_groups(
    settings: Settings, topic_id: int, first: int, count: int, partitions: int
) -> None:
    """`count` cluster groups on the topic, each with a cursor per partition, written in
    bulk (as GroupStore.create would one by one; PyMySQL packs an executemany whose
    VALUES are all placeholders into multi-row INSERTs)."""
    conn = connect(settings)
    try:
        with conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO consumer_group (name, topic_id, mode) VALUES (%s, %s, %s)",
                [(f"bulk-{i:05d}", topic_id, "cluster") for i in range(first, first + count)],
            )
            cursor.execute(
                "SELECT id FROM consumer_group WHERE name >= %s AND name < %s",
                (f"bulk-{first:05d}", f"bulk-{first + count:05d}"),
            )
            ids = [int(r[0]) for r in cursor.fetchall()]
            cursor.executemany(
                "INSERT INTO group_offset (group_id, partition_no, committed_offset, generation) "
                "VALUES (%s, %s, %s, %s)",
                [(g, p, g % 3, 0) for g in ids for p in range(partitions)],
            )
        conn.commit()
    finally:
        conn.close()


def _statements(store: Store, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    with sent_statements(monkeypatch) as sent:
        states = LagReader(store=store).read()
    return len(sent), len(states)


def test_a_read_costs_the_same_statements_for_3_groups_as_for_2000(
    store: Store, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = TopicAdmin(store=store).create("wide", 4)
    for partition in range(4):
        seed.messages(store, topic, partition, range(5), age_hours=0.1)
    _many_groups(settings, topic.id, 0, 3, 4)
    LagReader(store=store).read()  # warm: the pool's first connections
    few, groups = _statements(store, monkeypatch)
    assert groups == 3
    _many_groups(settings, topic.id, 3, 1_997, 4)
    many, groups = _statements(store, monkeypatch)
    assert groups == 2_000
    assert many == few <= 10, (few, many)


def test_scrapes_share_a_read_for_the_cache_time(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed_all(store)
    now = [100.0]
    collector = LagCollector(LagReader(store=store).read, 5.0, clock=lambda: now[0])
    with sent_statements(monkeypatch) as sent:
        first = exported(collector)
        read = len(sent)
        now[0] += 4.9
        second = exported(collector)
        assert len(sent) == read > 0  # the cached read answered
        now[0] += 0.2
        exported(collector)
        assert len(sent) == 2 * read
    labels = {"group": "billing", "topic": "orders", "partition": "1"}
    assert at(first, "ems_group_lag_messages", **labels) == 5
    assert at(second, "ems_group_lag_messages", **labels) == 5
    assert at(second, "ems_exporter_data_age_seconds") == pytest.approx(4.9)


@pytest.fixture
def unreachable(settings: Settings) -> Iterator[Store]:
    down = settings.with_(
        database_url="mysql://root@127.0.0.1:1/ems", connect_attempts=1, connect_timeout=1.0
    )
    with closing(Store(down)) as store:
        yield store


def test_a_failed_read_is_up_0_with_no_stale_samples(unreachable: Store) -> None:
    samples = exported(lag_collector(unreachable, 0))
    assert at(samples, "ems_exporter_up") == 0
    assert not [name for name, _ in samples if name.startswith("ems_group_")]


def test_the_oldest_unconsumed_message_past_a_hole(store: Store, settings: Settings) -> None:
    """The age is the first stored message at or after the cursor, as describe reads it."""
    topic = TopicAdmin(store=store).create("holes", 1)
    seed.messages(store, topic, 0, range(3), age_hours=2)
    seed.messages(store, topic, 0, range(4, 6), age_hours=1)
    group = seed.group(store, "hole-readers", topic)
    seed.commit(store, group, 0, 3)
    (state,) = [s for s in LagReader(store=store).read() if s.description.group == "hole-readers"]
    (described,) = GroupAdmin(store=store).describe("hole-readers")
    assert state.description.total_lag == described.total_lag
    assert described.lag_age_seconds is not None
    assert state.lag_seconds[0] == pytest.approx(described.lag_age_seconds, abs=5)
    assert state.lag_seconds[0] == pytest.approx(3600, abs=60)
