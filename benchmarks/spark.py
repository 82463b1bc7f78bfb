"""The spark suite: compaction of 2,000,000 log rows and a lag report over 1,000 partitions,
Spark (local[2], then local[1]) beside plain-Python baselines in the same run.

Every case starts from the same seeded rows (generated in the server from a SEQUENCE
table, so seeding is not what is measured) in its own database, ems_bench_spark.
Phases: JDBC read (into Spark's memory cache, as the baseline fetches into Arrow), Parquet
write (from that cache, as the baseline writes its Arrow table), the whole compaction job
(read, archive, summaries, chunked delete) and, from its timings, the chunked delete.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import tempfile
import time
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks import spark_baseline as baseline
from benchmarks.harness import BenchConfig, query
from ems.config import DEFAULT_JDBC_JAR, Settings
from ems.store import Store, migrate

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


@dataclass(kw_only=True)
class Results:
    phases: dict[str, Phase] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

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
    log(
        f"seeded {count:,} log rows ({rows:,} compactable) in {time.perf_counter() - started:.0f} s"
    )
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

    return get_session(
        "ems-bench",
        DEFAULT_JDBC_JAR,
        master=master,
        conf={
            "spark.ui.enabled": "false",
            "spark.driver.memory": "4g",
            "spark.sql.shuffle.partitions": "8",
        },
    )


def measure_spark(
    count: int, settings: Settings, master: str, column: str, results: Results, tmp: Path
) -> None:
    from pyspark import StorageLevel

    from spark.jobs.compact import Compactor, CompactRequest, compact
    from spark.transforms.compaction import ARCHIVE_PARTITIONS, archive_frame

    rows = seed_log(settings, count)
    spark = spark_session(master)
    try:
        with closing(Store(settings)) as store:
            # Phases on a run row that is never executed: the same read the job does.
            run = store.compaction.start(CUTOFF, [], str(tmp / "phases"))
            worker = Compactor(spark, settings, store, str(tmp / "phases"))
            frame = worker.read_log(run).persist(StorageLevel.MEMORY_AND_DISK)
            started = time.perf_counter()
            read = frame.count()
            results.set("JDBC read", read, column, time.perf_counter() - started)
            started = time.perf_counter()
            archive_frame(frame).write.mode("overwrite").partitionBy(*ARCHIVE_PARTITIONS).parquet(
                str(tmp / f"phase-write-{column}")
            )
            results.set("Parquet write", read, column, time.perf_counter() - started)
            frame.unpersist()
            query(settings.database_url, "DELETE FROM compaction_run")
            started = time.perf_counter()
            request = CompactRequest(cutoff=CUTOFF, archive_root=str(tmp / f"archive-{column}"))
            (outcome,) = compact(spark, settings, store, request)
            total = time.perf_counter() - started
        assert outcome.archived == rows == outcome.deleted, outcome
        results.set("chunked delete", outcome.deleted, column, outcome.timings["delete"])
        results.set("compaction job end to end", rows, column, total)
        log(f"{master}: {outcome.timings} total {total:.1f} s")
        if column == "spark":
            measure_spark_lag(spark, settings, results)
    finally:
        spark.stop()


def measure_spark_lag(spark, settings: Settings, results: Results) -> None:  # type: ignore[no-untyped-def]
    from spark.jobs.lag_report import LagRequest, report

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


def measure_python(count: int, settings: Settings, results: Results, tmp: Path) -> None:
    rows = seed_log(settings, count)
    url = settings.database_url
    table, fetch_s = baseline.timed(baseline.fetch, url, CUTOFF)
    assert table.num_rows == rows
    results.set("JDBC read", rows, "python", fetch_s)
    _, write_s = baseline.timed(baseline.write, table, tmp / "python-archive")
    results.set("Parquet write", rows, "python", write_s)
    _, summary_s = baseline.timed(baseline.summarize, table)
    deleted, delete_s = baseline.timed(baseline.delete, url, table, CUTOFF)
    assert deleted == rows
    results.set("chunked delete", rows, "python", delete_s)
    results.set(
        "compaction job end to end", rows, "python", fetch_s + write_s + summary_s + delete_s
    )
    log(
        f"python: fetch {fetch_s:.1f} s, write {write_s:.1f} s, "
        f"summaries {summary_s:.1f} s, delete {delete_s:.1f} s"
    )
    seed_snapshots(settings)
    with closing(Store(settings)) as store:
        report_id = store.lag_reports.start(AS_OF, int(WINDOW.total_seconds()))
    count, lag_s = baseline.timed(
        baseline.lag_report, url, AS_OF, int(WINDOW.total_seconds()), report_id
    )
    name = next(n for n in results.phases if n.startswith("lag report"))
    results.set(name, count, "python", lag_s)


def render(results: Results, env: list[str], count: int) -> str:
    head = [
        "phase",
        "rows",
        "Spark local[2] rows/s",
        "Python baseline rows/s",
        "Spark / Python",
        "Spark local[1] rows/s",
        "local[2] / local[1]",
    ]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    lines += ["| " + " | ".join(p.cells()) + " |" for p in results.phases.values()]
    end = results.phases["compaction job end to end"]
    ratio = (end.python or 0) / end.spark if end.spark else 0.0
    verdict = "met" if ratio >= TARGET else f"**missed** ({ratio:.2f}x of the {TARGET:g}x target)"
    return "\n".join(
        [
            "# Spark jobs benchmark",
            "",
            *env,
            "",
            *lines,
            "",
            f"Target: the compaction job at least {TARGET:g}x the Python baseline end to end at "
            f"{LOG_ROWS:,} log rows on local[2] (this run: {count:,}): {ratio:.2f}x, {verdict}.",
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
        f"- {count:,} consumption-log rows seeded per case; cutoff {CUTOFF:%Y-%m-%d}; "
        "chunks of at most 10,000 rows per DELETE",
    ]
    tmp = Path(tempfile.mkdtemp(prefix="ems-bench-spark-"))
    try:
        measure_spark(count, settings, "local[2]", "spark", results, tmp)
        measure_python(count, settings, results, tmp)
        measure_spark(count, settings, "local[1]", "spark_one", results, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    text = render(results, env, count)
    print(text)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text)
    log(f"wrote {RESULTS}")
    return 0


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)
