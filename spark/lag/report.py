"""The lag report's steps: read the window's snapshots, compute the report, store its rows
(published when the run is marked done), then write the optional outputs."""

from __future__ import annotations

import datetime as dt
from collections import Counter

from pyspark.sql import DataFrame, SparkSession

from ems.config import Settings
from ems.store import Store
from ems.store.snapshots import window_query
from spark import runtime
from spark.jdbc import RangeRead, append, jdbc_target, read_ranges
from spark.lag.outputs import write_charts, write_output
from spark.lag.request import LagOutcome, LagPlan, LagRequest, plan
from spark.transforms.lag import lag_report


def read_snapshots(
    spark: SparkSession, settings: Settings, store: Store, checked: LagPlan, partitions: int
) -> DataFrame | None:
    """The window's snapshots, read in parallel id ranges; None when there are none."""
    start = checked.as_of - dt.timedelta(seconds=checked.window_seconds)
    bounds = store.snapshots.id_range(start, checked.as_of)
    if bounds is None:
        return None
    query = window_query(bounds, start, checked.as_of, [g.id for g in checked.groups])
    read = RangeRead(query=query, column="id", low=bounds[0], high=bounds[1], partitions=partitions)
    return read_ranges(spark, jdbc_target(settings.database_url), read)


def report(
    spark: SparkSession, settings: Settings, store: Store, request: LagRequest
) -> LagOutcome:
    checked = plan(store, request)
    partitions = request.read_partitions or spark.sparkContext.defaultParallelism
    with runtime.spark_errors():
        snapshots = read_snapshots(spark, settings, store, checked, partitions)
        report_id = store.lag_reports.start(checked.as_of, checked.window_seconds)
        if snapshots is None:
            store.lag_reports.finish(report_id, 0)
            return LagOutcome(report_id=report_id, partitions=0)
        snapshots = snapshots.cache()
        rows = lag_report(snapshots, checked.as_of, checked.window_seconds).cache()
        _append_rows(rows, report_id, settings)
        summary = _status_rows(rows)
        store.lag_reports.finish(report_id, len(summary))
        store.lag_reports.prune(request.keep_reports)
        names = {g.id: f"{g.name}@{g.topic}" for g in store.group_refs.all()}
        output = write_output(spark, rows, names, request)
        charts = write_charts(snapshots, names, request.chart_dir)
        snapshots.unpersist()
        rows.unpersist()
    return LagOutcome(
        report_id=report_id,
        partitions=len(summary),
        statuses=dict(Counter(s for s, _, _ in summary)),
        group_statuses={names.get(g, str(g)): gs for _, g, gs in summary},
        output=output,
        charts=charts,
    )


def _append_rows(rows: DataFrame, report_id: int, settings: Settings) -> None:
    """The report's rows into lag_report, under its run's id (unpublished until done)."""
    with_id = rows.selectExpr(f"CAST({report_id} AS BIGINT) AS report_id", "*")
    append(with_id.coalesce(1), jdbc_target(settings.database_url), "lag_report")


def _status_rows(rows: DataFrame) -> list[tuple[str, int, str]]:
    # One small row per partition (1,000 partitions: 1,000 tiny rows) for the summary line.
    picked = rows.select("status", "group_id", "group_status").collect()
    return [(str(r["status"]), int(r["group_id"]), str(r["group_status"])) for r in picked]
