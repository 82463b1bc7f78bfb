"""The purge suite: retention purge of N expired messages while publishing at 1,000 msg/s.

One run, in its own database (ems_bench_purge, recreated): seed N messages created two
hours ago into a topic with a one-hour retention (multi-row INSERTs), start a publisher
process that sends single messages paced at 1,000 msg/s with a real Producer and records
every send's latency, let the server settle (the seeding's dirty pages flushed), measure
idle publish latency for --purge-idle-seconds, run the purge-retention job (as `ems
cleanup run` does) while publishing goes on, let the server settle again (InnoDB's
background purge of the deleted rows done and its write rate back to the idle one), and
measure idle latency once more.

The report gives the purge rate and publish p99 during the purge against idle p99 (target:
at most 2x), idle being both idle windows together: one before and one after the purge, so
a drift of the host's disk latency over the run does not pass for the purge's doing. A
probe thread times a 512-byte write + fdatasync in the server's data directory every 3 ms
throughout, so the disk's own latency in each window is in the report: every publish
commits, and its p99 follows the disk's. A last reference window measures publishing while
one process spins on a core, so the purge's effect can be read against a known CPU load in
the same run.
"""

from __future__ import annotations

import argparse
import dataclasses
import multiprocessing as mp
import os
import sys
import threading
import time
from contextlib import closing
from pathlib import Path
from typing import Any

from benchmarks.harness import (
    BenchConfig,
    BenchError,
    fresh_database,
    mysql_connect,
    on_database,
    query,
)
from benchmarks.innodb import SETTLE_WRITE_SLACK, innodb_io, settle
from benchmarks.report import environment
from ems import Producer, TopicAdmin
from ems.maintenance.jobs import run_job
from ems.maintenance.purge import round_quota
from ems.store import Store

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
    return on_database(cfg, DATABASE, topic=TOPIC)


def recreate(cfg: BenchConfig) -> None:
    fresh_database(cfg.settings)
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


class DiskProbe:
    """Times a 512-byte write + fdatasync in a directory every 3 ms, from a thread."""

    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, "ems_bench_fsync_probe")
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> DiskProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600)
        except OSError:
            return  # not writable: the report says n/a
        try:
            while not self._stop.wait(0.003):
                os.pwrite(fd, b"x" * 512, 0)
                began, t0 = time.time(), time.perf_counter()
                os.fdatasync(fd)
                self.samples.append((began, time.perf_counter() - t0))
        finally:
            os.close(fd)
            os.unlink(self.path)

    def window(self, start: float, end: float) -> list[float]:
        return [lat for at, lat in self.samples if start <= at < end]


def spin(stop: Any) -> None:
    """Keep one core busy until stop is set (the reference window's load)."""
    while not stop.value:
        pass


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
    settle_seconds: tuple[float, float]
    #: InnoDB's data bytes written, redo bytes written and pages read while the purge ran.
    io: tuple[int, int, int]
    #: InnoDB's data bytes written per second in the idle window before the purge.
    idle_write_rate: float
    before: list[float]
    during: list[float]
    after: list[float]
    disk_before: list[float]
    disk_during: list[float]
    disk_after: list[float]
    #: Publishing while one process spins on a core, after the idle window after.
    spinning: list[float]
    disk_spinning: list[float]

    @property
    def rate(self) -> float:
        return self.deleted / self.purge_seconds if self.purge_seconds else 0.0

    @property
    def idle(self) -> list[float]:
        return self.before + self.after

    @property
    def ratio(self) -> float:
        return percentile(self.during, 0.99) / percentile(self.idle, 0.99)


def measure(cfg: BenchConfig, rows: int, idle_seconds: float) -> Outcome:
    recreate(cfg)
    log(f"seeding {rows:,} expired messages")
    seed_seconds = seed(cfg, rows)
    ((datadir,),) = query(cfg.settings.database_url, "SELECT @@datadir")
    ctx = mp.get_context("spawn")
    stop, results = ctx.Value("b", False), ctx.Queue()
    proc = ctx.Process(target=publisher, args=(cfg, stop, results), daemon=True)
    proc.start()
    try:
        with DiskProbe(str(datadir)) as disk:
            if results.get(timeout=60) != "ready":
                raise BenchError("the publisher did not start")
            log(f"publishing at {RATE:.0f} msg/s; settling")
            settled_before = settle(cfg.settings.database_url)
            log(f"{idle_seconds:.0f} s idle")
            idle_io = innodb_io(cfg.settings.database_url)
            idle_from = time.time()
            time.sleep(idle_seconds)
            log("purging while publishing")
            io_from = innodb_io(cfg.settings.database_url)
            purge_from = time.time()
            with closing(Store(cfg.settings)) as store:
                result = run_job(store, cfg.settings, "purge-retention", holder="bench")
            purge_to = time.time()
            io_to = innodb_io(cfg.settings.database_url)
            log("settling")
            idle_write_rate = (io_from[0] - idle_io[0]) / (purge_from - idle_from)
            settled_after = settle(cfg.settings.database_url, idle_write_rate)
            log(f"{idle_seconds:.0f} s idle")
            after_from = time.time()
            time.sleep(idle_seconds)
            after_to = time.time()
            log(f"{idle_seconds:.0f} s with one core kept busy")
            spinning = ctx.Value("b", False)
            spinner = ctx.Process(target=spin, args=(spinning,), daemon=True)
            spinner.start()
            time.sleep(1.0)  # the spinner's interpreter has started
            spin_from = time.time()
            time.sleep(idle_seconds)
            spin_to = time.time()
            spinning.value = True
            spinner.join(timeout=10)
            stop.value = True
            samples: list[tuple[float, float]] = results.get(timeout=60)
    finally:
        stop.value = True
        proc.join(timeout=30)
        if proc.is_alive():
            proc.terminate()

    def sends(start: float, end: float) -> list[float]:
        return [lat for at, lat in samples if start <= at < end]

    return Outcome(
        rows=rows,
        seed_seconds=seed_seconds,
        deleted=result.counts["deleted"],
        purge_seconds=result.seconds,
        settle_seconds=(settled_before, settled_after),
        idle_write_rate=idle_write_rate,
        io=(io_to[0] - io_from[0], io_to[1] - io_from[1], io_to[2] - io_from[2]),
        before=sends(idle_from, purge_from),
        during=sends(purge_from, purge_to),
        after=sends(after_from, after_to),
        disk_before=disk.window(idle_from, purge_from),
        disk_during=disk.window(purge_from, purge_to),
        disk_after=disk.window(after_from, after_to),
        spinning=sends(spin_from, spin_to),
        disk_spinning=disk.window(spin_from, spin_to),
    )


def render(cfg: BenchConfig, env: list[str], o: Outcome) -> str:
    def ms(values: list[float], q: float) -> str:
        return f"{percentile(values, q) * 1000:.2f}" if values else "n/a"

    idle99 = percentile(o.idle, 0.99)

    def row(name: str, sends: list[float], disk: list[float]) -> str:
        return (
            f"| {name} | {len(sends):,} | {ms(sends, 0.5)} | {ms(sends, 0.99)} "
            f"| {percentile(sends, 0.99) / idle99:.2f}x | {ms(disk, 0.5)} | {ms(disk, 0.99)} |"
        )

    verdict = "met" if o.ratio <= 2.0 else "MISSED"
    before = percentile(o.during, 0.99) / percentile(o.before, 0.99)
    quota = round_quota(cfg.settings.purge_chunk_rows, PARTITIONS)
    return "\n".join(
        [
            "# Purge benchmark (latest run)",
            "",
            "`python -m benchmarks purge`: the purge-retention job deletes N expired messages "
            f"({PARTITIONS} partitions; rounds of {quota:,} rows from each, deleted in "
            f"transactions of about {cfg.settings.purge_chunk_rows:,} rows; a pause of "
            f"{cfg.settings.purge_pause:g}x the work after each transaction) while a Producer "
            f"publishes single messages at {RATE:.0f} msg/s. "
            "Idle windows start once the server has settled (InnoDB history list short, "
            "dirty pages no longer falling; after the purge, InnoDB writing no faster than "
            f"{SETTLE_WRITE_SLACK:g}x its rate in the idle window before).",
            "",
            *env,
            "",
            "| measure | value |",
            "| --- | --- |",
            f"| expired rows seeded | {o.rows:,} ({o.seed_seconds:.1f} s) |",
            f"| rows purged | {o.deleted:,} |",
            f"| purge time | {o.purge_seconds:.2f} s |",
            f"| purge rate | {o.rate:,.0f} rows/s |",
            f"| InnoDB data / redo bytes written, pages read during the purge | "
            f"{o.io[0] / 1e6:,.0f} MB ({o.io[0] / max(1, o.deleted):,.0f} B per row) / "
            f"{o.io[1] / 1e6:,.0f} MB / {o.io[2]:,} |",
            f"| InnoDB data write rate idle before / during the purge | "
            f"{o.idle_write_rate / 1e6:,.1f} MB/s / {o.io[0] / o.purge_seconds / 1e6:,.1f} MB/s |",
            f"| settling before / after the purge | {o.settle_seconds[0]:.0f} s / "
            f"{o.settle_seconds[1]:.0f} s |",
            f"| p99 during / idle (both idle windows) | {o.ratio:.2f}x "
            f"(target at most 2x: {verdict}) |",
            f"| p99 during / idle before only | {before:.2f}x |",
            "",
            "| window | sends | publish p50 ms | publish p99 ms | p99 / idle p99 "
            "| disk fsync p50 ms | disk fsync p99 ms |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
            row("idle before", o.before, o.disk_before),
            row("during the purge", o.during, o.disk_during),
            row("idle after", o.after, o.disk_after),
            row("idle (both)", o.idle, o.disk_before + o.disk_after),
            row("reference: one core kept busy", o.spinning, o.disk_spinning),
            "",
            "The reference window runs after the idle window after the purge, with a process "
            f"spinning on one of the machine's {os.cpu_count()} cores and nothing else changed.",
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
