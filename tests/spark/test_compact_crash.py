"""Compaction killed between its steps (SIGKILL in a subprocess), then rerun: the archive,
the summaries and the rows left in MySQL are exactly those of an uninterrupted run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from ems.config import Settings
from ems.store import Store
from spark.jobs.compact import CompactRequest, compact
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


@pytest.mark.slow
@pytest.mark.parametrize("crash_after", ["archive-write", "archive", "summaries", "delete:1"])
def test_rerun_after_kill(
    spark: SparkSession, settings: Settings, store: Store, tmp_path: Path, crash_after: str
) -> None:
    seeded = seed(settings)
    rows, compacted = seeded["rows"], seeded["compacted"]
    root = tmp_path / "archive"
    killed = run_cli(
        settings,
        "--cutoff",
        CUTOFF.isoformat(),
        "--archive-root",
        str(root),
        "--master",
        "local[1]",
        "--crash-after",
        crash_after,
    )
    assert killed.returncode == -9, killed.stderr[-2000:]
    (status,) = execute(settings, "SELECT status FROM compaction_run")
    expected_status = {
        "archive-write": "started",
        "archive": "started",
        "summaries": "archived",
        "delete:1": "summarized",
    }[crash_after]
    assert status == (expected_status,)
    if crash_after == "delete:1":
        # One chunk deleted, the rest still there: the kill really fell between chunks.
        left = live_ids(settings) & compacted
        assert left and left != compacted
    else:
        assert live_ids(settings) == set(rows)

    outcomes = compact(
        spark, settings, store, CompactRequest(cutoff=CUTOFF, archive_root=str(root))
    )

    assert outcomes[0].resumed_from == expected_status
    assert execute(settings, "SELECT status, archived_rows FROM compaction_run ORDER BY id") == [
        ("done", len(compacted)),
        ("done", 0),
    ]
    assert archived_ids(root) == sorted(compacted)
    assert live_ids(settings) == set(rows) - compacted
    assert stored_summaries(settings) == expected_summaries(rows, compacted)
    assert execute(settings, "SELECT COUNT(*) FROM log_summary_stage") == [(0,)]
    assert not (root / "_staging").exists() or not any((root / "_staging").iterdir())
