"""The cli suite: how long an `ems` command takes to start, in fresh interpreters.

Every case is a new `python` process (as `python -m ems.cli ...`, the same start as the
`ems` script), timed from before its fork to its exit, --cli-runs times (default 30), in
rounds: each round runs every case once, so the drift of a shared machine's speed hits
them alike. The floor is `python -c pass` in the same rounds, and `python -c "import
click"` shows what the command line library alone costs.

`ems topic list` reads a database of its own (ems_bench_cli, recreated with a few
topics). Its server round trips (the TCP connect, the handshake, the dialect's first
queries and the listing) are measured in the command itself: each round also runs it
under benchmarks.cli_probe, which adds up the time it is blocked on the database's socket.
Start-up beyond the floor is the median wall time less the floor's median and less the
median server wait: the interpreter's imports and the command's own Python. The target
(issue 39): at most 0.3 s for `ems --help` and `ems topic list`. One `-X importtime` run
per case says what the imports are.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.cli_probe import MARKER
from benchmarks.harness import BenchConfig, BenchError, fresh_database, on_database
from benchmarks.purge import percentile
from benchmarks.report import environment
from ems import TopicAdmin

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "cli-latest.md"
DATABASE = "ems_bench_cli"
TOPICS = ("bench.cli.orders", "bench.cli.readings", "bench.cli.alerts", "bench.cli.audit")
TARGET = 0.3
#: Modules whose import a reader wants to see called out (the ones issue 39 names).
HEAVY = ("sqlalchemy", "sqlalchemy.orm", "ems.models", "pymysql", "redis", "pyspark")


def log(message: str) -> None:
    print(f"[bench cli] {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True, kw_only=True)
class Case:
    label: str
    #: The interpreter's arguments.
    argv: tuple[str, ...]
    #: Talks to the database: its server wait is measured under benchmarks.cli_probe.
    server: bool = False
    #: Held to the target.
    target: bool = False


FLOOR = Case(label="python -c pass (the floor)", argv=("-c", "pass"))
CASES = (
    FLOOR,
    Case(label='python -c "import click"', argv=("-c", "import click")),
    Case(label="ems --help", argv=("-m", "ems.cli", "--help"), target=True),
    Case(label="ems topic --help", argv=("-m", "ems.cli", "topic", "--help")),
    Case(label="ems topic list", argv=("-m", "ems.cli", "topic", "list"), server=True, target=True),
    Case(
        label="ems topic list --json",
        argv=("-m", "ems.cli", "topic", "list", "--json"),
        server=True,
    ),
)


@dataclass(kw_only=True)
class Samples:
    """What the runs of one case measured."""

    walls: list[float] = field(default_factory=list)
    #: CPU seconds (user + system) of each run: less swayed by a busy machine than wall.
    cpus: list[float] = field(default_factory=list)
    #: Server waits of the probed runs (server cases only).
    waits: list[float] = field(default_factory=list)
    #: Socket calls of the probed runs.
    calls: list[int] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class Imports:
    """One `-X importtime` run: its top-level imports and their cumulative seconds."""

    top: tuple[tuple[str, float], ...]
    modules: frozenset[str]

    @property
    def seconds(self) -> float:
        return sum(s for _, s in self.top)


def parse_importtime(stderr: str) -> Imports:
    """The `import time:` lines of `python -X importtime` (self us | cumulative us | name,
    the name indented two spaces per level under the module that imported it)."""
    top: list[tuple[str, float]] = []
    modules: set[str] = set()
    for line in stderr.splitlines():
        if not line.startswith("import time:"):
            continue
        _, cumulative, name = line.split("|", 2)
        if not cumulative.strip().isdigit():
            continue  # the header line
        modules.add(name.strip())
        if not name[1:].startswith(" "):
            top.append((name.strip(), int(cumulative) / 1e6))
    return Imports(top=tuple(top), modules=frozenset(modules))


def parse_wait(stderr: str) -> tuple[float, int]:
    """The server wait and socket calls benchmarks.cli_probe reports."""
    for line in reversed(stderr.splitlines()):
        if line.startswith(MARKER):
            _, seconds, calls = line.split()
            return float(seconds), int(calls)
    raise BenchError(f"the probe reported no server wait:\n{stderr[-2000:]}")


def command_env(cfg: BenchConfig) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMS_")}
    env["EMS_DATABASE_URL"] = cfg.settings.database_url
    env["EMS_REDIS_URL"] = cfg.settings.redis_url
    return env


@dataclass(frozen=True, kw_only=True)
class Run:
    wall: float
    cpu: float
    stdout: str
    stderr: str


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def run_once(argv: Sequence[str], env: dict[str, str]) -> Run:
    """One fresh interpreter, waited for; BenchError if it fails."""
    cpu, started = _children_cpu(), time.perf_counter()
    done = subprocess.run(
        [sys.executable, *argv], env=env, cwd=ROOT, capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise BenchError(f"python {' '.join(argv)} exited {done.returncode}:\n{done.stderr}")
    return Run(wall=wall, cpu=_children_cpu() - cpu, stdout=done.stdout, stderr=done.stderr)


def probe_argv(case: Case) -> tuple[str, ...]:
    """The case's `ems` arguments run under benchmarks.cli_probe."""
    assert case.argv[:2] == ("-m", "ems.cli")
    return ("-m", "benchmarks.cli_probe", *case.argv[2:])


def prepare(cfg: BenchConfig) -> None:
    fresh_database(cfg.settings)
    with TopicAdmin(cfg.settings) as admin:
        for n, name in enumerate(TOPICS):
            admin.create(name, 4 * (n + 1))


def measure(cfg: BenchConfig, runs: int) -> tuple[dict[str, Samples], dict[str, Imports]]:
    env = command_env(cfg)
    samples = {case.label: Samples() for case in CASES}
    imports = {}
    for case in CASES:  # warm: byte code written, files in the page cache
        out = run_once(case.argv, env).stdout
        if case.server and not all(name in out for name in TOPICS):
            raise BenchError(f"{case.label} did not list the bench topics:\n{out}")
        timed = run_once(("-X", "importtime", *case.argv), env)
        imports[case.label] = parse_importtime(timed.stderr)
    for n in range(runs):
        shift = n % len(CASES)
        for case in CASES[shift:] + CASES[:shift]:
            done = run_once(case.argv, env)
            samples[case.label].walls.append(done.wall)
            samples[case.label].cpus.append(done.cpu)
            if case.server:
                seconds, calls = parse_wait(run_once(probe_argv(case), env).stderr)
                samples[case.label].waits.append(seconds)
                samples[case.label].calls.append(calls)
        if (n + 1) % 10 == 0:
            log(f"{n + 1} of {runs} rounds")
    return samples, imports


def beyond(case: Case, samples: dict[str, Samples]) -> float:
    """Median wall time less the floor's median and less the median server wait."""
    mine = samples[case.label]
    wait = statistics.median(mine.waits) if mine.waits else 0.0
    return statistics.median(mine.walls) - statistics.median(samples[FLOOR.label].walls) - wait


def cpu_beyond(case: Case, samples: dict[str, Samples]) -> float:
    """Median CPU time less the floor's (a wait on the server uses no CPU)."""
    floor = statistics.median(samples[FLOOR.label].cpus)
    return statistics.median(samples[case.label].cpus) - floor


def met(case: Case, samples: dict[str, Samples]) -> bool:
    return beyond(case, samples) <= TARGET


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f}"


def _row(case: Case, samples: dict[str, Samples]) -> str:
    mine = samples[case.label]
    wait = f"{_ms(statistics.median(mine.waits))} ({mine.calls[0]})" if mine.waits else "-"
    extra = "-" if case is FLOOR else _ms(beyond(case, samples))
    cpu_extra = "-" if case is FLOOR else _ms(cpu_beyond(case, samples))
    target = f"<= {_ms(TARGET)}" if case.target else "-"
    verdict = ("yes" if met(case, samples) else "NO") if case.target else "-"
    return (
        f"| {case.label} | {len(mine.walls)} | {_ms(statistics.median(mine.walls))} "
        f"| {_ms(percentile(mine.walls, 0.9))} | {_ms(statistics.median(mine.cpus))} | {wait} "
        f"| {extra} | {cpu_extra} | {target} | {verdict} |"
    )


def _imports_row(case: Case, imports: dict[str, Imports]) -> str:
    mine, floor = imports[case.label], imports[FLOOR.label]
    heavy = ", ".join(m for m in HEAVY if m in mine.modules) or "none"
    return (
        f"| {case.label} | {_ms(mine.seconds)} | {_ms(mine.seconds - floor.seconds)} "
        f"| {len(mine.modules)} | {heavy} |"
    )


def verdict(samples: dict[str, Samples]) -> str:
    targeted = [case for case in CASES if case.target]
    walls = "; ".join(
        f"`{case.label}` {_ms(beyond(case, samples))} ms "
        f"({'met' if met(case, samples) else 'MISSED'})"
        for case in targeted
    )
    cpus = "; ".join(f"`{case.label}` {_ms(cpu_beyond(case, samples))} ms" for case in targeted)
    return (
        f"Target (issue 39): at most {_ms(TARGET)} ms of start-up beyond the floor and the "
        f"command's server round trips, in wall time: {walls}. In CPU time, which a busy "
        f"machine sways less: {cpus}."
    )


def render(
    env: Sequence[str], runs: int, samples: dict[str, Samples], imports: dict[str, Imports]
) -> str:
    listing = next(c for c in CASES if c.server and c.target)
    biggest = sorted(imports[listing.label].top, key=lambda t: -t[1])[:8]
    return "\n".join(
        [
            "# CLI start-up benchmark (latest run)",
            "",
            *env,
            "",
            f"Each command ran {runs} times in fresh interpreters (`python -m ems.cli`, as "
            "the `ems` script starts), in rounds that run every case once. Wall time from "
            "fork to exit and CPU time (user and system), in milliseconds. Server wait: the "
            "median time `ems topic list` was blocked on the database's socket (connect, "
            "handshake, the dialect's first queries, the listing; socket calls in brackets), "
            "measured in the command itself in runs of its own. Beyond the floor: the median "
            "less the floor's median and less the server wait; CPU beyond: the CPU median "
            "less the floor's.",
            "",
            "| command | runs | median ms | p90 ms | CPU ms | server wait ms "
            "| beyond the floor ms | CPU beyond ms | target ms | met? |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---|---|",
            *(_row(case, samples) for case in CASES),
            "",
            verdict(samples),
            "",
            "### What the interpreter imports",
            "",
            "One `-X importtime` run of each command: the top-level imports' cumulative "
            "time (the interpreter's own start included), the same less the floor's, the "
            "modules imported, and which of the heavy ones are among them.",
            "",
            "| command | imports ms | beyond the floor ms | modules | heavy modules loaded |",
            "|---|---:|---:|---:|---|",
            *(_imports_row(case, imports) for case in CASES),
            "",
            f"The largest top-level imports of `{listing.label}`:",
            "",
            "| module | cumulative ms |",
            "|---|---:|",
            *(f"| {name} | {seconds * 1000:.1f} |" for name, seconds in biggest),
            "",
            "`ems` has no --version option, so there is no case for it.",
            "",
        ]
    )


def run(cfg: BenchConfig, args: argparse.Namespace) -> int:
    own = on_database(cfg, DATABASE)
    log(f"preparing {DATABASE} with {len(TOPICS)} topics")
    prepare(own)
    env = environment(own)
    log(f"{args.cli_runs} rounds of {len(CASES)} commands")
    samples, imports = measure(own, args.cli_runs)
    text = render(env, args.cli_runs, samples, imports)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(text)
    print(text)
    return 0
