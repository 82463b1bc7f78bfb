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
from typing import NamedTuple

from benchmarks.harness import PARTITIONS
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


def median_of(windows: Sequence[object], measure: str) -> float:
    """The median over the rounds of a run's property (a Window's, a ConsumeRun's; 0 when
    nothing was measured)."""
    return statistics.median(getattr(w, measure) for w in windows) if windows else 0.0


def round_ratios(mine: Sequence[object], other: Sequence[object], measure: str) -> list[float]:
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


# -- exactly-once consumption -----------------------------------------------------------------

EXACTLY_ONCE = "exactly-once"
SAME_WORK = "same-work"
NO_OP = "no-op"
#: The consuming variants, in table order.
CONSUME_VARIANTS = (EXACTLY_ONCE, SAME_WORK, NO_OP)
#: Counter keys (devices) per partition of the consumed backlog.
KEYS_PER_PARTITION = 4
#: The issue's target: exactly-once consumption at least this fraction of the rate of
#: at-least-once consumption doing the same durable work (a/b).
EXACTLY_ONCE_TARGET = 0.8


class BatchTimes(NamedTuple):
    """One batch of a member, in seconds: from the last settlement returning to the first
    handler call (poll: the fetch and ems's bookkeeping), the handler calls (first call to
    last return, with whatever ems does between them), from the last handler return to
    the commit returning, and from there to the settlement returning (ack(); 0 where the
    commit settles, exactly once)."""

    poll: float
    handle: float
    commit: float
    ack: float


@dataclass(frozen=True, kw_only=True)
class MemberRun:
    """What one member process of a consuming run saw, from the barrier on."""

    handled: int  # messages handled in settled batches
    first: float  # wall time (time.time()) of its first delivery
    last: float  # wall time its last settlement returned
    cpu: float  # its CPU seconds (all its threads) from the barrier to its last settlement
    batches: tuple[BatchTimes, ...] = ()
    #: What ems logged at WARNING or above (a consume round retried, partitions read again).
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class ConsumeRun:
    """One variant's run: a fresh group's member processes draining the backlog."""

    messages: int  # the backlog: every message settled once by the group
    members: Sequence[MemberRun]
    counted: int = 0  # the counter table's sum afterwards
    lock_waits: int = 0  # row-lock waits on the server during the run
    deadlocks: int = 0  # deadlocks on the server during the run
    #: CPU seconds of the server process from the members' start to their end (None: the
    #: server runs elsewhere), whatever else it served meanwhile.
    server_cpu: float | None = None
    #: Cores the machine spent on other processes meanwhile, on average: its busy CPU less
    #: the members' and the server's (None: not known). A shared host's noise, measured.
    elsewhere: float | None = None

    @property
    def elapsed(self) -> float:
        """From the first delivery of any member to the last settlement of all."""
        if not self.members:
            return 0.0
        return max(m.last for m in self.members) - min(m.first for m in self.members)

    @property
    def rate(self) -> float:
        return self.messages / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def cpu_per_message(self) -> float:
        """Client CPU microseconds per message, every member's."""
        return sum(m.cpu for m in self.members) / self.messages * 1e6 if self.messages else 0.0

    @property
    def server_cpu_per_message(self) -> float:
        """Server CPU microseconds per message (0 when not known)."""
        known = self.server_cpu is not None and self.messages
        return (self.server_cpu or 0.0) / self.messages * 1e6 if known else 0.0


#: Consuming variant -> its runs, one per round, in round order.
ConsumeRounds = Mapping[str, Sequence[ConsumeRun]]

CONSUME_TITLES = {
    EXACTLY_ONCE: "(a) exactly-once: `run()`, `transactional=sessionmaker(engine)`",
    SAME_WORK: "(b) at-least-once, same work: `poll()`, the batch's upserts in one "
    "transaction, commit, `ack()`",
    NO_OP: "(c) at-least-once, no-op handler: `poll()`, `ack()`",
}


def met_cell(ratios: Sequence[float], target: float) -> str:
    """'yes', or '**NO**: 0.62x < 0.8x', judged on the median of the rounds' ratios."""
    if not ratios:
        return "-"
    median = statistics.median(ratios)
    return "yes" if median >= target else f"**NO**: {median:.2f}x < {target:g}x"


def consume_rows(runs: ConsumeRounds, target: float = EXACTLY_ONCE_TARGET) -> list[str]:
    """Each variant's msg/s and client and server CPU per message; for (b) and (c), (a)'s
    ratios to them round by round (a rate ratio above 1: (a) is faster; a CPU ratio
    above 1: (a) costs more), with the target on a/b."""
    lines = [
        "| consumer | msg/s | client CPU us/msg | server CPU us/msg | (a)/this msg/s "
        "| (a)/this client CPU | target | met? |",
        "|---|---:|---:|---:|---:|---:|---|---|",
    ]
    mine = runs.get(EXACTLY_ONCE, ())
    for variant in CONSUME_VARIANTS:
        rounds = runs.get(variant, ())
        server = median_of(rounds, "server_cpu_per_message")
        cells = [
            f"{median_of(rounds, 'rate'):,.0f}",
            f"{median_of(rounds, 'cpu_per_message'):,.1f}",
            f"{server:,.1f}" if server else "-",
        ]
        if variant == EXACTLY_ONCE:
            cells += ["-", "-", "-", "-"]
        else:
            paired = len(rounds) == len(mine)  # a variant that did not run has no ratios
            rates = round_ratios(mine, rounds, "rate") if paired else []
            cpus = round_ratios(mine, rounds, "cpu_per_message") if paired else []
            cells += [ratio_cell(rates), ratio_cell(cpus)]
            if variant == SAME_WORK:
                cells += [f"a/b >= {target:g}x", met_cell(rates, target)]
            else:
                cells += ["(ems's floor, for context)", "-"]
        lines.append(f"| {CONSUME_TITLES[variant]} | " + " | ".join(cells) + " |")
    return lines


def round_rows(runs: ConsumeRounds) -> list[str]:
    """Each round's rates and client CPU per message, and its a/b: a shared machine's
    speed drifts between runs, and the CPU that the same code takes per message shows
    it."""
    heads = [short_title(v).split(" ")[0] for v in CONSUME_VARIANTS]
    lines = [
        "| round | order | "
        + " | ".join(f"{h} msg/s" for h in heads)
        + " | a/b | "
        + " | ".join(f"{h} client CPU us/msg" for h in heads)
        + " |",
        "|---:|---|" + "---:|" * (2 * len(heads) + 1),
    ]
    rounds = max((len(runs.get(v, ())) for v in CONSUME_VARIANTS), default=0)
    order = ", ".join(h.strip("()") for h in heads)
    backwards = ", ".join(h.strip("()") for h in heads[::-1])
    for i in range(rounds):
        got = [runs[v][i] if i < len(runs.get(v, ())) else None for v in CONSUME_VARIANTS]
        rates = [f"{r.rate:,.0f}" if r else "-" for r in got]
        cpus = [f"{r.cpu_per_message:,.1f}" if r else "-" for r in got]
        a, b = got[0], got[1]
        ratio = f"{a.rate / b.rate:.2f}x" if a and b and b.rate else "-"
        lines.append(
            f"| {i + 1} | {order if i % 2 == 0 else backwards} | "
            + " | ".join(rates)
            + f" | {ratio} | "
            + " | ".join(cpus)
            + " |"
        )
    return lines


def batch_seconds(runs: Sequence[ConsumeRun], phase: str) -> list[float]:
    """Every member's batches' `phase` (a BatchTimes field), pooled over the rounds."""
    return [getattr(b, phase) for run in runs for m in run.members for b in m.batches]


def _gap_ms(mine: list[float], other: list[float], q: float) -> str:
    if not mine or not other:
        return "-"
    return f"{(percentile(mine, q) - percentile(other, q)) * 1000:+,.1f}"


def commit_rows(runs: ConsumeRounds) -> list[str]:
    """Per batch, from the last handler return to the commit returning: (a)'s commit
    (ems's settlement and the COMMIT) against (b)'s (the service's COMMIT alone), their
    difference by percentile, and what (b)'s ack() takes after it."""
    a = batch_seconds(runs.get(EXACTLY_ONCE, ()), "commit")
    b = batch_seconds(runs.get(SAME_WORK, ()), "commit")
    acks = batch_seconds(runs.get(SAME_WORK, ()), "ack")
    qs = (0.5, 0.95, 0.99)
    lines = [
        "| per batch | batches | p50 ms | p95 ms | p99 ms |",
        "|---|---:|---:|---:|---:|",
    ]
    for title, values in (
        (
            "(a) last handler return -> `Session.commit()` returned: ems's settlement "
            "statements and the COMMIT, in the handler's transaction",
            a,
        ),
        (
            "(b) last upsert returned -> `Session.commit()` returned: the service's COMMIT "
            "of the same upserts",
            b,
        ),
    ):
        lines.append(
            f"| {title} | {len(values):,} | " + " | ".join(_ms(values, q) for q in qs) + " |"
        )
    lines.append(
        "| what exactly-once adds to the handler's commit, (a) - (b) | - | "
        + " | ".join(_gap_ms(a, b, q) for q in qs)
        + " |"
    )
    lines.append(
        "| (b), then `ack()`: ems's own settlement transaction, which (a) does not need | "
        f"{len(acks):,} | " + " | ".join(_ms(acks, q) for q in qs) + " |"
    )
    return lines


def short_title(variant: str) -> str:
    """'(a) exactly-once' of a variant's title."""
    return CONSUME_TITLES[variant].split(":")[0]


#: Phases that a variant does not have: (a) settles with its commit, (c) commits nothing.
_NO_PHASE = {(EXACTLY_ONCE, "ack"), (NO_OP, "commit")}


def phase_rows(runs: ConsumeRounds) -> list[str]:
    """Where a batch's time goes in each variant: the mean of each phase over every
    member's batches, pooled over the rounds, in ms; and the handler calls per message."""
    lines = [
        "| per batch, mean | batches | messages | poll ms | handler calls ms | commit ms "
        "| ack ms | total ms | handler calls us/msg |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for variant in CONSUME_VARIANTS:
        rounds = runs.get(variant, ())
        batches = [b for run in rounds for m in run.members for b in m.batches]
        if not batches:
            continue
        handled = sum(m.handled for run in rounds for m in run.members)
        means = {f: statistics.fmean(getattr(b, f) for b in batches) for f in BatchTimes._fields}
        cells = [
            "-" if (variant, f) in _NO_PHASE else f"{means[f] * 1000:,.1f}"
            for f in BatchTimes._fields
        ]
        per_message = means["handle"] * len(batches) / handled * 1e6 if handled else 0.0
        lines.append(
            f"| {short_title(variant)} | {len(batches):,} | {handled / len(batches):,.0f} | "
            + " | ".join(cells)
            + f" | {sum(means.values()) * 1000:,.1f} | {per_message:,.1f} |"
        )
    return lines


def consume_notes(runs: ConsumeRounds) -> list[str]:
    """What the counter table held after each variant, and what ems logged."""
    parts = []
    for variant, what in ((EXACTLY_ONCE, "(a)"), (SAME_WORK, "(b)")):
        done = runs.get(variant, ())
        if not done:
            continue
        extra = sorted({run.counted - run.messages for run in done})
        counted = ", ".join(f"{run.counted:,}" for run in done)
        if extra == [0]:
            parts.append(f"{what} counted {counted}: each message once")
        else:
            parts.append(f"{what} counted {counted} for backlogs of {done[0].messages:,}")
    warned = {
        short_title(v): [w for run in runs.get(v, ()) for m in run.members for w in m.warnings]
        for v in CONSUME_VARIANTS
    }
    logged = [f"{v}: {len(w):,} ({w[0]})" for v, w in warned.items() if w]
    said = (
        "ems logged warnings: " + "; ".join(logged)
        if logged
        else "ems logged no warning in any run (no consume round retried, no partition read again)"
    )
    locks = [
        f"{short_title(v)} {sum(r.lock_waits for r in rs):,} and {sum(r.deadlocks for r in rs):,}"
        for v in CONSUME_VARIANTS
        if (rs := runs.get(v, ()))
    ]
    if locks:
        said += (
            ". Row-lock waits and deadlocks on the server during the runs, all rounds: "
            + "; ".join(locks)
        )
    busy = [
        f"{short_title(v)} " + ", ".join(f"{r.elsewhere:.2f}" for r in rs)
        for v in CONSUME_VARIANTS
        if (rs := runs.get(v, ())) and all(r.elsewhere is not None for r in rs)
    ]
    if busy:
        said += (
            ". Cores this machine spent on other processes during the runs (its busy CPU "
            "less the members' and the server's), round by round: " + "; ".join(busy)
        )
    if not parts:
        return [said + "."]
    return [
        "After each run the service's counter rows summed to: "
        + "; ".join(parts)
        + ". "
        + said
        + "."
    ]


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
    #: Exactly-once consumption (none: the section is left out).
    consume: ConsumeRounds = field(default_factory=dict)
    consume_backlog: int = 0
    consume_members: int = 0
    consume_batch: int = 0
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
                *self._consume(),
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

    def _consume(self) -> list[str]:
        if not self.consume:
            return []
        members = self.consume_members
        return [
            "### Exactly-once consumption",
            "",
            f"A backlog of {self.consume_backlog:,} readings (the bodies above, keyed by "
            f"device: {KEYS_PER_PARTITION} keys per partition, the same count of messages in "
            f"each of the {PARTITIONS} partitions), drained from the earliest offset by a "
            f"fresh cluster group per run of {members} member processes (one "
            "per core of this machine, where MariaDB shares the same cores, so more members "
            f"would only queue for them; each takes {PARTITIONS // max(1, members)} "
            f"partitions, then they start together), {self.consume_batch:,} messages per "
            f"batch; {self.rounds} round(s), the variants' order alternating, the server let "
            "settle before each run (InnoDB's history list short, its dirty pages no longer "
            "falling). The handler's durable work is the same in (a) and (b): per message, "
            "`INSERT INTO counts (k, n) VALUES (key, 1) ON DUPLICATE KEY UPDATE n = n + 1` "
            "through a SQLAlchemy Session on the service's database, whose engine keeps "
            "SQLAlchemy's and the server's defaults (REPEATABLE READ, at which ems's "
            "settlement statements in (a) run too); the counter rows exist beforehand at 0, "
            "as in a projection's steady state. (a) "
            "`Consumer(..., transactional=sessionmaker(engine))`: ems opens the batch's "
            "Session, calls the handler with it per message, then writes its settlement (log "
            "rows done, the cursors as fences) through the same connection and commits once. "
            "(b) the pull form: `poll()`, the batch's upserts in one Session, commit, then "
            "`ack()`, which returns once ems's settlement has committed on ems's own "
            "connection: two commits per batch, and a crash between them counts the batch "
            "again. (c) the same loop with a handler that does nothing: ems's own cost of "
            "consuming. Rates run from the first delivery of either member to the last "
            "settlement of both; client CPU is both member processes' (every thread), from "
            "the start to their last settlement; server CPU the MariaDB process's meanwhile "
            "(from /proc, the server being on this machine).",
            "",
            *consume_rows(self.consume),
            "",
            *consume_notes(self.consume),
            "",
            "Round by round, the variants' order alternating; the client CPU that the same "
            "code takes per message shows how fast this machine ran meanwhile:",
            "",
            *round_rows(self.consume),
            "",
            "What exactly-once adds to the handler's commit: per batch, from the return of "
            "its last handler call (its last upsert) to `Session.commit()` returning, seen "
            "through a Session subclass (`sessionmaker(class_=...)`) whose commit() records "
            "the time; pooled over the rounds and members.",
            "",
            *commit_rows(self.consume),
            "",
            "Where a batch's time goes, per member: from the last settlement returning to the "
            "first handler call (poll: the fetch and ems's bookkeeping), the handler calls "
            "(with whatever ems does between them), the commit and the ack, as above; means "
            "over every member's batches, pooled over the rounds.",
            "",
            *phase_rows(self.consume),
            "",
        ]


_ALL_KEPT = (
    "every transaction's order stored; every message stored once (ems, dual write: offsets "
    "gap-free from 0; outbox: rows in the copy), the outbox empty after (a); every paced "
    "message delivered; exactly-once consumption: each group's cursors at every partition's "
    "end, every log row done (marked exactly once in (a)), no retries or dead letters, the "
    "counter rows equal to the messages of their keys in (a) and at least that in (b)"
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
