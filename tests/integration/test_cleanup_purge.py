"""The retention and delete-consumed purges against the real server: exact rows deleted
and kept, the low watermark, what is never purged, idempotence, and readers that lag."""

from __future__ import annotations

import itertools
import threading
import time
import types
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from ems import Consumer, TopicAdmin
from ems.config import Settings
from ems.exceptions import JobInterrupted
from ems.maintenance.jobs import run_job
from ems.maintenance.purge import Range, delete_consumed, purge_retention
from ems.offsets.reader import PartitionReader
from ems.store import Store
from ems.types import TopicInfo
from tests.integration import seed

OLD, NEW = 3.0, 0.0


@pytest.fixture
def topic(settings: Settings, store: Store) -> TopicInfo:
    return TopicAdmin(settings, store=store).create("t", 5, retention_hours=1)


def test_retention_deletes_expired_rows_in_chunks_and_raises_the_low_watermark(
    settings: Settings, store: Store, topic: TopicInfo
) -> None:
    g = seed.group(store, "g", topic)
    seed.messages(store, topic, 0, range(50), OLD)
    seed.messages(store, topic, 0, range(50, 60), NEW)
    seed.messages(store, topic, 1, range(10), OLD)  # all expired: the last row stays
    seed.messages(store, topic, 2, range(30), OLD)
    seed.retry(store, g, 2, 12, msg_id=seed.message_id(store, topic, 2, 12))
    seed.messages(store, topic, 3, range(30), OLD)
    seed.log(store, g, 3, 3, state="done")
    seed.log(store, g, 3, 7, state="start")
    seed.messages(store, topic, 4, range(20), OLD)  # hole at 20: a producer may fill it
    seed.messages(store, topic, 4, range(21, 26), NEW)

    small = settings.with_(purge_chunk_rows=7)
    planned = purge_retention(store, small, dry_run=True)
    assert seed.sql(store, "SELECT COUNT(*) FROM message") == [(60 + 10 + 30 + 30 + 25,)]
    assert seed.sql(store, "SELECT COUNT(*) FROM partition_low") == [(0,)]

    counts = purge_retention(store, small)

    assert counts == planned
    assert seed.offsets(store, topic, 0) == list(range(50, 60))
    assert seed.offsets(store, topic, 1) == [9]
    assert seed.offsets(store, topic, 2) == list(range(12, 30))
    assert seed.offsets(store, topic, 3) == list(range(7, 30))
    assert seed.offsets(store, topic, 4) == list(range(21, 26))
    lows = [seed.low(store, topic, p) for p in range(5)]
    assert lows == [50, 9, 12, 7, 20]
    assert counts == {"topics": 1, "partitions": 5, "deleted": 50 + 9 + 12 + 7 + 20}
    # Idempotent: nothing more to delete, nothing moves.
    assert purge_retention(store, settings)["deleted"] == 0
    assert [seed.low(store, topic, p) for p in range(5)] == lows


def expire_in_every_partition(store: Store, topic: TopicInfo, rows: int) -> None:
    """`rows` expired messages, then two young ones, in each of the topic's partitions."""
    for p in range(topic.partitions):
        seed.messages(store, topic, p, range(rows), OLD)
        seed.messages(store, topic, p, range(rows, rows + 2), NEW)


def watch_deletes(
    store: Store, monkeypatch: pytest.MonkeyPatch, seen: Callable[[list[Range]], object]
) -> None:
    """Call `seen` with the ranges of every purge transaction before it runs."""
    delete = store.purge.delete

    def watched(topic_id: int, ranges: list[Range], *rest: Any) -> dict[int, int]:
        seen(ranges)
        return delete(topic_id, ranges, *rest)

    monkeypatch.setattr(store.purge, "delete", watched)


def test_a_purge_round_takes_from_every_partition_in_chunk_sized_transactions(
    settings: Settings, store: Store, topic: TopicInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Rows of one time slice share pages whatever their partition: a round takes the
    # oldest rows of every partition, so pages empty in one pass.
    expire_in_every_partition(store, topic, 120)
    stop = threading.Event()
    transactions: list[list[Range]] = []

    def first_round_only(ranges: list[Range]) -> None:
        transactions.append(ranges)
        stop.set()  # the run ends at the next round's checkpoint

    watch_deletes(store, monkeypatch, first_round_only)
    with pytest.raises(JobInterrupted):
        run_job(
            store, settings.with_(purge_chunk_rows=100), "purge-retention", holder="t", stop=stop
        )
    # An even share would be 20 rows; each partition's DELETE takes at least 50, and a
    # transaction about 100 rows: two partitions each.
    assert transactions == [[(0, 0, 50), (1, 0, 50)], [(2, 0, 50), (3, 0, 50)], [(4, 0, 50)]]
    assert [seed.low(store, topic, p) for p in range(5)] == [50] * 5
    assert seed.sql(store, "SELECT COUNT(*) FROM message") == [(5 * 72,)]


def _patch_rest(monkeypatch: pytest.MonkeyPatch, rest: Callable[[float], object]) -> None:
    """The purge's sleeps go to `rest`; every other thread of the process keeps the real
    time.sleep (patching time.sleep itself made any thread a test left behind spin)."""
    fake = types.SimpleNamespace(monotonic=time.monotonic, sleep=rest)
    monkeypatch.setattr("ems.maintenance.purge.time", fake)


def test_a_purge_rests_after_every_transaction_in_proportion_to_its_work(
    settings: Settings, store: Store, topic: TopicInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A publish that meets the purge should wait for one short transaction at most, so
    # the rest comes after each transaction, not once per round of several.
    expire_in_every_partition(store, topic, 110)
    events: list[tuple[str, float, float]] = []  # (kind, when, rest asked for)
    watch_deletes(
        store, monkeypatch, lambda ranges: events.append(("delete", time.monotonic(), 0.0))
    )
    rest = lambda s: events.append(("rest", time.monotonic(), s))  # noqa: E731
    _patch_rest(monkeypatch, rest)
    started = time.monotonic()
    counts = purge_retention(store, settings.with_(purge_chunk_rows=50, purge_pause=3.0))

    assert counts["deleted"] == 5 * 110
    # Rounds of 50 rows per partition, one partition per transaction: 5 + 5 + 5 (10 rows).
    assert [kind for kind, _, _ in events] == ["delete", "rest"] * 15
    # Each rest is 3x the work since the previous one (the sleeps here take no time).
    previous = started
    for _, when, asked in (e for e in events if e[0] == "rest"):
        assert 0 < asked <= 3 * (when - previous)
        previous = when


def test_a_purge_without_a_pause_never_rests(
    settings: Settings, store: Store, topic: TopicInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed.messages(store, topic, 0, range(120), OLD)
    seed.messages(store, topic, 0, range(120, 121), NEW)
    rests: list[float] = []
    _patch_rest(monkeypatch, rests.append)
    counts = purge_retention(store, settings.with_(purge_chunk_rows=50, purge_pause=0.0))
    assert counts["deleted"] == 120 and rests == []


_names = itertools.count()
#: Per partition: expired rows from offset 0, young rows after them, a hole between the
#: two, and an offset some group is retrying (ignored when not stored).
_partition = st.tuples(
    st.integers(0, 12), st.integers(0, 4), st.booleans(), st.none() | st.integers(0, 16)
)


@hypothesis_settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(plans=st.lists(_partition, min_size=1, max_size=4), chunk=st.integers(1, 12))
def test_rounds_of_any_size_delete_exactly_what_the_rules_allow(
    settings: Settings, store: Store, plans: list[tuple[int, int, bool, int | None]], chunk: int
) -> None:
    n = next(_names)
    topic = TopicAdmin(settings, store=store).create(f"prop{n}", len(plans), retention_hours=1)
    g = seed.group(store, f"prop{n}", topic)
    expected: dict[int, tuple[list[int], int | None]] = {}
    for p, (old, young, hole, retried) in enumerate(plans):
        olds = list(range(old))
        youngs = list(range(old + hole, old + hole + young))
        for offsets, age in ((olds, OLD), (youngs, NEW)):
            if offsets:
                seed.messages(store, topic, p, offsets, age)
        stored = olds + youngs
        # Everything expired goes, but the first young row and a hole before it, a retried
        # offset and what follows it, and the partition's last row.
        end = old if youngs else old - 1
        if retried in stored:
            seed.retry(store, g, p, retried, msg_id=seed.message_id(store, topic, p, retried))
            end = min(end, retried)
        end = max(end, 0)
        expected[p] = ([o for o in stored if o >= end], end if end > 0 else None)

    purge_retention(store, settings.with_(purge_chunk_rows=chunk))

    for p, (kept, low) in expected.items():
        assert (seed.offsets(store, topic, p), seed.low(store, topic, p)) == (kept, low)


def test_a_young_topic_and_a_long_retention_lose_nothing(settings: Settings, store: Store) -> None:
    admin = TopicAdmin(settings, store=store)
    long = admin.create("long", 1, retention_hours=24)
    seed.messages(store, long, 0, range(10), OLD)
    assert purge_retention(store, settings)["deleted"] == 0
    assert seed.offsets(store, long, 0) == list(range(10))
    assert seed.low(store, long, 0) is None


def test_a_lagging_reader_jumps_to_the_low_watermark_without_tombstones(
    settings: Settings, store: Store, topic: TopicInfo
) -> None:
    seed.messages(store, topic, 0, range(50), OLD)
    seed.messages(store, topic, 0, range(50, 60), NEW)
    purge_retention(store, settings)
    reader = PartitionReader(store.messages, gap_timeout=0.01)
    batch = reader.read(topic.id, 0, 10, 100)
    assert [m.offset for m in batch.messages] == list(range(50, 60))
    assert batch.next_offset == 60
    assert seed.sql(store, "SELECT COUNT(*) FROM message WHERE tombstone = 1") == [(0,)]


def test_a_cluster_consumer_whose_cursor_was_purged_continues_at_the_low_watermark(
    settings: Settings, store: Store, topic: TopicInfo
) -> None:
    g = seed.group(store, "g", topic)
    seed.messages(store, topic, 0, range(50), OLD)
    seed.messages(store, topic, 0, range(50, 60), NEW)
    seed.commit(store, g, 0, 5)
    purge_retention(store, settings)
    got: list[int] = []
    with Consumer(
        "g", "t", settings=settings, start="earliest", lease_ttl=2.0, renew_every=0.5
    ) as consumer:
        for _ in range(40):
            batch = consumer.poll(timeout=0.5)
            consumer.ack(batch)
            got += [d.offset for d in batch if d.partition == 0]
            if len(got) >= 10:
                break
    assert got == list(range(50, 60))
    assert store.groups.offsets(g.id)[0] == 60
    assert seed.sql(store, "SELECT COUNT(*) FROM message WHERE tombstone = 1") == [(0,)]


def test_earliest_and_describe_stay_right_after_a_purge(
    settings: Settings, store: Store, topic: TopicInfo
) -> None:
    seed.messages(store, topic, 0, range(50), OLD)
    seed.messages(store, topic, 0, range(50, 60), NEW)
    purge_retention(store, settings)
    late = seed.group(store, "late", topic)
    assert store.groups.offsets(late.id)[0] == 50
    stats = store.topics.partition_stats(topic)[0]
    assert (stats.low_watermark, stats.high_watermark) == (50, 60)


def test_delete_consumed_follows_the_slowest_cluster_group(
    settings: Settings, store: Store
) -> None:
    admin = TopicAdmin(settings, store=store)
    topic = admin.create("dc", 2)
    plain = admin.create("plain", 1)
    lonely = admin.create("lonely", 1)
    seed.sql(store, "UPDATE topic SET delete_consumed = 1 WHERE name IN ('dc', 'lonely')")
    for t, parts in ((topic, 2), (plain, 1), (lonely, 1)):
        for p in range(parts):
            seed.messages(store, t, p, range(20), NEW)
    fast, slow = seed.group(store, "fast", topic), seed.group(store, "slow", topic)
    seed.commit(store, fast, 0, 15)
    seed.commit(store, slow, 0, 8)
    seed.commit(store, fast, 1, 20)
    seed.commit(store, slow, 1, 20)
    seed.retry(store, slow, 1, 17, msg_id=seed.message_id(store, topic, 1, 17))
    other = seed.group(store, "g", plain)
    seed.commit(store, other, 0, 20)

    counts = delete_consumed(store, settings.with_(purge_chunk_rows=3))

    assert seed.offsets(store, topic, 0) == list(range(8, 20))
    assert seed.offsets(store, topic, 1) == list(range(17, 20))
    assert (seed.low(store, topic, 0), seed.low(store, topic, 1)) == (8, 17)
    assert seed.offsets(store, plain, 0) == list(range(20))  # not enabled
    assert seed.offsets(store, lonely, 0) == list(range(20))  # no cluster group
    assert counts == {"topics": 2, "partitions": 2, "deleted": 8 + 17}
    assert delete_consumed(store, settings)["deleted"] == 0


def test_a_late_row_in_a_chosen_range_stays_and_stops_the_watermark(
    settings: Settings, store: Store, topic: TopicInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A producer that took offset 5 long ago and stalled fills it after the purge chose
    the range 0..9 and before its transaction: the young row must survive, visible."""
    seed.messages(store, topic, 0, [*range(5), *range(6, 12)], OLD)
    late = {"done": False}

    def fill_the_hole(ranges: list[Range]) -> None:
        if not late["done"] and any(p == 0 for p, _, _ in ranges):
            late["done"] = True
            seed.messages(store, topic, 0, [5], NEW)

    watch_deletes(store, monkeypatch, fill_the_hole)
    purge_retention(store, settings)
    assert late["done"]
    assert 5 in seed.offsets(store, topic, 0)
    low = seed.low(store, topic, 0)
    assert low is not None and low <= 5
    reader = PartitionReader(store.messages, settings.gap_timeout)
    batch = reader.read(topic.id, 0, low, 20)
    assert 5 in [m.offset for m in batch.messages]
