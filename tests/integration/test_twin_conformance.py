"""The in-memory twin (ems.testing) keeps the MySQL store's and Redis's rules: every test
here runs once on the real servers and once on the twin, through the ports the consumer
uses, and through the real producers (ems.Producer and ems.aio.Producer) on each."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import time
from collections.abc import Callable, Iterator, Mapping

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from ems.consumer.groups import ensure_group
from ems.exceptions import (
    BodyTooLarge,
    EmsError,
    InvalidInput,
    InvalidSchedule,
    PartitionsNotAdded,
)
from ems.offsets.reader import PartitionReader
from ems.producer.partitioner import partition_for_key
from ems.producer.planning import MAX_BATCH
from ems.store import Store
from ems.store.errors import BelowLowWatermark, DuplicateKey, NotLeader, StaleGeneration
from ems.types import (
    Delivery,
    Failure,
    Fetched,
    GroupInfo,
    NewMessage,
    Record,
    Settlement,
    TopicInfo,
    placed_of,
)
from ems.validation import MAX_BATCH_BYTES
from tests.integration import seed, twins
from tests.integration.twins import Twin


@pytest.fixture(params=["mysql", "memory"])
def twin(request: pytest.FixtureRequest) -> Iterator[Twin]:
    if request.param == "mysql":
        yield twins.mysql(request.getfixturevalue("store"))
    else:
        yield twins.memory()


@pytest.fixture
def topic(twin: Twin) -> TopicInfo:
    return twin.create_topic("t", 4)


@pytest.fixture
def group(twin: Twin, topic: TopicInfo) -> GroupInfo:
    return ensure_group(twin.store, "g", topic, seed.options(None))


def _expired(read: Callable[[], float]) -> None:
    seed.wait_until(lambda: read() < 0)


def test_a_lease_is_renewed_while_live_and_refused_once_expired(
    twin: Twin, group: GroupInfo
) -> None:
    leases = twin.store.leases
    leases.register(group.id, "a", "h", 1, ttl=0.3)
    assert leases.renew("a", ttl=0.3, cpu_percent=50.0, load_rate=10.0)
    heartbeat = leases.heartbeat()  # a member's renewals
    assert heartbeat.renew("a", ttl=0.3)
    (member,) = leases.members(group.id)
    assert member.client_id == "a" and 0.1 < member.expires_in <= 0.3
    _expired(lambda: leases.members(group.id)[0].expires_in)
    assert not leases.renew("a", ttl=10)
    assert not heartbeat.renew("a", ttl=10)
    heartbeat.close()
    leases.delete("a")
    assert leases.members(group.id) == []


def test_the_epoch_grows_on_takeover_only(twin: Twin, group: GroupInfo) -> None:
    leases = twin.store.leases
    assert leases.lead(group.id, "a", ttl=0.3) == 1
    assert leases.lead(group.id, "a", ttl=0.3) == 1
    assert leases.lead(group.id, "b", ttl=0.3) is None
    _expired(lambda: leases.leader(group.id).expires_in)  # type: ignore[union-attr]
    assert leases.lead(group.id, "a", ttl=10) == 2  # its own row, but expired: a takeover
    leases.resign(group.id, "a", 2)
    assert leases.lead(group.id, "b", ttl=10) == 3
    leader = leases.leader(group.id)
    assert leader is not None and (leader.client_id, leader.epoch) == ("b", 3)


def test_a_deposed_leader_writes_nothing(twin: Twin, group: GroupInfo) -> None:
    s = twin.store
    s.leases.register(group.id, "a", "h", 1, ttl=10)
    assert s.leases.lead(group.id, "a", ttl=0.2) == 1
    _expired(lambda: s.leases.leader(group.id).expires_in)  # type: ignore[union-attr]
    assert s.leases.lead(group.id, "b", ttl=10) == 2
    before = s.assignments.rows(group.id)
    with pytest.raises(NotLeader):
        s.assignments.apply(group.id, ("a", 1), {0: "a"}, [])
    assert s.assignments.rows(group.id) == before


def test_apply_reaps_expired_clients_grants_at_a_new_generation_and_revokes(
    twin: Twin, group: GroupInfo
) -> None:
    s = twin.store
    s.leases.register(group.id, "a", "h", 1, ttl=10)
    s.leases.register(group.id, "gone", "h", 2, ttl=0.2)
    assert s.leases.lead(group.id, "a", ttl=10) == 1
    first = s.assignments.apply(group.id, ("a", 1), {0: "a", 1: "a"}, [])
    _expired(lambda: min(m.expires_in for m in s.leases.members(group.id)))
    second = s.assignments.apply(group.id, ("a", 1), {2: "a"}, [1, 3])
    assert second == first + 1
    assert [m.client_id for m in s.leases.members(group.id)] == ["a"]
    rows = {r.partition: (r.client_id, r.generation, r.state) for r in s.assignments.rows(group.id)}
    assert rows == {
        0: ("a", first, "assigned"),
        1: ("a", first, "revoking"),
        2: ("a", second, "assigned"),
        3: (None, 0, "released"),  # was never assigned: nothing to revoke
    }
    s.assignments.release(group.id, "a", {1: second})  # not the generation it holds
    s.assignments.release(group.id, "a", {0: first})  # not revoking
    s.assignments.release(group.id, "b", {1: first})  # not the owner
    assert [r.state for r in s.assignments.rows(group.id)][:2] == ["assigned", "revoking"]
    s.assignments.release(group.id, "a", {1: first})
    assert s.assignments.rows(group.id)[1].state == "released"


def _owning(twin: Twin, group: GroupInfo, partitions: dict[int, str]) -> int:
    s = twin.store
    for client in sorted(set(partitions.values())):
        s.leases.register(group.id, client, "h", 1, ttl=10)
    epoch = s.leases.lead(group.id, sorted(partitions.values())[0], ttl=10)
    assert epoch is not None
    return s.assignments.apply(group.id, (sorted(partitions.values())[0], epoch), partitions, [])


def test_a_commit_is_fenced_and_all_or_nothing(twin: Twin, group: GroupInfo) -> None:
    s = twin.store
    generation = _owning(twin, group, {0: "a", 1: "b"})
    s.groups.commit(group.id, "a", {0: (5, generation)})
    with pytest.raises(StaleGeneration):
        s.groups.commit(group.id, "a", {0: (7, generation), 1: (9, generation)})
    with pytest.raises(StaleGeneration):
        s.groups.commit(group.id, "a", {0: (7, generation - 1)})
    s.leases.delete("a")  # no live lease: no commit, even of its own partition
    with pytest.raises(StaleGeneration):
        s.groups.commit(group.id, "a", {0: (7, generation)})
    assert s.groups.offsets(group.id) == {0: 5, 1: 0, 2: 0, 3: 0}


def _delivery(topic: TopicInfo, partition: int, offset: int, attempt: int = 1) -> Delivery:
    return Delivery(
        topic=topic.name,
        partition=partition,
        offset=offset,
        key=None,
        headers={},
        body=b"",
        timestamp=None,  # type: ignore[arg-type]
        attempt=attempt,
        message_id=0,
    )


def _message_ids(twin: Twin, topic: TopicInfo, partition: int) -> dict[int, int]:
    return {
        m.offset: m.id
        for m in twin.store.messages.fetch(topic.id, partition, 0, 100, MAX_BATCH_BYTES).rows
    }


def test_settle_logs_retries_dead_letters_and_commits_in_one_step(
    twin: Twin, topic: TopicInfo, group: GroupInfo
) -> None:
    s = twin.store
    for offset in range(3):
        twin.put(topic, 0, offset, b"m%d" % offset)
    ids = _message_ids(twin, topic, 0)
    generation = _owning(twin, group, {0: "a"})
    s.consumption.start(group.id, topic.id, "a", [_delivery(topic, 0, o) for o in range(3)])
    s.consumption.start(group.id, topic.id, "a", [_delivery(topic, 0, 2)])  # again: attempt 2
    assert twin.log_state(group, 0, 2) == ("start", 2)
    settlement = Settlement(
        done=[(0, 0)],
        failed=[
            Failure(0, 1, ids[1], 1, "boom", 0.05),  # retried after 50 ms
            Failure(0, 2, ids[2], 2, "boom", None),  # out of attempts
        ],
        cursors={0: (3, generation)},
    )
    s.consumption.settle(group.id, topic.id, "a", settlement)
    assert [twin.log_state(group, 0, o) for o in range(3)] == [
        ("done", 1),
        ("retry", 1),
        ("dead", 2),
    ]
    assert twin.dead(group) == [(0, 2, b"m2")]
    assert s.groups.offsets(group.id)[0] == 3
    time.sleep(0.1)
    (due,) = s.consumption.claim_due(group.id, topic.name, [0, 1], 10, 30, MAX_BATCH_BYTES)
    assert (due.partition, due.offset, due.body, due.attempt) == (0, 1, b"m1", 2)
    assert (
        s.consumption.claim_due(group.id, topic.name, [0, 1], 10, 30, MAX_BATCH_BYTES) == []
    )  # claimed


def test_start_logs_exactly_the_delivered_offsets_with_their_attempts(
    twin: Twin, topic: TopicInfo, group: GroupInfo
) -> None:
    s = twin.store
    for partition in (0, 1):
        for offset in range(6):
            twin.put(topic, partition, offset, b"m%d" % offset)
    # Runs with holes (offset 2 of partition 0 is not in the batch), two partitions, and
    # attempts that differ within a run (a retry handed out among fresh messages).
    batch = [_delivery(topic, 0, o) for o in (0, 1, 3, 4)] + [
        _delivery(topic, 1, 1),
        _delivery(topic, 1, 2, attempt=3),
        _delivery(topic, 1, 3),
    ]
    s.consumption.start(group.id, topic.id, "a", batch)
    assert [twin.log_state(group, 0, o) for o in range(6)] == [
        ("start", 1),
        ("start", 1),
        None,
        ("start", 1),
        ("start", 1),
        None,
    ]
    assert [twin.log_state(group, 1, o) for o in range(5)] == [
        None,
        ("start", 1),
        ("start", 3),
        ("start", 1),
        None,
    ]
    s.consumption.start(group.id, topic.id, "b", [_delivery(topic, 1, 2, attempt=2)])
    assert twin.log_state(group, 1, 2) == ("start", 4)  # one more than logged before


def test_the_retry_row_and_the_dead_letter_keep_the_last_failures_traceback(
    twin: Twin, topic: TopicInfo, group: GroupInfo
) -> None:
    s = twin.store
    for offset in range(2):
        twin.put(topic, 0, offset, b"m%d" % offset)
    ids = _message_ids(twin, topic, 0)
    generation = _owning(twin, group, {0: "a"})
    s.consumption.start(group.id, topic.id, "a", [_delivery(topic, 0, o) for o in range(2)])
    first = Settlement(
        failed=[
            Failure(0, 0, ids[0], 1, "ValueError: x", 30.0, "Traceback ...\nValueError: x\n"),
            Failure(0, 1, ids[1], 1, "DeadLetter: no", None, "Traceback ...\nDeadLetter: no\n"),
        ],
        cursors={0: (2, generation)},
    )
    s.consumption.settle(group.id, topic.id, "a", first)
    assert twin.retry_row(group, 0, 0) == (1, "ValueError: x", "Traceback ...\nValueError: x\n")
    assert twin.dead_failures(group) == [
        (1, 1, "DeadLetter: no", "Traceback ...\nDeadLetter: no\n")
    ]
    # The next failure is an ack timeout: no traceback, and none of the last one's stays.
    s.consumption.start(group.id, topic.id, "a", [_delivery(topic, 0, 0, attempt=2)])
    timed_out = Settlement(failed=[Failure(0, 0, ids[0], 2, "ack timeout", 30.0)])
    s.consumption.settle(group.id, topic.id, "a", timed_out)
    assert twin.retry_row(group, 0, 0) == (2, "ack timeout", None)
    s.consumption.start(group.id, topic.id, "a", [_delivery(topic, 0, 0, attempt=3)])
    dead = Settlement(failed=[Failure(0, 0, ids[0], 3, "KeyError: k", None, "tb")])
    s.consumption.settle(group.id, topic.id, "a", dead)
    assert twin.retry_row(group, 0, 0) is None
    assert twin.dead_failures(group)[-1] == (0, 3, "KeyError: k", "tb")


def test_a_stale_settlement_writes_nothing(twin: Twin, topic: TopicInfo, group: GroupInfo) -> None:
    s = twin.store
    twin.put(topic, 0, 0, b"m0")
    generation = _owning(twin, group, {0: "a"})
    s.consumption.start(group.id, topic.id, "a", [_delivery(topic, 0, 0)])
    stale = Settlement(done=[(0, 0)], cursors={0: (1, generation - 1)})
    with pytest.raises(StaleGeneration):
        s.consumption.settle(group.id, topic.id, "a", stale)
    assert twin.log_state(group, 0, 0) == ("start", 1)
    assert s.groups.offsets(group.id)[0] == 0


def test_a_settlement_with_its_start_rows_writes_both_or_nothing(
    twin: Twin, topic: TopicInfo, group: GroupInfo
) -> None:
    s = twin.store
    for offset in range(3):
        twin.put(topic, 0, offset, b"m%d" % offset)
    generation = _owning(twin, group, {0: "a"})
    batch = [_delivery(topic, 0, o) for o in range(3)]
    stale = Settlement(done=[(0, 0), (0, 1)], cursors={0: (2, generation - 1)})
    with pytest.raises(StaleGeneration):
        s.consumption.settle(group.id, topic.id, "a", stale, batch)
    assert [twin.log_state(group, 0, o) for o in range(3)] == [None, None, None]
    settlement = dataclasses.replace(stale, cursors={0: (2, generation)})
    s.consumption.settle(group.id, topic.id, "a", settlement, batch)
    # The start rows first: the two settled are done, the third is still in flight.
    assert [twin.log_state(group, 0, o) for o in range(3)] == [
        ("done", 1),
        ("done", 1),
        ("start", 1),
    ]
    assert s.groups.offsets(group.id)[0] == 2


def test_holes_are_skipped_by_fetch_and_closed_by_tombstones(twin: Twin, topic: TopicInfo) -> None:
    s = twin.store
    for offset in (0, 1, 4):
        twin.put(topic, 2, offset, b"x")
    assert [m.offset for m in s.messages.fetch(topic.id, 2, 1, 10, MAX_BATCH_BYTES).rows] == [1, 4]
    with pytest.raises(DuplicateKey):  # 3 is closed, then 4 is taken
        s.messages.insert_tombstones(topic.id, 2, range(3, 5))
    assert [m.offset for m in s.messages.fetch(topic.id, 2, 0, 10, MAX_BATCH_BYTES).rows] == [
        0,
        1,
        3,
        4,
    ]
    s.messages.insert_tombstones(topic.id, 2, range(2, 3))
    fetched = s.messages.fetch(topic.id, 2, 0, 10, MAX_BATCH_BYTES).rows
    assert [(m.offset, m.tombstone) for m in fetched] == [
        (0, False),
        (1, False),
        (2, True),
        (3, True),
        (4, False),
    ]
    assert s.messages.high_watermarks(topic) == {0: 0, 1: 0, 2: 5, 3: 0}
    assert s.messages.low_offset(topic.id, 2) is None


def test_new_groups_start_at_the_earliest_or_the_next_offset(twin: Twin, topic: TopicInfo) -> None:
    for offset in range(3):
        twin.put(topic, 1, offset, b"x")
    early = ensure_group(twin.store, "early", topic, seed.options(None))
    late = ensure_group(twin.store, "late", topic, seed.options(None, start="latest"))
    assert twin.store.groups.offsets(early.id) == {0: 0, 1: 0, 2: 0, 3: 0}
    assert twin.store.groups.offsets(late.id) == {0: 0, 1: 3, 2: 0, 3: 0}
    assert {r.state for r in twin.store.assignments.rows(late.id)} == {"released"}
    assert twin.store.groups.pause_left(late.id) is None


def test_partition_stats_count_from_the_low_watermark(twin: Twin, topic: TopicInfo) -> None:
    for offset in range(3):
        twin.put(topic, 1, offset, b"x")
    twin.store.messages.insert_tombstones(topic.id, 1, [3])
    stats = {s.partition: s for s in twin.store.topics.partition_stats(topic)}
    assert (stats[1].low_watermark, stats[1].high_watermark, stats[1].messages) == (0, 4, 4)
    assert (stats[0].low_watermark, stats[0].high_watermark, stats[0].messages) == (None, 0, 0)
    exact = {s.partition: s for s in twin.store.topics.partition_stats(topic, exact=True)}
    assert (exact[1].messages, exact[1].tombstones) == (3, 1)


def test_an_emptied_partition_keeps_its_high_watermark_at_the_low_watermark(
    twin: Twin, topic: TopicInfo
) -> None:
    for offset in range(5):
        twin.put(topic, 2, offset, b"x")
    twin.empty(topic, 2, 5)
    assert twin.store.messages.high_watermarks(topic) == {0: 0, 1: 0, 2: 5, 3: 0}


# -- byte-bounded fetches ------------------------------------------------------------------


def _offsets(fetched: Fetched) -> tuple[list[int], bool]:
    return [m.offset for m in fetched.rows], fetched.cut


def test_a_fetch_keeps_the_rows_whose_bodies_fit_the_byte_budget(
    twin: Twin, topic: TopicInfo
) -> None:
    for offset, size in enumerate([10, 20, 30, 0, 40, 5]):
        twin.put(topic, 1, offset, b"b" * size)
    fetch = twin.store.messages.fetch
    assert _offsets(fetch(topic.id, 1, 0, 10, 60)) == ([0, 1, 2, 3], True)  # 60, then 100
    assert _offsets(fetch(topic.id, 1, 0, 10, 59)) == ([0, 1], True)
    assert _offsets(fetch(topic.id, 1, 0, 3, 1000)) == ([0, 1, 2], False)  # the row limit
    assert _offsets(fetch(topic.id, 1, 0, 10, 1000)) == ([0, 1, 2, 3, 4, 5], False)
    assert _offsets(fetch(topic.id, 1, 6, 10, 10)) == ([], False)  # nothing more
    # The first body comes whatever its size, and the empty rows before it.
    assert _offsets(fetch(topic.id, 1, 4, 10, 10)) == ([4], True)
    assert _offsets(fetch(topic.id, 1, 3, 10, 10)) == ([3, 4], True)
    # Unless the caller has a batch under way: then nothing past the budget comes, and the
    # fetch still tells a cut partition from an exhausted one.
    assert _offsets(fetch(topic.id, 1, 4, 10, 10, at_least_one=False)) == ([], True)
    assert _offsets(fetch(topic.id, 1, 3, 10, 10, at_least_one=False)) == ([3], True)
    assert _offsets(fetch(topic.id, 1, 6, 10, 10, at_least_one=False)) == ([], False)


def test_due_retries_are_claimed_within_the_byte_budget(
    twin: Twin, topic: TopicInfo, group: GroupInfo
) -> None:
    s = twin.store
    for offset in range(5):
        twin.put(topic, 0, offset, bytes([65 + offset]) * 100)
    ids = _message_ids(twin, topic, 0)
    generation = _owning(twin, group, {0: "a"})
    s.consumption.start(group.id, topic.id, "a", [_delivery(topic, 0, o) for o in range(5)])
    failed = [Failure(0, o, ids[o], 1, "boom", 0.05 + o * 0.01) for o in range(5)]
    s.consumption.settle(
        group.id, topic.id, "a", Settlement(failed=failed, cursors={0: (5, generation)})
    )
    time.sleep(0.2)
    claims = []
    while due := s.consumption.claim_due(group.id, topic.name, [0], 10, 30, 250):
        claims.append([(d.offset, d.body) for d in due])
    assert claims == [
        [(0, b"A" * 100), (1, b"B" * 100)],  # oldest due first, 200 of 250 bytes
        [(2, b"C" * 100), (3, b"D" * 100)],
        [(4, b"E" * 100)],
    ]
    s.consumption.settle(
        group.id, topic.id, "a", Settlement(failed=[failed[0]._replace(delay=0.0)])
    )
    time.sleep(0.05)
    (alone,) = s.consumption.claim_due(group.id, topic.name, [0], 10, 30, 1)
    assert alone.offset == 0  # larger than the budget, and due: it comes alone


_reads = itertools.count()


@hypothesis_settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    sizes=st.lists(st.integers(1, 3000), min_size=1, max_size=40),
    limit=st.integers(1, 12),
    budget=st.integers(1, 8000),
)
def test_reads_cut_by_the_byte_budget_join_up_to_the_whole_partition(
    twin: Twin, sizes: list[int], limit: int, budget: int
) -> None:
    topic = twin.create_topic(f"bytes{next(_reads)}", 1)
    bodies = [bytes([48 + o % 10]) * size for o, size in enumerate(sizes)]
    for offset, body in enumerate(bodies):
        twin.put(topic, 0, offset, body)
    reader = PartitionReader(twin.store.messages, gap_timeout=60)
    seen: list[bytes] = []
    at = 0
    while True:
        batch = reader.read(topic.id, 0, at, limit, budget)
        got = [m.body for m in batch.messages]
        assert [m.offset for m in batch.messages] == list(range(at, batch.next_offset))
        assert len(got) <= limit
        assert sum(map(len, got)) <= budget or len(got) == 1
        seen += got
        at = batch.next_offset
        if not batch.more:
            break
        assert got  # more promised: each read makes progress
    assert seen == bodies and at == len(bodies)
    assert reader.read(topic.id, 0, at, limit, budget).messages == []


# -- publishing: the write step, the offset counters and the real producers ----------------


def _rows(
    twin: Twin, topic: TopicInfo
) -> dict[tuple[int, int], tuple[bytes | None, object, bytes]]:
    """(partition, offset) -> (key, headers, body) of every row of the topic."""
    return {
        (m.partition, m.offset): (m.key, m.headers, m.body)
        for p in range(topic.partitions)
        for m in twin.store.messages.fetch(topic.id, p, 0, 100, MAX_BATCH_BYTES).rows
    }


def test_a_write_is_all_or_nothing_under_the_key_and_the_low_watermark(
    twin: Twin, topic: TopicInfo
) -> None:
    messages = twin.store.messages
    t = topic.id
    messages.insert(
        placed_of(
            [
                NewMessage(t, 0, 0, b"k", '{"h":"v"}', b"a"),
                NewMessage(t, 0, 1, None, None, b"b"),
                NewMessage(t, 1, 0, None, None, b"c"),
            ]
        ),
        42,
    )
    places = [(0, 0), (0, 1), (1, 0), (0, 2)]
    assert [messages.write_token_at(t, p, o) for p, o in places] == [42, None, None, None]
    with pytest.raises(DuplicateKey):  # the second row's offset is taken: neither is stored
        messages.insert(
            placed_of(
                [NewMessage(t, 1, 1, None, None, b"new"), NewMessage(t, 0, 1, None, None, b"b2")]
            ),
            43,
        )
    twin.empty(topic, 2, 5)
    with pytest.raises(BelowLowWatermark):  # partition 2's row lies below 5: neither is
        messages.insert(
            placed_of(
                [NewMessage(t, 3, 0, None, None, b"x"), NewMessage(t, 2, 4, None, None, b"y")]
            ),
            44,
        )
    messages.insert(placed_of([NewMessage(t, 2, 5, None, None, b"d")]))
    assert _rows(twin, topic) == {
        (0, 0): (b"k", {"h": "v"}, b"a"),
        (0, 1): (None, {}, b"b"),
        (1, 0): (None, {}, b"c"),
        (2, 5): (None, {}, b"d"),
    }
    assert messages.seed_offsets(t) == {0: 2, 1: 1, 2: 6}
    twin.empty(topic, 3, 7)  # a partition emptied below its low watermark starts there
    assert messages.seed_offsets(t) == {0: 2, 1: 1, 2: 6, 3: 7}


@pytest.fixture(params=["sync", "aio"])
def flavour(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.mark.parametrize("kind", ["redis", "mysql"])
def test_counters_hand_out_ranges_and_are_reseeded_upward_only(
    twin: Twin, topic: TopicInfo, kind: str, flavour: str
) -> None:
    t = topic.id
    if flavour == "sync":
        backend = twin.backend(kind)
        counters = backend.allocator()
        allocate, reseed = counters.allocate, counters.reseed
    else:
        loop = asyncio.new_event_loop()
        aio_counters = twin.aio_backend(kind).allocator()

        def allocate(topic_id: int, counts: Mapping[int, int]) -> dict[int, int]:
            return loop.run_until_complete(aio_counters.allocate(topic_id, counts))

        def reseed(topic_id: int, next_offsets: Mapping[int, int]) -> None:
            loop.run_until_complete(aio_counters.reseed(topic_id, next_offsets))

    try:
        assert allocate(t, {0: 3}) == {0: 0}
        assert allocate(t, {0: 2, 1: 1}) == {0: 3, 1: 0}
        reseed(t, {0: 4, 1: 10})  # 4 lies below partition 0's counter: it stays at 5
        assert allocate(t, {0: 1, 1: 2}) == {0: 5, 1: 10}
        reseed(t, {})
        assert allocate(t, {2: 1, 3: 4}) == {2: 0, 3: 0}
        assert allocate(t, {1: 1, 3: 1}) == {1: 12, 3: 4}
    finally:
        if flavour == "sync":
            counters.close()
            backend.notifier.close()
        else:
            loop.run_until_complete(aio_counters.close())
            loop.close()


@pytest.fixture
def producer(twin: Twin, flavour: str) -> Iterator[twins.Sender]:
    sender = twins.sender(twin, flavour)
    yield sender
    sender.close()


def test_sends_store_the_rows_they_report(
    twin: Twin, topic: TopicInfo, producer: twins.Sender
) -> None:
    one = producer.send("t", b"a", key="k1", headers={"h": "v"})
    batch = producer.send_batch(
        "t",
        [
            Record(b"b", "k1"),
            b"c",
            {"body": "d", "key": b"k2", "headers": {"x": "y"}},
            "e",
        ],
    )
    placed = [one, *batch]
    assert {m.topic for m in placed} == {"t"}
    rows = _rows(twin, topic)
    assert [rows[(m.partition, m.offset)] for m in placed] == [
        (b"k1", {"h": "v"}, b"a"),
        (b"k1", {}, b"b"),
        (None, {}, b"c"),
        (b"k2", {"x": "y"}, b"d"),
        (None, {}, b"e"),
    ]
    assert len(rows) == len(placed)
    by_partition: dict[int, list[int]] = {}
    for m in placed:
        by_partition.setdefault(m.partition, []).append(m.offset)
    assert all(offsets == list(range(len(offsets))) for offsets in by_partition.values())
    # Each write's token is stored with its first row only (what a lost reply is told by).
    tokens = [twin.store.messages.write_token_at(topic.id, m.partition, m.offset) for m in placed]
    assert None not in tokens[:2] and tokens[0] != tokens[1] and tokens[2:] == [None] * 3
    assert producer.send_batch("t", []) == []


def test_keys_choose_partitions_as_kafka_does_and_keyless_messages_go_round_robin(
    twin: Twin, topic: TopicInfo, producer: twins.Sender
) -> None:
    keys = [f"project-{i}" for i in range(12)]
    placed = producer.send_batch("t", [Record(b"x", k) for k in keys])
    assert [m.partition for m in placed] == [partition_for_key(k.encode(), 4) for k in keys]
    singles = [producer.send("t", b"y", key=k).partition for k in keys[:4]]
    assert singles == [m.partition for m in placed[:4]]
    keyless = [producer.send("t", b"z").partition for _ in range(6)]
    keyless += [m.partition for m in producer.send_batch("t", [b"z"] * 6)]
    assert keyless == [0, 1, 2, 3] * 3


def _refusals(producer: twins.Sender) -> list[tuple[str, str]]:
    """What each bad call raised, by type and message."""
    bad: list[Callable[[], object]] = [
        lambda: producer.send("no spaces", b"x"),
        lambda: producer.send("nowhere", b"x"),
        lambda: producer.send("t", b"x" * ((1 << 20) + 1)),
        lambda: producer.send("t", b"x", headers={"n": 1}),  # type: ignore[dict-item]
        lambda: producer.send("t", b"x", headers=["n"]),  # type: ignore[arg-type]
        lambda: producer.send("t", b"x", key=b"k" * 256),
        lambda: producer.send("t", 5),  # type: ignore[arg-type]
        lambda: producer.send_batch("t", [b"ok", Record(b"x", headers={"n": 1})]),  # type: ignore[dict-item]
        lambda: producer.send_batch("t", [b"ok", 5]),  # type: ignore[list-item]
    ]
    found = []
    for call in bad:
        with pytest.raises(EmsError) as raised:
            call()
        found.append((type(raised.value).__name__, str(raised.value)))
    return found


def test_bad_input_is_refused_before_anything_is_written(
    twin: Twin, topic: TopicInfo, producer: twins.Sender
) -> None:
    assert [name for name, _ in _refusals(producer)] == [
        "InvalidName",
        "UnknownTopic",
        "BodyTooLarge",
        "InvalidHeaders",
        "InvalidHeaders",
        "InvalidKey",
        "InvalidBody",
        "InvalidHeaders",
        "InvalidInput",
    ]
    assert twin.store.messages.high_watermarks(topic) == {0: 0, 1: 0, 2: 0, 3: 0}


def test_a_taken_offset_makes_the_producer_reseed_and_succeed(
    twin: Twin, producer: twins.Sender
) -> None:
    one = twin.create_topic("one", 1)
    assert producer.send("one", b"a").offset == 0
    twin.put(one, 0, 1, b"squatter")  # a row the counter knows nothing of
    assert producer.send("one", b"b").offset == 2
    twin.put(one, 0, 3, b"squatter")
    # [3, 5) was handed out and refused whole; the counter goes past it, so 4 is a hole.
    assert [m.offset for m in producer.send_batch("one", [b"c", b"d"])] == [5, 6]
    assert {o: body for (_, o), (_, _, body) in _rows(twin, one).items()} == {
        0: b"a",
        1: b"squatter",
        2: b"b",
        3: b"squatter",
        5: b"c",
        6: b"d",
    }


def test_below_the_low_watermark_is_refused_and_the_producer_moves_past_it(
    twin: Twin, producer: twins.Sender
) -> None:
    one = twin.create_topic("one", 1)
    assert producer.send("one", b"a").offset == 0
    twin.empty(one, 0, 5)  # a purge emptied the partition up to 5: the counter is at 1
    assert producer.send("one", b"b").offset == 5
    assert _rows(twin, one) == {(0, 5): (None, {}, b"b")}


def test_counters_that_lost_their_values_are_noticed_and_reseeded(
    twin: Twin, producer: twins.Sender
) -> None:
    one = twin.create_topic("one", 1)
    assert [m.offset for m in producer.send_batch("one", [b"a", b"b"])] == [0, 1]
    twin.lose_counters()  # a restart without persistence: the next range starts at 0
    assert producer.send("one", b"c").offset == 2
    assert [m.offset for m in producer.send_batch("one", [b"d", b"e"])] == [3, 4]
    assert sorted(_rows(twin, one)) == [(0, o) for o in range(5)]


def _publish_script(twin: Twin, flavour: str) -> list[object]:
    """Every outcome of one run of sends and bad calls on a fresh twin."""
    topic = twin.create_topic("t", 4)
    sender = twins.sender(twin, flavour)
    try:
        outcomes: list[object] = [sender.send("t", b"a", key="project-7")]
        outcomes += sender.send_batch("t", [Record(b"x", f"k{i}") for i in range(10)])
        outcomes += sender.send_batch("t", [b"y", "z", {"body": b"w", "key": "k3"}])
        outcomes += [sender.send("t", b"b"), sender.send("t", b"c", key=b"k3")]
        outcomes += _refusals(sender)
        outcomes.append(twin.store.messages.high_watermarks(topic))
    finally:
        sender.close()
    return outcomes


def test_mysql_and_the_twin_place_and_refuse_alike(store: Store, flavour: str) -> None:
    on_mysql = _publish_script(twins.mysql(store), flavour)
    assert on_mysql == _publish_script(twins.memory(), flavour)
    assert sum(on_mysql[-1].values()) == 16  # type: ignore[attr-defined]


def test_a_batch_is_placed_whole_past_a_taken_offset_in_any_of_its_partitions(
    twin: Twin, topic: TopicInfo, producer: twins.Sender
) -> None:
    keys = {_key_partition(k): k for k in (f"k{i}" for i in range(40))}
    assert len(keys) == 4
    first = producer.send_batch("t", [Record(b"a", keys[p]) for p in (0, 1)])
    assert [(m.partition, m.offset) for m in first] == [(0, 0), (1, 0)]
    twin.put(topic, 1, 1, b"squatter")  # partition 1's next offset is taken; 0's is free
    batch = [Record(f"b{p}".encode(), keys[p]) for p in (0, 1, 2, 0)]
    placed = producer.send_batch("t", batch)
    # All or none: the rows of the first ranges in partitions 0 and 2 were refused with
    # partition 1's, and the whole batch went again at fresh offsets past every range
    # handed out (the refused ones are holes), in input order per partition.
    assert [(m.partition, m.offset) for m in placed] == [(0, 3), (1, 2), (2, 1), (0, 4)]
    rows = _rows(twin, topic)
    assert [rows[(m.partition, m.offset)][2] for m in placed] == [b"b0", b"b1", b"b2", b"b0"]
    assert sorted(rows) == [(0, 0), (0, 3), (0, 4), (1, 0), (1, 1), (1, 2), (2, 1)]


def _key_partition(key: str) -> int:
    return partition_for_key(key.encode(), 4)


def test_a_batch_over_the_limit_and_a_body_over_the_topics_bound_are_refused(
    twin: Twin, producer: twins.Sender
) -> None:
    small = twin.create_sized("small", 2, 100)
    assert producer.send("small", b"x" * 100).offset == 0
    with pytest.raises(BodyTooLarge, match="100"):
        producer.send("small", b"x" * 101)
    with pytest.raises(BodyTooLarge):  # one body too large: none of the batch is stored
        producer.send_batch("small", [b"ok", b"x" * 101])
    with pytest.raises(InvalidInput, match=f"at most {MAX_BATCH}"):
        producer.send_batch("small", [b"m"] * (MAX_BATCH + 1))
    assert twin.store.messages.high_watermarks(small) == {0: 1, 1: 0}


def test_partitions_added_reroute_keys_and_fence_writes_routed_by_the_old_count(
    twin: Twin, topic: TopicInfo, producer: twins.Sender
) -> None:
    keys = [f"project-{i}" for i in range(16)]
    before = producer.send_batch("t", [Record(b"old", k) for k in keys])
    change = twin.add_partitions("t", 6)
    assert (change.topic_id, change.before, change.after) == (topic.id, 4, 6)
    counts = [sum(1 for m in before if m.partition == p) for p in range(4)]
    assert change.watermarks == tuple(counts)
    with pytest.raises(PartitionsNotAdded):
        twin.add_partitions("t", 6)
    # A write routed by the old count is refused whole: the change's fence.
    with pytest.raises(BelowLowWatermark):
        late = placed_of([NewMessage(topic.id, 0, counts[0], None, None, b"x")])
        twin.store.messages.insert(late, partitions=4)
    # The producer still routes by the 4 it looked up: refused by the fence, it learns
    # the new count and routes the same rows again, with no message stored twice.
    after = producer.send_batch("t", [Record(b"new", k) for k in keys])
    assert [m.partition for m in after] == [partition_for_key(k.encode(), 6) for k in keys]
    assert producer.send("t", b"new", key=keys[0]).partition == after[0].partition
    rows = _rows(twin, dataclasses.replace(topic, partitions=6))
    assert len(rows) == 2 * len(keys) + 1
    for p in (4, 5):  # the new partitions start at offset 0
        assert sorted(o for q, o in rows if q == p) == list(range(sum(q == p for q, _ in rows)))
    [stored] = [c for c in twin.store.topics.partition_changes(topic.id)]
    assert (stored.before, stored.after, stored.watermarks) == (4, 6, change.watermarks)


def test_a_scheduled_send_is_stored_for_later_on_mysql_and_refused_by_type_on_the_twin(
    twin: Twin, topic: TopicInfo, producer: twins.Sender
) -> None:
    if twin.name == "memory":
        # The twin has no outbox: a typed refusal, and nothing is written.
        with pytest.raises(InvalidSchedule, match="takes no scheduled sends"):
            producer.send("t", b"later", key="k", delay=0)
        with pytest.raises(InvalidSchedule):
            producer.send_batch("t", [b"later"], delay=0)
        assert twin.store.messages.high_watermarks(topic) == {0: 0, 1: 0, 2: 0, 3: 0}
        return
    later = producer.send("t", b"later", key="k", delay=0)
    assert (later.partition, later.offset) == (partition_for_key(b"k", 4), -1)
    deadline = time.monotonic() + 30  # the producer's relay moves it once due
    while _rows(twin, topic) == {}:
        assert time.monotonic() < deadline, "the scheduled message never arrived"
        time.sleep(0.05)
    assert _rows(twin, topic) == {(later.partition, 0): (b"k", {}, b"later")}
