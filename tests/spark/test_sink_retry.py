"""An executor task of the ems sink that fails mid-write, after part of its rows were
stored, and that Spark runs again (local[2,2]: one retry per task): every row is stored
once (tests/spark/retried_sink.py, in a process of its own since a task's retries are
fixed when its SparkContext starts)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import ems
from ems.config import Settings
from tests.spark.test_sink import stored
from tests.spark.test_source import ROOT, topic


# In the Spark lane although it starts its own JVM: one JVM at a time on the two cores.
@pytest.mark.xdist_group("spark")
def test_a_task_retried_after_failing_mid_write_stores_every_row_once(
    settings: Settings, tmp_path: Path
) -> None:
    topic(settings, "retried.in", 2)
    topic(settings, "retried.out", 2)
    with ems.Producer(settings) as producer:
        producer.send_batch(
            "retried.in", [ems.Record(b"m%03d" % i, key=f"k{i}") for i in range(200)]
        )
    marker, log = tmp_path / "failed", tmp_path / "run.log"
    script = ROOT / "tests" / "spark" / "retried_sink.py"
    env = {**os.environ, "EMS_DATABASE_URL": settings.database_url, "PYTHONPATH": str(ROOT)}
    with log.open("wb") as out:
        done = subprocess.run(
            [
                sys.executable,
                str(script),
                "retried.in",
                "retried.out",
                str(tmp_path / "cp"),
                str(marker),
            ],
            env=env,
            stdout=out,
            stderr=out,
            timeout=300,
            check=False,
        )

    assert done.returncode == 0, log.read_text()[-3000:]
    assert marker.read_text() == "20"  # the first attempt took 20 rows: 14 stored in 2 writes
    out = stored(settings, "retried.out")
    assert [r[2] for r in out] == [b"m%03d" % i for i in range(200)]
