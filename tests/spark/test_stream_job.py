"""`ems spark stream`: per-project 1-minute windows of the demo's readings with a
watermark, to reading_window and Parquet, run with Trigger.AvailableNow in the suite's
Spark session; a micro-batch Spark runs again leaves the same rows and files."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow.parquet as pq
from click.testing import CliRunner
from pyspark.sql import SparkSession

import ems
from ems.cli import cli
from ems.config import Settings
from ems.store import Store
from tests.spark.test_source import topic

BASE = dt.datetime(2026, 11, 20, 10, 0, tzinfo=dt.UTC)
#: (project, seconds after BASE, temperature); the last reading moves the watermark (2 min)
#: past 10:04, so the windows up to 10:03 are final and written.
READINGS = [
    (1, 5, 20.0),
    (1, 50, 22.0),
    (2, 30, 18.0),
    (1, 70, 25.0),
    (2, 100, 19.0),
    (2, 110, 21.0),
    (1, 190, 30.0),
    (1, 400, 0.0),
]


def publish(settings: Settings) -> None:
    records = [
        ems.Record(
            json.dumps(
                {
                    "project_id": p,
                    "device": f"gw-{p}-0",
                    "ts": (BASE + dt.timedelta(seconds=s)).isoformat(timespec="milliseconds"),
                    "temperature": t,
                }
            ),
            key=str(p),
        )
        for p, s, t in READINGS
    ]
    records.insert(3, ems.Record("not a reading"))
    with ems.Producer(settings) as producer:
        producer.send_batch("iot.readings", records)


def run(settings: Settings, tmp_path: Path) -> str:
    args = ["spark", "stream", "--available-now", "--max-offsets", "4"]
    args += ["--checkpoint", str(tmp_path / "checkpoint"), "--parquet", str(tmp_path / "pq")]
    result = CliRunner().invoke(cli, args, obj=settings)
    assert result.exit_code == 0, result.output
    return result.output


def windows(store: Store) -> list[tuple[int, str, int, float]]:
    return [
        (w.project_id, w.start.strftime("%H:%M"), w.readings, round(w.avg_temperature, 2))
        for w in store.reading_windows.all()
    ]


EXPECTED = [
    (1, "10:00", 2, 21.0),
    (2, "10:00", 1, 18.0),
    (1, "10:01", 1, 25.0),
    (2, "10:01", 2, 20.0),
    (1, "10:03", 1, 30.0),
]


def test_the_stream_job_writes_final_windows_once(
    spark: SparkSession, settings: Settings, store: Store, tmp_path: Path
) -> None:
    topic(settings, "iot.readings", 2)
    publish(settings)

    output = run(settings, tmp_path)

    assert "windows written" in output
    assert windows(store) == EXPECTED
    shown = CliRunner().invoke(cli, ["spark", "queries", "reading-windows", "--json"], obj=settings)
    assert shown.exit_code == 0, shown.output
    (query,) = json.loads(shown.output)
    assert query["lag"] == 0  # the source recorded every committed batch's end
    assert sum(p["committed_offset"] for p in query["partitions"]) == len(READINGS) + 1
    text = CliRunner().invoke(cli, ["spark", "queries"], obj=settings).output
    assert text.startswith("streaming query reading-windows: last committed ")
    assert "iot.readings  1" in text
    unknown = CliRunner().invoke(cli, ["spark", "queries", "nobody"], obj=settings)
    assert unknown.exit_code == 2
    assert "ems.query.name" in unknown.output
    parquet = pq.read_table(tmp_path / "pq").to_pylist()
    assert sorted((r["project_id"], r["readings"]) for r in parquet) == sorted(
        (p, n) for p, _, n, _ in EXPECTED
    )
    commits = sorted(
        (tmp_path / "checkpoint" / "commits").glob("[0-9]*"), key=lambda p: int(p.name)
    )
    last = commits[-1]
    last.unlink()
    (last.parent / f".{last.name}.crc").unlink(missing_ok=True)

    run(settings, tmp_path)  # the last batch again

    assert last.exists()
    assert windows(store) == EXPECTED
    assert len(pq.read_table(tmp_path / "pq").to_pylist()) == len(EXPECTED)
