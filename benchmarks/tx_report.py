"""The tx suite's figures and page: pure functions of what its runs measured.

Every workload measures its variants in rounds, alternating their order, so the drift of
a shared machine's speed hits them alike: a rate is its median over the rounds, and a
ratio is the median of the rounds' own ratios (each variant's round against the round of
the other beside it), given with their range. Latencies are pooled over the rounds.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from benchmarks.purge import percentile


@dataclass(frozen=True, kw_only=True)
class Window:
    """One timed run of one variant in one fresh process."""

    calls: int  # service transactions (or send_batch calls, or relay moves)
    messages: int
    warm: int  # messages sent before the window, still stored
    elapsed: float
    cpu: float  # client CPU seconds: the window, and for ems the relay's drain after it
    backlog: int = 0  # outbox rows not yet relayed when the window closed (ems)
    drain: float = 0.0  # seconds until the relay had moved them

    @property
    def rate(self) -> float:
        return self.calls / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def message_rate(self) -> float:
        return self.messages / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def cpu_per_call(self) -> float:
        """Client CPU microseconds per call."""
        return self.cpu / self.calls * 1e6 if self.calls else 0.0

    @property
    def cpu_per_message(self) -> float:
        return self.cpu / self.messages * 1e6 if self.messages else 0.0


def median_of(windows: Sequence[Window], measure: str) -> float:
    """The median over the rounds of a Window property (0 when nothing was measured)."""
    return statistics.median(getattr(w, measure) for w in windows) if windows else 0.0


def round_ratios(mine: Sequence[Window], other: Sequence[Window], measure: str) -> list[float]:
    """mine's measure over other's, round by round (rounds where other had none left out)."""
    return [
        getattr(a, measure) / getattr(b, measure)
        for a, b in zip(mine, other, strict=True)
        if getattr(b, measure)
    ]


def ratio_cell(ratios: Sequence[float]) -> str:
    """'0.62x (0.58-0.66)': the median of the rounds' ratios and their range (none
    when they all agree)."""
    if not ratios:
        return "-"
    low, high = f"{min(ratios):.2f}", f"{max(ratios):.2f}"
    median = f"{statistics.median(ratios):.2f}x"
    return median if low == high else f"{median} ({low}-{high})"


# -- throughput ----------------------------------------------------------------------------

#: variant -> its windows, one per round, in round order.
Rounds = Mapping[str, Sequence[Window]]

#: (variant, column title) in table order.
COLUMNS = (
    ("ems", "(a) ems transactional send"),
    ("outbox", "(b) outbox row in the same transaction"),
    ("dual", "(c) dual write: commit, then send"),
)


def throughput_rows(workloads: Mapping[str, Rounds]) -> list[str]:
    """Service transactions per second and client CPU per transaction, by variant, with
    the ratios a/b and a/c (rates: higher is faster; CPU: higher costs more)."""
    head = " | ".join(title for _, title in COLUMNS)
    lines = [
        f"| service transaction | {head} | a/b | a/c |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for title, rounds in workloads.items():
        rates = [f"{median_of(rounds.get(v, ()), 'rate'):,.0f}" for v, _ in COLUMNS]
        lines.append(f"| {title} (transactions/s) | " + " | ".join(rates) + _ratios(rounds, "rate"))
    for title, rounds in workloads.items():
        cpus = [f"{median_of(rounds.get(v, ()), 'cpu_per_call'):,.0f}" for v, _ in COLUMNS]
        lines.append(
            f"| {title} (client CPU us/transaction) | "
            + " | ".join(cpus)
            + _ratios(rounds, "cpu_per_call")
        )
    return lines


def _ratios(rounds: Rounds, measure: str) -> str:
    ems = rounds.get("ems", ())
    cells = [ratio_cell(round_ratios(ems, rounds.get(v, ()), measure)) for v in ("outbox", "dual")]
    return " | " + " | ".join(cells) + " |"


def relay_lines(workloads: Mapping[str, Rounds]) -> list[str]:
    """Whether the relay kept up with (a): what the outbox held when the windows closed."""
    parts = []
    for title, rounds in workloads.items():
        ems = rounds.get("ems", ())
        if ems:
            backlog = statistics.median(w.backlog for w in ems)
            drain = statistics.median(w.drain for w in ems) * 1000
            parts.append(
                f"{title}: {backlog:,.0f} messages not yet relayed, moved within {drain:,.0f} ms"
            )
    if not parts:
        return []
    return [
        "When the windows of (a) closed, the producer's relay had left in the outbox (medians "
        "over the rounds; the time and CPU of that last move are counted in (a)): "
        + "; ".join(parts)
        + "."
    ]


# -- latency --------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class LatencyRun:
    """One run of a paced sender: per message (by sequence number) when its commit
    returned to the caller, when the consumer's handler got it and when it was stored
    (message.created_at, the database clock on the same machine)."""

    committed: dict[int, float]
    delivered: dict[int, float]
    stored: dict[int, float] = field(default_factory=dict)
    behind: int = 0  # sends that started more than 10 ms late
    held: float | None = None  # seconds another transaction stayed open meanwhile


def delays(runs: Sequence[LatencyRun], to: str) -> list[float]:
    """Seconds from each commit to its message's `to` time ("delivered" or "stored")."""
    found = []
    for run in runs:
        times = getattr(run, to)
        found += [times[seq] - at for seq, at in run.committed.items() if seq in times]
    return found


def undelivered(runs: Sequence[LatencyRun]) -> int:
    return sum(len(set(run.committed) - set(run.delivered)) for run in runs)


def _ms(values: list[float], q: float) -> str:
    return f"{percentile(values, q) * 1000:,.1f}" if values else "-"


def _max_ms(values: list[float]) -> str:
    return f"{max(values) * 1000:,.1f}" if values else "-"


@dataclass(frozen=True, kw_only=True)
class Hole:
    """What the alternative design's run left at the offset it held, and what the
    readers did meanwhile."""

    offset: int = -1
    tombstone: bool | None = None  # the row at the offset: a tombstone, or the message
    tombstones: int = 0  # tombstones in the partition
    lock_wait: float = 0.0  # seconds a tombstone INSERT was seen waiting on a lock


@dataclass(frozen=True, kw_only=True)
class LatencyCase:
    title: str
    runs: Sequence[LatencyRun]
    stored: bool = True  # the relay stores the message after the commit: worth showing


def latency_rows(cases: Sequence[LatencyCase]) -> list[str]:
    """p50/p99 from commit to stored (transactional sends) and to delivered, in ms."""
    lines = [
        "| message | messages | commit -> stored p50 ms | p99 ms | commit -> delivered p50 ms "
        "| p99 ms | max ms |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for case in cases:
        stored = delays(case.runs, "stored") if case.stored else []
        delivered = delays(case.runs, "delivered")
        lines.append(
            f"| {case.title} | {len(delivered):,} | {_ms(stored, 0.5)} | {_ms(stored, 0.99)} "
            f"| {_ms(delivered, 0.5)} | {_ms(delivered, 0.99)} | {_max_ms(delivered)} |"
        )
    return lines


def p99_ratio(held: Sequence[LatencyRun], alone: Sequence[LatencyRun]) -> str:
    """The held runs' p99 (commit to delivered) over the lone runs', round by round."""
    ratios = []
    for a, b in zip(held, alone, strict=False):  # a case that did not run has no rounds
        mine, other = delays([a], "delivered"), delays([b], "delivered")
        if mine and other and percentile(other, 0.99) > 0:
            ratios.append(percentile(mine, 0.99) / percentile(other, 0.99))
    return ratio_cell(ratios)


def held_seconds(runs: Sequence[LatencyRun]) -> str:
    """'3.1-3.4 s': how long the other transaction stayed open in these runs."""
    held = [r.held for r in runs if r.held is not None]
    if not held:
        return "-"
    low, high = min(held), max(held)
    return f"{low:.1f} s" if f"{low:.1f}" == f"{high:.1f}" else f"{low:.1f}-{high:.1f} s"


# -- relay throughput -------------------------------------------------------------------------


def backlog_rows(relay: Sequence[Window], batches: Sequence[Window]) -> list[str]:
    lines = [
        "| case | messages per round | msg/s | client CPU us/msg | vs send_batch |",
        "|---|---:|---:|---:|---:|",
    ]
    for title, windows, ratio in (
        (
            "relay moving a backlog of committed outbox rows (1,000 per move)",
            relay,
            ratio_cell(round_ratios(relay, batches, "message_rate")),
        ),
        ("plain send_batch of 1,000, one process", batches, "1.00x"),
    ):
        messages = median_of(windows, "messages")
        lines.append(
            f"| {title} | {messages:,.0f} | {median_of(windows, 'message_rate'):,.0f} "
            f"| {median_of(windows, 'cpu_per_message'):,.1f} | {ratio} |"
        )
    return lines


# -- the page ---------------------------------------------------------------------------------

#: Latency case key -> its row title.
LATENCY_TITLES = {
    "session": "transactional send, SQLAlchemy Session commit (the commit wakes the relay)",
    "pymysql": "transactional send, PyMySQL commit (found by the relay's interval pass)",
    "plain": "plain send, nothing else running",
    "plain-held": "plain send, another producer's transaction held open meanwhile",
    "session-held": "transactional send (Session), another producer's transaction held open "
    "meanwhile",
}


@dataclass(frozen=True, kw_only=True)
class Page:
    """Everything the suite measured, and the page it makes."""

    header: list[str]
    rounds: int
    window: float
    relay_interval: float
    latency_rate: float
    workloads: Mapping[str, Rounds]
    latencies: Mapping[str, Sequence[LatencyRun]]
    hole_run: LatencyRun
    hole: Hole
    hole_seconds: float
    hole_gap_timeout: float
    backlog: int
    relay: Sequence[Window]
    batches: Sequence[Window]
    problems: Sequence[str] = ()

    def render(self) -> str:
        return "\n".join(
            [
                "## ems transactional publishing: in the caller's transaction, side by side",
                "",
                *self.header,
                *self._method(),
                "",
                *throughput_rows(self.workloads),
                "",
                *relay_lines(self.workloads),
                "",
                "Checks:",
                *[f"- {p}" for p in self.problems or [_ALL_KEPT]],
                "",
                *self._latency(),
                *self._held(),
                *self._relay(),
            ]
        )

    def _method(self) -> list[str]:
        return [
            "- service transaction: in a SQLAlchemy Session on the service's own database "
            "(same server), INSERT one order row and publish 1 message (send) or 100 "
            "(send_batch) about it, then commit; one process, one thread, "
            f"{self.window:g} s per window after 20 warm-up transactions; {self.rounds} "
            "round(s), the variants' order alternating",
            "- (a) ems: `Producer.send/send_batch(..., transaction=session)`; the producer's "
            "relay thread moves the committed rows meanwhile, in the same process: its CPU, "
            "and the last move after the window closes, are counted in (a)",
            "- (b) outbox row: the same order INSERT and ems's own outbox INSERT "
            "(`ems.store.outbox.outbox_statements`: same statement, same literal encoding, "
            "same driver call) into a copy of message_outbox in the service's database; "
            "nothing relays it",
            "- (c) dual write: the order INSERT committed alone, then a plain send/send_batch "
            "(two commits, not atomic: what a transactional send replaces)",
            "- messages: the producer suite's IoT readings (JSON of 100-150 bytes, keyed by "
            "project id, one header) on a topic of 16 partitions",
            "- each rate is its median over the rounds; each ratio the median of the rounds' "
            "own ratios (a's round against the round beside it), with their range",
        ]

    def _latency(self) -> list[str]:
        cases = [
            LatencyCase(title=LATENCY_TITLES[k], runs=self.latencies[k], stored=k != "plain")
            for k in ("session", "pymysql", "plain")
            if k in self.latencies
        ]
        per_run = _per_run(self.latencies)
        return [
            "### End-to-end latency",
            "",
            f"One message per service transaction, paced at {self.latency_rate:g}/s "
            f"({per_run} per run, {self.rounds} round(s), the cases' order alternating), on a "
            "topic of one partition; a consumer group of one member in its own process takes "
            "them. From the moment the caller's commit returned to the relay's INSERT into "
            "`message` (its created_at: the database clock of this machine) and to the "
            "consumer's handler. The relay polls every "
            f"{self.relay_interval * 1000:g} ms (EMS_RELAY_INTERVAL) besides being woken by "
            f"SQLAlchemy commits. {_pacing(self.latencies)}",
            "",
            *latency_rows(cases),
            "",
        ]

    def _held(self) -> list[str]:
        keys = ("plain", "plain-held", "session", "session-held")
        cases = [
            LatencyCase(
                title=LATENCY_TITLES[k], runs=self.latencies[k], stored=k.startswith("session")
            )
            for k in keys
            if k in self.latencies
        ]
        hole = LatencyCase(
            title=f"plain send, behind a message INSERTed at a taken offset and held open "
            f"{self.hole_seconds:g} s (the alternative design; EMS_GAP_TIMEOUT "
            f"{self.hole_gap_timeout:g} s)",
            runs=[self.hole_run],
            stored=False,
        )
        held = [r for k in ("plain-held", "session-held") for r in self.latencies.get(k, ())]
        runs = self.latencies
        plain = p99_ratio(runs.get("plain-held", ()), runs.get("plain", ()))
        tx = p99_ratio(runs.get("session-held", ()), runs.get("session", ()))
        return [
            "### An open transaction and other producers' messages",
            "",
            "The same paced streams while another producer's transactional send (its order "
            "row and its outbox row written) keeps its transaction open for the whole run "
            f"({held_seconds(held)}), against the same streams alone. p99 held / alone, "
            f"round by round: plain sends {plain}, transactional sends {tx}.",
            "",
            *latency_rows([*cases, hole]),
            "",
            *self._hole_line(),
            "",
        ]

    def _hole_line(self) -> list[str]:
        waits = delays([self.hole_run], "delivered")
        if not waits:
            return ["The alternative design's run delivered nothing."]
        hole = self.hole
        if hole.tombstone is None:
            row = "the held offset holds no row"
        elif hole.tombstone:
            row = "the held offset was filled with a tombstone"
        else:
            row = "the held offset holds the held message, not a tombstone"
        if hole.lock_wait > 0:
            lock = (
                "The readers' tombstone INSERT, due once the hole was older than the gap "
                f"timeout, was seen waiting on the open row's lock for {hole.lock_wait:.2f} s "
                "(information_schema.innodb_trx), until the holder committed"
            )
        else:
            lock = "No tombstone INSERT was seen waiting on a lock"
        return [
            "For contrast, the alternative design: an offset taken before the commit and its "
            "message INSERTed inside a transaction held open "
            f"{held_seconds([self.hole_run])} makes every reader of the partition wait: the "
            f"longest a plain send waited behind it was {max(waits):.2f} s, with the gap "
            f"timeout at {self.hole_gap_timeout:g} s. {lock} ({row}; {hole.tombstones} "
            "tombstone(s) in the partition).",
        ]

    def _relay(self) -> list[str]:
        return [
            "### The relay's throughput",
            "",
            f"The relay's pass (`Producer.relay()`, which its thread runs) moving a backlog of "
            f"{self.backlog:,} committed outbox rows (written beforehand with ems's own outbox "
            "INSERTs, the readings above), timed from its first move to its last, against "
            f"plain send_batch of 1,000 from one process for {self.window:g} s; "
            f"{self.rounds} round(s), alternating.",
            "",
            *backlog_rows(self.relay, self.batches),
            "",
        ]


_ALL_KEPT = (
    "every transaction's order stored; every message stored once (ems, dual write: offsets "
    "gap-free from 0; outbox: rows in the copy), the outbox empty after (a); every paced "
    "message delivered"
)


def _pacing(latencies: Mapping[str, Sequence[LatencyRun]]) -> str:
    """How many paced sends started late, and how many messages never arrived."""
    runs = [r for rs in latencies.values() for r in rs]
    sent = sum(len(r.committed) for r in runs)
    late = sum(r.behind for r in runs)
    lost = undelivered(runs)
    missing = f"; {lost:,} never delivered" if lost else ""
    return f"Of {sent:,} paced sends, {late:,} started more than 10 ms late{missing}."


def _per_run(latencies: Mapping[str, Sequence[LatencyRun]]) -> str:
    sizes = {len(r.committed) for runs in latencies.values() for r in runs}
    return "/".join(f"{n:,}" for n in sorted(sizes)) or "0"
