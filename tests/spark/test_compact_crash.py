"""Compaction killed between its steps, then rerun: the archive, the summaries and the rows
left in MySQL are exactly those of an uninterrupted run.

One case really kills the job (SIGKILL of a `ems spark compact` subprocess in the middle of
its deletes); the others stop the job in this process at each step boundary, by raising
where the hook would kill, which leaves the database and archive in the same state a kill
does (a killed job's lease is taken over at once by a rerun on the same host, whose
process it names)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from ems.config import Settings
from ems.store import Store
from spark.compaction.request import CompactRequest
from spark.compaction.runner import compact
from spark.options import parse_crash_point
from tests.spark.conftest import execute
from tests.spark.test_compact_job import (
    CUTOFF,
    archived_ids,
    expected_summaries,
    live_ids,
    seed,
    stored_summaries,
)


def run_cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMS_")}
    env["EMS_DATABASE_URL"] = settings.database_url
    return subprocess.run(
        [sys.executable, "-m", "ems.cli", "spark", "compact", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


class Killed(BaseException):
    """Stands for SIGKILL: nothing in the job catches it."""


def _kill() -> None:
    raise Killed


#: Statuses a run can be left in when stopped there: chunks are deleted while the
#: summaries are computed, so a stop among the deletes may come before or after them.
STATUS_AFTER = {
    "archive-write": {"started"},
    "archive": {"started"},
    "summaries": {"archived"},
    "delete:2": {"archived", "summarized"},
}


@pytest.mark.slow
def test_rerun_after_sigkill(
    spark: SparkSession, settings: Settings, store: Store, tmp_path: Path
) -> None:
    root = tmp_path / "archive"
    seeded = seed(settings)
    killed = run_cli(
        settings,
        "--cutoff",
        CUTOFF.isoformat(),
        "--archive-root",
        str(root),
        "--master",
        "local[1]",
        "--conf",
        "spark.ui.enabled=false",
        "--crash-after",
        "delete:2",
    )
    assert killed.returncode == -9, killed.stderr[-2000:]
    check_rerun(spark, settings, store, root, seeded, "delete:2")


@pytest.mark.parametrize("crash_after", list(STATUS_AFTER))
def test_rerun_after_stop_at_each_step(
    spark: SparkSession,
    settings: Settings,
    store: Store,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    crash_after: str,
) -> None:
    root = tmp_path / "archive"
    seeded = seed(settings)
    monkeypatch.setattr("spark.runtime.crash_now", _kill)
    request = CompactRequest(
        cutoff=CUTOFF, archive_root=str(root), crash_after=parse_crash_point(crash_after)
    )
    with pytest.raises(Killed):
        compact(spark, settings, store, request)
    monkeypatch.undo()
    check_rerun(spark, settings, store, root, seeded, crash_after)


def check_rerun(
    spark: SparkSession,
    settings: Settings,
    store: Store,
    root: Path,
    seeded: dict[str, Any],
    crash_after: str,
) -> None:
    rows, compacted = seeded["rows"], seeded["compacted"]
    ((status,),) = execute(settings, "SELECT status FROM compaction_run")
    assert status in STATUS_AFTER[crash_after]
    if crash_after == "summaries":
        # Deletes may have begun beside the summaries; none of the live rows went.
        assert live_ids(settings) >= set(rows) - compacted
    elif crash_after.startswith("delete"):
        # One chunk deleted, the rest still there: the kill really fell between chunks.
        left = live_ids(settings) & compacted
        assert left and left != compacted
    else:
        assert live_ids(settings) == set(rows)

    outcomes = compact(
        spark, settings, store, CompactRequest(cutoff=CUTOFF, archive_root=str(root))
    )

    assert outcomes[0].resumed_from == status
    assert execute(settings, "SELECT status, archived_rows FROM compaction_run ORDER BY id") == [
        ("done", len(compacted)),
        ("done", 0),
    ]
    assert archived_ids(root) == sorted(compacted)
    assert live_ids(settings) == set(rows) - compacted
    assert stored_summaries(settings) == expected_summaries(rows, compacted)
    assert execute(settings, "SELECT COUNT(*) FROM log_summary_stage") == [(0,)]
    assert not (root / "_staging").exists() or not any((root / "_staging").iterdir())
