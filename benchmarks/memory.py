"""The memory suite: a member's RSS while it drains a backlog.

1. Small messages: --memory-rows messages (default 1,000,000) of 256 bytes over 16
   partitions, generated in the server (INSERT ... SELECT FROM the sequence engine) into a
   database of its own, dropped and filled afresh on every run. One cluster group of one
   member process with the default options (batch_size 500, max_batch_bytes 4 MiB) drains
   all of it from offset 0, in the push form, with a handler that only counts
   (benchmarks/aio_consume.Tally).
2. Large messages: LARGE_ROWS messages of LARGE_BODY bytes, drained once with the default
   options and once with max_batch_bytes at its maximum (1 GiB: the count bound alone, what
   a member did before the byte bound).

Per drain: the member's VmRSS once it holds its partitions (before the first delivery),
its largest VmRSS sampled every 0.2 s while it drains, and its VmHWM (the kernel's
high-water mark over the process's life, which no sample misses); the drain rate; and a
check that every cursor ends at its partition's end. The target, from issue 21, is
computed and reported, never asserted: member RSS under 100 MB while draining 1,000,000
messages of 256 bytes with the default options.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.aio_consume import Tally
from benchmarks.consumer import drop_databases
from benchmarks.consumer_procs import Fleet, rss_mb
from benchmarks.consumer_workers import balanced_share, stop_when
from benchmarks.harness import PARTITIONS, BenchConfig, mysql_connect, on_database, query
from benchmarks.report import environment
from benchmarks.scale_drain import RssSampler
from ems import Consumer, TopicAdmin
from ems.store import migrate
from ems.validation import DEFAULT_BATCH_BYTES, MAX_BATCH_BYTES

RESULTS = Path(__file__).resolve().parent / "results" / "memory-latest.md"
DATABASE = "ems_bench_memory"
SMALL_TOPIC = "bench.memory.small"
LARGE_TOPIC = "bench.memory.large"
SMALL_BODY = 256
LARGE_ROWS = 2_000
LARGE_BODY = 256 * 1024
#: Rows per INSERT ... SELECT of the fill (about 128 MB of bodies either way).
_CHUNK = {SMALL_BODY: 500_000, LARGE_BODY: 500}
RSS_GOAL_MB = 100.0
MB = 1024 * 1024

_FILL = (
    "INSERT INTO message (topic_id, partition_no, offset_no, body) "
    "SELECT %s, (seq + %s) %% %s, (seq + %s) DIV %s, REPEAT('x', %s) FROM seq_0_to_{last}"
)


@dataclass(frozen=True, kw_only=True)
class Case:
    label: str
    topic: str
    rows: int
    body: int
    #: Consumer options besides the defaults.
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class MemberSpec:
    cfg: BenchConfig
    case: Case
    group: str


@dataclass(frozen=True, kw_only=True)
class Drain:
    case: Case
    handled: int
    seconds: float
    rss_joined: float  # MB
    rss_peak: float  # MB, the largest sample while draining
    hwm: float  # MB, VmHWM once drained
    checks: list[str]

    @property
    def rate(self) -> float:
        return self.handled / self.seconds if self.seconds > 0 else 0.0


def log(message: str) -> None:
    print(f"[bench memory] {message}", file=sys.stderr, flush=True)


def cases(rows: int) -> list[Case]:
    unbounded = {"max_batch_bytes": MAX_BATCH_BYTES}
    return [
        Case(label=f"{rows:,} x 256 B", topic=SMALL_TOPIC, rows=rows, body=SMALL_BODY),
        Case(
            label=f"{LARGE_ROWS:,} x 256 KiB", topic=LARGE_TOPIC, rows=LARGE_ROWS, body=LARGE_BODY
        ),
        Case(
            label=f"{LARGE_ROWS:,} x 256 KiB",
            topic=LARGE_TOPIC,
            rows=LARGE_ROWS,
            body=LARGE_BODY,
            options=unbounded,
        ),
    ]


def run(cfg: BenchConfig, args: argparse.Namespace) -> int:
    cfg = on_database(cfg, DATABASE)
    drop_databases(cfg, DATABASE)
    migrate.create_database(cfg.settings)
    migrate.upgrade(cfg.settings)
    env = environment(cfg)
    todo = cases(args.memory_rows)
    drains = []
    try:
        for topic, rows, body in sorted({(c.topic, c.rows, c.body) for c in todo}):
            log(f"filling {rows:,} messages of {body:,} bytes into {topic}")
            fill(cfg, topic, rows, body)
        for i, case in enumerate(todo):
            log(f"draining {case.label} with {options_text(case)}")
            d = drain(cfg, case, f"memory-{i}")
            log(f"{d.handled:,} in {d.seconds:.1f} s; RSS {d.rss_joined:.0f} -> {d.hwm:.0f} MB")
            drains.append(d)
    finally:
        drop_databases(cfg, DATABASE)  # a gigabyte of generated rows: not left behind
    text = render(env, drains)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(text)
    print(text)
    return 1 if any(d.checks for d in drains) else 0


def fill(cfg: BenchConfig, topic: str, rows: int, body: int) -> None:
    """A topic of PARTITIONS partitions: row i at partition i % PARTITIONS."""
    admin = TopicAdmin(cfg.settings)
    try:
        info = admin.create(topic, PARTITIONS)
    finally:
        admin.close()
    conn = mysql_connect(cfg.settings.database_url)
    try:
        with conn.cursor() as cursor:
            for base in range(0, rows, _CHUNK[body]):
                n = min(_CHUNK[body], rows - base)
                args = (info.id, base, PARTITIONS, base, PARTITIONS, body)
                cursor.execute(_FILL.format(last=n - 1), args)
    finally:
        conn.close()


def member(events: Any, index: int, spec: MemberSpec, stop: Any) -> None:
    """The group's only member: join, take every partition, report its RSS, drain."""
    tally = Tally(events, index)
    consumer = Consumer(
        spec.group,
        spec.case.topic,
        tally,
        settings=spec.cfg.settings,
        start="earliest",
        **spec.case.options,
    )
    consumer.start()
    balanced_share(consumer, 1)
    events.put(("ready", index, (os.getpid(), rss_mb(os.getpid()))))
    tally.start(spec.case.rows)
    threading.Thread(target=stop_when, args=(stop, consumer.stop), daemon=True).start()
    consumer.run(handle_signals=False)
    events.put(("done", index, tally.handled))


def drain(cfg: BenchConfig, case: Case, group: str) -> Drain:
    fleet = Fleet()
    try:
        fleet.spawn(0, member, MemberSpec(cfg=cfg, case=case, group=group), fleet.stop)
        pid, joined = fleet.wait("ready", [0], 120)[0]
        sampler = RssSampler([pid])
        try:
            first, last, handled, _ = fleet.wait("drained", [0], 1800)[0]
        finally:
            peak = sampler.close()
        hwm = hwm_mb(pid)
        fleet.stop.value = 1
        fleet.wait("done", [0], 60)
    finally:
        fleet.close()
    return Drain(
        case=case,
        handled=handled,
        seconds=last - first,
        rss_joined=joined,
        rss_peak=max(peak, joined),
        hwm=hwm,
        checks=check_cursors(cfg, case, group, handled),
    )


def hwm_mb(pid: int) -> float:
    """VmHWM (peak resident set size) of a process in MB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def check_cursors(cfg: BenchConfig, case: Case, group: str, handled: int) -> list[str]:
    ((committed,),) = query(
        cfg.settings.database_url,
        "SELECT SUM(o.committed_offset) FROM group_offset o "
        "JOIN consumer_group g ON g.id = o.group_id WHERE g.name = %s",
        (group,),
    )
    checks = []
    if int(committed or 0) != case.rows:
        checks.append(f"CHECK {group}: cursors sum to {committed}, not {case.rows:,}")
    if handled != case.rows:
        checks.append(f"CHECK {group}: handled {handled:,} of {case.rows:,}")
    return checks


# -- report ------------------------------------------------------------------------------


def options_text(case: Case) -> str:
    size = case.options.get("max_batch_bytes", DEFAULT_BATCH_BYTES)
    default = "" if case.options else " (defaults)"
    return f"batch_size 500, max_batch_bytes {size // MB:,} MiB{default}"


def render(env: list[str], drains: list[Drain]) -> str:
    lines = [
        "# Memory benchmark: a member draining a backlog (latest run)",
        "",
        *env,
        "",
        "### Drain",
        "",
        f"One cluster group of one member process holding all {PARTITIONS} partitions "
        "drains the whole backlog from offset 0 (push form, a handler that only counts). "
        "RSS joined: the member's VmRSS once it holds its partitions, before the first "
        "delivery; sampled peak: its largest VmRSS sampled every 0.2 s while it drains; "
        "VmHWM: the kernel's high-water mark of its RSS over its whole life.",
        "",
        "| backlog | options | deliveries | drain s | deliveries/s | RSS joined MB "
        "| sampled peak MB | VmHWM MB |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for d in drains:
        lines.append(
            f"| {d.case.label} | {options_text(d.case)} | {d.handled:,} | {d.seconds:.1f} "
            f"| {d.rate:,.0f} | {d.rss_joined:.0f} | {d.rss_peak:.0f} | {d.hwm:.0f} |"
        )
    small = drains[0]
    met = "met" if small.hwm < RSS_GOAL_MB else "not met"
    checks = [c for d in drains for c in d.checks]
    lines += [
        "",
        f"Target (issue 21): member RSS under {RSS_GOAL_MB:.0f} MB while draining a "
        f"backlog of {small.case.label} messages with the default options: {met} "
        f"(VmHWM {small.hwm:.0f} MB).",
        "",
        "Checks:"
        if checks
        else "Checks: every drain handled its backlog exactly and left "
        "every cursor at its partition's end.",
        *([""] + [f"- {c}" for c in checks] if checks else []),
        "",
    ]
    return "\n".join(lines)
