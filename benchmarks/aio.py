"""The aio suite: ems.aio.Producer in one process with 1, 10, 100 and 1,000 tasks, each
sending single messages and awaiting each, beside the thread-safe Producer's one-process
single-send rate, in one run and one table.

Targets (reported, never asserted): 100 tasks >= 30,000 msg/s and >= 3x the sync rate.
After the table, a cProfile of the 100-task case shows where the time goes.
"""

from __future__ import annotations

import asyncio
import cProfile
import pstats
import time
from dataclasses import dataclass
from multiprocessing.synchronize import Barrier
from pathlib import Path

from benchmarks.aio_drivers import DATABASE, prepare
from benchmarks.harness import (
    BARRIER_TIMEOUT,
    HEADERS,
    BenchConfig,
    WorkerResult,
    clear_redis,
    on_database,
    query,
    readings,
    run_parallel,
    timed_loop,
)
from benchmarks.report import environment, profile_summary
from ems import Producer as SyncProducer
from ems.aio import Producer

RESULTS = Path(__file__).resolve().parent / "results" / "aio-latest.md"
TASKS = (1, 10, 100, 1000)
WARM = 20
TARGET_RATE = 30_000
TARGET_VS_SYNC = 3.0


@dataclass(frozen=True, kw_only=True)
class Spec:
    cfg: BenchConfig
    tasks: int  # 0: the thread-safe Producer, one thread


def sync_worker(index: int, workers: int, spec: Spec, barrier: Barrier) -> WorkerResult:
    rows = readings()
    producer = SyncProducer(spec.cfg.settings)
    position = 0

    def step() -> int:
        nonlocal position
        r = rows[position % len(rows)]
        position += 1
        producer.send(spec.cfg.topic, r.body, key=r.key, headers=HEADERS)
        return 1

    try:
        for _ in range(WARM):
            step()
        return timed_loop(barrier, spec.cfg.seconds, step, WARM)
    finally:
        producer.close()


async def drive(spec: Spec, barrier: Barrier | None, seconds: float) -> WorkerResult:
    rows = readings()
    topic = spec.cfg.topic
    stop = False
    counts = [0] * spec.tasks
    async with Producer(spec.cfg.settings) as producer:

        async def task(t: int, limit: int | None) -> None:
            position = t * len(rows) // spec.tasks
            while not stop and (limit is None or counts[t] < limit):
                r = rows[position % len(rows)]
                position += 1
                await producer.send(topic, r.body, key=r.key, headers=HEADERS)
                counts[t] += 1

        await asyncio.gather(*(task(t, 1) for t in range(spec.tasks)))  # warm up
        warm = sum(counts)
        counts = [0] * spec.tasks
        if barrier is not None:
            await asyncio.get_running_loop().run_in_executor(None, barrier.wait, BARRIER_TIMEOUT)
        cpu, start = time.process_time(), time.perf_counter()
        tasks = [asyncio.create_task(task(t, None)) for t in range(spec.tasks)]
        await asyncio.sleep(seconds)
        stop = True
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - start
        cpu = time.process_time() - cpu
    return WorkerResult(sent=sum(counts), warm=warm, elapsed=elapsed, cpu=cpu)


def aio_worker(index: int, workers: int, spec: Spec, barrier: Barrier) -> WorkerResult:
    if spec.tasks == 0:
        return sync_worker(index, workers, spec, barrier)
    return asyncio.run(drive(spec, barrier, spec.cfg.seconds))


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


def profile(cfg: BenchConfig, tasks: int = 100, seconds: float = 3.0) -> list[str]:
    reset(cfg)
    prof = cProfile.Profile()
    result = prof.runcall(asyncio.run, drive(Spec(cfg=cfg, tasks=tasks), None, seconds))
    title = f"Profile of {tasks} tasks sending for {seconds:g} s ({result.sent:,} sends)"
    return profile_summary(pstats.Stats(prof), title, result.sent, top=12)


def render(env: list[str], found: list[tuple[str, float, float]], notes: list[str]) -> str:
    sync = found[0][1]
    lines = [
        "## ems.aio producer benchmark",
        "",
        *env,
        "- one process; each task sends single messages (the IoT readings of the producer "
        "suite, key = project_id) and awaits each; all tasks share one ems.aio.Producer",
        "",
        "| case | msg/s | vs sync single send | client CPU us/msg | target | met? |",
        "|---|---:|---:|---:|---|---|",
    ]
    for case, rate, cpu in found:
        target, met = "- (reference)", "-"
        if case.startswith("aio, 100 tasks"):
            target = f">= {TARGET_RATE:,} msg/s, >= {TARGET_VS_SYNC:g}x sync"
            misses = []
            if rate < TARGET_RATE:
                misses.append(f"{rate:,.0f} < {TARGET_RATE:,}")
            if sync and rate / sync < TARGET_VS_SYNC:
                misses.append(f"{rate / sync:.2f}x < {TARGET_VS_SYNC:g}x")
            met = "yes" if not misses else "**NO**: " + "; ".join(misses)
        ratio = f"{rate / sync:.2f}x" if sync else "-"
        lines.append(f"| {case} | {rate:,.0f} | {ratio} | {cpu:,.1f} | {target} | {met} |")
    lines += ["", "Checks:", *[f"- {n}" for n in notes or ["all stored once, gap-free"]], ""]
    return "\n".join(lines)


def run(cfg: BenchConfig, args: object = None) -> int:
    cfg = on_database(cfg, DATABASE)
    prepare(cfg)
    env = environment(cfg)
    found: list[tuple[str, float, float]] = []
    notes: list[str] = []
    for tasks in (0, *TASKS):
        case = "sync Producer, 1 thread" if tasks == 0 else f"aio, {tasks} tasks"
        reset(cfg)
        result = run_parallel(aio_worker, Spec(cfg=cfg, tasks=tasks), 1, cfg.seconds)
        notes += [f"{case}: {p}" for p in check(cfg, result.sent + result.warm)]
        found.append((case, result.rate, result.cpu_micros))
        print(f"[bench] {case}: {result.rate:,.0f} msg/s", flush=True)
    text = render(env, found, notes) + "\n" + "\n".join(profile(cfg)) + "\n"
    print(text)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text)
    return 0
