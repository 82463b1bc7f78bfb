"""`ems scheduler` and `ems cleanup` end to end: two scheduler processes, one active at a
time; kill -9 and SIGTERM handovers; cron runs against the job lock; bad input."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from itertools import pairwise
from pathlib import Path
from typing import IO

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ems import TopicAdmin
from ems.config import Settings
from ems.store import Store
from ems.values.schedule import JobRunInfo, LeaseInfo
from tests import forked
from tests.integration import seed

TTL = 2.0
#: For the hand-over test: a lease no takeover could wait out unnoticed.
LONG_TTL = 30.0
FAST_JOBS = ("snapshots", "purge-log", "retry-due", "reclaim-inflight")


def _env(settings: Settings) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMS_")}
    env.update(EMS_DATABASE_URL=settings.database_url, EMS_REDIS_URL=settings.redis_url)
    return env


def _cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    return forked.run("ems.cli", args, env=_env(settings))


@pytest.fixture
def start_scheduler(
    settings: Settings, tmp_path: Path
) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    procs: list[tuple[subprocess.Popen[str], IO[str]]] = []

    def start(name: str, *extra: str) -> subprocess.Popen[str]:
        intervals = [a for job in FAST_JOBS for a in ("--interval", f"{job}=0.3")]
        log = open(tmp_path / f"{name}.log", "w")  # noqa: SIM115 - closed at teardown
        args = ["scheduler", "--lease-ttl", str(TTL), "--renew-every", "0.4", *intervals, *extra]
        proc = subprocess.Popen(
            [sys.executable, "-m", "ems.cli", *args],
            env=_env(settings),
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
        procs.append((proc, log))
        return proc

    yield start
    for proc, log in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        log.close()


def _lease(store: Store) -> LeaseInfo | None:
    return store.scheduler.lease("scheduler")


def _holder(store: Store) -> str | None:
    lease = _lease(store)
    return lease.holder if lease is not None else None


def _wait_for(check: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def _pid(holder: str) -> int:
    return int(holder.split(":")[1])


def _runner(run: JobRunInfo) -> str:
    return run.runner.rsplit("#", 1)[0]


def _assert_no_overlap_between_runners(runs: list[JobRunInfo]) -> None:
    """Runs of different schedulers never overlap in time. A run the killed scheduler left
    behind has no finish time, or got one when the next run of its job started: only its
    start is compared (it began before every run of the next scheduler)."""
    for a in runs:
        for b in runs:
            if _runner(a) == _runner(b) or a.started_at > b.started_at:
                continue
            if a.finished_at is None or (a.error and "abandoned" in a.error):
                continue
            assert a.finished_at is not None and a.finished_at <= b.started_at, (a, b)
    for job in {r.job for r in runs}:
        same = sorted((r for r in runs if r.job == job), key=lambda r: r.started_at)
        for a, b in pairwise(same):
            assert a.finished_at is not None and a.finished_at <= b.started_at, (a, b)


def test_one_of_two_schedulers_runs_jobs_and_the_other_takes_over_after_kill_9(
    store: Store, start_scheduler: Callable[[str], subprocess.Popen[str]]
) -> None:
    procs = [start_scheduler("a"), start_scheduler("b")]
    _wait_for(lambda: len(store.scheduler.runs()) >= 8, timeout=30)
    first = _lease(store)
    assert first is not None and first.holder is not None and first.epoch == 1
    runners = {r.runner for r in store.scheduler.runs(1000)}
    assert runners == {f"{first.holder}#1"}

    active = next(p for p in procs if p.pid == _pid(first.holder))
    standby = next(p for p in procs if p is not active)
    os.kill(active.pid, signal.SIGKILL)
    killed_at = time.monotonic()
    _wait_for(lambda: (_lease(store) or first).holder != first.holder, timeout=TTL + 5)
    took = time.monotonic() - killed_at
    second = _lease(store)
    assert second is not None and second.holder is not None
    assert _pid(second.holder) == standby.pid and second.epoch == 2
    assert took >= TTL - 1.0, "the standby took over before the lease could have expired"
    _wait_for(
        lambda: any(r.runner == f"{second.holder}#2" for r in store.scheduler.runs(1000)),
        timeout=10,
    )
    time.sleep(1.0)

    runs = store.scheduler.runs(1000)
    assert {r.runner for r in runs} <= {f"{first.holder}#1", f"{second.holder}#2"}
    _assert_no_overlap_between_runners(runs)

    standby.send_signal(signal.SIGTERM)
    assert standby.wait(timeout=15) == 0
    lease = _lease(store)
    assert lease is not None and lease.expires_in <= 0  # released, not left to expire
    assert not [
        r
        for r in store.scheduler.runs(1000)
        if r.status == "running" and r.runner.startswith(second.holder)
    ]


def test_sigterm_hands_over_at_once(
    store: Store, start_scheduler: Callable[[str], subprocess.Popen[str]]
) -> None:
    # A lease far longer than any takeover may take, even on a loaded machine: a standby
    # that waited the lease out would miss the deadline below by far.
    long_ttl = ("--lease-ttl", str(LONG_TTL))
    a = start_scheduler("a", *long_ttl)
    _wait_for(lambda: _holder(store) is not None, 20)
    b = start_scheduler("b", *long_ttl)
    time.sleep(1.5)
    first = _lease(store)
    assert first is not None and first.holder is not None and _pid(first.holder) == a.pid
    a.send_signal(signal.SIGTERM)
    assert a.wait(timeout=15) == 0
    # The standby tries every 0.4 s: it takes over long before the lease would expire.
    _wait_for(lambda: (_lease(store) or first).holder != first.holder, timeout=LONG_TTL / 2)
    second = _lease(store)
    assert second is not None and second.holder is not None and _pid(second.holder) == b.pid


def test_a_cron_run_is_refused_while_the_job_is_running(settings: Settings, store: Store) -> None:
    assert store.scheduler.hold("job:purge-log", "host:1:sched", ttl=30) is not None
    result = _cli(settings, "cleanup", "run", "purge-log", "--yes")
    assert result.returncode == 1
    assert "purge-log is running" in result.stderr and "host:1:sched" in result.stderr
    assert store.scheduler.runs() == []


def test_cleanup_run_and_list(settings: Settings, store: Store) -> None:
    topic = TopicAdmin(settings, store=store).create("t", 1, retention_hours=1)
    seed.messages(store, topic, 0, range(10), 2)
    seed.messages(store, topic, 0, range(10, 12), 0)
    dry = _cli(settings, "cleanup", "run", "purge-retention", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["counts"]["deleted"] == 10
    assert seed.offsets(store, topic, 0) == list(range(12)) and store.scheduler.runs() == []
    refused = _cli(settings, "cleanup", "run", "purge-retention")
    assert refused.returncode == 1 and seed.offsets(store, topic, 0) == list(range(12))
    result = _cli(settings, "cleanup", "run", "purge-retention", "--yes", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["counts"] == {"topics": 1, "partitions": 1, "deleted": 10}
    assert seed.offsets(store, topic, 0) == [10, 11]
    listing = _cli(settings, "cleanup", "list", "--json")
    assert listing.returncode == 0, listing.stderr
    last = {j["job"]: j["last_run"] for j in json.loads(listing.stdout)}
    assert last["purge-retention"]["status"] == "done" and last["snapshots"] is None
    text = _cli(settings, "cleanup", "list").stdout
    assert "purge-retention" in text and "deleted=10" in text


def test_bad_input_exits_2_and_runs_nothing(settings: Settings, store: Store) -> None:
    result = _cli(settings, "cleanup", "run", "vacuum", "--yes")
    assert result.returncode == 2 and "unknown job 'vacuum'" in result.stderr
    no_dry = _cli(settings, "cleanup", "run", "snapshots", "--dry-run")
    assert no_dry.returncode == 2 and "--dry-run is available" in no_dry.stderr
    bad = _cli(settings, "scheduler", "--once", "--interval", "vacuum=5")
    assert bad.returncode == 2 and "unknown job" in bad.stderr
    ttl = _cli(settings, "scheduler", "--once", "--lease-ttl", "1", "--renew-every", "1")
    assert ttl.returncode == 2 and "TTL" in ttl.stderr
    assert store.scheduler.runs() == []
    assert store.scheduler.lease("scheduler") is None


def test_scheduler_once_runs_every_job_and_releases(settings: Settings, store: Store) -> None:
    result = _cli(settings, "scheduler", "--once")
    assert result.returncode == 0, result.stderr
    runs = store.scheduler.runs()
    assert sorted(r.job for r in runs) == sorted(
        [
            "alarms",
            "purge-retention",
            "delete-consumed",
            "purge-log",
            "retry-due",
            "reclaim-inflight",
            "relay-outbox",
            "snapshots",
            "time-index",
        ]
    )
    assert all(r.status == "done" for r in runs)
    lease = store.scheduler.lease("scheduler")
    assert lease is not None and lease.expires_in <= 0


def test_topic_rank_from_captures(settings: Settings, store: Store) -> None:
    admin = TopicAdmin(settings, store=store)
    busy, quiet = admin.create("busy", 2), admin.create("quiet", 1)
    now = store.maintenance.now()  # every row of one capture has the same time
    for captured, marks in (
        (dt.timedelta(hours=30), {(busy, 0): 100, (busy, 1): 50, (quiet, 0): 10}),
        (dt.timedelta(minutes=90), {(busy, 0): 1000, (busy, 1): 500, (quiet, 0): 20}),
        (dt.timedelta(seconds=5), {(busy, 0): 1100, (busy, 1): 700, (quiet, 0): 20}),
    ):
        for (topic, p), high in marks.items():
            seed.sql(
                store,
                "INSERT INTO topic_watermark (captured_at, topic_id, partition_no, "
                "high_watermark) VALUES (%s, %s, %s, %s)",
                (now - captured, topic.id, p, high),
            )
    result = _cli(settings, "topic", "rank", "--json")
    assert result.returncode == 0, result.stderr
    ranking = json.loads(result.stdout)
    topics = [
        (t["topic"], t["last_hour"]["messages"], t["last_day"]["messages"])
        for t in ranking["topics"]
    ]
    assert topics == [("busy", 300, 1800 - 150), ("quiet", 0, 10)]
    text = _cli(settings, "topic", "rank").stdout
    assert text.splitlines()[2].split()[:3] == ["busy", "300", "1650"]


def test_a_cron_run_is_refused_while_the_scheduler_runs_that_job(
    settings: Settings, store: Store, tmp_path: Path
) -> None:
    topic = TopicAdmin(settings, store=store).create("t", 1, retention_hours=1)
    seed.sql(
        store,
        "INSERT INTO message (topic_id, partition_no, offset_no, body, created_at) "
        "SELECT %s, 0, seq, 'x', NOW(6) - INTERVAL 2 HOUR FROM seq_0_to_39999",
        (topic.id,),
    )
    env = {**_env(settings), "EMS_PURGE_CHUNK_ROWS": "500", "EMS_PURGE_PAUSE": "2"}
    with open(tmp_path / "scheduler.log", "w") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ems.cli",
                "scheduler",
                "--lease-ttl",
                "4",
                "--renew-every",
                "1",
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            _wait_for(
                lambda: any(
                    r.job == "purge-retention" and r.status == "running"
                    for r in store.scheduler.runs()
                ),
                timeout=20,
            )
            cron = _cli(settings, "cleanup", "run", "purge-retention", "--yes")
            assert cron.returncode == 1 and "purge-retention is running" in cron.stderr
            runs = [r for r in store.scheduler.runs() if r.job == "purge-retention"]
            assert len(runs) == 1 and runs[0].runner.startswith(str(_holder(store)))
            # Stopped once a chunk is done (other jobs start beside it and may delay the
            # first), so what the stop leaves is a partial purge, not an untouched one.
            _wait_for(lambda: len(seed.offsets(store, topic, 0)) < 40000, timeout=20)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=15) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    (run,) = [r for r in store.scheduler.runs() if r.job == "purge-retention"]
    # SIGTERM stopped it at a chunk boundary: some chunks done, the rest left for later.
    assert run.status == "failed" and "shutting down" in (run.error or "")
    left = len(seed.offsets(store, topic, 0))
    assert 0 < left < 40000 and left % 500 == 0
    assert seed.low(store, topic, 0) == 40000 - left


def _scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_the_active_scheduler_serves_its_metrics(
    store: Store, start_scheduler: Callable[..., subprocess.Popen[str]], tmp_path: Path
) -> None:
    start_scheduler("m", "--metrics-port", "0")
    log = tmp_path / "m.log"
    _wait_for(lambda: "metrics on port" in log.read_text(), 30)
    port = int(log.read_text().split("metrics on port ")[1].split()[0])
    done = ("ems_job_runs_total", (("job", "snapshots"), ("status", "done")))
    _wait_for(lambda: _scrape(port).get(done, 0) >= 2, 30)
    samples = _scrape(port)
    assert samples[("ems_scheduler_active", ())] == 1.0
    runs = [r for r in store.scheduler.runs() if r.job == "snapshots" and r.status == "done"]
    assert len(runs) >= samples[done] >= 2
    assert samples[("ems_job_seconds_count", (("job", "snapshots"),))] >= 2


def test_the_scheduler_serves_every_groups_lag_with_lag_metrics(
    store: Store,
    settings: Settings,
    start_scheduler: Callable[..., subprocess.Popen[str]],
    tmp_path: Path,
) -> None:
    topic = TopicAdmin(store=store).create("lagging", 1)
    seed.messages(store, topic, 0, range(7), age_hours=0.5)
    group = seed.group(store, "behind", topic)
    seed.commit(store, group, 0, 3)
    start_scheduler("lag", "--metrics-port", "0", "--lag-metrics")
    log = tmp_path / "lag.log"
    _wait_for(lambda: "metrics on port" in log.read_text(), 30)
    port = int(log.read_text().split("metrics on port ")[1].split()[0])
    samples = _scrape(port)
    lag = (
        "ems_group_lag_messages",
        (("group", "behind"), ("partition", "0"), ("topic", "lagging")),
    )
    assert samples[lag] == 4
    assert samples[("ems_exporter_up", ())] == 1
    # The scheduler's own metrics are still there.
    assert ("ems_scheduler_active", ()) in samples
    alone = _cli(settings, "scheduler", "--lag-metrics", "--once")
    assert alone.returncode == 2 and "--lag-metrics needs --metrics-port" in alone.stderr
