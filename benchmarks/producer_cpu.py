"""Client CPU per single `send`: ems against a raw PyMySQL INSERT of the same rows.

`python -m benchmarks.producer_cpu [--sends N] [--rounds R] [--profile]`

On a small, shared host the many-producer cases are capped by CPU, not by latency, so the
figure that predicts them is the CPU one process spends per message. It is measured with
time.process_time(), which stays meaningful while other work loads the machine (wall-clock
rates do not), over the same readings the producer suite sends, alternating ems and raw
rounds so that drift hits both alike. It writes to its own database (ems_bench_cpu) and
never runs as a test.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from benchmarks.harness import (
    PARTITIONS,
    BenchConfig,
    Reading,
    clear_redis,
    query,
    readings,
)
from benchmarks.writers import EmsWriter, RawWriter
from ems import Settings, TopicAdmin
from ems.exceptions import TopicExists
from ems.store import migrate

DATABASE = "ems_bench_cpu"
TOPIC = "bench.cpu"
WARM = 200


@dataclass(frozen=True, kw_only=True)
class Sample:
    cpu_us: float  # client CPU per send
    wall_us: float  # wall time per send (noisy on a loaded host; for orientation only)


def config(server: str, redis_url: str) -> BenchConfig:
    settings = Settings(database_url=f"{server.rstrip('/')}/{DATABASE}", redis_url=redis_url)
    return BenchConfig(settings=settings, kombu_url="", seconds=0, topic=TOPIC)


def prepare(cfg: BenchConfig) -> None:
    migrate.create_database(cfg.settings)
    migrate.upgrade(cfg.settings)
    admin = TopicAdmin(cfg.settings)
    try:
        admin.create(cfg.topic, PARTITIONS)
    except TopicExists:
        pass
    finally:
        admin.close()


def reset(cfg: BenchConfig) -> None:
    query(cfg.settings.database_url, "TRUNCATE TABLE message")
    clear_redis(cfg.settings)


def measure(send: Callable[[Reading], None], rows: list[Reading], sends: int) -> Sample:
    for row in rows[:WARM]:
        send(row)
    batch = [rows[(WARM + i) % len(rows)] for i in range(sends)]
    cpu, wall = time.process_time(), time.perf_counter()
    for row in batch:
        send(row)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return Sample(cpu_us=cpu / sends * 1e6, wall_us=wall / sends * 1e6)


def run_system(cfg: BenchConfig, system: str, rows: list[Reading], sends: int) -> Sample:
    reset(cfg)
    writer = EmsWriter(cfg, 0, 1) if system == "ems" else RawWriter(cfg, 0, 1)
    try:
        return measure(writer.send, rows, sends)
    finally:
        writer.close()


def profile(cfg: BenchConfig, rows: list[Reading], sends: int, top: int) -> str:
    reset(cfg)
    writer = EmsWriter(cfg, 0, 1)
    prof = cProfile.Profile(time.process_time)  # CPU, not wall: waits do not show
    try:
        for row in rows[:WARM]:
            writer.send(row)
        batch = [rows[(WARM + i) % len(rows)] for i in range(sends)]
        prof.enable()
        for row in batch:
            writer.send(row)
        prof.disable()
    finally:
        writer.close()
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.producer_cpu", description=__doc__)
    parser.add_argument("--sends", type=int, default=5000, help="timed sends per round")
    parser.add_argument("--rounds", type=int, default=3, help="ems/raw rounds (median shown)")
    parser.add_argument("--server", default="mysql+pymysql://root@127.0.0.1:3306")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--profile", action="store_true", help="also cProfile ems sends (CPU)")
    parser.add_argument("--top", type=int, default=30, help="functions the profile lists")
    args = parser.parse_args(argv)
    cfg = config(args.server, args.redis_url)
    prepare(cfg)
    rows = readings()
    results: dict[str, list[Sample]] = {"ems": [], "raw": []}
    print("| round | ems CPU us/send | raw CPU us/send | ems/raw CPU | ems wall us | raw wall us |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in range(args.rounds):
        for system in ("ems", "raw"):
            results[system].append(run_system(cfg, system, rows, args.sends))
        e, w = results["ems"][-1], results["raw"][-1]
        print(
            f"| {r + 1} | {e.cpu_us:.1f} | {w.cpu_us:.1f} | {e.cpu_us / w.cpu_us:.2f} "
            f"| {e.wall_us:.0f} | {w.wall_us:.0f} |",
            flush=True,
        )
    ems = statistics.median(s.cpu_us for s in results["ems"])
    raw = statistics.median(s.cpu_us for s in results["raw"])
    print(f"| median | {ems:.1f} | {raw:.1f} | {ems / raw:.2f} | | |")
    if args.profile:
        print(profile(cfg, rows, args.sends, args.top))
    reset(cfg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
