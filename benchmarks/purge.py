"""The purge suite: retention purge of N expired messages while publishing at 1,000 msg/s.

One run, in its own database (ems_bench_purge, recreated): seed N messages created two
hours ago into a topic with a one-hour retention (multi-row INSERTs), start a publisher
process that sends single messages paced at 1,000 msg/s with a real Producer and records
every send's latency, measure idle publish latency for --purge-idle-seconds, then run the
purge-retention job (as `ems cleanup run` does) while publishing goes on. The report gives
the purge rate and publish p99 during the purge against idle p99 (target: at most 2x).
"""

from __future__ import annotations

import argparse
import dataclasses
import multiprocessing as mp
import sys
import threading
import time
from contextlib import closing
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url

from benchmarks.harness import BenchConfig, BenchError, clear_redis, mysql_connect, query
from benchmarks.report import environment
from ems import Producer, TopicAdmin
from ems.ops.jobs import run_job
from ems.store import Store, migrate

RESULTS = Path(__file__).resolve().parent / "results" / "purge-latest.md"
DATABASE = "ems_bench_purge"
TOPIC = "bench.purge"
PARTITIONS = 8
RATE = 1000.0
SENDERS = 4
SEED_BATCH = 5000
BODY = (
    b'{"project_id":"prj-007","device":"gw012-s03","temp":21.5,"rh":40.2,"pad":"'
    + (b"x" * 60)
    + b'"}'
)


def log(message: str) -> None:
    print(f"[bench purge] {message}", file=sys.stderr, flush=True)


def purge_config(cfg: BenchConfig) -> BenchConfig:
    url = make_url(cfg.settings.database_url)
    server = cfg.settings.database_url.removesuffix(f"/{url.database}")
    return dataclasses.replace(
        cfg, settings=cfg.settings.with_(database_url=f"{server}/{DATABASE}"), topic=TOPIC
    )


def recreate(cfg: BenchConfig) -> None:
    conn = mysql_connect(cfg.settings.database_url, database=False)
    try:
        with conn.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
    finally:
        conn.close()
    clear_redis(cfg.settings)
    migrate.create_database(cfg.settings)
    migrate.upgrade(cfg.settings)
    admin = TopicAdmin(cfg.settings)
    try:
        admin.create(TOPIC, PARTITIONS, retention_hours=1)
    finally:
        admin.close()


def seed(cfg: BenchConfig, rows: int) -> float:
    """N expired messages spread over the partitions; returns the seconds it took."""
    ((topic_id,),) = query(
        cfg.settings.database_url, "SELECT id FROM topic WHERE name = %s", (TOPIC,)
    )
    started = time.perf_counter()
    conn = mysql_connect(cfg.settings.database_url)
    try:
        with conn.cursor() as cursor:
            cursor.execute("SELECT NOW(6) - INTERVAL 2 HOUR")
            (expired,) = cursor.fetchone()
            for first in range(0, rows, SEED_BATCH):
                batch = [
                    (topic_id, n % PARTITIONS, n // PARTITIONS, BODY, expired)
                    for n in range(first, min(rows, first + SEED_BATCH))
                ]
                # Only placeholders in VALUES: PyMySQL then sends one multi-row INSERT.
                cursor.executemany(
                    "INSERT INTO message (topic_id, partition_no, offset_no, body, created_at) "
                    "VALUES (%s, %s, %s, %s, %s)",
                    batch,
                )
    finally:
        conn.close()
    return time.perf_counter() - started


def publisher(cfg: BenchConfig, stop: Any, results: Any) -> None:
    """Paced single sends from SENDERS threads sharing one Producer; puts the list of
    (wall time the send started, latency seconds) when stop is set."""
    samples: list[tuple[float, float]] = []
    lock = threading.Lock()
    with Producer(cfg.settings) as producer:
        for _ in range(5):  # connect and seed the offset counters before timing
            producer.send(TOPIC, BODY)
        results.put("ready")
        start = time.perf_counter()

        def sender(k: int) -> None:
            seq = k
            mine: list[tuple[float, float]] = []
            while not stop.value:
                wait = start + seq / RATE - time.perf_counter()
                if wait > 0:
                    time.sleep(wait)
                began, t0 = time.time(), time.perf_counter()
                # Keyless: round robin over the partitions, so every partition gets newer
                # rows (a purge keeps a partition's last row, expired or not).
                producer.send(TOPIC, BODY)
                mine.append((began, time.perf_counter() - t0))
                seq += SENDERS
            with lock:
                samples.extend(mine)

        threads = [threading.Thread(target=sender, args=(k,)) for k in range(SENDERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    results.put(samples)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Outcome:
    rows: int
    seed_seconds: float
    deleted: int
    purge_seconds: float
    idle: list[float]
    during: list[float]

    @property
    def rate(self) -> float:
        return self.deleted / self.purge_seconds if self.purge_seconds else 0.0

    @property
    def ratio(self) -> float:
        return percentile(self.during, 0.99) / percentile(self.idle, 0.99)


def measure(cfg: BenchConfig, rows: int, idle_seconds: float) -> Outcome:
    recreate(cfg)
    log(f"seeding {rows:,} expired messages")
    seed_seconds = seed(cfg, rows)
    ctx = mp.get_context("spawn")
    stop, results = ctx.Value("b", False), ctx.Queue()
    proc = ctx.Process(target=publisher, args=(cfg, stop, results), daemon=True)
    proc.start()
    try:
        if results.get(timeout=60) != "ready":
            raise BenchError("the publisher did not start")
        idle_from = time.time()
        log(f"publishing at {RATE:.0f} msg/s: {idle_seconds:.0f} s idle")
        time.sleep(idle_seconds)
        log("purging while publishing")
        purge_from = time.time()
        with closing(Store(cfg.settings)) as store:
            result = run_job(store, cfg.settings, "purge-retention", holder="bench")
        purge_to = time.time()
        stop.value = True
        samples: list[tuple[float, float]] = results.get(timeout=60)
    finally:
        stop.value = True
        proc.join(timeout=30)
        if proc.is_alive():
            proc.terminate()
    return Outcome(
        rows=rows,
        seed_seconds=seed_seconds,
        deleted=result.counts["deleted"],
        purge_seconds=result.seconds,
        idle=[lat for at, lat in samples if idle_from <= at < purge_from],
        during=[lat for at, lat in samples if purge_from <= at <= purge_to],
    )


def render(cfg: BenchConfig, env: list[str], o: Outcome) -> str:
    def ms(values: list[float], q: float) -> str:
        return f"{percentile(values, q) * 1000:.2f}"

    verdict = "met" if o.ratio <= 2.0 else "MISSED"
    return "\n".join(
        [
            "# Purge benchmark (latest run)",
            "",
            "`python -m benchmarks purge`: the purge-retention job deletes N expired messages "
            f"({PARTITIONS} partitions, chunks of at most {cfg.settings.purge_chunk_rows:,} "
            f"rows, a pause of {cfg.settings.purge_pause:g}x each chunk's time after it) "
            f"while a Producer publishes single messages at {RATE:.0f} msg/s.",
            "",
            *env,
            "",
            "| measure | value |",
            "| --- | --- |",
            f"| expired rows seeded | {o.rows:,} ({o.seed_seconds:.1f} s) |",
            f"| rows purged | {o.deleted:,} |",
            f"| purge time | {o.purge_seconds:.2f} s |",
            f"| purge rate | {o.rate:,.0f} rows/s |",
            f"| publish p50 / p99 idle (ms) | {ms(o.idle, 0.5)} / {ms(o.idle, 0.99)} "
            f"({len(o.idle):,} sends) |",
            f"| publish p50 / p99 during the purge (ms) | {ms(o.during, 0.5)} / "
            f"{ms(o.during, 0.99)} ({len(o.during):,} sends) |",
            f"| p99 during / idle | {o.ratio:.2f}x (target at most 2x: {verdict}) |",
            "",
        ]
    )


def run(cfg: BenchConfig, args: argparse.Namespace) -> int:
    own = purge_config(cfg)
    own = dataclasses.replace(
        own,
        settings=own.settings.with_(
            purge_chunk_rows=args.purge_chunk_rows, purge_pause=args.purge_pause
        ),
    )
    outcome = measure(own, args.purge_rows, args.purge_idle_seconds)
    if outcome.deleted != outcome.rows:
        raise BenchError(f"purged {outcome.deleted:,} rows, not the {outcome.rows:,} seeded")
    text = render(own, environment(own), outcome)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(text)
    print(text)
    return 0
