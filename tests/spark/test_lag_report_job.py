"""Offset snapshots and the lag report end to end: capture, report table, CSV, charts."""

from __future__ import annotations

import csv
import datetime as dt
from pathlib import Path

from click.testing import CliRunner
from pyspark.sql import SparkSession

from ems.cli import cli
from ems.config import Settings
from ems.maintenance.snapshots import capture_offset_snapshots
from ems.store import Store
from spark.lag.report import report
from spark.lag.request import LagRequest
from tests.spark.conftest import add_group, execute

AS_OF = dt.datetime(2026, 11, 21, 12, 0, 0)


def add_messages(settings: Settings, topic_id: int, partition: int, count: int) -> None:
    base = dt.datetime(2026, 11, 21, 8, 0, 0)
    for offset in range(count):
        execute(
            settings,
            "INSERT INTO message (topic_id, partition_no, offset_no, body, created_at) "
            "VALUES (%s, %s, %s, 'x', %s)",
            (topic_id, partition, offset, base + dt.timedelta(minutes=offset)),
        )


def commit(settings: Settings, group: int, partition: int, offset: int) -> None:
    execute(
        settings,
        "INSERT INTO group_offset (group_id, partition_no, committed_offset, generation) "
        "VALUES (%s, %s, %s, 1) ON DUPLICATE KEY UPDATE committed_offset = VALUES("
        "committed_offset), updated_at = NOW(6)",
        (group, partition, offset),
    )


def test_capture_reads_commits_and_watermarks(settings: Settings, store: Store) -> None:
    group, topic = add_group(settings, "billing", "iot.readings", partitions=3)
    broadcast, _ = add_group(settings, "screens", "iot.readings")
    execute(settings, "UPDATE consumer_group SET mode = 'broadcast' WHERE id = %s", (broadcast,))
    add_messages(settings, topic, 0, 10)
    add_messages(settings, topic, 1, 5)
    commit(settings, group, 0, 3)
    commit(settings, group, 1, 5)
    commit(settings, broadcast, 0, 1)

    assert capture_offset_snapshots(settings) == 2
    result = CliRunner().invoke(cli, ["offsets", "snapshot"], obj=settings)
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "captured 2 partition offsets"

    rows = execute(
        settings,
        "SELECT captured_at, partition_no, committed_offset, high_watermark, "
        "oldest_unconsumed_at FROM offset_snapshot WHERE group_id = %s "
        "ORDER BY captured_at, partition_no",
        (group,),
    )
    assert len({r[0] for r in rows}) == 2  # two captures, one time each
    assert [r[1:] for r in rows[:2]] == [
        (0, 3, 10, dt.datetime(2026, 11, 21, 8, 3)),
        (1, 5, 5, None),
    ]
    assert [r[1:] for r in rows[2:]] == [r[1:] for r in rows[:2]]


def seed_snapshots(settings: Settings) -> tuple[int, int]:
    """Group 'billing' consumes steadily (OK); 'alerts' stopped committing 20 min ago."""
    billing, topic = add_group(settings, "billing", "iot.readings", partitions=2)
    alerts, _ = add_group(settings, "alerts", "iot.readings")
    stopped = AS_OF - dt.timedelta(minutes=20)
    rows = []
    for minute in range(0, 30, 2):  # 30 minutes of captures every 2 minutes
        at = AS_OF - dt.timedelta(minutes=28 - minute)
        high = 1000 + 50 * minute
        oldest = at - dt.timedelta(seconds=45)
        for partition in (0, 1):
            rows.append((at, billing, topic, partition, high - 10, high, at, oldest))
            rows.append((at, alerts, topic, partition, 900, high, stopped, None))
    for row in rows:
        execute(
            settings,
            "INSERT INTO offset_snapshot (captured_at, group_id, topic_id, partition_no, "
            "committed_offset, high_watermark, committed_at, oldest_unconsumed_at) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
            row,
        )
    return billing, alerts


def test_lag_report_end_to_end(
    spark: SparkSession, settings: Settings, store: Store, tmp_path: Path
) -> None:
    billing, alerts = seed_snapshots(settings)
    request = LagRequest(
        as_of=AS_OF,
        window=dt.timedelta(minutes=10),
        output=str(tmp_path / "report"),
        output_format="csv",
        chart_dir=str(tmp_path / "charts"),
        keep_reports=1,
    )
    outcome = report(spark, settings, store, request)

    assert outcome.partitions == 4
    assert outcome.statuses == {"OK": 2, "STOP": 2}
    assert outcome.group_statuses == {"billing@iot.readings": "OK", "alerts@iot.readings": "ERR"}
    runs = execute(settings, "SELECT id, status, partitions FROM lag_report_run")
    assert runs == [(outcome.report_id, "done", 4)]
    stored = execute(
        settings,
        "SELECT group_id, partition_no, high_watermark, committed_offset, lag, "
        "lag_age_seconds, consume_rate, snapshots, status, group_status FROM lag_report "
        "WHERE report_id = %s ORDER BY group_id, partition_no",
        (outcome.report_id,),
    )
    # Captures at 12:00, 11:58, ..., 11:52 are inside (11:50, 12:00]: five of them.
    assert stored == [
        (billing, 0, 2400, 2390, 10, 45.0, 50 / 60, 5, "OK", "OK"),
        (billing, 1, 2400, 2390, 10, 45.0, 50 / 60, 5, "OK", "OK"),
        (alerts, 0, 2400, 900, 1500, None, 0.0, 5, "STOP", "ERR"),
        (alerts, 1, 2400, 900, 1500, None, 0.0, 5, "STOP", "ERR"),
    ]
    (csv_file,) = (tmp_path / "report").glob("*.csv")
    with csv_file.open() as f:
        lines = list(csv.DictReader(f))
    assert [(r["group_label"], r["partition_no"], r["lag"]) for r in lines] == [
        ("billing@iot.readings", "0", "10"),
        ("billing@iot.readings", "1", "10"),
        ("alerts@iot.readings", "0", "1500"),
        ("alerts@iot.readings", "1", "1500"),
    ]
    charts = sorted(Path(p).name for p in outcome.charts)
    assert charts == ["lag-alerts_iot.readings.png", "lag-billing_iot.readings.png"]
    for path in outcome.charts:
        assert Path(path).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # A second report replaces the first (keep_reports=1); nothing half-written is kept.
    again = report(spark, settings, store, request)
    assert execute(settings, "SELECT id FROM lag_report_run") == [(again.report_id,)]
    assert execute(settings, "SELECT DISTINCT report_id FROM lag_report") == [(again.report_id,)]


def test_one_snapshot_in_the_window_is_stored_and_shown_as_unknown(
    spark: SparkSession, settings: Settings, store: Store, tmp_path: Path
) -> None:
    """A group with 9,558 lag, no members and one snapshot in the window: the report
    stores "unknown" (migration 0019's enum value), the job's summary and the console's
    overview and groups page say so, never OK."""
    from ems.ops.browse import Browser
    from ems.ops.overview import OverviewReader

    group, topic = add_group(settings, "idle", "iot.readings", partitions=1)
    at = AS_OF - dt.timedelta(minutes=1)
    execute(
        settings,
        "INSERT INTO offset_snapshot (captured_at, group_id, topic_id, partition_no, "
        "committed_offset, high_watermark, committed_at, oldest_unconsumed_at) "
        "VALUES (%s, %s, %s, 0, 100, 9658, %s, %s)",
        (at, group, topic, at - dt.timedelta(minutes=2), at - dt.timedelta(minutes=5)),
    )
    request = LagRequest(
        as_of=AS_OF,
        window=dt.timedelta(minutes=10),
        output=str(tmp_path / "report"),
        output_format="csv",
        chart_dir=None,
        keep_reports=1,
    )
    outcome = report(spark, settings, store, request)
    assert outcome.statuses == {"unknown": 1}
    assert outcome.group_statuses == {"idle@iot.readings": "unknown"}
    stored = execute(
        settings,
        "SELECT lag, snapshots, status, group_status FROM lag_report WHERE report_id = %s",
        (outcome.report_id,),
    )
    assert stored == [(9558, 1, "unknown", "unknown")]
    overview = OverviewReader(store=store).read()
    assert [(g.group, g.status, g.lag) for g in overview.groups] == [("idle", "unknown", 9558)]
    page = Browser(store=store).groups_page()
    assert [(g.name, g.status) for g in page.items] == [("idle", "unknown")]
