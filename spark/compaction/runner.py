"""Whole compaction invocations: one (cron, `ems spark compact`, spark-submit) or one at
each interval in a single Spark session (--every).

Nothing here imports pyspark at module level: the CLI imports this module when a command
runs, and without pyspark installed the preflight says how to install it.
"""

from __future__ import annotations

import datetime as dt
import sys
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import closing
from typing import TYPE_CHECKING

from ems.config import Settings
from ems.exceptions import EmsError, InvalidCutoff, SparkJobFailed
from ems.store import Store
from spark import runtime
from spark.compaction.request import CompactRequest, RunOutcome, plan
from spark.preflight import check_environment

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

APP_NAME = "ems-compact"


def compact(
    spark: SparkSession, settings: Settings, store: Store, request: CompactRequest
) -> list[RunOutcome]:
    """Finish any interrupted run, then run the requested compaction. Holds the compaction
    lock throughout, so two invocations never interleave."""
    # The steps import pyspark; callers reach this only once Spark has started.
    from spark.compaction.steps import compactor_for

    checked = plan(store, request)
    with store.compaction.lock(), runtime.spark_errors():
        outcomes = []
        for unfinished in store.compaction.unfinished():
            worker = compactor_for(spark, settings, store, unfinished.archive_root, request)
            outcomes.append(worker.finish(unfinished, resumed=True))
        run = store.compaction.start(
            checked.cutoff, [g.id for g in checked.groups], checked.archive_root
        )
        worker = compactor_for(spark, settings, store, checked.archive_root, request)
        outcomes.append(worker.finish(run))
    return outcomes


def run(
    settings: Settings,
    request: CompactRequest,
    *,
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
) -> list[RunOutcome]:
    """Check everything, then start Spark and compact. The entry point of both the CLI
    and spark-submit."""
    with closing(Store(settings)) as store:
        check_environment(settings.jdbc_jar)
        plan(store, request)
        with runtime.session(APP_NAME, settings, master=master, conf=conf) as spark:
            return compact(spark, settings, store, request)


def serve(
    settings: Settings,
    request: CompactRequest,
    every: dt.timedelta,
    *,
    stop: threading.Event,
    on_outcome: Callable[[RunOutcome], None],
    on_error: Callable[[EmsError], None],
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
) -> int:
    """Compact every `every` in one Spark session until `stop` is set; returns the runs
    completed. Each run recomputes its cutoff from --older-than. A run that fails (database
    unreachable, another run holding the lock) is reported to on_error and the next run
    still comes: an interrupted run is finished by the next, as under cron. A run that
    fails because the stop signal also reached Spark's JVM ends the loop quietly, and one
    whose JVM died otherwise ends it with SparkJobFailed."""
    if request.older_than is None:
        raise InvalidCutoff("compacting at an interval needs an age (--older-than), not a cutoff")
    with closing(Store(settings)) as store:
        check_environment(settings.jdbc_jar)
        plan(store, request)
        session = runtime.session(APP_NAME, settings, master=master, conf=conf, shield_jvm=True)
        with session as spark:
            runs = 0
            while not stop.is_set():
                started = time.monotonic()
                try:
                    for outcome in compact(spark, settings, store, request):
                        on_outcome(outcome)
                except EmsError as exc:
                    if stop.is_set():
                        break
                    on_error(exc)
                    if not runtime.alive(spark):
                        raise SparkJobFailed("Spark's JVM has gone; start the job again") from exc
                runs += 1
                stop.wait(pause_after(every, time.monotonic() - started))
            return runs


def serve_until_stopped(
    settings: Settings,
    request: CompactRequest,
    every: dt.timedelta,
    *,
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
    echo: Callable[[str], None] = lambda line: print(line, flush=True),
    echo_error: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
) -> int:
    """serve() until SIGTERM, printing each run's outcome and each failed run's error."""
    with runtime.stop_on_sigterm() as stop:
        return serve(
            settings,
            request,
            every,
            stop=stop,
            on_outcome=lambda outcome: echo(describe(outcome)),
            on_error=lambda exc: echo_error(f"error: {exc}"),
            master=master,
            conf=conf,
        )


def pause_after(every: dt.timedelta, took: float) -> float:
    """Seconds to wait after a run that took `took` s: runs start `every` apart, and one
    that overran is followed at once by the next (never by a burst of missed ones)."""
    return max(0.0, every.total_seconds() - took)


def describe(outcome: RunOutcome) -> str:
    resumed = f" (resumed after {outcome.resumed_from})" if outcome.resumed_from else ""
    return (
        f"run {outcome.run_id}{resumed}: archived {outcome.archived} rows, "
        f"{outcome.summaries} summary rows, deleted {outcome.deleted} rows"
    )
