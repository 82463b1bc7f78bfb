"""The aio suite: the asyncio SDK beside the sync SDK and raw PyMySQL, in one run and one
table.

Rows, each measured in fresh processes (harness.run_parallel) after the message table and
the offset counters are emptied:

- single send, one process: raw INSERT on one connection and the sync Producer on one
  thread (the producer suite's own worker and writers: benchmarks/producer.py and
  writers.py), then ems.aio.Producer with 1, 10, 100 and 1,000 tasks, each sending single
  messages and awaiting each, all sharing one producer;
- batch of 100, one process: raw multi-row INSERT, the sync Producer's send_batch, and
  ems.aio.Producer.send_batch from one task and from 4 tasks sharing one producer;
- consume and ack, 4 processes: one group of 4 member processes drains a backlog with the
  sync Consumer and with ems.aio.Consumer, handlers that do nothing (benchmarks/aio_consume.py);
- event-loop lag: 100 tasks publish at full rate while a monitor task on the same loop
  sleeps 1 ms at a time and records how late it wakes (p50, p99, max).

Targets, computed from the measurements and reported, never asserted: 100 tasks >= 30,000
msg/s and >= 3x the sync single-send rate; aio consume >= 0.9x sync; lag p99 < 10 ms.
Under the table: the checks (every acknowledged message stored once, gap-free; every
backlog message handled and the group's cursors at the end), the lag, and a cProfile of
the 100-task case.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import multiprocessing as mp
import pstats
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing.synchronize import Barrier
from pathlib import Path

from benchmarks import aio_consume
from benchmarks.aio_drivers import DATABASE, prepare
from benchmarks.consumer import WORKERS as CONSUMERS
from benchmarks.consumer_workers import BODY_BYTES
from benchmarks.harness import (
    BARRIER_TIMEOUT,
    BATCH,
    HEADERS,
    PARTITIONS,
    BenchConfig,
    Measurement,
    Reading,
    WorkerResult,
    clear_redis,
    on_database,
    query,
    readings,
    run_parallel,
)
from benchmarks.producer import Spec as WriterSpec
from benchmarks.producer import bench_worker
from benchmarks.purge import percentile
from benchmarks.report import environment, profile_summary
from ems.aio import Producer

RESULTS = Path(__file__).resolve().parent / "results" / "aio-latest.md"
TASKS = (1, 10, 100, 1000)
#: The tasks whose single sends carry the target.
TARGET_TASKS = 100
BATCH_TASKS = (1, 4)
LAG_TASKS = TARGET_TASKS
#: The lag monitor's sleep.
TICK = 0.001

SINGLE = "single send, 1 process"
BATCHED = f"batch of {BATCH}, 1 process"
CONSUME = f"consume + ack, {CONSUMERS} processes"
LAG = "event-loop lag"


@dataclass(frozen=True)
class Lag:
    """How late each wake-up of the monitor came, in seconds."""

    late: tuple[float, ...]

    def ms(self, q: float) -> float:
        return percentile(list(self.late), q) * 1000

    @property
    def p50(self) -> float:
        return self.ms(0.50)

    @property
    def p99(self) -> float:
        return self.ms(0.99)

    @property
    def worst(self) -> float:
        return max(self.late, default=float("nan")) * 1000


@dataclass(frozen=True, kw_only=True)
class Row:
    kind: str  # SINGLE, BATCHED, CONSUME or LAG
    case: str
    system: str  # "raw", "sync" or "aio": the reference columns compare within a kind
    rate: float
    cpu: float  # client CPU us per message
    goal: Goal | None = None
    lag: Lag | None = None
    error: str | None = None  # the row could not be measured
    rounds: tuple[float, ...] = ()  # msg/s of each round a median was taken over
    #: Against sync as the median of the rounds' ratios (aio_consume.paired_ratio), where
    #: the rounds pair it with sync's; None: by the rates (row over the sync row's).
    paired: float | None = None


@dataclass(frozen=True, kw_only=True)
class Goal:
    """A target row's floors (and the lag's ceiling)."""

    rate: float | None = None
    vs_sync: float | None = None
    lag_p99_ms: float | None = None

    def describe(self) -> str:
        parts = []
        if self.rate is not None:
            parts.append(f">= {self.rate:,.0f} msg/s")
        if self.vs_sync is not None:
            parts.append(f">= {self.vs_sync:g}x sync")
        if self.lag_p99_ms is not None:
            parts.append(f"lag p99 < {self.lag_p99_ms:g} ms")
        return ", ".join(parts)

    def misses(self, row: Row, sync: float | None) -> list[str]:
        """Why the row misses the target; [] when met. A missing measurement is a miss."""
        if row.error is not None:
            return ["not measured"]
        out = []
        if self.rate is not None and row.rate < self.rate:
            out.append(f"{row.rate:,.0f} < {self.rate:,.0f} msg/s")
        if self.vs_sync is not None:
            ratio = row.paired if row.paired is not None else row.rate / sync if sync else None
            if ratio is None:
                out.append("sync not measured")
            elif ratio < self.vs_sync:
                out.append(f"{ratio:.2f}x < {self.vs_sync:g}x sync")
        if self.lag_p99_ms is not None:
            if row.lag is None:
                out.append("lag not measured")
            elif not row.lag.p99 < self.lag_p99_ms:
                out.append(f"p99 {row.lag.p99:.2f} ms >= {self.lag_p99_ms:g} ms")
        return out


SEND_GOAL = Goal(rate=30_000, vs_sync=3.0)
CONSUME_GOAL = Goal(vs_sync=0.9)
LAG_GOAL = Goal(lag_p99_ms=10.0)


@dataclass(frozen=True, kw_only=True)
class Case:
    """One publishing row."""

    kind: str  # SINGLE or BATCHED
    system: str
    tasks: int = 1
    goal: Goal | None = None

    @property
    def batch(self) -> int:
        return 1 if self.kind == SINGLE else BATCH

    @property
    def title(self) -> str:
        call = "send" if self.kind == SINGLE else "send_batch"
        if self.system == "raw":
            return f"raw {'INSERT' if self.kind == SINGLE else 'multi-row INSERT'}, 1 connection"
        if self.system == "sync":
            return f"sync Producer.{call}, 1 thread"
        return f"aio Producer.{call}, {self.tasks:,} task{'s' * (self.tasks > 1)}"


CASES = (
    Case(kind=SINGLE, system="raw"),
    Case(kind=SINGLE, system="sync"),
    *(
        Case(kind=SINGLE, system="aio", tasks=n, goal=SEND_GOAL if n == TARGET_TASKS else None)
        for n in TASKS
    ),
    Case(kind=BATCHED, system="raw"),
    Case(kind=BATCHED, system="sync"),
    *(Case(kind=BATCHED, system="aio", tasks=n) for n in BATCH_TASKS),
)
CONSUME_CASES = {
    "sync": "sync Consumer.run, `def handle(d)` does nothing",
    "aio": "aio Consumer.run, `async def handle(d)` does nothing",
}


def log(message: str) -> None:
    print(f"[bench aio] {message}", file=sys.stderr, flush=True)


# -- the asyncio producer in one process -------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Spec:
    cfg: BenchConfig
    tasks: int
    batch: int = 1


async def watch(late: list[float], running: Callable[[], bool]) -> None:
    """The lag monitor: sleep TICK at a time on the loop; record how late each wake-up is."""
    while running():
        due = time.perf_counter() + TICK
        await asyncio.sleep(TICK)
        late.append(max(0.0, time.perf_counter() - due))


async def drive(
    spec: Spec, barrier: Barrier | None, seconds: float, late: list[float] | None = None
) -> WorkerResult:
    """spec.tasks tasks sharing one Producer, each awaiting one call (a send, or a
    send_batch of spec.batch) at a time for `seconds`; with `late`, the lag monitor too."""
    rows = readings()
    chunks = [rows[i : i + spec.batch] for i in range(0, len(rows), spec.batch)]
    topic = spec.cfg.topic
    running = True
    counts = [0] * spec.tasks
    async with Producer(spec.cfg.settings) as producer:

        async def call(chunk: list[Reading]) -> None:
            if spec.batch == 1:
                r = chunk[0]
                await producer.send(topic, r.body, key=r.key, headers=HEADERS)
            else:
                await producer.send_batch(topic, [(r.body, r.key, HEADERS) for r in chunk])

        async def task(t: int, calls: int | None) -> None:
            position = t * len(chunks) // spec.tasks  # tasks start at different rows
            while running and calls != 0:
                chunk = chunks[position % len(chunks)]
                position += 1
                await call(chunk)
                counts[t] += len(chunk)
                calls = None if calls is None else calls - 1

        await asyncio.gather(*(task(t, 1) for t in range(spec.tasks)))  # warm up
        warm = sum(counts)
        counts[:] = [0] * spec.tasks
        if barrier is not None:
            await asyncio.get_running_loop().run_in_executor(None, barrier.wait, BARRIER_TIMEOUT)
        cpu, start = time.process_time(), time.perf_counter()
        tasks = [asyncio.create_task(task(t, None)) for t in range(spec.tasks)]
        if late is not None:
            tasks.append(asyncio.create_task(watch(late, lambda: running)))
        await asyncio.sleep(seconds)
        running = False
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - start
        cpu = time.process_time() - cpu
    return WorkerResult(sent=sum(counts), warm=warm, elapsed=elapsed, cpu=cpu)


def aio_worker(index: int, workers: int, spec: Spec, barrier: Barrier) -> WorkerResult:
    return asyncio.run(drive(spec, barrier, spec.cfg.seconds))


def lag_worker(spec: Spec) -> tuple[WorkerResult, list[float]]:
    late: list[float] = []
    return asyncio.run(drive(spec, None, spec.cfg.seconds, late)), late


# -- measurements ------------------------------------------------------------------------


def reset(cfg: BenchConfig) -> None:
    query(cfg.settings.database_url, "TRUNCATE TABLE message")
    clear_redis(cfg.settings)


def check(cfg: BenchConfig, acked: int) -> list[str]:
    """Every acknowledged message stored; offsets gap-free from 0 in every partition."""
    problems = []
    ((rows,),) = query(cfg.settings.database_url, "SELECT COUNT(*) FROM message")
    if rows != acked:
        problems.append(f"{acked:,} acknowledged but {rows:,} rows stored")
    for p, count, low, high in query(
        cfg.settings.database_url,
        "SELECT partition_no, COUNT(*), MIN(offset_no), MAX(offset_no) FROM message "
        "GROUP BY partition_no",
    ):
        if low != 0 or high + 1 != count:
            problems.append(f"partition {p}: {count} rows at offsets {low}..{high}")
    return problems


def publish(cfg: BenchConfig, case: Case, notes: list[str]) -> Row:
    """One publishing row: raw and sync by the producer suite's worker, aio by drive()."""
    reset(cfg)
    if case.system == "aio":
        spec: object = Spec(cfg=cfg, tasks=case.tasks, batch=case.batch)
        result = run_parallel(aio_worker, spec, 1, cfg.seconds)
    else:
        system = "raw" if case.system == "raw" else "ems"
        spec = WriterSpec(cfg=cfg, system=system, batch=case.batch)
        result = run_parallel(bench_worker, spec, 1, cfg.seconds)
    notes += [f"{case.title}: {p}" for p in check(cfg, result.sent + result.warm)]
    log(f"{case.kind} / {case.title}: {result.rate:,.0f} msg/s")
    return Row(
        kind=case.kind,
        case=case.title,
        system=case.system,
        rate=result.rate,
        cpu=result.cpu_micros,
        goal=case.goal,
    )


def measure_lag(cfg: BenchConfig, notes: list[str]) -> Row:
    """LAG_TASKS tasks publishing at full rate with the monitor on their loop, in a fresh
    process."""
    reset(cfg)
    with ProcessPoolExecutor(1, mp_context=mp.get_context("forkserver")) as pool:
        future = pool.submit(lag_worker, Spec(cfg=cfg, tasks=LAG_TASKS))
        result, late = future.result(timeout=cfg.seconds + BARRIER_TIMEOUT)
    notes += [f"lag run: {p}" for p in check(cfg, result.sent + result.warm)]
    m = Measurement(
        workers=1, sent=result.sent, warm=result.warm, elapsed=result.elapsed, cpu=result.cpu
    )
    lag = Lag(tuple(late))
    log(f"lag with {LAG_TASKS} tasks at {m.rate:,.0f} msg/s: p99 {lag.p99:.2f} ms")
    return Row(
        kind=LAG,
        case=f"aio Producer.send, {LAG_TASKS} tasks, and a monitor task sleeping "
        f"{TICK * 1000:g} ms at a time",
        system="aio",
        rate=m.rate,
        cpu=m.cpu_micros,
        goal=LAG_GOAL,
        lag=lag,
    )


def consume(cfg: BenchConfig, messages: int, notes: list[str]) -> list[Row]:
    rows = []
    drains = aio_consume.measure(cfg, messages, log)
    paired = aio_consume.paired_ratio(drains)
    for d in drains:
        notes += d.checks
        if d.error is not None:
            notes.append(f"{CONSUME_CASES[d.system]}: FAILED: {d.error}")

        rows.append(
            Row(
                kind=CONSUME,
                case=CONSUME_CASES[d.system],
                system=d.system,
                rate=d.rate,
                cpu=d.cpu_micros,
                goal=CONSUME_GOAL if d.system == "aio" else None,
                error=d.error,
                rounds=d.rounds,
                paired=paired if d.system == "aio" else None,
            )
        )
    return rows


def profile(cfg: BenchConfig, tasks: int = TARGET_TASKS, seconds: float = 3.0) -> list[str]:
    reset(cfg)
    prof = cProfile.Profile()
    result = prof.runcall(asyncio.run, drive(Spec(cfg=cfg, tasks=tasks), None, seconds))
    title = f"Profile of {tasks} tasks sending for {seconds:g} s ({result.sent:,} sends)"
    return profile_summary(pstats.Stats(prof), title, result.sent, top=12)


# -- the report --------------------------------------------------------------------------


def _ratio(a: float, b: float | None) -> str:
    return f"{a / b:.2f}x" if b else "-"


def table(rows: list[Row]) -> list[str]:
    """One line per row; "vs sync" and "vs raw" compare with the sync and raw rows of the
    same kind (the lag row with the single sends)."""
    refs = {(r.kind, r.system): r.rate for r in rows if r.system in ("sync", "raw") and r.rate}
    lines = [
        "| measure | case | msg/s | vs sync | vs raw | client CPU us/msg | target | met? |",
        "|---|---|---:|---:|---:|---:|---|---|",
    ]
    for r in rows:
        kind = SINGLE if r.kind == LAG else r.kind
        sync, raw = refs.get((kind, "sync")), refs.get((kind, "raw"))
        target, met = "- (reference)", "-"
        if r.goal is not None:
            misses = r.goal.misses(r, sync)
            target = r.goal.describe()
            met = "yes" if not misses else "**NO**: " + "; ".join(misses)
            if r.lag is not None and not misses:
                met += f": p99 {r.lag.p99:.2f} ms"
        if r.error is not None:
            cells = ["FAILED", "-", "-", "-"]
        else:
            vs_sync = f"{r.paired:.2f}x" if r.paired is not None else _ratio(r.rate, sync)
            cells = [f"{r.rate:,.0f}", vs_sync, _ratio(r.rate, raw), f"{r.cpu:,.1f}"]
        lines.append(f"| {r.kind} | {r.case} | {' | '.join(cells)} | {target} | {met} |")
    return lines


def method(cfg: BenchConfig, messages: int) -> list[str]:
    """The run's set-up (bullets: the docs page describes it in prose)."""
    share = PARTITIONS // CONSUMERS
    return [
        "- publishing: the IoT readings of the producer suite (key = project_id), a topic of "
        f"{PARTITIONS} partitions; each row in a fresh process, {cfg.seconds:g} s timed "
        "after warm-up, the message table emptied before each",
        "- raw: PyMySQL, autocommit, same `message` table and columns, partition precomputed, "
        f"offsets from a local counter; batch = executemany (one multi-row INSERT of {BATCH})",
        "- sync: ems.Producer on one thread; aio: ems.aio.Producer, one per process, shared "
        "by its tasks; each task awaits each call",
        f"- consume + ack: a backlog of {messages:,} unkeyed messages of {BODY_BYTES} bytes "
        f"in {PARTITIONS} partitions, drained by one group of {CONSUMERS} member processes "
        f"lined up behind a barrier with {share} partitions each; push form (run()), handlers "
        "that only count; msg/s from the group's first delivery to its last; medians of "
        f"{aio_consume.DRAIN_ROUNDS} drains per system, the order alternating, each by a new "
        "group after the server settled; aio's vs sync is the median of the rounds' ratios "
        "(each round's aio drain over its sync drain, run back to back)",
        f"- event-loop lag: while {LAG_TASKS} tasks publish at full rate, a monitor task on "
        f"the same loop sleeps {TICK * 1000:g} ms at a time and records how late it wakes",
    ]


def rounds_lines(rows: list[Row]) -> list[str]:
    """The rates a median row was taken over, each system's in the order run."""
    parts = [
        f"{r.system} " + ", ".join(f"{rate:,.0f}" for rate in r.rounds) for r in rows if r.rounds
    ]
    if not parts:
        return []
    return [f"{CONSUME}: msg/s of each drain, in the order run: {'; '.join(parts)}.", ""]


def lag_lines(rows: list[Row]) -> list[str]:
    row = next(r for r in rows if r.lag is not None)
    assert row.lag is not None
    lag = row.lag
    return [
        "### Event-loop lag",
        "",
        f"While {LAG_TASKS} tasks published at full rate ({row.rate:,.0f} msg/s), "
        f"{len(lag.late):,} wake-ups of a monitor task sleeping {TICK * 1000:g} ms at a time "
        f"came late by p50 {lag.p50:.2f} ms, p99 {lag.p99:.2f} ms, max {lag.worst:.2f} ms.",
    ]


def render(
    env: list[str], rows: list[Row], notes: list[str], profiled: list[str], head: list[str]
) -> str:
    checks = notes or [
        "every acknowledged message stored once, offsets gap-free from 0 in every partition",
        "every backlog message handled once per group, logged done, and the group's "
        "committed offsets at the high watermark of every partition",
    ]
    return "\n".join(
        [
            "## ems.aio benchmark: the asyncio SDK beside the sync SDK and raw",
            "",
            *env,
            *head,
            "",
            *table(rows),
            "",
            *rounds_lines(rows),
            "Checks:",
            *[f"- {n}" for n in checks],
            "",
            *lag_lines(rows),
            "",
            "### Where the time goes",
            "",
            *profiled,
            "",
        ]
    )


def run(cfg: BenchConfig, args: argparse.Namespace) -> int:
    started = time.monotonic()
    cfg = on_database(cfg, DATABASE)
    prepare(cfg)
    env = environment(cfg)
    log(next(line for line in env if "load average" in line).removeprefix("- "))
    notes: list[str] = []
    rows = [publish(cfg, case, notes) for case in CASES]
    lag = measure_lag(cfg, notes)
    rows += [*consume(cfg, args.aio_consume_messages, notes), lag]
    log(f"profiling {TARGET_TASKS} tasks")
    text = render(env, rows, notes, profile(cfg), method(cfg, args.aio_consume_messages))
    print(text)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text)
    log(f"done in {time.monotonic() - started:.0f} s; wrote {RESULTS}")
    return 0
