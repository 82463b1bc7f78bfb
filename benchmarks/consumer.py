"""The consumer suite: drain throughput (ems vs raw PyMySQL vs Kombu's SQLAlchemy
transport), publish->handler latency, rebalance times and consumer memory.

It uses its own databases (ems_bench_consume, ems_bench_consume_kombu), recreated on every
run, so the producer suite's tables are untouched.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from benchmarks import consumer_latency, consumer_rebalance, latency_floor
from benchmarks.consumer_procs import Fleet, rss_mb
from benchmarks.consumer_report import DrainRound, EmsRun, Results, render
from benchmarks.consumer_workers import (
    GroupSpec,
    RawSpec,
    ems_consumer,
    fill_ems,
    kombu_drain_worker,
    kombu_fill_worker,
    paced_producer,
    raw_drain_worker,
)
from benchmarks.harness import (
    BenchConfig,
    BenchError,
    clear_redis,
    mysql_connect,
    on_database,
    prepare_databases,
    query,
    run_in_child,
    run_parallel,
    server_url,
    turns,
)
from benchmarks.innodb import settle
from benchmarks.report import environment
from benchmarks.writers import declare_kombu_queue
from ems import Consumer

RESULTS = Path(__file__).resolve().parent / "results" / "consumer-latest.md"
TOPIC = "bench.consume"
WORKERS = 4
#: Drains of the backlog per system (raw, ems), the order alternating; medians reported.
DRAIN_ROUNDS = 3
LATENCY_RATE = 1000.0
LATENCY_SECONDS = 10.0
LATENCY_INDEX = 10
SOAK_INDEX = 11
#: RSS samples over the soak's warm-up and window (at most one a second).
SOAK_SAMPLES = 180


def log(message: str) -> None:
    print(f"[bench consumer] {message}", file=sys.stderr, flush=True)


def consume_config(cfg: BenchConfig) -> BenchConfig:
    """The same server with the suite's own databases."""
    kombu = f"sqla+{server_url(cfg)}/ems_bench_consume_kombu"
    return on_database(cfg, "ems_bench_consume", kombu_url=kombu, topic=TOPIC)


def drop_databases(cfg: BenchConfig, *names: str) -> None:
    """Drop these databases of cfg's server and the Redis counters of cfg's database: a
    fresh database must not meet the offset counters of the last run."""
    conn = mysql_connect(cfg.settings.database_url, database=False)
    try:
        with conn.cursor() as cursor:
            for name in names:
                cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")
    finally:
        conn.close()
    clear_redis(cfg.settings)


def recreate(cfg: BenchConfig) -> None:
    drop_databases(cfg, "ems_bench_consume", "ems_bench_consume_kombu")
    prepare_databases(cfg)
    run_in_child(declare_kombu_queue, cfg)


def partition_ranges(cfg: BenchConfig) -> dict[int, tuple[int, int]]:
    """partition -> (first offset, one past the last) of the backlog."""
    return {
        int(p): (int(low), int(high) + 1)
        for p, low, high in query(
            cfg.settings.database_url,
            "SELECT partition_no, MIN(offset_no), MAX(offset_no) FROM message "
            "GROUP BY partition_no",
        )
    }


# -- throughput --------------------------------------------------------------------------


def drain_rounds(
    cfg: BenchConfig, ranges: dict[int, tuple[int, int]], counts: dict[int, int]
) -> list[DrainRound]:
    """DRAIN_ROUNDS drains of the backlog by each of raw and ems, the order alternating
    (raw first, then ems first, ...), each by a group of its own after the server settled
    (InnoDB's history list short, its dirty pages no longer falling): one side's
    background work is not measured as the other's."""
    url = cfg.settings.database_url
    rounds = []
    for r, order in enumerate(turns(("raw", "ems"), DRAIN_ROUNDS)):
        for system in order:
            settle(url)
            if system == "raw":
                rate, cpu = raw_drain(cfg, ranges, f"bench-raw-{r}")
                problems: list[str] = []
            else:
                rate, cpu, problems = ems_drain(cfg, counts, f"bench-drain-{r}")
            rounds.append(DrainRound(system=system, rate=rate, cpu_micros=cpu, checks=problems))
            log(f"round {r + 1}: {system} drained at {rate:,.0f} msg/s")
            query(url, "TRUNCATE TABLE topic_group_log")
    return rounds


def ems_drain(
    cfg: BenchConfig, counts: dict[int, int], group: str
) -> tuple[float, float, list[str]]:
    """(msg/s, client CPU us per message, check problems) of WORKERS ems members draining
    the backlog behind a barrier, as ems_run's drain (then they stop)."""
    fleet = Fleet()
    members = range(WORKERS)
    spec = GroupSpec(cfg=cfg, group=group, workers=WORKERS, counts=counts)
    try:
        barrier = fleet.ctx.Barrier(WORKERS)
        for i in members:
            fleet.spawn(i, ems_consumer, spec, barrier, fleet.stop, None)
        fleet.wait("ready", members, 120)
        drained = fleet.wait("drained", members, 900)
        fleet.stop.value = 1
        fleet.wait("done", members, 60)
    finally:
        fleet.close()
    rate, cpu = drain_rate(drained)
    return rate, cpu, check_group(cfg, group)


def drain_rate(drained: dict[int, tuple[float, float, int, float]]) -> tuple[float, float]:
    """(msg/s, client CPU us per message) of members' drain reports (start, end, handled,
    CPU seconds): from the first start to the last end."""
    start = min(d[0] for d in drained.values())
    end = max(d[1] for d in drained.values())
    handled = sum(d[2] for d in drained.values())
    return handled / (end - start), sum(d[3] for d in drained.values()) / handled * 1e6


def raw_drain(
    cfg: BenchConfig, ranges: dict[int, tuple[int, int]], group: str
) -> tuple[float, float]:
    """(msg/s, client CPU us per message) of the hand-written PyMySQL consumer."""
    # The group rows (cursors, assignments) come from ems, so the raw consumer writes the
    # same tables; it never starts a member.
    Consumer(group, cfg.topic, settings=cfg.settings, start="earliest").close()
    ((group_id, topic_id),) = query(
        cfg.settings.database_url,
        "SELECT g.id, g.topic_id FROM consumer_group g WHERE g.name = %s",
        (group,),
    )
    spec = RawSpec(cfg=cfg, topic_id=topic_id, group_id=group_id, ranges=ranges)
    result = run_parallel(raw_drain_worker, spec, WORKERS, 600)
    total = sum(end - first for first, end in ranges.values())
    if result.sent != total:
        raise BenchError(f"raw handled {result.sent:,} of {total:,}")
    return result.rate, result.cpu_micros


def kombu_drain(cfg: BenchConfig) -> tuple[float, float, int]:
    """(publish msg/s, consume+ack msg/s, messages) of Kombu, 4 processes each way."""
    fill = run_parallel(kombu_fill_worker, cfg, WORKERS, cfg.seconds)
    ((stored,),) = query(cfg.kombu_url, "SELECT COUNT(*) FROM kombu_message WHERE visible = 1")
    drain = run_parallel(kombu_drain_worker, cfg, WORKERS, 1200)
    if drain.sent != stored:
        raise BenchError(f"kombu consumed {drain.sent:,} of {stored:,} stored messages")
    return fill.rate, drain.rate, int(stored)


def ems_run(cfg: BenchConfig, counts: dict[int, int], soak: float, warmup: float) -> EmsRun:
    """4 members drain the backlog behind a barrier, then the same processes take a paced
    stream: first LATENCY_SECONDS of timestamped messages, then the memory soak (a warm-up
    of `warmup` seconds, then `soak` seconds whose RSS trend is judged)."""
    fleet = Fleet()
    barrier = fleet.ctx.Barrier(WORKERS)
    spec = GroupSpec(cfg=cfg, group="bench-drain", workers=WORKERS, counts=counts)
    run = EmsRun(soak_warmup=warmup)
    members = range(WORKERS)
    try:
        for i in members:
            fleet.spawn(i, ems_consumer, spec, barrier, fleet.stop, None)
        pids = {i: ready[0] for i, ready in fleet.wait("ready", members, 120).items()}
        run.rss_start = [rss_mb(pids[i]) for i in members]
        drained = fleet.wait("drained", members, 900)
        run.rate, run.cpu_micros = drain_rate(drained)
        run.rss_drained = [rss_mb(pids[i]) for i in members]
        log(f"ems drained at {run.rate:,.0f} msg/s (before its latency run and soak)")

        fleet.spawn(
            LATENCY_INDEX,
            paced_producer,
            cfg,
            LATENCY_RATE,
            LATENCY_SECONDS,
            True,
            fleet.stop_producers,
        )
        fleet.wait("ready", [LATENCY_INDEX], 60)
        sent, elapsed, behind, _, _ = fleet.wait("sent", [LATENCY_INDEX], LATENCY_SECONDS + 60)[
            LATENCY_INDEX
        ]
        run.latency_sent, run.latency_rate, run.latency_behind = sent, sent / elapsed, behind
        time.sleep(1.0)  # the tail of the stream

        paced = warmup + soak
        fleet.spawn(
            SOAK_INDEX, paced_producer, cfg, LATENCY_RATE, paced, False, fleet.stop_producers
        )
        fleet.wait("ready", [SOAK_INDEX], 60)
        began = time.monotonic()
        every = max(1.0, paced / SOAK_SAMPLES)
        while True:
            at = time.monotonic() - began
            run.soak.append((at, [rss_mb(pids[i]) for i in members]))
            try:
                sent, elapsed, *_ = fleet.wait("sent", [SOAK_INDEX], every)[SOAK_INDEX]
                run.soak_rate = sent / elapsed
                break
            except BenchError as exc:
                if "no 'sent' event" not in str(exc):
                    raise
        time.sleep(1.0)
        run.soak.append((time.monotonic() - began, [rss_mb(pids[i]) for i in members]))
        fleet.stop.value = 1
        for latencies, _ in fleet.wait("done", members, 60).values():
            run.latencies.extend(latencies)
        log(f"soak of {warmup:.0f} s + {soak:.0f} s done")
    finally:
        fleet.close()
    run.checks = check_group(cfg, "bench-drain")
    return run


def check_group(cfg: BenchConfig, group: str) -> list[str]:
    """Every stored message was logged once and marked done; cursors at the high watermark."""
    url = cfg.settings.database_url
    ((group_id,),) = query(url, "SELECT id FROM consumer_group WHERE name = %s", (group,))
    ((messages,),) = query(url, "SELECT COUNT(*) FROM message WHERE tombstone = 0")
    states = dict(
        query(
            url,
            "SELECT state, COUNT(*) FROM topic_group_log WHERE group_id = %s GROUP BY state",
            (group_id,),
        )
    )
    problems = []
    if states != {"done": messages}:
        problems.append(f"CHECK {group}: {messages:,} messages but log states {states}")
    behind = query(
        url,
        "SELECT o.partition_no, o.committed_offset, MAX(m.offset_no) + 1 FROM group_offset o "
        "JOIN message m ON m.topic_id = (SELECT topic_id FROM consumer_group WHERE id = %s) "
        "AND m.partition_no = o.partition_no WHERE o.group_id = %s "
        "GROUP BY o.partition_no, o.committed_offset "
        "HAVING o.committed_offset <> MAX(m.offset_no) + 1",
        (group_id, group_id),
    )
    problems += [
        f"CHECK {group}: partition {p} cursor {c}, high watermark {h}" for p, c, h in behind
    ]
    return problems


# -- the suite ---------------------------------------------------------------------------


def run(cfg: BenchConfig, args: argparse.Namespace) -> int:
    started = time.monotonic()
    ccfg = consume_config(cfg)
    results = Results(messages=args.consume_messages, soak=args.soak_seconds)
    log("recreating ems_bench_consume and ems_bench_consume_kombu")
    recreate(ccfg)
    env = environment(ccfg)
    log(f"filling {args.consume_messages:,} messages of 256 bytes")
    fill_started = time.monotonic()
    run_in_child(fill_ems, (ccfg, args.consume_messages), timeout=600)
    results.fill_rate = args.consume_messages / (time.monotonic() - fill_started)
    ranges = partition_ranges(ccfg)
    counts = {p: end - first for p, (first, end) in ranges.items()}

    log(f"drains: {DRAIN_ROUNDS} rounds of raw and ems, the order alternating")
    results.drains = drain_rounds(ccfg, ranges, counts)

    log("ems drain, latency and soak")
    results.ems = ems_run(ccfg, counts, args.soak_seconds, args.soak_warmup)

    log("latency budget, and the hand-written floor")
    results.budgets = consumer_latency.measure(ccfg) + latency_floor.measure(ccfg)

    log("rebalance")
    results.rebalance = consumer_rebalance.measure(ccfg)

    log("kombu fill and drain")
    # Kombu's transport can fail under its own concurrency (deadlocks in its SELECT ...
    # FOR UPDATE); one retry, then the report says so instead of losing the ems results.
    for attempt in (1, 2):
        try:
            results.kombu_fill, results.kombu_rate, results.kombu_messages = kombu_drain(ccfg)
            break
        except BenchError as exc:
            log(f"kombu run {attempt} failed: {exc}")
    log(f"kombu drained {results.kombu_messages:,} at {results.kombu_rate:,.0f} msg/s")

    text = render(env, results)
    print(text)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text)
    log(f"done in {time.monotonic() - started:.0f} s; wrote {RESULTS}")
    return 0
