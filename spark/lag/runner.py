"""One whole lag report (`ems spark lag-report`, spark-submit) and its summary lines.

Nothing here imports pyspark at module level: the CLI imports this module when a command
runs, and without pyspark installed the preflight says how to install it.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import closing

from ems.config import Settings
from ems.store import Store
from spark import runtime
from spark.lag.request import LagOutcome, LagRequest, plan
from spark.preflight import check_environment

APP_NAME = "ems-lag-report"


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
        # The report's steps import pyspark, present once the preflight has passed.
        from spark.lag.report import report

        with runtime.session(APP_NAME, settings, master=master, conf=conf) as spark:
            return report(spark, settings, store, request)


def describe(outcome: LagOutcome) -> list[str]:
    counts = ", ".join(f"{k} {v}" for k, v in sorted(outcome.statuses.items())) or "no snapshots"
    lines = [f"report {outcome.report_id}: {outcome.partitions} partitions ({counts})"]
    lines += [f"  {group}: {status}" for group, status in sorted(outcome.group_statuses.items())]
    if outcome.output:
        lines.append(f"  written to {outcome.output}")
    lines += [f"  chart {path}" for path in outcome.charts]
    return lines
