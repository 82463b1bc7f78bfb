"""What the consumer suite measured, and its markdown report."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from benchmarks.consumer_latency import Budget
from benchmarks.consumer_procs import slope_per_minute
from benchmarks.consumer_rebalance import Timing
from benchmarks.consumer_workers import BODY_BYTES, RAW_BATCH, SENDERS

RATE_TARGET = 15_000
#: ems's drain rate over raw's (medians of the alternating rounds): the performance
#: work's target for consume + ack.
VS_RAW_TARGET = 0.95
VS_KOMBU_TARGET = 25.0
#: Publish-to-handler latency at 1,000 msg/s: the performance work's target (it was
#: p50 <= 10 ms and p99 <= 50 ms before).
P50_TARGET_MS = 5.0
P99_TARGET_MS = 20.0
RSS_TARGET_MB = 100.0
#: Slope under this (MB/min) over the soak's window counts as no growth trend.
FLAT_MB_PER_MIN = 0.5


@dataclass(kw_only=True)
class EmsRun:
    rate: float = 0.0
    cpu_micros: float = 0.0
    rss_start: list[float] = field(default_factory=list)
    rss_drained: list[float] = field(default_factory=list)
    #: (seconds since the soak's paced stream began, RSS MB of each member); the first
    #: soak_warmup seconds are its warm-up, the rest its window.
    soak: list[tuple[float, list[float]]] = field(default_factory=list)
    soak_warmup: float = 0.0
    latencies: list[float] = field(default_factory=list)
    latency_sent: int = 0
    latency_rate: float = 0.0
    latency_behind: int = 0
    soak_rate: float = 0.0
    checks: list[str] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class DrainRound:
    """One drain of the whole backlog by one system (raw or ems), by a group of its own."""

    system: str
    rate: float
    cpu_micros: float
    checks: list[str] = field(default_factory=list)


@dataclass(kw_only=True)
class Results:
    messages: int
    soak: float
    fill_rate: float = 0.0
    #: The drain rounds, in the order they ran.
    drains: list[DrainRound] = field(default_factory=list)
    kombu_fill: float = 0.0
    kombu_rate: float = 0.0
    kombu_messages: int = 0
    ems: EmsRun = field(default_factory=EmsRun)
    rebalance: list[Timing] = field(default_factory=list)
    budgets: list[Budget] = field(default_factory=list)


def _yes(ok: bool, why: str = "") -> str:
    return "yes" if ok else f"**NO**{': ' + why if why else ''}"


def median_drain(rounds: list[DrainRound], system: str) -> tuple[float, float]:
    """(msg/s, client CPU us per message): the system's medians over its rounds."""
    mine = [d for d in rounds if d.system == system]
    if not mine:
        return 0.0, 0.0
    return (
        statistics.median(d.rate for d in mine),
        statistics.median(d.cpu_micros for d in mine),
    )


def throughput_table(r: Results) -> list[str]:
    ems, ems_cpu = median_drain(r.drains, "ems")
    raw, raw_cpu = median_drain(r.drains, "raw")
    vs_raw = ems / raw if raw else 0.0
    vs_kombu = ems / r.kombu_rate if r.kombu_rate else 0.0
    met = _yes(ems >= RATE_TARGET, f"{ems:,.0f} < {RATE_TARGET:,} msg/s")
    raw_met = _yes(vs_raw >= VS_RAW_TARGET, f"{vs_raw:.2f}x < {VS_RAW_TARGET:g}x")
    kombu_met = (
        "yes" if vs_kombu >= VS_KOMBU_TARGET else f"**NO**: {vs_kombu:.1f}x < {VS_KOMBU_TARGET:g}x"
    )
    each = "; ".join(f"{d.system} {d.rate:,.0f}" for d in r.drains)
    return [
        "| system | consume+ack msg/s | client CPU us/msg | ems/system | target | met? |",
        "|---|---:|---:|---:|---|---|",
        f"| ems (Consumer.poll + ack, 4 processes) | {ems:,.0f} | {ems_cpu:,.1f} | - "
        f"| >= {RATE_TARGET:,} msg/s | {met} |",
        f"| raw PyMySQL (same durable work) | {raw:,.0f} | {raw_cpu:,.1f} | "
        f"{vs_raw:.2f}x | ems >= {VS_RAW_TARGET:g}x raw | {raw_met} |",
        f"| kombu SQLAlchemy transport ({r.kombu_messages:,} msgs) | {r.kombu_rate:,.0f} | - | "
        f"{vs_kombu:.1f}x | ems >= {VS_KOMBU_TARGET:g}x kombu | {kombu_met} |",
        "",
        f"ems and raw: medians of {len(r.drains) // 2 or 1} drains each of the whole backlog, "
        "the order alternating, the server let settle before each (InnoDB's history list "
        f"short, its dirty pages no longer falling); in the order run, msg/s: {each}.",
    ]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def latency_table(run: EmsRun) -> list[str]:
    ms = [v * 1000 for v in run.latencies]
    p50, p95, p99 = (_percentile(ms, q) for q in (0.50, 0.95, 0.99))
    peak = max(ms) if ms else float("nan")
    return [
        f"{run.latency_sent:,} messages sent at {run.latency_rate:,.0f} msg/s by "
        f"{SENDERS} threads sharing one Producer "
        f"({run.latency_behind:,} sends more than 10 ms behind schedule); "
        f"{len(ms):,} handled.",
        "",
        "| p50 ms | p95 ms | p99 ms | max ms | target | met? |",
        "|---:|---:|---:|---:|---|---|",
        f"| {p50:.1f} | {p95:.1f} | {p99:.1f} | {peak:.1f} | p50 <= {P50_TARGET_MS:g} ms, "
        f"p99 <= {P99_TARGET_MS:g} ms | "
        f"{_yes(p50 <= P50_TARGET_MS and p99 <= P99_TARGET_MS and len(ms) == run.latency_sent)} |",
    ]


def budget_table(budgets: list[Budget]) -> list[str]:
    """Latency, and the CPU per message behind it, of each group size and system."""
    lines = [
        "| members | system | handler p50 / p99 ms | send p50 ms | messages per fetch "
        "| cores busy | CPU us per message: server / Redis / producer / members "
        "| members by thread: main / wake-ups / ack writer / other |",
        "|---:|---|---|---:|---:|---:|---|---|",
    ]
    for b in sorted(budgets, key=lambda b: (b.members, b.system != "ems")):
        ms = [v * 1000 for v in b.latencies]
        p50, p99 = _percentile(ms, 0.50), _percentile(ms, 0.99)
        per = 1e6 / max(1, b.sent)
        cpu = " / ".join(
            f"{b.cpu[k] * per:,.0f}" if k in b.cpu else "-"
            for k in ("server", "Redis", "producer", "members")
        )
        threads = "-"
        if b.threads:
            threads = " / ".join(
                f"{b.threads.get(k, 0.0) * per:,.0f}"
                for k in ("main", "wake-ups", "ack writer", "other")
            )
        per_fetch = b.handled / b.fetches if b.fetches else float("nan")
        lines.append(
            f"| {b.members} | {b.system} | {p50:.1f} / {p99:.1f} | {b.send_p50 * 1000:.1f} | "
            f"{per_fetch:.1f} | {b.busy:.0%} | {cpu} | {threads} |"
        )
    return lines


def rebalance_table(timings: list[Timing]) -> list[str]:
    lines = [
        "| event | partitions moved | owned after s | messages flow after s | target | met? |",
        "|---|---:|---:|---:|---|---|",
    ]
    for t in timings:
        lines.append(
            f"| {t.case} | {t.partitions} | {t.owned:.2f} | {t.flowing:.2f} | "
            f"<= {t.target:g} s | {_yes(t.met)} |"
        )
    return lines


def soak_series(run: EmsRun, member: int) -> tuple[list[float], list[tuple[float, float]]]:
    """A member's RSS over the soak: the warm-up's values, and the window's (seconds, MB)
    samples, whose trend is judged."""
    warm = [values[member] for t, values in run.soak if t < run.soak_warmup]
    window = [(t, values[member]) for t, values in run.soak if t >= run.soak_warmup]
    return warm, window


def memory_table(run: EmsRun, soak: float) -> list[str]:
    lines = [
        "| member | start MB | after drain MB | warm-up first MB | soak first MB "
        "| soak last MB | max MB | slope MB/min | met? |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for i in range(len(run.rss_start)):
        warm, series = soak_series(run, i)
        values = [v for _, v in series]
        peak = max([run.rss_start[i], run.rss_drained[i], *warm, *values])
        slope = slope_per_minute(series)
        ok = peak <= RSS_TARGET_MB and slope < FLAT_MB_PER_MIN
        first_warm = f"{warm[0]:.1f}" if warm else "-"
        lines.append(
            f"| {i} | {run.rss_start[i]:.1f} | {run.rss_drained[i]:.1f} | {first_warm} | "
            f"{values[0]:.1f} | {values[-1]:.1f} | {peak:.1f} | {slope:+.3f} | {_yes(ok)} |"
        )
    windowed = sum(t >= run.soak_warmup for t, _ in run.soak)
    lines += [
        "",
        f"Paced producer at {run.soak_rate:,.0f} msg/s for a {run.soak_warmup:g} s warm-up, "
        f"then a {soak:g} s soak ({windowed} samples); target <= {RSS_TARGET_MB:g} MB "
        f"throughout and no growth trend over the soak (least-squares slope < "
        f"{FLAT_MB_PER_MIN:g} MB/min). The warm-up, in which the members' allocator pools "
        "take their working size, is left out of the slope, not of the maximum.",
    ]
    return lines


def render(env: list[str], r: Results) -> str:
    method = [
        f"- backlog: {r.messages:,} unkeyed messages of {BODY_BYTES} bytes on a 16-partition "
        f"topic, filled with Producer.send_batch at {r.fill_rate:,.0f} msg/s",
        '- ems: a fresh cluster group (start="earliest") of 4 processes; each waits for its '
        "share of 4 partitions, then all drain behind a barrier with poll() + a no-op "
        "handler + ack(); the window runs from the barrier to the last ack",
        f"- raw: 4 PyMySQL processes on 4 partitions each: SELECT of an offset range LIMIT "
        f"{RAW_BATCH}, the log's start rows as one INSERT ... SELECT of that range (the "
        "fastest known shape; ems writes them so too), one transaction with the "
        "log UPDATE and the cursor UPDATE; same group tables, same backlog",
        f"- kombu: 4 processes publish for the timed window ({r.kombu_fill:,.0f} msg/s), then "
        "4 processes basic_get + ack until the queue is empty",
    ]
    checks = [c for d in r.drains for c in d.checks] + r.ems.checks or [
        "ems: every stored message logged exactly once as done, cursors at the high "
        "watermark, in each drain"
    ]
    return "\n".join(
        [
            "## ems consumer benchmark",
            "",
            *env,
            *method,
            "",
            "### Throughput",
            "",
            *throughput_table(r),
            "",
            "### Publish -> handler latency (1 producer process paced to 1,000 msg/s, 4 members)",
            "",
            *latency_table(r.ems),
            "",
            "### Where the latency goes (the same paced producer, 10 s, groups of 1 and 4)",
            "",
            "A fetch costs a read, and its acks one transaction (with the batch's start "
            "rows), whatever it carries; a member hears the wake-ups of the partitions it holds. "
            "CPU is per message sent, over the window from the first send until the group "
            "had acked them all; the server and Redis columns are their whole processes. "
            "The hand-written floor (benchmarks/latency_floor.py) is the same pipeline "
            "without ems, run just after it: per message one INCRBY, one INSERT and ems's "
            "wake-up write from 8 paced threads with a connection each; members with fixed "
            "shares of the partitions, subscribed to theirs, that read what a wake-up "
            "announced in one statement and log it as done and move their cursors in one "
            "transaction.",
            "",
            *budget_table(r.budgets),
            "",
            "### Rebalance (16 partitions, paced producer at 1,000 msg/s, lease_ttl=10, "
            "renew_every=3)",
            "",
            *rebalance_table(r.rebalance),
            "",
            "### Memory (VmRSS of the 4 drain members)",
            "",
            *memory_table(r.ems, r.soak),
            "",
            "Checks:",
            *[f"- {c}" for c in checks],
            "",
        ]
    )
