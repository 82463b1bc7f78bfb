"""Consumer-group lag report over a sliding window of offset snapshots.

Per group, topic and partition: high watermark, committed offset, lag in messages, lag age
(age of the oldest unconsumed message), consumption and production rates over the window,
and a Burrow-style status (see spark.transforms.lag). Written to lag_report (rows of one
lag_report_run, published when the run is marked done), optionally to Parquet or CSV, and
as one PNG chart of lag over time per group.

Snapshots come from `ems offsets snapshot` (run it every 30-60 s); the report never
counts rows of the message table.

    spark-submit --jars /usr/share/java/mariadb-java-client.jar \\
        spark/jobs/lag_report.py --window 15m --output var/lag --chart-dir var/lag
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if __name__ == "__main__" and not __package__:
    # spark-submit puts only this script's directory on sys.path; a checkout without an
    # installed ems[spark] still finds the spark package at the repository root.
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ems.config import Settings
from ems.exceptions import InvalidWindow
from ems.store import Store
from ems.types import GroupRef
from spark.jobs import _runtime
from spark.jobs.compact import scope
from spark.options import parse_duration, parse_timestamp
from spark.preflight import check_environment

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

APP_NAME = "ems-lag-report"
DEFAULT_WINDOW = dt.timedelta(minutes=15)
#: Reports kept in lag_report (older ones are pruned after each run).
DEFAULT_KEEP = 500
OutputFormat = Literal["parquet", "csv"]


@dataclass(frozen=True, kw_only=True)
class LagRequest:
    window: dt.timedelta = DEFAULT_WINDOW
    #: End of the window (UTC); None: the database clock now.
    as_of: dt.datetime | None = None
    groups: tuple[str, ...] = ()
    topic: str | None = None
    output: str | None = None
    output_format: OutputFormat = "parquet"
    chart_dir: str | None = None
    keep_reports: int = DEFAULT_KEEP
    read_partitions: int | None = None


@dataclass(frozen=True, kw_only=True)
class LagOutcome:
    report_id: int
    partitions: int
    statuses: dict[str, int] = field(default_factory=dict)
    group_statuses: dict[str, str] = field(default_factory=dict)
    output: str | None = None
    charts: list[str] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class LagPlan:
    as_of: dt.datetime
    window_seconds: int
    groups: tuple[GroupRef, ...]


def plan(store: Store, request: LagRequest) -> LagPlan:
    """Validate before Spark starts (unreachable database, unknown group, bad window)."""
    now = store.group_refs.now()
    as_of = request.as_of or now
    if as_of > now:
        raise InvalidWindow(f"report time {as_of.isoformat(sep=' ')} is in the future")
    seconds = int(request.window.total_seconds())
    if seconds < 1:
        raise InvalidWindow("the report window must be at least 1 s")
    return LagPlan(
        as_of=as_of,
        window_seconds=seconds,
        groups=tuple(scope(store, request.groups, request.topic)),
    )


def read_snapshots(
    spark: SparkSession, settings: Settings, store: Store, checked: LagPlan, partitions: int
) -> DataFrame | None:
    """The window's snapshots, read in parallel id ranges; None when there are none."""
    from spark.jdbc import RangeRead, jdbc_target, read_ranges

    start = checked.as_of - dt.timedelta(seconds=checked.window_seconds)
    bounds = store.snapshots.id_range(start, checked.as_of)
    if bounds is None:
        return None
    where = (
        f"id BETWEEN {bounds[0]} AND {bounds[1]} "
        f"AND captured_at > '{start.isoformat(sep=' ')}' "
        f"AND captured_at <= '{checked.as_of.isoformat(sep=' ')}'"
    )
    if checked.groups:
        where += f" AND group_id IN ({', '.join(str(g.id) for g in checked.groups)})"
    query = (
        "SELECT id, captured_at, group_id, topic_id, partition_no, committed_offset, "
        f"high_watermark, committed_at, oldest_unconsumed_at FROM offset_snapshot WHERE {where}"
    )
    read = RangeRead(query=query, column="id", low=bounds[0], high=bounds[1], partitions=partitions)
    return read_ranges(spark, jdbc_target(settings.database_url), read)


def report(
    spark: SparkSession, settings: Settings, store: Store, request: LagRequest
) -> LagOutcome:
    from spark.jdbc import append, jdbc_target
    from spark.transforms.lag import lag_report

    checked = plan(store, request)
    partitions = request.read_partitions or spark.sparkContext.defaultParallelism
    with _runtime.spark_errors():
        snapshots = read_snapshots(spark, settings, store, checked, partitions)
        report_id = store.lag_reports.start(checked.as_of, checked.window_seconds)
        if snapshots is None:
            store.lag_reports.finish(report_id, 0)
            return LagOutcome(report_id=report_id, partitions=0)
        snapshots = snapshots.cache()
        rows = lag_report(snapshots, checked.as_of, checked.window_seconds).cache()
        with_id = rows.selectExpr(f"CAST({report_id} AS BIGINT) AS report_id", "*")
        append(with_id.coalesce(1), jdbc_target(settings.database_url), "lag_report")
        summary = _status_rows(rows)
        count = len(summary)
        store.lag_reports.finish(report_id, count)
        store.lag_reports.prune(request.keep_reports)
        names = {g.id: f"{g.name}@{g.topic}" for g in store.group_refs.all()}
        output = _write_output(spark, rows, names, request)
        charts = _write_charts(snapshots, names, request.chart_dir)
        snapshots.unpersist()
        rows.unpersist()
    return LagOutcome(
        report_id=report_id,
        partitions=count,
        statuses=dict(Counter(s for s, _, _ in summary)),
        group_statuses={names.get(g, str(g)): gs for _, g, gs in summary},
        output=output,
        charts=charts,
    )


def _status_rows(rows: DataFrame) -> list[tuple[str, int, str]]:
    # One small row per partition (1,000 partitions: 1,000 tiny rows) for the summary line.
    picked = rows.select("status", "group_id", "group_status").collect()
    return [(str(r["status"]), int(r["group_id"]), str(r["group_status"])) for r in picked]


def _write_output(
    spark: SparkSession, rows: DataFrame, names: dict[int, str], request: LagRequest
) -> str | None:
    if request.output is None:
        return None
    from pyspark.sql import functions as F

    labels = spark.createDataFrame(
        [(gid, label) for gid, label in names.items()], "group_id long, group_label string"
    )
    named = rows.join(F.broadcast(labels), "group_id", "left").orderBy("group_id", "partition_no")
    writer = named.coalesce(1).write.mode("overwrite")
    if request.output_format == "csv":
        writer.option("header", "true").csv(request.output)
    else:
        writer.parquet(request.output)
    return request.output


def _write_charts(snapshots: DataFrame, names: dict[int, str], chart_dir: str | None) -> list[str]:
    if chart_dir is None:
        return []
    from spark.chart import write_lag_charts
    from spark.transforms.lag import lag_over_time

    series: dict[str, list[tuple[dt.datetime, int]]] = {}
    # Aggregated first: one point per group and capture reaches the driver.
    for row in lag_over_time(snapshots).collect():
        label = names.get(row["group_id"], str(row["group_id"]))
        series.setdefault(label, []).append((row["captured_at"], row["lag"]))
    return write_lag_charts(series, chart_dir)


def run(
    settings: Settings,
    request: LagRequest,
    *,
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
) -> LagOutcome:
    """Check everything, then start Spark and report (CLI and spark-submit entry point)."""
    with closing(Store(settings)) as store:
        check_environment(settings.jdbc_jar)
        plan(store, request)
        with _runtime.session(APP_NAME, settings, master=master, conf=conf) as spark:
            return report(spark, settings, store, request)


def describe(outcome: LagOutcome) -> list[str]:
    counts = ", ".join(f"{k} {v}" for k, v in sorted(outcome.statuses.items())) or "no snapshots"
    lines = [f"report {outcome.report_id}: {outcome.partitions} partitions ({counts})"]
    lines += [f"  {group}: {status}" for group, status in sorted(outcome.group_statuses.items())]
    if outcome.output:
        lines.append(f"  written to {outcome.output}")
    lines += [f"  chart {path}" for path in outcome.charts]
    return lines


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lag_report.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--window", default="15m", help="sliding window, e.g. 15m (default 15m)")
    p.add_argument("--as-of", help="end of the window, ISO 8601 UTC (default: now)")
    p.add_argument("--group", action="append", default=[], help="only this group (repeatable)")
    p.add_argument("--topic", help="only groups of this topic")
    p.add_argument("--output", help="also write the report here")
    p.add_argument("--format", choices=("parquet", "csv"), default="parquet")
    p.add_argument("--chart-dir", help="write lag-<group>@<topic>.png charts here")
    p.add_argument("--keep-reports", type=int, default=DEFAULT_KEEP)
    p.add_argument("--master", help="Spark master when not given to spark-submit")
    p.add_argument("--read-partitions", type=int, help="JDBC read partitions")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="Spark setting")
    return p


def request_from_args(args: argparse.Namespace) -> LagRequest:
    return LagRequest(
        window=parse_duration(args.window),
        as_of=parse_timestamp(args.as_of) if args.as_of else None,
        groups=tuple(args.group),
        topic=args.topic,
        output=args.output,
        output_format=args.format,
        chart_dir=args.chart_dir,
        keep_reports=args.keep_reports,
        read_partitions=args.read_partitions,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return _runtime.main_for(args, run, request_from_args, describe)


if __name__ == "__main__":
    sys.exit(main())
