"""Targets, the markdown table, the environment header and the profile summary."""

from __future__ import annotations

import datetime as dt
import os
import platform
import pstats
import sysconfig
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path

import redis

from benchmarks.harness import BenchConfig, query
from benchmarks.pairing import Ratio, paired

SYSTEMS = ("ems", "raw+redis+guard", "raw+redis", "raw", "kombu")
#: Every publish row against the design's floor (raw+redis): ems's rate at least this
#: share of it, its client CPU per message at most this multiple.
FLOOR_RATE_TARGET = 0.95
FLOOR_CPU_TARGET = 1.2


@dataclass(frozen=True, kw_only=True)
class Target:
    """Minimum ems throughput, absolute and relative to the other systems."""

    vs_raw: float | None = None
    vs_kombu: float | None = None
    rate: float | None = None

    def describe(self) -> str:
        parts = []
        if self.rate is not None:
            parts.append(f">= {self.rate:,.0f} msg/s")
        if self.vs_raw is not None:
            parts.append(f">= {self.vs_raw:g}x raw")
        if self.vs_kombu is not None:
            parts.append(f">= {self.vs_kombu:g}x kombu")
        return ", ".join(parts) or "-"

    def misses(self, rates: dict[str, float | None]) -> list[str]:
        """Why the target is missed; [] when met. A missing measurement is a miss."""
        ems, raw, kombu = rates.get("ems"), rates.get("raw"), rates.get("kombu")
        if ems is None:
            return ["ems not measured"]
        out = []
        if self.rate is not None and ems < self.rate:
            out.append(f"{ems:,.0f} < {self.rate:,.0f} msg/s")
        for name, other, floor in (("raw", raw, self.vs_raw), ("kombu", kombu, self.vs_kombu)):
            if floor is None:
                continue
            if not other:
                out.append(f"{name} not measured")
            elif ems / other < floor:
                out.append(f"ems/{name} {ems / other:.2f} < {floor:g}")
        return out


@dataclass(kw_only=True)
class Row:
    case: str
    target: Target | None
    rates: dict[str, float | None] = field(default_factory=dict)  # medians of the rounds
    cpu: dict[str, float] = field(default_factory=dict)  # client CPU us per message
    errors: dict[str, str] = field(default_factory=dict)
    #: Each floor system's msg/s and client CPU per message in every round, in the order
    #: of the rounds: what the floor table pairs (benchmarks.pairing).
    rounds: dict[str, list[float]] = field(default_factory=dict)
    cpu_rounds: dict[str, list[float]] = field(default_factory=dict)

    def cells(self) -> list[str]:
        rates = [self._rate(s) for s in SYSTEMS]
        ems, _, design, raw, kombu = (self.rates.get(s) for s in SYSTEMS)
        return [
            self.case,
            *rates,
            _ratio(ems, raw),
            _ratio(design, raw),
            _ratio(ems, design),
            _ratio(ems, kombu),
            self.target.describe() if self.target else "- (reference)",
            self._met(),
        ]

    def _rate(self, system: str) -> str:
        if system in self.errors:
            return "FAILED"
        value = self.rates.get(system)
        return "-" if value is None else f"{value:,.0f}"

    def _met(self) -> str:
        if self.target is None:
            return "-"
        misses = self.target.misses(self.rates)
        return "yes" if not misses else "**NO**: " + "; ".join(misses)


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if not a or not b else f"{a / b:.2f}x"


def table(rows: list[Row]) -> str:
    head = [
        "case",
        "ems msg/s",
        "raw+redis+guard msg/s",
        "raw+redis msg/s",
        "raw msg/s",
        "kombu msg/s",
        "ems/raw",
        "raw+redis/raw",
        "ems/raw+redis",
        "ems/kombu",
        "target",
        "met?",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r.cells()) + " |" for r in rows]
    return "\n".join(lines)


def cpu_table(rows: list[Row]) -> str:
    """Client-side CPU per message: the other half of the story on a 2-core host, where
    producers, MariaDB and Redis share the same cores."""
    lines = [
        "| case | ems client CPU us/msg | raw+redis+guard | raw+redis | raw | kombu |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        cells = [f"{row.cpu[s]:,.1f}" if s in row.cpu else "-" for s in SYSTEMS]
        lines.append(f"| {row.case} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def heading(title: str, names: list[str], figures: list[str]) -> list[str]:
    """A section's title and its table's head: name columns, then right-aligned figures."""
    return [
        f"### {title}",
        "",
        "| " + " | ".join([*names, *figures]) + " |",
        "|" + "---|" * len(names) + "---:|" * len(figures),
    ]


#: The columns of ems against the design's floor (floor_cells), after the row's name.
FLOOR_HEAD = (
    "ems / raw+redis: msg/s | client CPU | ems / raw+redis+guard: msg/s | client CPU "
    "| the guard (raw+redis+guard / raw+redis): msg/s"
)
#: What those columns mean, for the text under a table of them.
FLOOR_COLUMNS = (
    "msg/s columns: the first system's rate over the second's (1.00x = as fast); client "
    "CPU columns: the first's CPU per message over the second's (1.00x = as cheap). Each is "
    "the median of the rounds' ratios, the two systems' runs of a round set side by side "
    "(the host runs in slow and fast phases longer than a round), and in brackets the "
    "rounds' lowest and highest ratio."
)


#: A system's figure in each round, in the order of the rounds.
Rounds = Mapping[str, Sequence[float]]
_EMS, _GUARD, _FLOOR = "ems", "raw+redis+guard", "raw+redis"


def floor_ratios(rate: Rounds, cpu: Rounds) -> dict[str, Ratio | None]:
    """The FLOOR_HEAD comparisons of one operation, each paired round by round
    (benchmarks.pairing) from the systems' msg/s and client CPU per message in every
    round: ems against raw+redis, ems against raw+redis+guard (what ems's own layers
    cost), and raw+redis+guard against raw+redis (what the guard costs)."""
    no: Sequence[float] = ()
    return {
        "rate": paired(rate.get(_EMS, no), rate.get(_FLOOR, no)),
        "cpu": paired(cpu.get(_EMS, no), cpu.get(_FLOOR, no)),
        "layers rate": paired(rate.get(_EMS, no), rate.get(_GUARD, no)),
        "layers cpu": paired(cpu.get(_EMS, no), cpu.get(_GUARD, no)),
        "guard rate": paired(rate.get(_GUARD, no), rate.get(_FLOOR, no)),
        "guard cpu": paired(cpu.get(_GUARD, no), cpu.get(_FLOOR, no)),
    }


def floor_cells(ratios: Mapping[str, Ratio | None]) -> list[str]:
    """The FLOOR_HEAD cells of floor_ratios: each the median of the rounds' ratios, with
    their range."""
    names = ("rate", "cpu", "layers rate", "layers cpu", "guard rate")
    return [_text(ratios[name]) for name in names]


def _text(ratio: Ratio | None) -> str:
    return "-" if ratio is None else ratio.with_range()


def floor_table(rows: list[Row]) -> list[str]:
    """Each row's ems against the design's floor (raw+redis), judged against the floor
    targets, and split: ems against the floor with ems's own guarded statement
    (raw+redis+guard: what ems's own layers cost) and that against raw+redis (what the
    guard costs, which the design keeps). Every ratio pairs the rounds' runs."""
    lines = [
        f"| case | {FLOOR_HEAD} | {LAYERS_HEAD} | target | met? |",
        "|---|---:|---:|---:|---:|---:|---|---|---|",
    ]
    target = f">= {FLOOR_RATE_TARGET:g}x msg/s, <= {FLOOR_CPU_TARGET:g}x client CPU"
    for row in rows:
        ratios = floor_ratios(row.rounds, row.cpu_rounds)
        misses = floor_misses(ratios["rate"], ratios["cpu"])
        met = "yes" if not misses else "**NO**: " + "; ".join(misses)
        cells = " | ".join(floor_cells(ratios))
        need = "; ".join(layers_needed(ratios)) or "-"
        lines.append(f"| {row.case} | {cells} | {need} | {target} | {met} |")
    return lines


#: The column of what ems's own layers would have to reach for a row's floor targets.
LAYERS_HEAD = "for the targets, ems / raw+redis+guard would need"


def layers_needed(ratios: Mapping[str, Ratio | None]) -> list[str]:
    """For a row short of a floor target: the ratio ems's own layers (ems against
    raw+redis+guard, which sends ems's statement with nothing around it) would have to
    reach, the guard's cost taken as measured, next to what they reach. Where that is
    beyond 1.00x, the guard alone already misses the target: ems could meet it only by
    being faster, or cheaper, than its own statement sent bare. [] when the row meets
    both targets or was not measured in full."""
    out: list[str] = []
    ems, layers, guard = ratios["rate"], ratios["layers rate"], ratios["guard rate"]
    if ems and layers and guard and ems.median < FLOOR_RATE_TARGET:
        need = FLOOR_RATE_TARGET / guard.median
        beyond = ", beyond the guard alone" if need > 1 else ""
        out.append(f"msg/s >= {need:.2f}x (has {layers}{beyond})")
    ems, layers, guard = ratios["cpu"], ratios["layers cpu"], ratios["guard cpu"]
    if ems and layers and guard and ems.median > FLOOR_CPU_TARGET:
        need = FLOOR_CPU_TARGET / guard.median
        beyond = ", beyond the guard alone" if need < 1 else ""
        out.append(f"client CPU <= {need:.2f}x (has {layers}{beyond})")
    return out


def floor_misses(rate: Ratio | None, cpu: Ratio | None) -> list[str]:
    """Why ems misses the floor targets (ems against raw+redis, msg/s and client CPU per
    message, paired by round); [] when met. A missing measurement is a miss."""
    if rate is None or cpu is None:
        return ["not measured"]
    out = []
    if rate.median < FLOOR_RATE_TARGET:
        out.append(f"msg/s {rate} < {FLOOR_RATE_TARGET:g}x")
    if cpu.median > FLOOR_CPU_TARGET:
        out.append(f"client CPU {cpu} > {FLOOR_CPU_TARGET:g}x")
    return out


def environment(cfg: BenchConfig) -> list[str]:
    ((server, flush, sync_binlog, log_bin),) = query(
        cfg.settings.database_url,
        "SELECT VERSION(), @@innodb_flush_log_at_trx_commit, @@sync_binlog, @@log_bin",
    )
    client = redis.Redis.from_url(cfg.settings.redis_url)
    try:
        redis_version = client.info("server").get("redis_version", "?")
    finally:
        client.close()
    ((busy,),) = query(
        cfg.settings.database_url,
        "SELECT COUNT(*) FROM information_schema.processlist "
        "WHERE command = 'Query' AND id <> CONNECTION_ID()",
    )
    libs = ", ".join(f"{p} {version(p)}" for p in ("sqlalchemy", "pymysql", "redis", "kombu"))
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return [
        f"- date: {dt.datetime.now(dt.UTC).isoformat(timespec='seconds')}",
        f"- uname -m: {platform.machine()}",
        f"- nproc: {len(os.sched_getaffinity(0))}",
        f"- MariaDB: {server} (innodb_flush_log_at_trx_commit={flush}, "
        f"sync_binlog={sync_binlog}, log_bin={log_bin})",
        f"- Redis: {redis_version}",
        f"- Python: {platform.python_version()} ({libs})",
        f"- at start: load average {load}; other queries running on the server: {busy} "
        "(a shared host adds noise; compare columns of one run, not across runs)",
    ]


# -- profile -----------------------------------------------------------------------------

_PREFIXES = (sysconfig.get_paths()["purelib"] + "/", str(Path(__file__).resolve().parents[1]) + "/")


def _where(func: tuple[str, int, str]) -> str:
    path, line, name = func
    if path == "~":
        return name
    for prefix in _PREFIXES:
        path = path.removeprefix(prefix)
    return f"{path}:{line}({name})"


_SOCKET = "socket send/recv (waiting on MySQL/Redis)"


def _layer(func: tuple[str, int, str]) -> str:
    path, _, name = func
    if path == "~":
        io = ("recv" in name or "send" in name or "poll" in name) and "socket" in name
        return _SOCKET if io else "builtins"
    for package in ("ems", "sqlalchemy", "pymysql", "redis"):
        if f"/{package}/" in path:
            return package
    return "stdlib/other"


def profile_summary(stats: pstats.Stats, title: str, messages: int, top: int = 8) -> list[str]:
    """Top functions by tottime, and tottime summed by layer (ems, drivers, socket I/O).
    Socket send/recv is mostly waiting on the servers, so it is reported as a layer and
    left out of the ranking, which then shows where the client's own time goes."""
    raw = stats.stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in raw.values())
    own = [kv for kv in raw.items() if _layer(kv[0]) != _SOCKET]
    ranked = sorted(own, key=lambda kv: kv[1][2], reverse=True)[:top]
    lines = [
        f"{title}: {total:.2f} s, {total / messages * 1e6:,.1f} us per message under the "
        f"profiler. Top {top} functions by tottime (socket send/recv excluded, see layers):",
        "",
        "| tottime s | share | calls | cumtime s | function |",
        "|---:|---:|---:|---:|---|",
    ]
    for func, (_, ncalls, tt, ct, _) in ranked:
        lines.append(f"| {tt:.3f} | {tt / total:.0%} | {ncalls:,} | {ct:.3f} | `{_where(func)}` |")
    layers: dict[str, float] = defaultdict(float)
    for func, value in raw.items():
        layers[_layer(func)] += value[2]
    shares = sorted(layers.items(), key=lambda kv: kv[1], reverse=True)
    lines += ["", "tottime by layer: " + ", ".join(f"{k} {v / total:.0%}" for k, v in shares)]
    steps = {
        name: ct
        for (path, _, name), (_, _, _, ct, _) in raw.items()
        if path.endswith(
            ("ems/producer/producer.py", "ems/offsets/allocators.py", "ems/store/messages.py")
        )
    }
    parts = [f"{label} {steps[name] / total:.0%}" for name, label in _STEPS if name in steps]
    if parts:
        lines.append("cumulative by ems step: " + ", ".join(parts))
    return lines


#: ems functions whose cumulative time splits a publish into its steps.
_STEPS = (
    ("_prepare", "validate+partition (_prepare)"),
    ("allocate", "Redis offsets (allocate)"),
    ("insert", "MySQL INSERT (MessageStore.insert)"),
)
