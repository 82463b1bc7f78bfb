"""The assignor suite: how long one assign() round takes at 100,000 partitions over 1,000
members, for the rounds a group leader sees. Pure CPU; no servers needed.

Each case runs a few rounds with different seeded membership changes; the previous
assignment and the new member list are built before the clock starts.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import os
import platform
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from benchmarks.harness import BenchConfig
from ems.coordination import assign, moves

RESULTS = Path(__file__).resolve().parent / "results" / "assignor-latest.md"
MEMBERS = 1_000
PARTITIONS = 100_000
ROUNDS = 5
TARGET = 2.0  # seconds per round
SEED = 20261122

#: (rng, members) -> the members after the change.
Change = Callable[[random.Random, list[str]], list[str]]


@dataclass(frozen=True, kw_only=True)
class Case:
    title: str
    initial: bool  # True: no previous assignment
    change: Change


@dataclass(frozen=True, kw_only=True)
class Timing:
    seconds: float  # assign() alone
    plan_seconds: float  # moves() over the result
    moved: int  # partitions in the handoff plan


def _same(rng: random.Random, members: list[str]) -> list[str]:
    return list(members)


def _leave(rng: random.Random, members: list[str]) -> list[str]:
    gone = rng.choice(members)
    return [m for m in members if m != gone]


def _join(rng: random.Random, members: list[str]) -> list[str]:
    return [*members, f"joiner-{rng.randrange(10**9):09d}"]


def _churn(rng: random.Random, members: list[str]) -> list[str]:
    """10% leave and as many new members join."""
    count = len(members) // 10
    gone = set(rng.sample(members, count))
    fresh = [f"joiner-{rng.randrange(10**9):09d}-{i}" for i in range(count)]
    return [m for m in members if m not in gone] + fresh


CASES = (
    Case(title="initial assignment (no previous)", initial=True, change=_same),
    Case(title="one member leaves", initial=False, change=_leave),
    Case(title="one member joins", initial=False, change=_join),
    Case(title="10% churn (100 leave, 100 join)", initial=False, change=_churn),
)


def time_round(previous: dict[int, str], members: list[str], partitions: range) -> Timing:
    """One timed assign() round, checked for validity and balance afterwards."""
    gc.collect()
    start = time.perf_counter()
    result = assign(previous, members, partitions)
    seconds = time.perf_counter() - start
    plan = moves(previous, result, members)
    plan_seconds = time.perf_counter() - start - seconds
    per = Counter(result.values())
    if len(result) != len(partitions) or max(per.values()) - min(per.values()) > 1:
        raise AssertionError("assign() returned an invalid or unbalanced assignment")
    return Timing(seconds=seconds, plan_seconds=plan_seconds, moved=len(plan))


def measure(case: Case, base: dict[int, str], members: list[str]) -> list[Timing]:
    partitions = range(PARTITIONS)
    timings = []
    for i in range(ROUNDS):
        after = case.change(random.Random(SEED + i), members)
        timings.append(time_round({} if case.initial else base, after, partitions))
    return timings


def row(case: Case, timings: list[Timing]) -> str:
    secs = [t.seconds for t in timings]
    worst = max(secs)
    met = "yes" if worst <= TARGET else f"**NO**: {worst:.3f} s > {TARGET:g} s"
    cells = [
        case.title,
        str(len(timings)),
        f"{min(secs):.3f}",
        f"{statistics.median(secs):.3f}",
        f"{worst:.3f}",
        f"{statistics.median(t.plan_seconds for t in timings):.3f}",
        f"{statistics.median(t.moved for t in timings):,.0f}",
        f"<= {TARGET:g} s",
        met,
    ]
    return "| " + " | ".join(cells) + " |"


def render(rows: list[str]) -> str:
    return "\n".join(
        [
            "## ems assignor benchmark",
            "",
            f"- date: {dt.datetime.now(dt.UTC).isoformat(timespec='seconds')}",
            f"- uname -m: {platform.machine()}",
            f"- nproc: {len(os.sched_getaffinity(0))}",
            f"- Python: {platform.python_version()} ({platform.python_implementation()})",
            f"- {PARTITIONS:,} partitions over {MEMBERS:,} members; {ROUNDS} rounds per case, "
            "each with its own seeded membership change from the same balanced assignment",
            "- assign s: one `assign()` call; moves s: the handoff plan (`moves()`) over its "
            "result; moved: partitions in that plan (new owners, including orphans)",
            "",
            "| case | rounds | min assign s | median assign s | max assign s | median moves s "
            "| moved | target | met? |",
            "|---|---:|---:|---:|---:|---:|---:|---|---|",
            *rows,
            "",
        ]
    )


def run(cfg: BenchConfig, args: argparse.Namespace) -> int:
    """Time every case; 1 when a round missed the target. cfg and args are not used."""
    members = [f"member-{i:04d}" for i in range(MEMBERS)]
    base = assign({}, members, range(PARTITIONS))
    rows, missed = [], False
    for case in CASES:
        print(f"[bench] assignor: {case.title}", file=sys.stderr, flush=True)
        timings = measure(case, base, members)
        missed |= max(t.seconds for t in timings) > TARGET
        rows.append(row(case, timings))
    text = render(rows)
    print(text)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text)
    return 1 if missed else 0
