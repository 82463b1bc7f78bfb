"""Instructions per message, counted by valgrind: what each publishing system's client
executes for one message, the same on any machine and under any load.

Part of the cost model (`python -m benchmarks cost`). Each count comes from processes of
their own under valgrind's cachegrind, which counts every instruction a process executes in
user space: one that only starts and warms up a writer (the baseline), and one that goes
on with the operations measured.
The difference over the messages of those operations is the cost of one message, with the
interpreter's start, the imports and the connections taken out. The processes run under a
fixed hash seed. What still moves is the start itself: about a million instructions either
way with the process's memory layout (the size of its environment shifts it), as much
over 4,000 messages as 2.5% of a batched one's count. The measured processes make enough
messages to spread it thin: over three layouts, per message counts spread by 0.3% (batch)
and 0.4% (single).

Times on a shared machine move by a quarter between identical runs a minute apart; these
counts do not, so they say what the timed figures cannot: how much more work ems's client
does per message than the floors, and whether a change of its code cut any.

`python -m benchmarks.instructions DATABASE_URL REDIS_URL TOPIC SYSTEM OPERATION COUNT` is
one such process (the parent runs it under valgrind).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from benchmarks import compiled
from benchmarks.harness import (
    BATCH,
    BenchConfig,
    BenchError,
    bench_topic,
    clear_redis,
    query,
    readings,
)
from benchmarks.report import heading

#: The systems counted: ems and its two floors (raw has no Redis step: not a floor).
SYSTEMS = ("ems", "raw+redis+guard", "raw+redis")
#: Measured operations per process: single sends, and batch calls of BATCH messages (the
#: readings again from the start past their end).
SINGLE_SENDS = 8_000
BATCH_CALLS = 400
#: Single sends, then batch calls, every process makes before the measured ones.
WARM_SENDS = 30
WARM_CALLS = 2
#: Processes under valgrind at once (each holds one core while it runs).
PARALLEL = 2
#: Seconds one process may take (the interpreter's start alone is about 6e9 instructions).
TIMEOUT = 900.0
#: cachegrind's events read per message: instructions, and misses of the simulated
#: first-level caches (instruction reads, data reads, data writes).
EVENTS = ("Ir", "I1mr", "D1mr", "D1mw")
#: operation ("single" or "batch") -> system -> event -> count per message.
Counts = dict[str, dict[str, dict[str, float]]]


def totals(text: str) -> dict[str, int]:
    """The whole run's totals of a cachegrind output file: its `events:` line names the
    columns of its `summary:` line."""
    names: list[str] = []
    values: list[int] = []
    for line in text.splitlines():
        if line.startswith("events:"):
            names = line.split()[1:]
        elif line.startswith("summary:"):
            values = [int(v) for v in line.split()[1:]]
    if not names or len(names) != len(values):
        raise BenchError("a cachegrind output without matching events and summary lines")
    return dict(zip(names, values, strict=True))


def per_message(base: dict[str, int], run: dict[str, int], messages: int) -> dict[str, float]:
    """Each event of EVENTS the run counted beyond its baseline, per message of the run's
    measured part."""
    return {event: (run[event] - base[event]) / messages for event in EVENTS}


def messages(operation: str) -> int:
    return SINGLE_SENDS if operation == "single" else BATCH_CALLS * BATCH


@dataclass(frozen=True)
class _Job:
    system: str
    operation: str
    count: int
    topic: str


def _child(cfg: BenchConfig, job: _Job) -> list[str]:
    """The command line of one counted process (run as it is, or under valgrind)."""
    return [
        sys.executable,
        "-m",
        "benchmarks.instructions",
        cfg.settings.database_url,
        cfg.settings.redis_url,
        job.topic,
        job.system,
        job.operation,
        str(job.count),
    ]


def _run(command: list[str], env: dict[str, str], what: str, cwd: Path | None = None) -> None:
    done = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=TIMEOUT, cwd=cwd
    )
    if done.returncode != 0:
        raise BenchError(f"{what} failed:\n{done.stderr[-2000:]}")


def measure(cfg: BenchConfig, tree: Path | None = None) -> Counts:
    """Per operation and system, what one message costs: three processes per system (the
    baseline, the single sends, the batch calls), each on a topic of its own, PARALLEL at
    a time. Every process reads the same bytecode, compiled before by one process per
    system run natively: compiling ems's modules is most of an interpreter's start, and a
    baseline that compiled what its measured twin then found made would count it.
    tree: a compiled build (benchmarks.compiled) the processes import from instead of
    the checkout."""
    query(cfg.settings.database_url, "TRUNCATE TABLE message")
    clear_redis(cfg.settings)
    jobs = [
        _Job(system, operation, count, f"{cfg.topic}.counted.{i}.{operation}")
        for i, system in enumerate(SYSTEMS)
        for operation, count in (("base", 0), ("single", SINGLE_SENDS), ("batch", BATCH_CALLS))
    ]
    for job in jobs:
        bench_topic(cfg.settings, job.topic)
    with tempfile.TemporaryDirectory(prefix="ems-counted-") as tmp:
        env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPYCACHEPREFIX": f"{tmp}/pycache"}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        if tree is not None:
            env = compiled.environment(tree, env)
        for job in jobs:
            if job.operation == "base":
                native = _Job(job.system, "batch", 1, job.topic)
                _run(_child(cfg, native), env, f"{job.system} natively", tree)

        def counted(job: _Job) -> dict[str, int]:
            out = Path(tmp) / f"{job.topic}.out"
            valgrind = ["valgrind", "--tool=cachegrind", "--cache-sim=yes"]
            command = [*valgrind, f"--cachegrind-out-file={out}", *_child(cfg, job)]
            _run(command, env, f"{job.system} {job.operation} under valgrind", tree)
            return totals(out.read_text())

        with ThreadPoolExecutor(PARALLEL) as pool:
            found = dict(zip(jobs, pool.map(counted, jobs), strict=True))
    query(cfg.settings.database_url, "TRUNCATE TABLE message")
    clear_redis(cfg.settings)
    runs = {(job.system, job.operation): run for job, run in found.items()}
    return {
        operation: {
            system: per_message(runs[system, "base"], runs[system, operation], messages(operation))
            for system in SYSTEMS
        }
        for operation in ("single", "batch")
    }


def l1_misses(cost: Mapping[str, float]) -> float:
    """A message's misses of the first-level caches, instructions and data together."""
    return cost["I1mr"] + cost["D1mr"] + cost["D1mw"]


def render(builds: Mapping[str, Counts]) -> list[str]:
    """The counts of each build, each system beside that build's floors."""
    titles = {"single": "single send", "batch": f"batch send ({BATCH} per call)"}
    lines = heading(
        "Instructions per message",
        ["operation", "build", "system"],
        [
            "instructions",
            "vs raw+redis",
            "vs raw+redis+guard",
            "L1 misses: instructions",
            "data",
            "all vs raw+redis",
        ],
    )
    for operation, title in titles.items():
        for build, counts in builds.items():
            found = counts[operation]
            floor, guard = found["raw+redis"], found["raw+redis+guard"]
            for system in SYSTEMS:
                cost = found[system]
                n, data = cost["Ir"], cost["D1mr"] + cost["D1mw"]
                lines.append(
                    f"| {title} | {build} | {system} | {n:,.0f} | {n / floor['Ir']:.3f}x "
                    f"| {n / guard['Ir']:.3f}x | {cost['I1mr']:,.0f} | {data:,.0f} "
                    f"| {l1_misses(cost) / l1_misses(floor):.2f}x |"
                )
    lines += [
        "",
        "Counted by valgrind's cachegrind in processes of their own: per message, what a "
        f"process that made {SINGLE_SENDS:,} single sends (or {BATCH_CALLS} batch calls of "
        f"{BATCH}) executed in user space beyond one that only warmed up ({WARM_SENDS} sends, "
        f"{WARM_CALLS} batch calls). Counts, not times: the same on any machine and under "
        "any load, so a change to ems's code shows here even where the timed rounds cannot "
        "tell it from noise. The kernel's work (system calls, page faults) is not in them. "
        "L1 misses: the misses per message of cachegrind's simulated first-level caches "
        "(instruction reads; data reads and writes), sized as the host's. Each costs the "
        "processor about ten cycles where an instruction takes under one, so a system "
        "with more misses per instruction than its floor runs a higher client CPU ratio "
        "than its instruction ratio: ems's layers run more distinct code and touch more "
        "objects per message than the floors' few functions.",
        "",
        "interpreted: the checkout as it runs. compiled: the opt-in build of the publish "
        "path (pyproject.toml's [tool.ems.compiled]: validation, routing, planning, the "
        "group commit, the statement, its connection, the fences, the allocator, the "
        "wake-ups) compiled to C extensions by mypyc, and the floors' writers with them, so "
        "that each build's ems is set beside floors built alike. What stays interpreted in "
        "both is the drivers (PyMySQL, the Redis client) and the rest of ems, the Producer "
        "and the MessageStore among it.",
        "",
    ]
    return lines


def main(argv: Sequence[str]) -> None:
    """One counted process: WARM_SENDS single sends and WARM_CALLS batch calls, then
    `count` operations of `operation` (none for the baseline)."""
    # Imported here: the parent needs neither ems nor the writers' drivers.
    from benchmarks.writers import WRITERS
    from ems.config import Settings

    database_url, redis_url, topic, system, operation, count_text = argv
    count = int(count_text)
    cfg = BenchConfig(
        settings=Settings(database_url=database_url, redis_url=redis_url),
        kombu_url="",
        seconds=0.0,
        topic=topic,
    )
    rows = readings()
    calls = [rows[i : i + BATCH] for i in range(0, len(rows), BATCH)]
    writer = WRITERS[system](cfg, 0, 1)
    try:
        for row in rows[:WARM_SENDS]:
            writer.send(row)
        for call in calls[:WARM_CALLS]:
            writer.send_batch(call)
        # The readings again from the start when a count runs past them.
        if operation == "single":
            for i in range(WARM_SENDS, WARM_SENDS + count):
                writer.send(rows[i % len(rows)])
        elif operation == "batch":
            for i in range(WARM_CALLS, WARM_CALLS + count):
                writer.send_batch(calls[i % len(calls)])
    finally:
        writer.close()


if __name__ == "__main__":
    main(sys.argv[1:])
