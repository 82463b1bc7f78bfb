"""The scale suite: ems on a topic far larger than the InnoDB buffer pool, in one run.

1. Fill: a topic of 16 partitions with --scale-rows messages of 256 bytes generated in the
   server (benchmarks/scale_data.py), in a database of its own dropped and created afresh
   at the schema before partition-ordered storage (revision BEFORE: rows clustered by id);
   the fill time and the table's size (data + indexes) beside innodb_buffer_pool_size.
2. Partition order: a new group drains the topic from its first offsets for a minute
   (benchmarks/scale_cold.py) on the id-ordered table; the migration to head rebuilds the
   table clustered by (topic, partition, offset), timed; the same cold drain again with a
   second new group. Cold-start rate, sustained rate and disk page reads of both, side by
   side. Everything after this runs on the partition-ordered table.
3. Reset by datetime: the time index built over the whole table (extend per partition until
   nothing is left, as the time-index job does run after run), then, a tenth into the data
   and in its middle, the lookup per partition through the index (store.resets.first_at)
   beside the exact search without it (store.resets._first_past), median and max over
   scale_data.LOOKUP_PARTITIONS, and whether both find the same offset.
4. Drain: 1, 4 and 16 cluster groups of one member process each drain the last 200,000
   messages of the topic together (benchmarks/scale_drain.py): total and per-group
   deliveries/s and the members' VmRSS before and at the peak of the drain.

Targets, from the issue this suite reproduces, computed from the measurements and
reported, never asserted: a cold drain of the partition-ordered table keeps at least 0.8x
of its cold-start rate; a lookup under 1 s per partition (the issue's size is 20M rows);
16 groups deliver at least 0.8x the total of 4 groups; member RSS under 100 MB. The
issue's own figures are printed beside ours as the issue's report, not as targets.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks import scale_cold, scale_data, scale_drain
from benchmarks.consumer import drop_databases
from benchmarks.harness import BenchConfig, BenchError, on_database
from benchmarks.report import environment
from benchmarks.scale_cold import ColdDrain
from benchmarks.scale_data import Filled, Lookup, summary
from benchmarks.scale_drain import Drain
from ems.store import Store, migrate
from ems.types import TopicInfo

RESULTS = Path(__file__).resolve().parent / "results" / "scale-latest.md"
DATABASE = "ems_bench_scale"
TOPIC = "bench.scale"
MB = 1024 * 1024

#: The last revision whose message table is clustered by id.
BEFORE = "0009"
KEPT_GOAL = 0.8  # a cold drain's sustained rate over its cold-start rate
ISSUE_COLD = "34k msg/s at the start, 16-20k within 30 s; disk page reads 900/s -> 6,000/s"
LOOKUP_GOAL_S = 1.0
ISSUE_ROWS = 20_000_000
FANOUT_GOAL = 0.8  # 16 groups' total over 4 groups'
RSS_GOAL_MB = 100.0
#: groups -> the issue's deliveries/s in total
ISSUE_RATES = {1: "32-34k", 4: "41-43k", 16: "24-25k"}
ISSUE_RSS = "59 MB at start, 155-159 MB while draining"
ISSUE_RESET = "about 244 s per run at 20M rows (reset-offsets --to-datetime)"


@dataclass(frozen=True, kw_only=True)
class Results:
    env: list[str]
    filled: Filled
    colds: list[ColdDrain]
    migrate_s: float
    migrated_bytes: int
    indexed: int
    index_s: float
    lookups: list[Lookup]
    drains: list[Drain]
    drain_error: str | None


def log(message: str) -> None:
    print(f"[bench scale] {message}", file=sys.stderr, flush=True)


def run(cfg: BenchConfig, args: argparse.Namespace) -> int:
    cfg = on_database(cfg, DATABASE, topic=TOPIC)
    topic = scale_data.create_topic(cfg, DATABASE, BEFORE)
    env = environment(cfg)
    log(f"filling {args.scale_rows:,} rows in {DATABASE}")
    filled = scale_data.fill(cfg, topic, args.scale_rows, log)
    log(f"filled in {filled.seconds:.1f} s; table {filled.table_bytes / MB:,.0f} MB")
    store = Store(cfg.settings)
    try:
        colds = [cold(cfg, store, topic, "cold-by-id", "clustered by id (revision 0009)")]
        log("migrating to head: the table clustered by (topic, partition, offset)")
        started = time.monotonic()
        migrate.upgrade(cfg.settings)
        migrate_s = time.monotonic() - started
        migrated = scale_data.table_bytes(cfg)
        log(f"migrated in {migrate_s:.1f} s; table {migrated / MB:,.0f} MB")
        colds.append(cold(cfg, store, topic, "cold-by-partition", "clustered by partition"))
        indexed, index_s = scale_data.build_index(store, topic)
        log(f"indexed {indexed:,} offsets in {index_s:.1f} s")
        found = scale_data.lookups(store, topic, args.scale_rows)
        log("lookups done")
        drains, error = measure_drains(cfg, store, topic)
    finally:
        store.close()
        # Gigabytes of generated rows: not left on the server once measured.
        drop_databases(cfg, DATABASE)
    results = Results(
        env=env,
        filled=filled,
        colds=colds,
        migrate_s=migrate_s,
        migrated_bytes=migrated,
        indexed=indexed,
        index_s=index_s,
        lookups=found,
        drains=drains,
        drain_error=error,
    )
    text = render(results)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(text)
    print(text)
    return 0 if error is None and not problems(results) else 1


def cold(cfg: BenchConfig, store: Store, topic: TopicInfo, group: str, layout: str) -> ColdDrain:
    log(f"cold drain, {layout}, for {scale_cold.COLD_SECONDS:.0f} s")
    c = scale_cold.cold_drain(cfg, store, topic, group, layout)
    log(f"cold start {c.cold:,.0f}/s, sustained {c.sustained:,.0f}/s ({c.kept:.2f}x)")
    return c


def measure_drains(
    cfg: BenchConfig, store: Store, topic: TopicInfo
) -> tuple[list[Drain], str | None]:
    """The drains in scale_drain.ORDER; on a failure, those measured and the error."""
    drains: list[Drain] = []
    for groups in scale_drain.ORDER:
        run = 1 + sum(1 for d in drains if d.groups == groups)
        log(f"draining with {groups} group(s), run {run}")
        try:
            d = scale_drain.drain(cfg, store, topic, groups, run)
        except BenchError as exc:
            log(f"drain with {groups} group(s): FAILED\n{exc}")
            return drains, f"{groups} group(s): {str(exc).partition(chr(10))[0]}"
        log(f"{groups} group(s): {d.handled:,} in {d.seconds:.1f} s, {d.rate:,.0f}/s")
        drains.append(d)
    return drains, None


def problems(results: Results) -> list[str]:
    """The checks that failed: lookups that disagree, drains that fell short."""
    out = [
        f"CHECK {x.label}, partition {x.partition}: index {x.indexed}, without {x.exact}"
        for x in results.lookups
        if x.indexed != x.exact
    ]
    return out + [c for d in results.drains for c in d.checks]


# -- report ------------------------------------------------------------------------------


def met(ok: bool) -> str:
    return "met" if ok else "not met"


def render(r: Results) -> str:
    return "\n".join(
        [
            "# Scale benchmark: a topic larger than the buffer pool (latest run)",
            "",
            *r.env,
            "",
            *fill_section(r.filled),
            *cold_section(r),
            *reset_section(r),
            *drain_section(r),
            *check_lines(r),
        ]
    )


def fill_section(f: Filled) -> list[str]:
    return [
        "### Fill",
        "",
        f"{f.rows:,} messages of 256 bytes in 16 partitions, generated in the server in "
        f"chunks of {scale_data.CHUNK:,} rows (INSERT ... SELECT FROM the sequence engine); "
        "partition p gets p + 1 rows of every 136 (the busiest sixteen times the quietest, "
        "as keyed traffic); created_at 1 ms apart, one row in ten committed up to 30 s late.",
        "",
        "| rows | fill s | rows/s | table MB (data + indexes) | buffer pool MB | table / pool |",
        "|---:|---:|---:|---:|---:|---:|",
        f"| {f.rows:,} | {f.seconds:.1f} | {f.rows / f.seconds:,.0f} "
        f"| {f.table_bytes / MB:,.0f} | {f.buffer_pool_bytes / MB:,.0f} "
        f"| {f.table_bytes / f.buffer_pool_bytes:.1f}x |",
        "",
    ]


def cold_section(r: Results) -> list[str]:
    c0, w, s0 = scale_cold.COLD_START, scale_cold.WINDOW, scale_cold.SUSTAINED
    lines = [
        "### Partition order: a new group drains the topic from its start",
        "",
        f"One member of a new group (start earliest) holding all 16 partitions, a handler "
        f"that only counts, for {scale_cold.COLD_SECONDS:.0f} s; committed cursors and disk "
        f"page reads (Innodb_buffer_pool_reads) sampled every {w:g} s. First on the table "
        f"as filled, clustered by id; then migration {BEFORE} -> head rebuilt it clustered "
        f"by (topic, partition, offset) in {r.migrate_s:.1f} s "
        f"({r.filled.table_bytes / MB:,.0f} MB -> {r.migrated_bytes / MB:,.0f} MB, data + "
        "indexes), and a second new group drained it the same way.",
        "",
        f"| table | first {c0:g} s /s | last {s0:g} s /s | kept | page reads/s first "
        f"{c0:g} s | page reads/s last {s0:g} s | delivered |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for c in r.colds:
        lines.append(
            f"| {c.layout} | {c.cold:,.0f} | {c.sustained:,.0f} | {c.kept:.2f}x "
            f"| {c.page_reads(0, c0):,.0f} | {c.page_reads(c.end - s0, c.end):,.0f} "
            f"| {c.delivered:,} |"
        )
    lines.append("")
    for c in r.colds:
        rates = ", ".join(f"{x:,.0f}" for x in c.window_rates())
        lines.append(f"{c.layout}, per {w:g} s: {rates}.")
        lines.append("")
    if r.colds:
        kept = r.colds[-1].kept
        lines += [
            f"Target (issue): a group draining a table several times the buffer pool keeps "
            f"at least {KEPT_GOAL:g}x of its cold-start rate: {met(kept >= KEPT_GOAL)} "
            f"({kept:.2f}x, partition order). Issue report: {ISSUE_COLD}.",
            "",
        ]
    return lines


def reset_section(r: Results) -> list[str]:
    lines = [
        "### Reset by datetime",
        "",
        f"Time index built over the whole table: {r.indexed:,} offsets in {r.index_s:.1f} s "
        f"({r.indexed / r.index_s if r.index_s else 0:,.0f} offsets/s), extending each "
        f"partition by at most {scale_data.EXTEND_ROWS:,} rows a call until none was left.",
        "",
        f"Lookup of the first offset at or after a time, per partition, over partitions "
        f"{', '.join(map(str, scale_data.LOOKUP_PARTITIONS))}: through the time index "
        "(store.resets.first_at) and without it (store.resets._first_past, the exact search "
        "before the index).",
        "",
        "| time sought | index median ms | index max ms | without median ms "
        "| without max ms | same offset |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for label in scale_data.lookup_times(r.filled.rows):
        mine = [x for x in r.lookups if x.label == label]
        im, ix = summary([x.indexed_s * 1000 for x in mine])
        em, ex = summary([x.exact_s * 1000 for x in mine])
        same = all(x.indexed == x.exact for x in mine)
        lines.append(
            f"| {label} | {im:.1f} | {ix:.1f} | {em:,.0f} | {ex:,.0f} | {'yes' if same else 'NO'} |"
        )
    worst = max(x.indexed_s for x in r.lookups)
    lines += [
        "",
        f"Target (issue): a reset lookup under {LOOKUP_GOAL_S:g} s per partition at "
        f"{ISSUE_ROWS:,} rows: {met(worst < LOOKUP_GOAL_S)} here at {r.filled.rows:,} rows "
        f"(worst lookup through the index {worst * 1000:.1f} ms). Issue report: {ISSUE_RESET}.",
        "",
    ]
    return lines


def drain_section(r: Results) -> list[str]:
    lines = [
        "### Drain with 1, 4 and 16 groups",
        "",
        "In the order 1, 4, 16, 4, 16 groups (run 1, then run 2 of 4 and 16): the fan-out "
        "ratio is taken from both pairs. "
        f"Each group one member process holding all 16 partitions, reset by datetime to the "
        f"created_at of the message {scale_drain.BACKLOG:,} from the end of the topic (late "
        "rows add a few percent to what is drained); all members released together; "
        "handlers that only count. Total: every delivery over the first delivery of any group "
        "to the last of any. CPU per delivery: the members' own (from their first delivery "
        "to their last) and the database server's (from the members' start to the last "
        "delivery), over the deliveries. Pages: the server's reads from disk and flushes "
        "over the same time, per second of the drain. RSS: the largest member's VmRSS.",
        "",
        "| groups | run | deliveries | total /s | per group /s (median, min-max) | reset s (max) "
        "| member CPU µs/delivery | server CPU µs/delivery | page reads /s | pages flushed /s "
        "| RSS start MB | RSS peak MB | issue report, total /s |",
        "|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for d in r.drains:
        med, top = summary(list(d.group_rates))
        lines.append(
            f"| {d.groups} | {d.run} | {d.handled:,} | {d.rate:,.0f} | {med:,.0f} "
            f"({min(d.group_rates):,.0f}-{top:,.0f}) | {max(d.reset_s):.2f} "
            f"| {micros(d.micros(d.member_cpu_s))} | {micros(d.micros(d.server_cpu_s))} "
            f"| {d.page_reads / d.seconds:,.0f} | {d.pages_flushed / d.seconds:,.0f} "
            f"| {d.rss_start:.0f} | {d.rss_peak:.0f} | {ISSUE_RATES[d.groups]} |"
        )
    if r.drain_error:
        lines += ["", f"Not measured: {r.drain_error}."]
    lines += ["", *drain_targets(r.drains), ""]
    return lines


def micros(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def drain_targets(drains: list[Drain]) -> list[str]:
    lines = [f"Issue report: member RSS {ISSUE_RSS}."]
    ratios = fanout_ratios(drains)
    if ratios:
        shown = ", ".join(f"{r:.2f}x" for r in ratios)
        lines.append(
            f"Target (issue): 16 groups deliver at least {FANOUT_GOAL:g}x the total of 4 "
            f"groups, in every pair: {met(min(ratios) >= FANOUT_GOAL)} ({shown})."
        )
    if drains:
        peak = max(d.rss_peak for d in drains)
        lines.append(
            f"Target (issue): member RSS under {RSS_GOAL_MB:.0f} MB: "
            f"{met(peak < RSS_GOAL_MB)} (peak {peak:.0f} MB)."
        )
    return [" ".join(lines)]


def fanout_ratios(drains: list[Drain]) -> list[float]:
    """16 groups' total over 4 groups', per run that measured both."""
    rates = {(d.groups, d.run): d.rate for d in drains}
    runs = sorted({d.run for d in drains})
    return [rates[16, n] / rates[4, n] for n in runs if (4, n) in rates and (16, n) in rates]


def check_lines(r: Results) -> list[str]:
    found = problems(r)
    if not found:
        return [
            "Checks: every lookup found the same offset through the index as without it; "
            "every drain handled its backlog and left every cursor at the end.",
            "",
        ]
    return ["Checks:", "", *(f"- {p}" for p in found), ""]
