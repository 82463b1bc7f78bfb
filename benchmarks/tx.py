"""The tx suite (`make bench SUITES=tx`): transactional publishing, side by side in one run.

1. Service transactions with one message (send) and with 100 (send_batch): (a) ems's
   transactional send, (b) the same outbox row written by hand in the same transaction,
   (c) the dual write, commit then send (benchmarks/tx_workers.py says exactly what each
   does). Rates, client CPU per transaction, a/b and a/c.
2. End-to-end latency of a transactional message, from the caller's commit to `message`
   and to a consumer: a Session commit (which wakes the relay) and a PyMySQL commit (found
   by the relay's interval pass).
3. What an open transaction costs other producers: plain and transactional sends while a
   transactional send's transaction stays open for the whole run, against the same sends
   alone; for contrast, a message INSERTed at a taken offset inside an open transaction
   (the alternative design), which stalls the readers of its partition.
4. The relay's throughput moving a backlog of committed outbox rows, against plain
   send_batch of 1,000 from one process.
5. Exactly-once consumption against at-least-once: a fresh group of CONSUME_MEMBERS
   processes drains a backlog (--tx-consume-backlog) with (a) run() and
   `transactional=sessionmaker(...)`, (b) poll(), the same upserts in one service
   transaction, commit, ack(), (c) poll(), a no-op handler, ack(). Rates, client CPU per
   message, a/b (the target) and a/c, and what exactly-once adds to the handler's commit.

Every workload runs its variants in rounds (--tx-rounds), alternating their order, each
run in fresh processes; the page is benchmarks/results/tx-latest.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from benchmarks.consumer import drop_databases
from benchmarks.consumer_procs import Fleet
from benchmarks.docs_figures import results_path
from benchmarks.harness import (
    PARTITIONS,
    BenchConfig,
    BenchError,
    clear_redis,
    mysql_connect,
    on_database,
    query,
    readings,
    server_url,
)
from benchmarks.innodb import settle
from benchmarks.report import environment
from benchmarks.tx_report import (
    CONSUME_VARIANTS,
    EXACTLY_ONCE,
    NO_OP,
    SAME_WORK,
    ConsumeRun,
    Hole,
    LatencyRun,
    Page,
    Window,
)
from benchmarks.tx_workers import (
    OUTBOX,
    PLAIN,
    PYMYSQL,
    SERVICE_DB,
    SERVICE_TABLES,
    SESSION,
    VARIANTS,
    WARM,
    ConsumeSpec,
    SenderSpec,
    ThroughputSpec,
    backlog_records,
    baseline_items,
    batch_sender,
    consume_member,
    consumer,
    fill_backlog,
    hole_holder,
    key_counts,
    outbox_holder,
    relay_drain,
    sender,
    seq_of,
    throughput,
)
from ems import TopicAdmin
from ems.store import migrate
from ems.store.caller import quoted_schema
from ems.store.outbox import outbox_statements

DATABASE = "ems_bench_tx"
TOPIC = "bench.tx.orders"
#: (title, messages per service transaction).
WORKLOADS = (("one order + 1 message", 1), ("one order + 100 messages", 100))
#: Paced sends per second in the latency runs.
LATENCY_RATE = 50.0
HOLE = "hole"
#: The alternative design's open transaction, and the readers' gap timeout meanwhile.
HOLE_SECONDS = 3.0
HOLE_GAP_TIMEOUT = 1.0
#: Seconds between the lock-wait watcher's reads (above InnoDB's 0.1 s cache age).
WATCH_EVERY = 0.15
_LOCK_WAITS = "SELECT trx_query FROM information_schema.innodb_trx WHERE trx_state = 'LOCK WAIT'"
#: (key, sender kind, what holds a transaction open meanwhile) of the latency runs.
LATENCY_CASES = (
    ("session", SESSION, None),
    ("pymysql", PYMYSQL, None),
    ("plain", PLAIN, None),
    ("plain-held", PLAIN, OUTBOX),
    ("session-held", SESSION, OUTBOX),
)
#: Member processes of each consuming group: one per core of the 2-core bench machine,
#: where MariaDB (and Redis) share the same two cores.
CONSUME_MEMBERS = 2
#: Messages per batch of every consuming variant (ems's default batch_size).
CONSUME_BATCH = 500


def log(message: str) -> None:
    print(f"[bench tx] {message}", file=sys.stderr, flush=True)


@dataclasses.dataclass(frozen=True)
class Setup:
    cfg: BenchConfig  # the suite's ems database and its topic
    service_url: str
    topic_id: int
    rounds: int
    window: float  # seconds per timed window


def prepare(cfg: BenchConfig, rounds: int) -> Setup:
    """Fresh databases: ems_bench_tx at Alembic head with the topic, and the service's
    database with its orders table and a copy of message_outbox (the baseline's)."""
    cfg = on_database(cfg, DATABASE, topic=TOPIC)
    drop_databases(cfg, DATABASE, SERVICE_DB)
    migrate.create_database(cfg.settings)
    migrate.upgrade(cfg.settings)
    admin = TopicAdmin(cfg.settings)
    try:
        topic_id = admin.create(TOPIC, PARTITIONS).id
    finally:
        admin.close()
    conn = mysql_connect(cfg.settings.database_url, database=False)
    try:
        with conn.cursor() as cursor:
            cursor.execute(f"CREATE DATABASE `{SERVICE_DB}`")
            cursor.execute(f"USE `{SERVICE_DB}`")
            for statement in SERVICE_TABLES:
                cursor.execute(statement.format(ems=f"`{DATABASE}`"))
    finally:
        conn.close()
    service = f"{server_url(cfg)}/{SERVICE_DB}"
    return Setup(cfg, service, topic_id, rounds, cfg.seconds / 2)


def count(url: str, sql: str, args: tuple[object, ...] = ()) -> int:
    return int(query(url, sql, args)[0][0])


def empty_tables(setup: Setup) -> None:
    """Every table a throughput run writes, and the offset counters, emptied."""
    for table in ("message", "message_outbox"):
        query(setup.cfg.settings.database_url, f"TRUNCATE TABLE {table}")
    for table in ("orders", "message_outbox"):
        query(setup.service_url, f"TRUNCATE TABLE {table}")
    clear_redis(setup.cfg.settings)


def one_process(target: Callable[..., None], *args: object, timeout: float) -> Any:
    """Run target in a fresh process; its "done" payload."""
    fleet = Fleet()
    try:
        fleet.spawn(0, target, *args)
        return fleet.wait("done", [0], timeout)[0]
    finally:
        fleet.close()


# -- 1. throughput -------------------------------------------------------------------------


def check_window(setup: Setup, spec: ThroughputSpec, window: Window) -> list[str]:
    """Every transaction's order stored; its messages stored (ems, dual) or in the
    baseline's outbox (outbox), gap-free from 0 where ems gave them offsets."""
    where = f"{spec.variant}, {spec.batch} per transaction"
    ems_url, transactions = setup.cfg.settings.database_url, window.calls + WARM
    messages = transactions * spec.batch
    problems = []
    orders = count(setup.service_url, "SELECT COUNT(*) FROM orders")
    if orders != transactions:
        problems.append(f"{where}: {transactions:,} transactions committed, {orders:,} orders")
    if spec.variant == OUTBOX:
        rows = count(setup.service_url, "SELECT COUNT(*) FROM message_outbox")
        if rows != messages:
            problems.append(f"{where}: {messages:,} outbox rows written, {rows:,} stored")
        return problems
    stored = count(ems_url, "SELECT COUNT(*) FROM message")
    left = count(ems_url, "SELECT COUNT(*) FROM message_outbox")
    if stored != messages or left:
        problems.append(f"{where}: {messages:,} sent, {stored:,} stored, {left:,} left in outbox")
    for p, n, low, high in query(
        ems_url,
        "SELECT partition_no, COUNT(*), MIN(offset_no), MAX(offset_no) FROM message "
        "GROUP BY partition_no",
    ):
        if low != 0 or high - low + 1 != n:
            problems.append(f"{where}: partition {p} holds {n} rows at offsets {low}..{high}")
    return problems


def throughputs(setup: Setup, problems: list[str]) -> dict[str, dict[str, list[Window]]]:
    """Per workload, per variant, one window per round; the variants' order alternates."""
    found: dict[str, dict[str, list[Window]]] = {t: {v: [] for v in VARIANTS} for t, _ in WORKLOADS}
    for round_no in range(setup.rounds):
        for title, batch in WORKLOADS:
            for variant in VARIANTS if round_no % 2 == 0 else VARIANTS[::-1]:
                empty_tables(setup)
                spec = ThroughputSpec(
                    cfg=setup.cfg,
                    service_url=setup.service_url,
                    variant=variant,
                    batch=batch,
                    seconds=setup.window,
                    topic_id=setup.topic_id,
                )
                window = one_process(throughput, spec, timeout=setup.window + 180)
                problems.extend(check_window(setup, spec, window))
                found[title][variant].append(window)
                log(
                    f"round {round_no + 1}, {title}, {variant}: {window.rate:,.0f} tx/s, "
                    f"{window.cpu_per_call:,.0f} us CPU/tx"
                )
    return found


# -- 4. the relay's throughput ---------------------------------------------------------------


def fill_outbox(setup: Setup, rows: int) -> None:
    """`rows` committed outbox rows of the topic: the INSERTs a transactional send writes."""
    readings_ = readings()
    schema = quoted_schema(DATABASE)
    conn = mysql_connect(setup.cfg.settings.database_url)
    try:
        with conn.cursor() as cursor:
            for start in range(0, rows, 1_000):
                chunk = [
                    readings_[i % len(readings_)] for i in range(start, min(rows, start + 1_000))
                ]
                for sql, params in outbox_statements(schema, setup.topic_id, baseline_items(chunk)):
                    cursor.execute(sql, params)
    finally:
        conn.close()


def relay_rounds(
    setup: Setup, backlog: int, problems: list[str]
) -> tuple[list[Window], list[Window]]:
    """Per round: the relay draining `backlog` rows, and send_batch for one window."""
    relay: list[Window] = []
    batches: list[Window] = []
    ems_url = setup.cfg.settings.database_url
    for round_no in range(setup.rounds):
        for what in ("relay", "batch") if round_no % 2 == 0 else ("batch", "relay"):
            empty_tables(setup)
            if what == "relay":
                fill_outbox(setup, backlog)
                window = one_process(relay_drain, setup.cfg, backlog, timeout=600)
                relay.append(window)
            else:
                window = one_process(batch_sender, setup.cfg, setup.window, timeout=300)
                batches.append(window)
            stored = count(ems_url, "SELECT COUNT(*) FROM message")
            if stored != window.messages + window.warm:
                problems.append(
                    f"{what}: {window.messages + window.warm:,} sent, {stored:,} stored"
                )
            log(f"round {round_no + 1}, {what}: {window.message_rate:,.0f} msg/s")
    return relay, batches


# -- 2 and 3. latency ------------------------------------------------------------------------


class LockWaits:
    """Watches information_schema.innodb_trx from a thread, every WATCH_EVERY seconds: for
    how long a tombstone INSERT was seen waiting on a lock (first sighting to last). InnoDB
    refreshes that table's cache only when nobody read it in the last 0.1 s: a watcher
    polling faster sees the first answer forever."""

    def __init__(self, url: str) -> None:
        self._conn = mysql_connect(url)
        self._stopped = threading.Event()
        self._first: float | None = None
        self._last = 0.0
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stopped.wait(WATCH_EVERY):
            with self._conn.cursor() as cursor:
                cursor.execute(_LOCK_WAITS)
                waiting = [str(q) for (q,) in cursor.fetchall()]
            if any("tombstone" in q for q in waiting):
                now = time.time()
                self._first = self._first or now
                self._last = now

    def stop(self) -> float:
        """Seconds a tombstone INSERT was seen waiting (0: never seen)."""
        self._stopped.set()
        self._thread.join()
        self._conn.close()
        return self._last - self._first if self._first is not None else 0.0


def stored_times(setup: Setup, topic_id: int) -> dict[int, float]:
    """seq -> when its row was stored (message.created_at, as a Unix time)."""
    rows = query(
        setup.cfg.settings.database_url,
        "SELECT body, UNIX_TIMESTAMP(created_at) FROM message WHERE topic_id = %s "
        "AND tombstone = 0",
        (topic_id,),
    )
    return {seq_of(b): float(at) for b, at in rows}


def _holder(
    fleet: Fleet, cfg: BenchConfig, setup: Setup, hold: str, topic_id: int, release: Any
) -> Any:
    if hold == OUTBOX:
        fleet.spawn(2, outbox_holder, cfg, setup.service_url, release, fleet.stop_producers)
    else:
        fleet.spawn(2, hole_holder, cfg, topic_id, HOLE_SECONDS, fleet.stop_producers)
    return fleet.wait("holding", [2], 120)[2]


def latency_run(
    setup: Setup, kind: str, hold: str | None, messages: int, run_no: int, problems: list[str]
) -> tuple[LatencyRun, Hole]:
    """One consumer, one paced sender and perhaps a holder, on a fresh topic of one
    partition: every message of the run waits behind whatever its partition waits on."""
    topic = f"bench.tx.latency{run_no}"
    admin = TopicAdmin(setup.cfg.settings)
    try:
        topic_id = admin.create(topic, 1).id
    finally:
        admin.close()
    cfg = dataclasses.replace(setup.cfg, topic=topic)
    if hold == HOLE:
        settings = cfg.settings.with_(gap_timeout=HOLE_GAP_TIMEOUT)
        cfg = dataclasses.replace(cfg, settings=settings)
    spec = SenderSpec(
        cfg=cfg, service_url=setup.service_url, kind=kind, count=messages, rate=LATENCY_RATE
    )
    fleet = Fleet()
    go, release = fleet.ctx.RawValue("b", 0), fleet.ctx.RawValue("b", 0)
    hole, held, watch, offset = Hole(), None, None, -1
    try:
        fleet.spawn(0, consumer, cfg, f"latency{run_no}", messages, fleet.stop)
        fleet.spawn(1, sender, spec, go, fleet.stop_producers)
        fleet.wait("ready", [1], 120)
        fleet.wait("live", [0], 120)
        if hold is not None:
            holding = _holder(fleet, cfg, setup, hold, topic_id, release)
            offset = holding if hold == HOLE else -1
        if hold == HOLE:
            watch = LockWaits(setup.cfg.settings.database_url)
        go.value = 1
        committed, behind = fleet.wait("sent", [1], messages / LATENCY_RATE + 120)[1]
        try:
            fleet.wait("got", [0], 60 + HOLE_SECONDS)
        except BenchError as exc:
            if "no 'got' event" not in str(exc):
                raise
            problems.append(f"latency run {run_no} ({kind}, {hold}): not all delivered in 60 s")
        if hold is not None:
            release.value = 1
            held = fleet.wait("released", [2], 120)[2]
        fleet.stop.value = 1
        delivered = fleet.wait("done", [0], 60)[0]
    finally:
        waited = watch.stop() if watch is not None else 0.0
        fleet.close()
    if hold == HOLE:
        hole = _hole_after(setup, topic_id, offset, waited)
    stored = stored_times(setup, topic_id)
    return LatencyRun(
        committed=committed, delivered=delivered, stored=stored, behind=behind, held=held
    ), hole


def _hole_after(setup: Setup, topic_id: int, offset: int, waited: float) -> Hole:
    url = setup.cfg.settings.database_url
    rows = query(
        url,
        "SELECT tombstone FROM message WHERE topic_id = %s AND partition_no = 0 AND offset_no = %s",
        (topic_id, offset),
    )
    tombstones = count(
        url, "SELECT COUNT(*) FROM message WHERE topic_id = %s AND tombstone", (topic_id,)
    )
    return Hole(
        offset=offset,
        tombstone=bool(rows[0][0]) if rows else None,
        tombstones=tombstones,
        lock_wait=waited,
    )


def latencies(
    setup: Setup, messages: int, problems: list[str]
) -> tuple[dict[str, list[LatencyRun]], LatencyRun, Hole]:
    """The latency cases in rounds, alternating their order; then the hole, once."""
    found: dict[str, list[LatencyRun]] = {key: [] for key, _, _ in LATENCY_CASES}
    run_no = 0
    for round_no in range(setup.rounds):
        cases = LATENCY_CASES if round_no % 2 == 0 else LATENCY_CASES[::-1]
        for key, kind, hold in cases:
            run_no += 1
            run, _ = latency_run(setup, kind, hold, messages, run_no, problems)
            found[key].append(run)
            got = len([seq for seq in run.delivered if seq >= 0])
            log(f"round {round_no + 1}, latency {key}: {got:,} of {messages:,} delivered")
    # Sends for a second longer than the hold, so the hole stalls a stream in flight.
    hole_messages = int(LATENCY_RATE * (HOLE_SECONDS + 1))
    hole_run, hole = latency_run(setup, PLAIN, HOLE, hole_messages, run_no + 1, problems)
    return found, hole_run, hole


# -- 5. exactly-once consumption against at-least-once ----------------------------------------


def fill_consume_backlog(setup: Setup, backlog: int) -> dict[int, int]:
    """Fresh tables, then the backlog published: {partition: messages}, from offset 0."""
    empty_tables(setup)
    per: dict[int, int] = one_process(fill_backlog, setup.cfg, backlog, timeout=600)
    return per


def reset_consumption(setup: Setup, keys: Counter[str]) -> None:
    """The log, retries and dead letters emptied; the counter rows back at 0."""
    for table in ("topic_group_log", "retry_message", "dead_message"):
        query(setup.cfg.settings.database_url, f"TRUNCATE TABLE {table}")
    query(setup.service_url, "TRUNCATE TABLE counts")
    rows = sorted(keys)
    query(
        setup.service_url,
        "INSERT INTO counts (k, n) VALUES " + ", ".join(["(%s, 0)"] * len(rows)),
        rows,
    )


_LOCKS = (
    "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS "
    "WHERE VARIABLE_NAME IN ('INNODB_ROW_LOCK_WAITS', 'INNODB_DEADLOCKS')"
)


def lock_counts(setup: Setup) -> dict[str, int]:
    """The server's row-lock waits and deadlocks so far."""
    return {str(k): int(v) for k, v in query(setup.cfg.settings.database_url, _LOCKS)}


def server_cpu(setup: Setup) -> float | None:
    """CPU seconds the server process has used so far, when it runs on this machine (its
    pid file readable here); None otherwise."""
    ((pid_file,),) = query(setup.cfg.settings.database_url, "SELECT @@pid_file")
    try:
        with open(str(pid_file)) as f:
            pid = int(f.read().strip())
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, ValueError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def host_busy() -> float:
    """CPU seconds this machine's cores have been busy so far (every process's)."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def consume_run(setup: Setup, spec: ConsumeSpec) -> ConsumeRun:
    """The group's members in fresh processes, started together once each holds its
    share; a ConsumeRun of what they report, the server's lock waits meanwhile, and from
    their start to their end the server's CPU and what the machine spent elsewhere."""
    before = lock_counts(setup)
    fleet = Fleet()
    barrier = fleet.ctx.Barrier(spec.members)
    members = range(spec.members)
    try:
        for i in members:
            fleet.spawn(i, consume_member, spec, barrier)
        fleet.wait("share", members, 180)
        began, host, server = time.perf_counter(), host_busy(), server_cpu(setup)
        done = fleet.wait("done", members, 900)
        took, host = time.perf_counter() - began, host_busy() - host
        server_after = server_cpu(setup)
    finally:
        fleet.close()
    after = lock_counts(setup)
    runs = [done[i] for i in members]
    served = None if server is None or server_after is None else server_after - server
    elsewhere = None
    if served is not None and took > 0:
        elsewhere = max(0.0, host - served - sum(m.cpu for m in runs)) / took
    return ConsumeRun(
        messages=sum(spec.counts.values()),
        members=runs,
        lock_waits=after["INNODB_ROW_LOCK_WAITS"] - before["INNODB_ROW_LOCK_WAITS"],
        deadlocks=after["INNODB_DEADLOCKS"] - before["INNODB_DEADLOCKS"],
        server_cpu=served,
        elsewhere=elsewhere,
    )


def check_consumed(setup: Setup, spec: ConsumeSpec, keys: Counter[str]) -> list[str]:
    """The group's cursors at every partition's end, every log row done (marked exactly
    once in (a) only), no retries or dead letters, and the counter rows: each key's
    messages exactly (a), at least (b), untouched (c)."""
    where = f"{spec.variant}, group {spec.group}"
    ems_url, problems = setup.cfg.settings.database_url, []
    cursors = dict(
        query(
            ems_url,
            "SELECT o.partition_no, o.committed_offset FROM group_offset o "
            "JOIN consumer_group g ON g.id = o.group_id WHERE g.name = %s",
            (spec.group,),
        )
    )
    short = {p: (cursors.get(p), n) for p, n in spec.counts.items() if cursors.get(p) != n}
    if short:
        problems.append(f"{where}: cursors (at, end) not at the end: {short}")
    logged = query(
        ems_url,
        "SELECT l.state, l.exactly_once, COUNT(*) FROM topic_group_log l "
        "JOIN consumer_group g ON g.id = l.group_id WHERE g.name = %s "
        "GROUP BY l.state, l.exactly_once",
        (spec.group,),
    )
    want = [("done", int(spec.variant == EXACTLY_ONCE), sum(spec.counts.values()))]
    if [(str(s), int(e), int(n)) for s, e, n in logged] != want:
        problems.append(f"{where}: log rows (state, exactly once, rows) {logged}, not {want}")
    for table in ("retry_message", "dead_message"):
        left = count(ems_url, f"SELECT COUNT(*) FROM {table}")
        if left:
            problems.append(f"{where}: {left} rows in {table}")
    counted = {str(k): int(n) for k, n in query(setup.service_url, "SELECT k, n FROM counts")}
    expected = {k: 0 for k in keys} if spec.variant == NO_OP else dict(keys)
    if spec.variant == SAME_WORK:
        under = {k: (counted.get(k), n) for k, n in expected.items() if counted.get(k, 0) < n}
        if under or set(counted) != set(expected):
            problems.append(f"{where}: keys counted less than their messages: {under}")
    elif counted != expected:
        wrong = {k: (counted.get(k), n) for k, n in expected.items() if counted.get(k) != n}
        problems.append(f"{where}: keys (counted, messages) not counted exactly: {wrong}")
    return problems


def consumption(setup: Setup, backlog: int, problems: list[str]) -> dict[str, list[ConsumeRun]]:
    """Per variant one run per round, the variants' order alternating; each a fresh
    group draining the same backlog from the earliest offset."""
    counts = fill_consume_backlog(setup, backlog)
    keys = key_counts(backlog_records(backlog))
    found: dict[str, list[ConsumeRun]] = {v: [] for v in CONSUME_VARIANTS}
    for round_no in range(setup.rounds):
        for variant in CONSUME_VARIANTS if round_no % 2 == 0 else CONSUME_VARIANTS[::-1]:
            reset_consumption(setup, keys)
            # The last run's background work (purge of the log's old versions, page
            # flushing; section 4's outbox deletes before the first) is not this run's.
            waited = settle(setup.cfg.settings.database_url)
            spec = ConsumeSpec(
                cfg=setup.cfg,
                service_url=setup.service_url,
                variant=variant,
                group=f"bench.tx.{variant}.{round_no + 1}",
                members=CONSUME_MEMBERS,
                counts=counts,
                batch=CONSUME_BATCH,
            )
            run = consume_run(setup, spec)
            problems.extend(check_consumed(setup, spec, keys))
            total = count(setup.service_url, "SELECT COALESCE(SUM(n), 0) FROM counts")
            run = dataclasses.replace(run, counted=total)
            found[variant].append(run)
            log(
                f"round {round_no + 1}, consume {variant}: {run.rate:,.0f} msg/s, "
                f"{run.cpu_per_message:,.1f} us CPU/msg, counted {total:,} (the server "
                f"settled in {waited:.0f} s before)"
            )
    return found


def run(cfg: BenchConfig, args: argparse.Namespace) -> int:
    started = time.monotonic()
    setup = prepare(cfg, args.tx_rounds)
    header = environment(setup.cfg)
    problems: list[str] = []
    log("service transactions")
    workloads = throughputs(setup, problems)
    log("end-to-end latency and open transactions")
    cases, hole_run, hole = latencies(setup, args.tx_latency_messages, problems)
    log("the relay's throughput")
    relay, batches = relay_rounds(setup, args.tx_backlog, problems)
    log("exactly-once consumption against at-least-once")
    consume = consumption(setup, args.tx_consume_backlog, problems)
    page = Page(
        header=header,
        rounds=setup.rounds,
        window=setup.window,
        relay_interval=setup.cfg.settings.relay_interval,
        latency_rate=LATENCY_RATE,
        workloads={title: workloads[title] for title, _ in WORKLOADS},
        latencies=cases,
        hole_run=hole_run,
        hole=hole,
        hole_seconds=HOLE_SECONDS,
        hole_gap_timeout=HOLE_GAP_TIMEOUT,
        backlog=args.tx_backlog,
        relay=relay,
        batches=batches,
        consume=consume,
        consume_backlog=args.tx_consume_backlog,
        consume_members=CONSUME_MEMBERS,
        consume_batch=CONSUME_BATCH,
        problems=problems,
    )
    text = page.render()
    print(text)
    path = results_path("tx")
    path.write_text(text)
    log(f"done in {time.monotonic() - started:.0f} s; wrote {path}")
    return 1 if problems else 0
