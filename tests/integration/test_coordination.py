"""Leases, the leader row and generation fencing, against the real server's clock."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor, wait

import pytest

from ems import TopicAdmin
from ems.backend import mysql_backend
from ems.config import Settings
from ems.consumer.groups import ensure_group
from ems.exceptions import DatabaseUnavailable
from ems.store import Store
from ems.store.errors import NotLeader, StaleGeneration
from ems.store.groups import commit_cursors
from ems.store.leases import fence
from ems.store.scheduler import fence as scheduler_fence
from ems.types import GroupInfo
from ems.values.autoscale import ScaleDecision
from ems.values.schedule import Hold
from tests import sql as db
from tests.integration import seed

OPTIONS = seed.options(None)


@pytest.fixture
def group(settings: Settings, store: Store) -> GroupInfo:
    topic = TopicAdmin(settings, store=store).create("t", 4)
    return ensure_group(store, "g", topic, OPTIONS)


def test_a_lease_is_renewed_while_live_and_refused_once_expired(
    store: Store, group: GroupInfo
) -> None:
    store.leases.register(group.id, "a", "h", 1, ttl=0.3)
    assert store.leases.renew("a", ttl=0.3)
    (member,) = store.leases.members(group.id)
    assert 0.1 < member.expires_in <= 0.3
    seed.wait_until(lambda: store.leases.members(group.id)[0].expires_in < 0)  # DB clock
    assert not store.leases.renew("a", ttl=10)
    assert store.leases.members(group.id)[0].expires_in < 0


def _leader_expired(store: Store, group: GroupInfo) -> bool:
    leader = store.leases.leader(group.id)
    return leader is not None and leader.expires_in < 0


def test_epoch_grows_on_takeover_only(store: Store, group: GroupInfo) -> None:
    assert store.leases.lead(group.id, "a", ttl=0.3) == 1
    assert store.leases.lead(group.id, "a", ttl=0.3) == 1  # renewal
    assert store.leases.lead(group.id, "b", ttl=0.3) is None
    seed.wait_until(lambda: _leader_expired(store, group))
    assert store.leases.lead(group.id, "b", ttl=10) == 2
    assert store.leases.lead(group.id, "a", ttl=10) is None
    leader = store.leases.leader(group.id)
    assert leader is not None and (leader.client_id, leader.epoch) == ("b", 2)


def test_a_deposed_leader_writes_nothing(store: Store, group: GroupInfo) -> None:
    store.leases.register(group.id, "a", "h", 1, ttl=10)
    assert store.leases.lead(group.id, "a", ttl=0.2) == 1
    time.sleep(0.3)
    assert store.leases.lead(group.id, "b", ttl=10) == 2
    before = store.assignments.rows(group.id)
    with pytest.raises(NotLeader):
        store.assignments.apply(group.id, ("a", 1), {0: "a"}, [1])
    assert store.assignments.rows(group.id) == before
    assert store.groups.get("g", group.topic_id).generation == group.generation  # type: ignore[union-attr]


def test_renewals_land_while_the_leaders_transaction_is_open(
    settings: Settings, store: Store, group: GroupInfo
) -> None:
    """The leader's assignment (reap, generation bump, grants: a round trip each) makes
    no renewal wait. Its reap, a DELETE by group and expiry, locked live members' rows,
    and its bump the group row, against which a renewal checked the client row's foreign
    key: renewals waited for the leader's commit, over a slow link longer than a lease."""
    store.leases.register(group.id, "gone", "h", 1, ttl=0.1)
    for client in ("a", "b"):
        store.leases.register(group.id, client, "h", 2, ttl=30)
    # Members of another group: with them the server reads the group's rows by index.
    other = ensure_group(store, "other", store.topics.get("t"), OPTIONS)
    for i in range(10):
        store.leases.register(other.id, f"other-{i}", "h", 3, ttl=30)
    epoch = store.leases.lead(group.id, "a", ttl=30)
    assert epoch is not None
    seed.wait_until(lambda: min(m.expires_in for m in store.leases.members(group.id)) < 0)
    waiting = (
        "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = %s "
        "AND INFO LIKE 'UPDATE partition_assignment SET client_id%%'"
    )
    lock = "SELECT * FROM partition_assignment WHERE group_id = %s AND partition_no = 0 FOR UPDATE"
    with ThreadPoolExecutor(3) as threads:
        with db.transaction(store) as blocker:
            blocker.execute(lock, (group.id,))
            blocker.fetchall()
            # The leader's transaction stays open at its grant, which waits for the row.
            applied = threads.submit(store.assignments.apply, group.id, ("a", epoch), {0: "b"}, [])
            seed.wait_until(lambda: seed.sql(store, waiting, (settings.database_name,))[0][0])
            renewed = [threads.submit(store.leases.renew, c, 30) for c in ("a", "b")]
            assert not wait(renewed, timeout=5).not_done, "renewals wait for the leader"
            assert [r.result() for r in renewed] == [True, True]
        assert applied.result(timeout=10) == group.generation + 1
    assert [m.client_id for m in store.leases.members(group.id)] == ["a", "b"]


def test_a_commit_with_a_stale_generation_writes_nothing_and_raises(
    store: Store, group: GroupInfo
) -> None:
    for client in ("a", "b"):
        store.leases.register(group.id, client, "h", 1, ttl=10)
    epoch = store.leases.lead(group.id, "a", ttl=10)
    assert epoch is not None
    first = store.assignments.apply(group.id, ("a", epoch), {0: "a", 1: "a"}, [])
    store.groups.commit(group.id, "a", {0: (5, first)})
    second = store.assignments.apply(group.id, ("a", epoch), {0: "b"}, [])
    assert second == first + 1
    with pytest.raises(StaleGeneration):
        store.groups.commit(group.id, "a", {1: (3, first), 0: (9, first)})
    assert store.groups.offsets(group.id)[0] == 5
    assert store.groups.offsets(group.id)[1] == 0  # all or nothing
    store.groups.commit(group.id, "b", {0: (7, second)})
    assert store.groups.offsets(group.id)[0] == 7


def test_a_client_whose_lease_expired_cannot_commit(store: Store, group: GroupInfo) -> None:
    store.leases.register(group.id, "a", "h", 1, ttl=0.2)
    epoch = store.leases.lead(group.id, "a", ttl=10)
    assert epoch is not None
    generation = store.assignments.apply(group.id, ("a", epoch), {0: "a"}, [])
    seed.wait_until(lambda: store.leases.members(group.id)[0].expires_in < 0)
    with pytest.raises(StaleGeneration):
        store.groups.commit(group.id, "a", {0: (4, generation)})
    assert store.groups.offsets(group.id)[0] == 0


def test_revoke_then_release_by_the_owner_only(store: Store, group: GroupInfo) -> None:
    store.leases.register(group.id, "a", "h", 1, ttl=10)
    epoch = store.leases.lead(group.id, "a", ttl=10)
    assert epoch is not None
    generation = store.assignments.apply(group.id, ("a", epoch), {2: "a"}, [])
    store.assignments.apply(group.id, ("a", epoch), {}, [2])
    store.assignments.release(group.id, "b", {2: generation})  # not the owner: no effect
    assert store.assignments.rows(group.id)[2].state == "revoking"
    store.assignments.release(group.id, "a", {2: generation})
    assert store.assignments.rows(group.id)[2].state == "released"


def test_group_creation_sets_cursors_at_the_start_position(
    settings: Settings, store: Store
) -> None:
    from ems import Producer

    topic = TopicAdmin(settings, store=store).create("t2", 2)
    with Producer(backend=mysql_backend(settings, store)) as producer:
        producer.send_batch("t2", [b"x"] * 6)
    earliest = ensure_group(store, "early", topic, OPTIONS)
    latest = ensure_group(store, "late", topic, seed.options(None, start="latest"))
    assert store.groups.offsets(earliest.id) == {0: 0, 1: 0}
    assert store.groups.offsets(latest.id) == {0: 3, 1: 3}


def test_hot_path_transactions_run_read_committed(store: Store) -> None:
    # Under REPEATABLE READ the log's range UPDATEs take gap locks and members deadlock.
    with store.db.transaction() as cursor:
        # MariaDB up to 11.0 names it tx_isolation, MySQL 8 transaction_isolation.
        cursor.execute(
            "SHOW SESSION VARIABLES "
            "WHERE Variable_name IN ('tx_isolation', 'transaction_isolation')"
        )
        levels = {value for _, value in cursor.fetchall()}
        assert levels == {"READ-COMMITTED"}


def test_a_member_stalled_inside_a_commit_loses_its_locks_and_the_leader_moves_on(
    settings: Settings, store: Store, group: GroupInfo
) -> None:
    """A cursor commit reads the member's assignment and lease rows and locks them until
    it commits. A member that stalls inside it (a cut link, a paused process) would keep
    those locks, and the leader could not move its partitions, as long as its session
    lived: the server ends a session idle in a write transaction after
    idle_transaction_timeout, and the late commit fails without writing."""
    for client in ("a", "b"):
        store.leases.register(group.id, client, "h", 1, ttl=30)
    epoch = store.leases.lead(group.id, "b", ttl=30)
    assert epoch is not None
    generation = store.assignments.apply(group.id, ("b", epoch), {0: "a"}, [])
    stalled = Store(settings.with_(idle_transaction_timeout=1))
    try:
        with pytest.raises(DatabaseUnavailable), stalled.db.transaction() as cursor:
            commit_cursors(cursor, group.id, "a", {0: (4, generation)})
            started = time.monotonic()
            # The leader takes partition 0 from "a" while "a" sits in its commit.
            moved = store.assignments.apply(group.id, ("b", epoch), {0: "b"}, [])
            waited = time.monotonic() - started
        assert waited < 1 + 3, f"the leader waited {waited:.1f} s on a stalled member's locks"
        assert store.assignments.rows(group.id)[0].client_id == "b"
        assert store.groups.offsets(group.id)[0] == 0  # the stalled commit wrote nothing
        store.groups.commit(group.id, "b", {0: (7, moved)})
        assert store.groups.offsets(group.id)[0] == 7
    finally:
        stalled.close()


def _lapsed(store: Store, group: GroupInfo) -> None:
    """Until the group's leader lease has run out (the database's clock): observed, not
    slept for."""

    def lapsed() -> bool:
        leader = store.leases.leader(group.id)
        return leader is None or leader.expires_in <= 0

    seed.wait_until(lapsed, timeout=60)


def test_a_leader_stalled_inside_its_fenced_transaction_loses_the_row_and_another_takes_over(
    settings: Settings, store: Store, group: GroupInfo
) -> None:
    """A leader transaction starts with the fence, which locks the leader row until the
    transaction ends. The fence used to set a column to its own value: the server saw no
    write, so its bound on idle write transactions never ended the session of a leader
    stalled inside one (a paused process, a cut link), and no member could take the row
    over once the lease ran out, for as long as that session lived. The fence writes the
    row: the stalled session ends after idle_transaction_timeout, and the takeover goes
    on at once."""
    for client in ("a", "b"):
        store.leases.register(group.id, client, "h", 1, ttl=30)
    epoch = store.leases.lead(group.id, "b", ttl=4)
    assert epoch is not None
    stalled = Store(settings.with_(idle_transaction_timeout=1))
    try:
        with pytest.raises(DatabaseUnavailable), stalled.db.transaction() as cursor:
            fence(cursor, group.id, "b", epoch)
            _lapsed(store, group)
            started = time.monotonic()
            taken = store.leases.lead(group.id, "a", ttl=30)
            waited = time.monotonic() - started
        assert waited < 3, f"the takeover waited {waited:.1f} s on a stalled leader's lock"
        assert taken == epoch + 1
    finally:
        stalled.close()


def test_a_leader_stalled_inside_a_scaling_change_loses_the_row_and_another_takes_over(
    settings: Settings, store: Store, group: GroupInfo
) -> None:
    """An autoscaling change runs while its leader holds the leader row (so no takeover
    happens while it is on the wire): a leader stalled there keeps the row no longer than
    idle_transaction_timeout, and the decision of a session so ended is not recorded."""
    for client in ("a", "b"):
        store.leases.register(group.id, client, "h", 1, ttl=30)
    epoch = store.leases.lead(group.id, "b", ttl=4)
    assert epoch is not None
    stalled = Store(settings.with_(idle_transaction_timeout=1))
    took: list[tuple[int | None, float]] = []

    def change() -> tuple[bool, str | None]:
        _lapsed(store, group)
        started = time.monotonic()
        took.append((store.leases.lead(group.id, "a", ttl=30), time.monotonic() - started))
        return True, None

    decision = ScaleDecision(current=1, desired=2, recommendation=2, reason="test")
    try:
        with pytest.raises(DatabaseUnavailable):
            stalled.autoscale.apply_as_leader(
                group.id, ("b", epoch), decision, backend="test", change=change
            )
        ((taken, waited),) = took
        assert waited < 3, f"the takeover waited {waited:.1f} s on a stalled leader's lock"
        assert taken == epoch + 1
        assert store.autoscale.decisions(group.id) == []
    finally:
        stalled.close()


def test_a_scheduler_stalled_inside_a_fenced_run_start_loses_its_lease_row(
    settings: Settings, store: Store
) -> None:
    """A job run starts in a transaction that first fences the scheduler's lease rows and
    holds them until commit: a scheduler stalled there keeps them no longer than
    idle_transaction_timeout, and the next scheduler takes the lapsed lease at once."""
    epoch = store.scheduler.hold("scheduler", "a", ttl=4)
    assert epoch is not None
    stalled = Store(settings.with_(idle_transaction_timeout=1))
    try:
        with pytest.raises(DatabaseUnavailable), stalled.db.transaction() as cursor:
            scheduler_fence(cursor, Hold(name="scheduler", holder="a", epoch=epoch))
            seed.wait_until(
                lambda: (
                    (lease := store.scheduler.lease("scheduler")) is None or lease.expires_in <= 0
                ),
                timeout=60,
            )
            started = time.monotonic()
            taken = store.scheduler.hold("scheduler", "b", ttl=30)
            waited = time.monotonic() - started
        assert waited < 3, f"the next scheduler waited {waited:.1f} s on a stalled one's lock"
        assert taken == epoch + 1
    finally:
        stalled.close()
