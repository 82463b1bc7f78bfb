"""The compaction job kept up (--every): runs at an interval in one session, survives a
failed run, stops on SIGTERM after its current run."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from ems.config import Settings
from ems.exceptions import EmsError, InvalidCutoff, JobAlreadyRunning
from ems.store import Store
from ems.store.compaction import LEASE
from ems.values.schedule import Hold
from spark import runtime
from spark.compaction.request import CompactRequest, RunOutcome
from spark.compaction.runner import pause_after, serve
from tests.spark.conftest import execute, insert_log
from tests.spark.test_compact_job import CUTOFF, archived_ids, live_ids, seed

#: The seeded rows are days old: a day's age takes every final one of them.
OLDER_THAN = dt.timedelta(days=1)


def final_ids(settings: Settings) -> set[int]:
    return {
        r[0]
        for r in execute(settings, "SELECT id FROM topic_group_log WHERE state IN ('done', 'dead')")
    }


def serve_often(
    settings: Settings,
    root: Path,
    stop: threading.Event,
    on_outcome: Callable[[RunOutcome], None],
    on_error: Callable[[EmsError], None],
) -> int:
    """Runs 100 ms apart (the runs take longer, so each follows the last at once)."""
    request = CompactRequest(older_than=OLDER_THAN, archive_root=str(root))
    every = dt.timedelta(milliseconds=100)
    return serve(settings, request, every, stop=stop, on_outcome=on_outcome, on_error=on_error)


def test_runs_at_an_interval_until_stopped(
    spark: SparkSession, settings: Settings, store: Store, tmp_path: Path
) -> None:
    seeded = seed(settings)
    first = final_ids(settings)
    (topic,) = execute(
        settings, "SELECT topic_id FROM consumer_group WHERE id = %s", (seeded["groups"][0],)
    )[0]
    late = [
        (i, seeded["groups"][0], topic, 0, 10_000 + i, "done", 1, *[CUTOFF] * 3)
        for i in range(900_001, 900_031)
    ]
    stop = threading.Event()
    outcomes: list[RunOutcome] = []

    def on_outcome(outcome: RunOutcome) -> None:
        outcomes.append(outcome)
        if len(outcomes) == 1:
            insert_log(settings, late)  # arrives between runs
        else:
            stop.set()

    runs = serve_often(settings, tmp_path, stop, on_outcome, pytest.fail)

    assert runs == 2
    assert [(o.archived, o.deleted) for o in outcomes] == [
        (len(first), len(first)),
        (len(late), len(late)),
    ]
    assert archived_ids(tmp_path) == sorted(first | {r[0] for r in late})
    assert live_ids(settings) == set(seeded["rows"]) - first
    # The session the runs used is still the caller's: serve never stops a session it
    # did not start.
    assert SparkSession.getActiveSession() is spark


def test_a_failed_run_is_reported_and_the_next_one_runs(
    spark: SparkSession, settings: Settings, store: Store, tmp_path: Path
) -> None:
    seeded = seed(settings)
    first = final_ids(settings)
    # Another host's compaction holds the lease during the first run.
    other = "another-host:1:feedf00d"
    epoch = store.scheduler.hold(LEASE, other, 300.0)
    assert epoch is not None
    errors: list[EmsError] = []
    outcomes: list[RunOutcome] = []
    stop = threading.Event()

    def on_error(exc: EmsError) -> None:
        errors.append(exc)
        store.scheduler.release(Hold(name=LEASE, holder=other, epoch=epoch))  # it ends

    def on_outcome(outcome: RunOutcome) -> None:
        outcomes.append(outcome)
        stop.set()

    runs = serve_often(settings, tmp_path, stop, on_outcome, on_error)

    assert runs == 2
    assert [type(e) for e in errors] == [JobAlreadyRunning]
    assert [(o.archived, o.deleted) for o in outcomes] == [(len(first), len(first))]
    assert live_ids(settings) == set(seeded["rows"]) - first


def test_an_absolute_cutoff_is_refused_before_spark_starts(
    settings: Settings, tmp_path: Path
) -> None:
    seeded = seed(settings)
    with pytest.raises(InvalidCutoff, match="needs an age"):
        serve(
            settings,
            CompactRequest(cutoff=CUTOFF, archive_root=str(tmp_path)),
            dt.timedelta(hours=1),
            stop=threading.Event(),
            on_outcome=pytest.fail,
            on_error=pytest.fail,
        )
    assert live_ids(settings) == set(seeded["rows"])
    assert execute(settings, "SELECT COUNT(*) FROM compaction_run") == [(0,)]


@pytest.mark.parametrize(
    ("every", "took", "pause"),
    [(3600, 10.0, 3590.0), (60, 60.0, 0.0), (60, 95.5, 0.0), (1, 0.25, 0.75)],
)
def test_pause_after(every: int, took: float, pause: float) -> None:
    assert pause_after(dt.timedelta(seconds=every), took) == pause


def test_sigterm_during_the_wait_sets_the_stop_event_and_the_handler_is_restored() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with runtime.stop_on_sigterm() as stop:
        assert not stop.is_set()
        # Another process signals while the loop waits for its next run.
        killer = subprocess.Popen(["sh", "-c", f"sleep 0.3; kill -TERM {os.getpid()}"])
        started = time.monotonic()
        assert stop.wait(30)
        assert time.monotonic() - started < 10
        killer.wait()
    assert signal.getsignal(signal.SIGTERM) is before


# In the Spark lane although it starts its own JVM: one JVM at a time on the two cores.
@pytest.mark.xdist_group("spark")
@pytest.mark.parametrize("whole_group", [False, True], ids=["process", "process-group"])
def test_sigterm_stops_the_cli_cleanly(
    settings: Settings, tmp_path: Path, whole_group: bool
) -> None:
    """`ems spark compact --every` in a process of its own, stopped by SIGTERM to it alone
    or to its whole process group (systemd, a shell's kill): Spark's JVM ignores SIGTERM,
    so either way the run in flight finishes, and the job exits 0 without a traceback."""
    seed(settings)
    first = final_ids(settings)
    # With faulthandler on, a job that does not stop dumps its threads' stacks on SIGABRT.
    env = {**os.environ, "EMS_DATABASE_URL": settings.database_url, "PYTHONFAULTHANDLER": "1"}
    command = [sys.executable, "-m", "ems.cli", "spark", "compact", "--master", "local[1]"]
    command += ["--older-than", "1d", "--every", "1s", "--archive-root", str(tmp_path)]
    proc = subprocess.Popen(
        command,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the first run is done
        assert line.startswith("run "), line
        if whole_group:
            os.killpg(proc.pid, signal.SIGTERM)
        else:
            proc.send_signal(signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGABRT)
            err = proc.communicate(timeout=30)[1]
            stacks = err[-6000:]
            raise AssertionError(f"did not stop within 120 s; its threads:\n{stacks}") from None
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, err
    assert "Traceback" not in err, err
    *runs, last = [line.rstrip("\n"), *out.splitlines()]
    assert all(line.startswith("run ") for line in runs), out
    assert last == f"stopped after {len(runs)} runs", out
    # Every run that started finished: the one under way when the signal came (if the
    # signal did not fall between two runs) was let finish, not cut short.
    statuses = execute(settings, "SELECT status FROM compaction_run ORDER BY id")
    assert statuses == [("done",)] * len(runs), (statuses, out)
    assert archived_ids(tmp_path) == sorted(first)
    assert not final_ids(settings)
