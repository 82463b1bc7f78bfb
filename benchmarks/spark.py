"""The spark suite: compaction of 2,000,000 log rows and a lag report over 1,000 partitions,
Spark (local[2], then local[1]) beside plain-Python baselines in the same run.

Every case starts from the same seeded rows (generated in the server from a SEQUENCE
table, so seeding is not what is measured) in its own database, ems_bench_spark, once the
server has settled after seeding (InnoDB's page cleaner would otherwise flush the seed's
pages during whatever runs next).

The whole compaction job runs in rounds (--spark-rounds, default 3): each round compacts
freshly seeded rows with the Spark job on local[2], then with the Python baseline, and the
verdict uses the medians. Round 1 is the first job of a new Spark session, so it pays for
the JVM compiling its code; it is reported on its own. Then, on local[2] and once each:
JDBC read (into Spark's memory cache, as the baseline fetches into Arrow) and Parquet write
(from that cache, as the baseline writes its Arrow table); the local[1] session repeats the
rounds of the Spark job alone.
"""

from __future__ import annotations

import argparse
import datetime as dt
import multiprocessing
import shutil
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import TYPE_CHECKING, Any

from benchmarks import spark_baseline as baseline
from benchmarks.cpu import cpu_seconds, local_server_pid
from benchmarks.harness import BenchConfig, query
from benchmarks.innodb import settle
from ems.config import DEFAULT_JDBC_JAR, Settings
from ems.store import Store, migrate

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

RESULTS = Path(__file__).resolve().parent / "results" / "spark-latest.md"
DATABASE = "ems_bench_spark"
LOG_ROWS = 2_000_000
CUTOFF = dt.datetime(2026, 11, 15)
GROUPS = 4
LAG_GROUPS = 10
LAG_PARTITIONS = 100  # per group: 1,000 partitions
LAG_CAPTURES = 60  # one a minute; the report window covers the last 15
AS_OF = dt.datetime(2026, 11, 21, 12, 0)
WINDOW = dt.timedelta(minutes=15)
TARGET = 2.0

# Server-side generation: ~5% dead, ~5% retry or start (never compacted), the rest done;
# processing times 0-997 ms; every final row older than the cutoff.
# %% because PyMySQL formats every statement, even without arguments.
_SEED_LOG = """
INSERT INTO topic_group_log (id, group_id, topic_id, partition_no, offset_no, client_id,
    state, attempts, error, started_at, finished_at, updated_at)
SELECT seq, 1 + seq %% {groups}, 1, seq %% 16, seq DIV 16, 'bench-client',
    ELT(1 + (seq %% 20 = 0) + 2 * (seq %% 40 = 1) + 3 * (seq %% 40 = 3), 'done', 'dead',
        'retry', 'start'),
    1 + 2 * (seq %% 7 = 0), NULL, s, s + INTERVAL (seq %% 997) * 1000 MICROSECOND,
    s + INTERVAL (seq %% 997) * 1000 MICROSECOND
FROM (SELECT seq, TIMESTAMP'2026-11-01 00:00:00' + INTERVAL (seq * 400000) MICROSECOND AS s
      FROM seq_1_to_{rows}) AS g
"""
_SEED_SNAPSHOTS = f"""
INSERT INTO offset_snapshot (captured_at, group_id, topic_id, partition_no, committed_offset,
    high_watermark, committed_at, oldest_unconsumed_at)
SELECT TIMESTAMP'{AS_OF:%Y-%m-%d %H:%M:%S}' - INTERVAL (c.seq) MINUTE, 1 + g.seq, 1, p.seq,
    100000 + (60 - c.seq) * (40 + g.seq * 3) - p.seq %% 50 * (g.seq = 3),
    100000 + (60 - c.seq) * (45 + g.seq * 3),
    TIMESTAMP'{AS_OF:%Y-%m-%d %H:%M:%S}' - INTERVAL (c.seq) MINUTE
        - INTERVAL (5 + 30 * (g.seq = 7)) MINUTE,
    TIMESTAMP'{AS_OF:%Y-%m-%d %H:%M:%S}' - INTERVAL (c.seq) MINUTE - INTERVAL 40 SECOND
FROM seq_0_to_{LAG_CAPTURES - 1} c, seq_0_to_{LAG_GROUPS - 1} g, seq_0_to_{LAG_PARTITIONS - 1} p
"""


@dataclass(kw_only=True)
class Phase:
    name: str
    rows: int
    spark: float | None = None  # seconds, local[2]
    python: float | None = None
    spark_one: float | None = None  # seconds, local[1]

    @staticmethod
    def rate(rows: int, seconds: float | None) -> str:
        return "-" if not seconds else f"{rows / seconds:,.0f}"

    def cells(self) -> list[str]:
        ratio = f"{self.python / self.spark:.2f}x" if self.spark and self.python else "-"
        scale = f"{self.spark_one / self.spark:.2f}x" if self.spark and self.spark_one else "-"
        return [
            self.name,
            f"{self.rows:,}",
            self.rate(self.rows, self.spark),
            self.rate(self.rows, self.python),
            ratio,
            self.rate(self.rows, self.spark_one),
            scale,
        ]


@dataclass(frozen=True, kw_only=True)
class JobRun:
    """One end-to-end compaction: its wall time and the time of each of its steps."""

    rows: int
    seconds: float
    steps: dict[str, float]
    #: CPU seconds used during the run, by whom (JIT: the JVM compiling code).
    cpu: dict[str, float] = field(default_factory=dict)

    def describe(self) -> str:
        steps = ", ".join(f"{name} {s:.1f}" for name, s in self.steps.items())
        cpu = ", ".join(f"{name} {s:.1f}" for name, s in self.cpu.items())
        return f"{self.seconds:.1f} s ({steps}; CPU s: {cpu})"


class CpuMeter:
    """CPU seconds used from its creation until read(): by this process (or, given a Spark
    session, by its JVM and the JVM's JIT compilers) and by the local database server."""

    def __init__(self, spark: SparkSession | None = None) -> None:
        self.server = local_server_pid()
        self.jvm: Any = None
        self.jvm_pid: int | None = None
        if spark is not None:
            self.jvm = spark._jvm.java.lang.management.ManagementFactory  # type: ignore[union-attr]
            self.jvm_pid = int(self.jvm.getRuntimeMXBean().getPid())
        self.start_at = self._now()

    def _now(self) -> dict[str, float]:
        now = {}
        if self.jvm is not None and self.jvm_pid is not None:
            now["JIT"] = self.jvm.getCompilationMXBean().getTotalCompilationTime() / 1000
            now["JVM"] = cpu_seconds(self.jvm_pid)
        else:
            now["Python"] = time.process_time()
        if self.server is not None:
            now["MariaDB"] = cpu_seconds(self.server)
        return now

    def read(self) -> dict[str, float]:
        now = self._now()
        return {name: now[name] - self.start_at[name] for name in now}


@dataclass(kw_only=True)
class Results:
    phases: dict[str, Phase] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: Per round, local[2] and Python; and the local[1] session's runs.
    spark_runs: list[JobRun] = field(default_factory=list)
    python_runs: list[JobRun] = field(default_factory=list)
    spark_one_runs: list[JobRun] = field(default_factory=list)

    def set(self, name: str, rows: int, column: str, seconds: float) -> None:
        phase = self.phases.setdefault(name, Phase(name=name, rows=rows))
        setattr(phase, column, seconds)


def log(message: str) -> None:
    print(f"[bench spark] {message}", flush=True)


def settings_for(cfg: BenchConfig) -> Settings:
    server = cfg.settings.database_url.rsplit("/", 1)[0]
    return cfg.settings.with_(database_url=f"{server}/{DATABASE}")


def prepare(settings: Settings) -> None:
    migrate.create_database(settings)
    migrate.upgrade(settings)


def seed_log(settings: Settings, count: int) -> int:
    url = settings.database_url
    for table in ("topic_group_log", "compaction_run", "log_summary", "log_summary_stage"):
        query(url, f"TRUNCATE TABLE {table}")
    started = time.perf_counter()
    query(url, _SEED_LOG.format(groups=GROUPS, rows=count))
    ((rows,),) = query(
        url,
        "SELECT COUNT(*) FROM topic_group_log WHERE state IN ('done', 'dead') AND updated_at < %s",
        (CUTOFF,),
    )
    seeded = time.perf_counter() - started
    waited = settle(url)
    log(f"seeded {count:,} log rows ({rows:,} compactable) in {seeded:.0f} s")
    log(f"server settled in {waited:.0f} s")
    return int(rows)


def seed_snapshots(settings: Settings) -> int:
    url = settings.database_url
    for table in ("offset_snapshot", "lag_report", "lag_report_run"):
        query(url, f"TRUNCATE TABLE {table}")
    query(url, _SEED_SNAPSHOTS)
    ((rows,),) = query(url, "SELECT COUNT(*) FROM offset_snapshot")
    return int(rows)


def spark_session(master: str):  # type: ignore[no-untyped-def]
    from spark.session import get_session

    started = time.perf_counter()
    spark = get_session(
        "ems-bench",
        DEFAULT_JDBC_JAR,
        master=master,
        conf={
            "spark.ui.enabled": "false",
            "spark.driver.memory": "4g",
            "spark.sql.shuffle.partitions": "8",
        },
    )
    log(f"{master}: session started in {time.perf_counter() - started:.1f} s")
    return spark


def spark_job(spark: SparkSession, settings: Settings, count: int, root: Path) -> JobRun:
    """Compact freshly seeded rows with the job, as `ems spark compact` does."""
    from spark.compaction.request import CompactRequest
    from spark.compaction.runner import compact

    rows = seed_log(settings, count)
    with closing(Store(settings)) as store:
        meter = CpuMeter(spark)
        started = time.perf_counter()
        (outcome,) = compact(
            spark, settings, store, CompactRequest(cutoff=CUTOFF, archive_root=str(root))
        )
        total = time.perf_counter() - started
        cpu = meter.read()
    assert outcome.archived == rows == outcome.deleted, outcome
    # The deletes start with the summaries beside them; "delete" is that whole step.
    return JobRun(rows=rows, seconds=total, steps=dict(outcome.timings), cpu=cpu)


def spark_phases(
    spark: SparkSession, settings: Settings, count: int, column: str, results: Results, tmp: Path
) -> None:
    """The JDBC read and the Parquet write on their own: the same read the job does, into
    the memory cache, then the archive written from it."""
    from pyspark import StorageLevel

    from spark.compaction.steps import Compactor
    from spark.transforms.compaction import ARCHIVE_PARTITIONS, LOG_UNIQUE_COLUMNS, archive_frame

    seed_log(settings, count)
    with closing(Store(settings)) as store:
        # A run row that is never executed: the job's own read of its id range.
        run = store.compaction.start(CUTOFF, [], str(tmp / "phases"))
        worker = Compactor(spark, settings, store, str(tmp / "phases"))
        frame = worker.read_log(run).persist(StorageLevel.MEMORY_AND_DISK)
        started = time.perf_counter()
        read = frame.count()
        results.set("JDBC read", read, column, time.perf_counter() - started)
        started = time.perf_counter()
        # The job's own writer, into this run's staging directory.
        worker.archive.write(
            archive_frame(frame), run.id, ARCHIVE_PARTITIONS, plain=LOG_UNIQUE_COLUMNS
        )
        results.set("Parquet write", read, column, time.perf_counter() - started)
        frame.unpersist()
    query(settings.database_url, "DELETE FROM compaction_run")


@contextmanager
def session(master: str) -> Iterator[SparkSession]:
    spark = spark_session(master)
    try:
        yield spark
    finally:
        spark.stop()


def spark_round(
    spark: SparkSession, settings: Settings, count: int, n: int, runs: list[JobRun], tmp: Path
) -> None:
    master = spark.sparkContext.master
    run = spark_job(spark, settings, count, tmp / f"archive-{master}-{n}")
    runs.append(run)
    log(f"round {n}: {master} {run.describe()}")


def measure_spark(count: int, settings: Settings, rounds: int, results: Results, tmp: Path) -> None:
    """local[2]: the job and the baseline in alternating rounds, then the phases and the
    lag report; local[1]: the job's rounds and the phases."""
    with session("local[2]") as spark:
        for n in range(1, rounds + 1):
            spark_round(spark, settings, count, n, results.spark_runs, tmp)
            baseline_run = python_job(settings, count, tmp / f"python-{n}")
            results.python_runs.append(baseline_run)
            log(f"round {n}: python {baseline_run.describe()}")
        spark_phases(spark, settings, count, "spark", results, tmp)
        measure_spark_lag(spark, settings, results)
    # local[1] in a process of its own: a new JVM, whose first job compiles the code again,
    # as local[2]'s did; in this JVM it would run already compiled and look faster.
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        one = pool.submit(measure_local_one, count, settings, rounds, tmp).result()
    results.spark_one_runs = one.spark_one_runs
    for phase in one.phases.values():
        results.set(phase.name, phase.rows, "spark_one", phase.spark_one or 0.0)
    job_medians(results, "spark", results.spark_runs)
    job_medians(results, "spark_one", results.spark_one_runs)


def measure_local_one(count: int, settings: Settings, rounds: int, tmp: Path) -> Results:
    """local[1]'s rounds and its phases, in this process's JVM."""
    results = Results()
    with session("local[1]") as spark:
        for n in range(1, rounds + 1):
            spark_round(spark, settings, count, n, results.spark_one_runs, tmp)
        spark_phases(spark, settings, count, "spark_one", results, tmp)
    return results


def job_medians(results: Results, column: str, runs: list[JobRun]) -> None:
    """The chunked delete and the whole job of one column: medians of its rounds."""
    rows = runs[0].rows
    results.set("chunked delete", rows, column, median(r.steps["delete"] for r in runs))
    results.set("compaction job end to end", rows, column, median(r.seconds for r in runs))


def measure_spark_lag(spark, settings: Settings, results: Results) -> None:  # type: ignore[no-untyped-def]
    from spark.lag.report import report
    from spark.lag.request import LagRequest

    snapshots = seed_snapshots(settings)
    with closing(Store(settings)) as store:
        request = LagRequest(as_of=AS_OF, window=WINDOW)
        report(spark, settings, store, request)  # warm-up: JIT and the JDBC writer
        started = time.perf_counter()
        outcome = report(spark, settings, store, request)
        elapsed = time.perf_counter() - started
    results.notes.append(
        f"lag report: {snapshots:,} snapshot rows stored, {outcome.partitions:,} partitions "
        f"reported, statuses {outcome.statuses}"
    )
    results.set(
        f"lag report ({outcome.partitions:,} partitions, 15 min window)",
        outcome.partitions,
        "spark",
        elapsed,
    )


def python_job(settings: Settings, count: int, root: Path) -> JobRun:
    """The baseline's compaction of freshly seeded rows, step by step."""
    rows = seed_log(settings, count)
    url = settings.database_url
    meter = CpuMeter()
    table, fetch_s = baseline.timed(baseline.fetch, url, CUTOFF)
    assert table.num_rows == rows
    _, write_s = baseline.timed(baseline.write, table, root)
    _, summary_s = baseline.timed(baseline.summarize, table)
    deleted, delete_s = baseline.timed(baseline.delete, url, table, CUTOFF)
    assert deleted == rows
    steps = {"fetch": fetch_s, "write": write_s, "summaries": summary_s, "delete": delete_s}
    return JobRun(rows=rows, seconds=sum(steps.values()), steps=steps, cpu=meter.read())


def measure_python(settings: Settings, results: Results) -> None:
    """The baseline's rates (medians of its rounds) and its lag report."""
    runs = results.python_runs
    rows = runs[0].rows
    results.set("JDBC read", rows, "python", median(r.steps["fetch"] for r in runs))
    results.set("Parquet write", rows, "python", median(r.steps["write"] for r in runs))
    job_medians(results, "python", runs)
    seed_snapshots(settings)
    window = int(WINDOW.total_seconds())
    with closing(Store(settings)) as store:
        report_id = store.lag_reports.start(AS_OF, window)
    count, lag_s = baseline.timed(
        baseline.lag_report, settings.database_url, AS_OF, window, report_id
    )
    name = next(n for n in results.phases if n.startswith("lag report"))
    results.set(name, count, "python", lag_s)


#: Table rows in this order; the lag report last.
PHASE_ORDER = ("JDBC read", "Parquet write", "chunked delete", "compaction job end to end")


def rounds_table(results: Results) -> list[str]:
    lines = [
        "| round | Spark local[2] s (steps) | Python s (steps) | Python / Spark "
        "| Spark local[1] s |",
        "|---|---|---|---:|---:|",
    ]
    runs = zip(results.spark_runs, results.python_runs, results.spark_one_runs, strict=True)
    for n, (spark, python, one) in enumerate(runs, start=1):
        label = f"{n} (first job of its JVM)" if n == 1 else str(n)
        lines.append(
            f"| {label} | {spark.describe()} | {python.describe()} "
            f"| {python.seconds / spark.seconds:.2f}x | {one.seconds:.1f} |"
        )
    return lines


def verdict(results: Results) -> str:
    end = results.phases["compaction job end to end"]
    ratio = (end.python or 0) / end.spark if end.spark else 0.0
    rounds = list(zip(results.spark_runs, results.python_runs, strict=True))
    met = sum(1 for spark, python in rounds if python.seconds >= TARGET * spark.seconds)
    first = rounds[0][1].seconds / rounds[0][0].seconds
    outcome = "met" if ratio >= TARGET else f"**missed** ({ratio:.2f}x of the {TARGET:g}x target)"
    return (
        f"Target: the compaction job at least {TARGET:g}x the Python baseline end to end at "
        f"{LOG_ROWS:,} log rows on local[2]. Medians of {len(rounds)} rounds: {ratio:.2f}x, "
        f"{outcome}. Rounds at or above {TARGET:g}x: {met} of {len(rounds)}; round 1 (a JVM "
        f"that had not run the job before, as under cron): {first:.2f}x."
    )


def render(results: Results, env: list[str]) -> str:
    head = [
        "phase",
        "rows",
        "Spark local[2] rows/s",
        "Python baseline rows/s",
        "Spark / Python",
        "Spark local[1] rows/s",
        "local[2] / local[1]",
    ]
    phases = sorted(
        results.phases.values(),
        key=lambda p: PHASE_ORDER.index(p.name) if p.name in PHASE_ORDER else len(PHASE_ORDER),
    )
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    lines += ["| " + " | ".join(p.cells()) + " |" for p in phases]
    return "\n".join(
        [
            "# Spark jobs benchmark",
            "",
            *env,
            "",
            *lines,
            "",
            "Compaction rows: medians over the rounds. JDBC read and Parquet write: Spark "
            "measured once per session after its rounds, the baseline's medians. Each round "
            "below gives wall seconds per step and the CPU seconds used meanwhile: JIT is the "
            "JVM compiling code (part of the JVM's CPU), MariaDB the local server's process. "
            "The local[1] session runs in a process of its own, so its round 1 is also the "
            "first job of a new JVM.",
            "",
            *rounds_table(results),
            "",
            verdict(results),
            "",
            *[f"- {note}" for note in results.notes],
            "",
        ]
    )


def run(cfg: BenchConfig, args: argparse.Namespace) -> int:
    import os
    import platform

    count = args.spark_rows
    settings = settings_for(cfg)
    prepare(settings)
    results = Results()
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    env = [
        f"- date: {dt.datetime.now(dt.UTC).isoformat(timespec='seconds')}; nproc "
        f"{len(os.sched_getaffinity(0))}; load average at start {load} (a shared host)",
        f"- Python {platform.python_version()}, pyspark {_version('pyspark')}, pyarrow "
        f"{_version('pyarrow')}, MariaDB Connector/J ({DEFAULT_JDBC_JAR})",
        f"- {count:,} consumption-log rows seeded per case, then the server let settle; "
        f"cutoff {CUTOFF:%Y-%m-%d}; chunks of at most 10,000 rows per DELETE; "
        f"{args.spark_rounds} rounds",
    ]
    tmp = Path(tempfile.mkdtemp(prefix="ems-bench-spark-"))
    try:
        measure_spark(count, settings, args.spark_rounds, results, tmp)
        measure_python(settings, results)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    text = render(results, env)
    print(text)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text)
    log(f"wrote {RESULTS}")
    return 0


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)
