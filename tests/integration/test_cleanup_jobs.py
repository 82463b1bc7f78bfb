"""The housekeeping jobs and the run harness against the real servers."""

from __future__ import annotations

import threading
import time

import pytest
import redis

from ems import TopicAdmin
from ems.config import Settings
from ems.exceptions import JobAlreadyRunning, JobInterrupted, UnknownJob
from ems.maintenance import jobs
from ems.maintenance.checkpoint import checkpoint
from ems.maintenance.housekeeping import purge_log, reclaim_inflight, retry_due, snapshots
from ems.maintenance.scheduler import Scheduler, SchedulerConfig
from ems.metrics import REGISTRY
from ems.ops.plans import Plans
from ems.store import Store
from ems.store.errors import NotScheduler
from ems.types import GroupInfo, TopicInfo
from ems.values.login_limits import FORGET_SECONDS
from ems.values.schedule import Hold
from ems.wakeups import group_channel
from tests.integration import seed

DAY = 86400.0


@pytest.fixture
def topic(settings: Settings, store: Store) -> TopicInfo:
    return TopicAdmin(settings, store=store).create("t", 2)


@pytest.fixture
def group(store: Store, topic: TopicInfo) -> GroupInfo:
    return seed.group(store, "g", topic, ack_timeout=1)


def _log_states(store: Store) -> dict[tuple[int, int], str]:
    rows = seed.sql(store, "SELECT partition_no, offset_no, state FROM topic_group_log")
    return {(int(p), int(o)): s for p, o, s in rows}


def test_purge_log_deletes_old_finished_rows_only(
    settings: Settings, store: Store, group: GroupInfo
) -> None:
    seed.log(store, group, 0, 1, state="done", age_seconds=10 * DAY)
    seed.log(store, group, 0, 2, state="dead", age_seconds=10 * DAY)
    seed.log(store, group, 0, 3, state="done", age_seconds=DAY)
    seed.log(store, group, 0, 4, state="start", age_seconds=10 * DAY)
    seed.log(store, group, 0, 5, state="retry", age_seconds=10 * DAY)
    for o in range(6, 11):
        seed.log(store, group, 1, o, state="done", age_seconds=8 * DAY)

    counts = purge_log(store, settings.with_(purge_chunk_rows=2, log_retention_days=7))

    assert counts == {
        "done": 6,
        "dead": 1,
        "job_runs": 0,
        "autoscale_decisions": 0,
        "alarms": 0,
        "login_failures": 0,
        "admin_plans": 0,
        "write_names": 0,
        "audit": 0,
        "stream_query_positions": 0,
    }
    assert _log_states(store) == {(0, 3): "done", (0, 4): "start", (0, 5): "retry"}
    assert purge_log(store, settings) == dict.fromkeys(counts, 0)


STATES = ("done", "dead", "start", "retry")


def test_purge_log_deletes_only_old_done_and_dead_rows_of_every_group_and_partition(
    settings: Settings, store: Store, topic: TopicInfo, group: GroupInfo
) -> None:
    other = TopicAdmin(settings, store=store).create("u", 3)
    targets = [(group, 0), (group, 1), (seed.group(store, "h", topic), 1)]
    targets += [(seed.group(store, "k", other), p) for p in (0, 2)]
    kept: set[tuple[int, int, int]] = set()
    for g, p in targets:
        # 13 old rows of every state at the bottom, then 8 young ones: windows of 5 rows
        # end inside the young ones, where an old done row (offset 12) is still deleted.
        for o in range(21):
            state = STATES[o % 4]
            old = o < 13
            seed.log(store, g, p, o, state=state, age_seconds=(10 if old else 1) * DAY)
            if not old or state not in ("done", "dead"):
                kept.add((g.id, p, o))

    counts = purge_log(store, settings.with_(purge_chunk_rows=5, log_retention_days=7))

    assert (counts["done"], counts["dead"]) == (4 * len(targets), 3 * len(targets))
    rows = seed.sql(store, "SELECT group_id, partition_no, offset_no FROM topic_group_log")
    assert {(int(g), int(p), int(o)) for g, p, o in rows} == kept
    again = purge_log(store, settings.with_(purge_chunk_rows=5, log_retention_days=7))
    assert (again["done"], again["dead"]) == (0, 0)


def test_old_rows_kept_at_the_bottom_do_not_stop_the_purge_above_them(
    settings: Settings, store: Store, group: GroupInfo
) -> None:
    # Three windows of old retry and start rows (retried messages) below old done rows.
    for o in range(12):
        seed.log(store, group, 0, o, state="retry" if o % 3 else "start", age_seconds=9 * DAY)
    for o in range(12, 30):
        seed.log(store, group, 0, o, state="done", age_seconds=8 * DAY)
    seed.log(store, group, 0, 30, state="done", age_seconds=DAY)

    counts = purge_log(store, settings.with_(purge_chunk_rows=4, log_retention_days=7))

    assert (counts["done"], counts["dead"]) == (18, 0)
    assert sorted(_log_states(store)) == [(0, o) for o in [*range(12), 30]]


def test_a_row_updated_late_does_not_hold_back_the_old_rows_above_it(
    settings: Settings, store: Store, group: GroupInfo
) -> None:
    # Offset 2 was read again an hour ago (a replay): young among rows eight days old.
    for o in range(12):
        seed.log(store, group, 0, o, state="done", age_seconds=3600 if o == 2 else 8 * DAY)
    for o in range(12, 20):
        seed.log(store, group, 0, o, state="done", age_seconds=DAY)

    counts = purge_log(store, settings.with_(purge_chunk_rows=4, log_retention_days=7))

    assert counts["done"] == 11
    assert sorted(_log_states(store)) == [(0, o) for o in [2, *range(12, 20)]]


def _handler_reads(store: Store) -> dict[str, int]:
    """Rows this session read so far: "next" counts rows read in key order (a range read
    and a full index scan alike), "rnd_next" rows read by table scans."""
    rows = store.db.select("SHOW SESSION STATUS LIKE 'Handler_read%%'", ())
    return {str(name).removeprefix("Handler_read_"): int(value) for name, value in rows}


def test_purge_log_reads_about_one_window_past_the_old_rows(
    settings: Settings, store: Store, group: GroupInfo
) -> None:
    old, young, chunk = 1_000, 50_000, 250
    seed.sql(
        store,
        "INSERT INTO topic_group_log (group_id, topic_id, partition_no, offset_no, client_id, "
        "state, updated_at) SELECT %s, %s, 0, seq, 'c', 'done', "
        f"IF(seq < %s, NOW(6) - INTERVAL 10 DAY, NOW(6)) FROM seq_0_to_{old + young - 1}",
        (group.id, group.topic_id, old),
    )
    # One connection in the pool: every statement of the run is counted on it.
    single = Store(settings.with_(pool_size=1))
    try:
        (session,) = single.db.select("SELECT CONNECTION_ID()", ())[0]
        before = _handler_reads(single)
        counts = purge_log(single, settings.with_(purge_chunk_rows=chunk, log_retention_days=7))
        after = _handler_reads(single)
        assert single.db.select("SELECT CONNECTION_ID()", ())[0][0] == session
    finally:
        single.close()

    assert counts["done"] == old
    read = {name: after[name] - before[name] for name in ("next", "rnd_next")}
    # Each old row is read twice in key order (its window, its DELETE), then one window
    # of young rows; the table scans are each window's temporary table. A scan of the
    # log, in key order or not, would read all 51,000 rows.
    assert read["next"] <= 2 * old + 2 * chunk, read
    assert read["rnd_next"] <= old + 2 * chunk, read
    remaining = seed.sql(store, "SELECT MIN(offset_no), COUNT(*) FROM topic_group_log")
    assert remaining == [(old, young)]


def test_purge_log_prunes_old_decisions_and_cleared_alarms_but_what_policy_reads(
    settings: Settings, store: Store, topic: TopicInfo, group: GroupInfo
) -> None:
    slow = seed.group(store, "slow", topic)
    seed.sql(
        store,
        "INSERT INTO autoscale_policy (group_id, backend, cooldown_seconds) VALUES (%s, 'log', %s)",
        (slow.id, int(50 * DAY)),
    )

    def decision(group_id: int, days: float, applied: bool) -> int:
        seed.sql(
            store,
            "INSERT INTO autoscale_decision (group_id, leader_epoch, decided_at, "
            "current_replicas, desired_replicas, applied, backend, reason) VALUES "
            "(%s, 1, NOW(6) - INTERVAL %s SECOND, 1, 2, %s, 'log', 'test')",
            (group_id, int(days * DAY), applied),
        )
        return int(seed.sql(store, "SELECT MAX(id) FROM autoscale_decision")[0][0])

    old_applied = decision(group.id, 40, True)
    decision(group.id, 35, False)
    newest_applied = decision(group.id, 31, True)  # the cooldown counts from it: kept
    decision(group.id, 31, False)
    young = decision(group.id, 1, False)
    within_cooldown = decision(slow.id, 40, False)  # the group's cooldown is 50 days
    decision(slow.id, 60, False)

    def alarm(key: str, status: str, opened_days: float, cleared_days: float | None) -> None:
        seed.sql(
            store,
            "INSERT INTO alarm (kind, condition_key, open_key, status, message, opened_at, "
            "last_seen_at, cleared_at) VALUES ('lag', %s, %s, %s, 'test', "
            "NOW(6) - INTERVAL %s SECOND, NOW(6) - INTERVAL %s SECOND, "
            "NOW(6) - INTERVAL %s SECOND)",
            (
                key,
                key if status == "open" else None,
                status,
                int(opened_days * DAY),
                int(opened_days * DAY),
                None if cleared_days is None else int(cleared_days * DAY),
            ),
        )

    alarm("lag:old", "cleared", 41, 40)
    alarm("lag:recent", "cleared", 41, 10)
    alarm("lag:open", "open", 41, None)

    counts = purge_log(store, settings.with_(purge_chunk_rows=2))

    assert (counts["autoscale_decisions"], counts["alarms"]) == (4, 1)
    kept = [r[0] for r in seed.sql(store, "SELECT id FROM autoscale_decision ORDER BY id")]
    assert kept == [newest_applied, young, within_cooldown]
    assert old_applied not in kept
    alarms = seed.sql(store, "SELECT condition_key FROM alarm ORDER BY id")
    assert [a[0] for a in alarms] == ["lag:recent", "lag:open"]
    # Idempotent.
    again = purge_log(store, settings)
    assert (again["autoscale_decisions"], again["alarms"]) == (0, 0)


def test_purge_log_prunes_sign_in_failures_whose_window_ended(
    settings: Settings, store: Store
) -> None:
    window = int(FORGET_SECONDS)
    for scope, last_seconds_ago in (
        ("user:old", window + 60),
        ("address:10.0.0.1", window + 1),
        ("user:recent", window - 60),
        ("address:10.0.0.2", 5),
    ):
        seed.sql(
            store,
            "INSERT INTO admin_login_failure (scope, failures, first_at, last_at) VALUES "
            "(%s, 3, NOW(6) - INTERVAL %s SECOND, NOW(6) - INTERVAL %s SECOND)",
            (scope, last_seconds_ago + 30, last_seconds_ago),
        )

    counts = purge_log(store, settings.with_(purge_chunk_rows=1))

    assert counts["login_failures"] == 2
    kept = seed.sql(store, "SELECT scope FROM admin_login_failure ORDER BY scope")
    assert [k[0] for k in kept] == ["address:10.0.0.2", "user:recent"]
    assert purge_log(store, settings)["login_failures"] == 0


def test_purge_log_prunes_the_audit_trail_past_its_retention(
    settings: Settings, store: Store
) -> None:
    for days_ago in (100, 91, 89, 0):
        seed.sql(
            store,
            "INSERT INTO admin_audit (at, actor, address, user_agent, action, target, params, "
            "outcome) VALUES (NOW(6) - INTERVAL %s DAY, 'a', '-', '', 'access', %s, '{}', 'ok')",
            (days_ago, f"t{days_ago}"),
        )
    counts = purge_log(store, settings.with_(purge_chunk_rows=1))
    assert counts["audit"] == 2
    kept = seed.sql(store, "SELECT target FROM admin_audit ORDER BY target")
    assert [k[0] for k in kept] == ["t0", "t89"]
    # 0 keeps every entry
    assert "audit" not in purge_log(store, settings.with_(audit_retention_days=0))
    assert purge_log(store, settings.with_(audit_retention_days=1))["audit"] == 1


def test_purge_log_prunes_expired_previews(settings: Settings, store: Store) -> None:
    plans = Plans(settings, store=store)
    for lifetime in (-60.0, -1.0, 60.0):
        plans.issue("otto", "purge", "dead letters", {"ids": [1]}, lifetime=lifetime)
    assert purge_log(store, settings.with_(purge_chunk_rows=1))["admin_plans"] == 2
    assert seed.sql(store, "SELECT COUNT(*) FROM admin_plan WHERE expires_at > NOW(6)") == [(1,)]
    assert seed.sql(store, "SELECT COUNT(*) FROM admin_plan") == [(1,)]


def test_reclaim_requeues_or_hands_back_in_flight_rows_of_dead_clients(
    settings: Settings, store: Store, topic: TopicInfo, group: GroupInfo
) -> None:
    seed.messages(store, topic, 0, range(10), 0)
    seed.commit(store, group, 0, 5)
    store.leases.register(group.id, "alive", "h", 1, ttl=30)
    # Below the cursor only a redelivered retry is in flight: its retry row stays claimed.
    seed.log(store, group, 0, 2, state="start", client="gone", age_seconds=5, attempts=3)
    seed.retry(store, group, 0, 2, msg_id=seed.message_id(store, topic, 0, 2), due_in=30)
    seed.log(store, group, 0, 7, state="start", client="gone", age_seconds=5)
    seed.log(store, group, 0, 3, state="start", client="alive", age_seconds=5)
    seed.log(store, group, 0, 4, state="start", client="gone", age_seconds=0)  # too young

    assert reclaim_inflight(store, settings) == {"requeued": 1, "handed_back": 1, "lost": 0}

    assert _log_states(store) == {(0, 2): "retry", (0, 3): "start", (0, 4): "start"}
    retries = seed.sql(
        store,
        "SELECT partition_no, offset_no, attempts, due_at <= NOW(6), message_id FROM retry_message",
    )
    assert retries == [(0, 2, 3, 1, seed.message_id(store, topic, 0, 2))]
    assert reclaim_inflight(store, settings) == {"requeued": 0, "handed_back": 0, "lost": 0}


def test_retry_due_wakes_groups_and_drops_retries_of_vanished_messages(
    settings: Settings, store: Store, topic: TopicInfo, group: GroupInfo
) -> None:
    seed.messages(store, topic, 0, range(5), 0)
    seed.retry(store, group, 0, 1, msg_id=seed.message_id(store, topic, 0, 1), due_in=-1)
    seed.retry(store, group, 0, 2, msg_id=seed.message_id(store, topic, 0, 2), due_in=60)
    seed.retry(store, group, 0, 3, msg_id=999_999, due_in=-1)
    seed.log(store, group, 0, 3, state="retry")
    client = redis.Redis.from_url(settings.redis_url)
    pubsub = client.pubsub()
    pubsub.subscribe(group_channel(settings, group.id))
    # Subscribed once Redis has confirmed it: a wake-up published before is lost.
    confirmed = pubsub.get_message(timeout=30)
    assert confirmed is not None and confirmed["type"] == "subscribe"

    counts = retry_due(store, settings)

    assert counts == {"due": 1, "groups_woken": 1, "due_unowned": 1, "orphans_dropped": 1}
    deadline = time.monotonic() + 3
    message = None
    while message is None and time.monotonic() < deadline:
        message = pubsub.get_message(timeout=0.5)
    assert message is not None and message["data"] == b"changed"
    offsets = seed.sql(store, "SELECT offset_no FROM retry_message ORDER BY offset_no")
    assert offsets == [(1,), (2,)]
    assert _log_states(store) == {(0, 3): "dead"}
    pubsub.close()
    client.close()


def test_snapshots_capture_watermarks_and_prune_old_ones(
    settings: Settings, store: Store, topic: TopicInfo, group: GroupInfo
) -> None:
    seed.messages(store, topic, 0, range(7), 0)
    seed.messages(store, topic, 1, range(3), 0)
    seed.sql(
        store,
        "INSERT INTO topic_watermark (captured_at, topic_id, partition_no, high_watermark) "
        "VALUES (NOW(6) - INTERVAL 9 DAY, %s, 0, 1)",
        (topic.id,),
    )
    counts = snapshots(store, settings)
    assert counts == {"offset_rows": 2, "watermark_rows": 2, "watermarks_pruned": 1}
    rows = seed.sql(store, "SELECT partition_no, high_watermark FROM topic_watermark ORDER BY 1")
    assert rows == [(0, 7), (1, 3)]


def test_run_job_records_the_run_with_its_counts(settings: Settings, store: Store) -> None:
    result = jobs.run_job(store, settings, "purge-log", holder="tester")
    (run,) = store.scheduler.runs()
    assert (run.job, run.runner, run.status, run.counts) == (
        "purge-log",
        "tester",
        "done",
        result.counts,
    )
    assert run.finished_at is not None
    assert store.scheduler.last_runs(["purge-log", "snapshots"]) == {"purge-log": run}


def test_an_unknown_job_is_refused_before_anything_is_written(
    settings: Settings, store: Store
) -> None:
    with pytest.raises(UnknownJob):
        jobs.run_job(store, settings, "vacuum", holder="tester")
    assert store.scheduler.runs() == []
    assert seed.sql(store, "SELECT COUNT(*) FROM scheduler_lease") == [(0,)]


def test_a_run_is_refused_while_another_holds_the_job_lock(
    settings: Settings, store: Store
) -> None:
    assert store.scheduler.hold("job:purge-log", "scheduler-a", ttl=30) == 1
    with pytest.raises(JobAlreadyRunning, match="scheduler-a"):
        jobs.run_job(store, settings, "purge-log", holder="cron")
    assert store.scheduler.runs() == []


def test_a_new_run_marks_an_abandoned_one_failed(settings: Settings, store: Store) -> None:
    seed.sql(store, "INSERT INTO job_run (job, runner) VALUES ('purge-log', 'killed')")
    jobs.run_job(store, settings, "purge-log", holder="next")
    old, new = sorted(store.scheduler.runs(), key=lambda r: r.id)
    assert (old.status, new.status) == ("failed", "done")
    assert old.error is not None and "abandoned" in old.error


def test_the_scheduler_epoch_grows_on_takeover_only(store: Store) -> None:
    assert store.scheduler.hold("scheduler", "a", ttl=0.3) == 1
    assert store.scheduler.hold("scheduler", "a", ttl=0.3) == 1
    assert store.scheduler.hold("scheduler", "b", ttl=0.3) is None
    time.sleep(0.4)
    assert store.scheduler.hold("scheduler", "b", ttl=10) == 2
    assert store.scheduler.hold("scheduler", "a", ttl=10) is None
    lease = store.scheduler.lease("scheduler")
    assert lease is not None and (lease.holder, lease.epoch) == ("b", 2)


def test_a_deposed_scheduler_starts_no_run_and_its_running_job_stops_at_a_chunk(
    settings: Settings, store: Store
) -> None:
    epoch = store.scheduler.hold("scheduler", "a", ttl=0.3)
    assert epoch == 1
    hold = Hold(name="scheduler", holder="a", epoch=epoch)
    seen: list[str] = []

    def slow_job(store: Store, settings: Settings) -> dict[str, int]:
        checkpoint()
        seen.append("first chunk")
        time.sleep(0.4)
        assert store.scheduler.hold("scheduler", "b", ttl=10) == 2
        checkpoint()
        seen.append("second chunk")
        return {}

    jobs.JOBS["slow"] = slow_job
    try:
        with pytest.raises(NotScheduler):
            jobs.run_job(store, settings, "slow", holder="a", scheduler_hold=hold)
        with pytest.raises(NotScheduler):
            jobs.run_job(store, settings, "slow", holder="a", scheduler_hold=hold)
    finally:
        del jobs.JOBS["slow"]
    assert seen == ["first chunk"]
    (run,) = store.scheduler.runs()
    assert run.status == "failed" and run.error is not None
    # The job lock was given back: the next holder need not wait out its TTL.
    assert store.scheduler.hold("job:slow", "b", ttl=10) is not None


def test_a_stop_request_ends_the_run_at_the_next_chunk_boundary(
    settings: Settings, store: Store
) -> None:
    stop = threading.Event()
    chunks: list[int] = []

    def chunked(store: Store, settings: Settings) -> dict[str, int]:
        for n in range(5):
            checkpoint()
            chunks.append(n)
            if n == 1:
                stop.set()  # SIGTERM arrives while chunk 1 runs
        return {"chunks": len(chunks)}

    jobs.JOBS["chunked"] = chunked
    try:
        with pytest.raises(JobInterrupted):
            jobs.run_job(store, settings, "chunked", holder="a", stop=stop)
    finally:
        del jobs.JOBS["chunked"]
    assert chunks == [0, 1]
    (run,) = store.scheduler.runs()
    assert run.status == "failed" and "shutting down" in (run.error or "")


def test_the_scheduler_reports_its_lease_and_runs_as_metrics(
    settings: Settings, store: Store
) -> None:
    def sample(name: str, **labels: str) -> float:
        return REGISTRY.get_sample_value(name, labels) or 0.0

    before = sample("ems_job_runs_total", job="snapshots", status="done")
    active = Scheduler(store, settings, SchedulerConfig(lease_ttl=5, renew_every=1))
    standby = Scheduler(store, settings, SchedulerConfig(lease_ttl=5, renew_every=1))
    assert active.heartbeat() and sample("ems_scheduler_active") == 1
    assert not standby.heartbeat() and sample("ems_scheduler_active") == 0
    assert not standby.run_job("snapshots")  # a standby runs nothing
    assert active.run_job("snapshots")
    assert sample("ems_job_runs_total", job="snapshots", status="done") == before + 1
    (run,) = store.scheduler.runs()
    assert run.runner == f"{active.holder}#1"
    active.resign()
    assert standby.heartbeat()  # released: taken at once


def test_purge_log_deletes_the_positions_of_streaming_queries_not_committed_for_the_retention(
    settings: Settings, store: Store, topic: TopicInfo
) -> None:
    """A dropped query's rows (committed 8 days ago) go, in chunks; a running one's
    (committed an hour ago) stay; retention 0 keeps every row."""
    queries = store.stream_queries
    queries.record("gone", [(topic.id, p, 1) for p in range(3)])
    queries.record("running", [(topic.id, p, 1) for p in range(3)])
    queries.record("half", [(topic.id, 0, 1), (topic.id, 1, 1)])
    ages = {"gone": 8 * DAY, "running": 3600, "half": 8 * DAY}
    for name, age in ages.items():
        seed.sql(
            store,
            "UPDATE stream_query_position SET committed_at = NOW(6) - INTERVAL %s SECOND "
            "WHERE query_name = %s",
            (age, name),
        )
    seed.sql(  # a partition the half query still commits
        store,
        "UPDATE stream_query_position SET committed_at = NOW(6) "
        "WHERE query_name = 'half' AND partition_no = 1",
    )
    kept = settings.with_(purge_chunk_rows=2, stream_query_retention=7 * DAY)

    assert (
        purge_log(store, kept.with_(stream_query_retention=0)).get("stream_query_positions") is None
    )
    assert purge_log(store, kept)["stream_query_positions"] == 4

    left = seed.sql(store, "SELECT query_name, partition_no FROM stream_query_position")
    assert sorted((str(q), int(p)) for q, p in left) == [
        ("half", 1),
        ("running", 0),
        ("running", 1),
        ("running", 2),
    ]
    assert purge_log(store, kept)["stream_query_positions"] == 0
