"""The cost model per operation: what one message costs ems, raw+redis and raw.

`python -m benchmarks cost`

For single send, batch send (100 per call) and consume (fetch, then ack), in one process
and one run, in rounds whose order of systems alternates, per message:

- MySQL statements: the driver's commands (every COM_QUERY, BEGIN and COMMIT included:
  each is a round trip), counted in PyMySQL's one command function, split by what the
  statement does (send; fetch = the read and the log's start rows; ack = the transaction
  that marks the log and moves the cursor; other = leases, heartbeats, seeding);
- requests sent: the process's socket sends (socket.sendall and send), MySQL and Redis
  alike (a pipeline is one; a PUBLISH sent with replies off too);
- client CPU: time.process_time() of the process (every thread of it: ems's ack writer
  and heartbeat are its own cost);
- server CPU: user + system CPU of the server threads of the run's connections (MariaDB
  names a connection's OS thread in information_schema.PROCESSLIST.TID), when the server
  runs on this machine: what the statements cost the server, InnoDB's background threads
  aside;
- server work: the server's global counters around the round (nothing else uses the
  server meanwhile): rows the storage engine read and wrote (the handler calls), InnoDB
  page reads and writes in the buffer pool, redo bytes and data file syncs.

Counts are deterministic (they do not move with the machine's load); CPU times are
medians of the rounds. After the timed rounds, one profiled round per operation and system
splits the client CPU by layer (benchmarks.layers): each layer's share of the profile,
and that share of the timed client CPU per message.

The systems are those of the producer suite (benchmarks.writers); consume compares an ems
Consumer (poll + ack, one member owning all partitions) with the raw consumer of the
consumer suite (its statements, on one connection).
"""

from __future__ import annotations

import argparse
import socket
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymysql

from benchmarks import batch_steps, compiled, guard_cost, instructions
from benchmarks.consumer_workers import _RAW_CURSOR, _RAW_DONE, _RAW_FETCH, _RAW_LOG, RAW_BATCH
from benchmarks.cpu import pid_of_thread, thread_cpu_seconds
from benchmarks.harness import (
    BATCH,
    BenchConfig,
    bench_topic,
    clear_redis,
    fresh_database,
    mysql_connect,
    on_database,
    query,
    readings,
)
from benchmarks.layers import CALL_COLUMNS, LAYERS, LayerProfile, shares
from benchmarks.report import (
    FLOOR_COLUMNS,
    FLOOR_HEAD,
    environment,
    floor_cells,
    floor_ratios,
    heading,
)
from benchmarks.writers import EmsWriter, GuardedWriter, RawRedisWriter, RawWriter
from ems import Consumer
from ems.consumer.cluster import ClusterSession

DATABASE = "ems_bench_cost"
RESULTS = Path(__file__).resolve().parent / "results" / "cost-latest.md"
PARTITIONS = 16
ROUNDS = 4
SINGLE_SENDS = 2500
BATCH_CALLS = 100  # every row of readings() once: rounds long enough to read a 10% change
CONSUME = 20_000
SYSTEMS = ("ems", "raw+redis+guard", "raw+redis", "raw")
#: The systems that consume (raw+redis and its guard are publish-side only).
CONSUMERS = ("ems", "raw")
KINDS = ("send", "fetch", "ack", "other")
#: Server work per message: the global status counters summed into each figure. Handler
#: counts are the engine's row calls (an index lookup, each next row, each row written).
WORK = {
    "rows read": (
        "Handler_read_first",
        "Handler_read_key",
        "Handler_read_last",
        "Handler_read_next",
        "Handler_read_prev",
        "Handler_read_rnd",
        "Handler_read_rnd_next",
    ),
    "rows written": ("Handler_write", "Handler_update", "Handler_delete"),
    "page reads": ("Innodb_buffer_pool_read_requests",),
    "page writes": ("Innodb_buffer_pool_write_requests",),
    "redo bytes": ("Innodb_os_log_written",),
    "syncs": ("Innodb_data_fsyncs",),
}
_WORK_STATUS = "SHOW GLOBAL STATUS WHERE Variable_name IN ({})".format(
    ", ".join(f"'{name}'" for names in WORK.values() for name in names)
)


# -- counting ------------------------------------------------------------------------------


@dataclass
class Counts:
    statements: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))


COUNTS = Counts()
_ORIGINAL = pymysql.connections.Connection._execute_command


def _kind(sql: object) -> str:
    head = (sql.encode() if isinstance(sql, str) else bytes(sql or b""))[:120].upper()  # type: ignore[call-overload]
    if head.startswith(b"INSERT INTO MESSAGE"):
        return "send"
    if b"TOPIC_GROUP_LOG" in head and head.startswith(b"INSERT"):
        return "fetch"
    if head.startswith(b"SELECT ID, OFFSET_NO") or head.startswith(b"SELECT OFFSET_NO, BODY"):
        return "fetch"
    if head.startswith((b"BEGIN", b"COMMIT", b"UPDATE TOPIC_GROUP_LOG", b"UPDATE GROUP_OFFSET")):
        return "ack"
    return "other"


def _counting(self: pymysql.connections.Connection, command: int, sql: object) -> object:
    COUNTS.statements[_kind(sql)] += 1
    return _ORIGINAL(self, command, sql)


SENDS = [0]
_SENDALL = socket.socket.sendall
_SEND = socket.socket.send


def _counted_sendall(self: socket.socket, data: Any, *args: Any) -> None:
    SENDS[0] += 1
    _SENDALL(self, data, *args)


def _counted_send(self: socket.socket, data: Any, *args: Any) -> int:
    SENDS[0] += 1
    return _SEND(self, data, *args)


def _syscalls() -> int:
    return SENDS[0]


class ServerThreads:
    """CPU seconds of the server threads serving connections to the run's database."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.pid: int | None = None

    def cpu(self) -> dict[int, float]:
        rows = query(
            self.url,
            "SELECT TID FROM information_schema.PROCESSLIST "
            "WHERE DB = %s AND ID <> CONNECTION_ID()",
            (DATABASE,),
        )
        out = {}
        for (tid,) in rows:
            seconds = self._thread_cpu(int(tid))
            if seconds is not None:
                out[int(tid)] = seconds
        return out

    def _thread_cpu(self, tid: int) -> float | None:
        if self.pid is None:
            self.pid = pid_of_thread(tid)
        if self.pid is None:
            return None
        return thread_cpu_seconds(self.pid, tid)


def server_work(url: str) -> dict[str, int]:
    """The server's WORK counters now (global: every connection's work)."""
    found = {str(name): int(value) for name, value in query(url, _WORK_STATUS, ())}
    return {figure: sum(found.get(n, 0) for n in names) for figure, names in WORK.items()}


@dataclass(frozen=True, kw_only=True)
class Sample:
    messages: int
    statements: dict[str, int]
    writes: int
    cpu: float
    server: float | None
    wall: float
    work: dict[str, int] = field(default_factory=dict)


@contextmanager
def measured(threads: ServerThreads, messages: int, out: list[Sample],
             profile: LayerProfile | None = None) -> Iterator[None]:  # fmt: skip
    before_server = threads.cpu()
    before_work = server_work(threads.url)
    before = dict(COUNTS.statements)
    writes, cpu, wall = _syscalls(), time.process_time(), time.perf_counter()
    if profile is None:
        yield
    else:
        with profile.window():
            yield
    wall, cpu, writes = time.perf_counter() - wall, time.process_time() - cpu, _syscalls() - writes
    statements = {k: COUNTS.statements[k] - before[k] for k in KINDS}
    after_server = threads.cpu()
    after_work = server_work(threads.url)
    work = {figure: after_work[figure] - before_work[figure] for figure in WORK}
    server = (
        sum(v - before_server.get(t, 0.0) for t, v in after_server.items())
        if after_server
        else None
    )
    out.append(Sample(messages=messages, statements=statements, writes=writes, cpu=cpu,
                      server=server, wall=wall, work=work))  # fmt: skip


# -- the operations ------------------------------------------------------------------------


def prepare(cfg: BenchConfig) -> int:
    fresh_database(cfg.settings)
    return bench_topic(cfg.settings, cfg.topic, PARTITIONS)


WRITERS: dict[str, type[EmsWriter] | type[RawWriter]] = {
    "ems": EmsWriter,
    "raw+redis+guard": GuardedWriter,
    "raw+redis": RawRedisWriter,
    "raw": RawWriter,
}


def sends(cfg: BenchConfig, threads: ServerThreads, system: str, batch: bool,
          out: list[Sample], profile: LayerProfile | None = None) -> None:  # fmt: skip
    query(cfg.settings.database_url, "TRUNCATE TABLE message")
    clear_redis(cfg.settings)
    rows = readings()
    writer = WRITERS[system](cfg, 0, 1)
    try:
        for row in rows[:50]:
            writer.send(row)
        if batch:
            calls = [rows[i * BATCH : (i + 1) * BATCH] for i in range(BATCH_CALLS)]
            with measured(threads, BATCH * BATCH_CALLS, out, profile):
                for call in calls:
                    writer.send_batch(call)
        else:
            with measured(threads, SINGLE_SENDS, out, profile):
                for row in rows[:SINGLE_SENDS]:
                    writer.send(row)
    finally:
        writer.close()
    query(cfg.settings.database_url, "TRUNCATE TABLE message")
    clear_redis(cfg.settings)


def fill(cfg: BenchConfig, count: int) -> None:
    writer = RawRedisWriter(cfg, 0, 1)
    rows = readings()
    try:
        for first in range(0, count, 1000):
            writer.send_batch([rows[(first + i) % len(rows)] for i in range(1000)])
    finally:
        writer.close()


def consume_ems(cfg: BenchConfig, threads: ServerThreads, round_no: int, out: list[Sample],
                profile: LayerProfile | None = None) -> None:  # fmt: skip
    consumer = Consumer(f"cost-ems-{round_no}", cfg.topic, settings=cfg.settings, start="earliest")
    try:
        consumer.start()
        wait_owning(consumer)
        handled = 0
        with measured(threads, CONSUME, out, profile):
            while handled < CONSUME:
                batch = consumer.poll(timeout=1.0)
                consumer.ack(batch)
                handled += len(batch)
            session = consumer.session
            assert isinstance(session, ClusterSession)
            session.writer.flush()
    finally:
        consumer.close()


def wait_owning(consumer: Consumer) -> None:
    session = consumer.session
    assert isinstance(session, ClusterSession)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        session.sync()
        if len(session.states) == PARTITIONS:
            return
        time.sleep(0.02)
    raise TimeoutError("the member did not own every partition within 60 s")


def consume_raw(cfg: BenchConfig, threads: ServerThreads, round_no: int, topic_id: int,
                out: list[Sample], profile: LayerProfile | None = None) -> None:  # fmt: skip
    group = f"cost-raw-{round_no}"
    Consumer(group, cfg.topic, settings=cfg.settings, start="earliest").close()
    ((group_id,),) = query(
        cfg.settings.database_url, "SELECT id FROM consumer_group WHERE name = %s", (group,)
    )
    conn = mysql_connect(cfg.settings.database_url)
    cursor = conn.cursor()
    cursor.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
    position = dict.fromkeys(range(PARTITIONS), 0)
    handled = 0
    try:
        with measured(threads, CONSUME, out, profile):
            while handled < CONSUME:
                for p in range(PARTITIONS):
                    at = position[p]
                    cursor.execute(_RAW_FETCH, (topic_id, p, at, at + RAW_BATCH, RAW_BATCH))
                    rows = cursor.fetchall()
                    if not rows:
                        continue
                    last = rows[-1][1]
                    cursor.execute(_RAW_LOG, (group_id, "raw-0", topic_id, p, at, last))
                    conn.begin()
                    cursor.execute(_RAW_DONE, (group_id, "raw-0", p, at, last))
                    cursor.execute(_RAW_CURSOR, (last + 1, group_id, p))
                    conn.commit()
                    position[p] = last + 1
                    handled += len(rows)
    finally:
        conn.close()
    out[-1] = Sample(**{**out[-1].__dict__, "messages": handled})


# -- the run -------------------------------------------------------------------------------

Results = dict[str, dict[str, list[Sample]]]


@dataclass(frozen=True)
class Profiled:
    """One operation and system's profiled round: CPU seconds per layer, and calls per
    message per layer and of built-ins."""

    seconds: dict[str, float]
    calls: dict[str, float]


#: operation -> system -> its profiled round.
Profiles = dict[str, dict[str, Profiled]]


def collect(cfg: BenchConfig, topic_id: int) -> Results:
    threads = ServerThreads(cfg.settings.database_url)
    results: Results = {op: {s: [] for s in SYSTEMS} for op in ("single", "batch", "consume")}
    setattr(pymysql.connections.Connection, "_execute_command", _counting)  # noqa: B010
    setattr(socket.socket, "sendall", _counted_sendall)  # noqa: B010
    setattr(socket.socket, "send", _counted_send)  # noqa: B010
    try:
        for r in range(ROUNDS):
            order = SYSTEMS if r % 2 == 0 else SYSTEMS[::-1]
            for system in order:
                sends(cfg, threads, system, False, results["single"][system])
                sends(cfg, threads, system, True, results["batch"][system])
            query(cfg.settings.database_url, "TRUNCATE TABLE message")
            clear_redis(cfg.settings)
            fill(cfg, CONSUME * 2)
            for system in ("ems", "raw") if r % 2 == 0 else ("raw", "ems"):
                if system == "ems":
                    consume_ems(cfg, threads, r, results["consume"]["ems"])
                else:
                    consume_raw(cfg, threads, r, topic_id, results["consume"]["raw"])
            query(cfg.settings.database_url, "TRUNCATE TABLE topic_group_log")
    finally:
        setattr(pymysql.connections.Connection, "_execute_command", _ORIGINAL)  # noqa: B010
        setattr(socket.socket, "sendall", _SENDALL)  # noqa: B010
        setattr(socket.socket, "send", _SEND)  # noqa: B010
    return results


def profile_round(cfg: BenchConfig, topic_id: int) -> Profiles:
    """One more round of every operation and system, profiled by layer, never timed."""
    threads = ServerThreads(cfg.settings.database_url)
    profiles: Profiles = {op: {} for op in OPS}

    def profiled(op: str, system: str, run: Callable[[LayerProfile, list[Sample]], None]) -> None:
        profile, out = LayerProfile(), list[Sample]()
        with profile.threads():
            run(profile, out)
        messages = sum(s.messages for s in out)
        calls = {layer: n / messages for layer, n in profile.calls().items()}
        profiles[op][system] = Profiled(seconds=profile.seconds(), calls=calls)

    for system in SYSTEMS:
        for op, batch in (("single", False), ("batch", True)):
            profiled(op, system, lambda p, o, s=system, b=batch: sends(cfg, threads, s, b, o, p))
    query(cfg.settings.database_url, "TRUNCATE TABLE message")
    clear_redis(cfg.settings)
    fill(cfg, CONSUME * 2)
    profiled("consume", "ems", lambda p, o: consume_ems(cfg, threads, ROUNDS, o, p))
    profiled("consume", "raw", lambda p, o: consume_raw(cfg, threads, ROUNDS, topic_id, o, p))
    query(cfg.settings.database_url, "TRUNCATE TABLE topic_group_log")
    return profiles


def per_message(samples: list[Sample], value: Callable[[Sample], float | None]) -> float | None:
    values = [value(s) for s in samples]
    if not samples or any(v is None for v in values):
        return None
    return statistics.median(v / s.messages for v, s in zip(values, samples, strict=True))  # type: ignore[operator]


def _statements(kind: str) -> Callable[[Sample], float]:
    return lambda s: float(s.statements[kind])


OPS = {
    "single": "single send",
    "batch": f"batch send ({BATCH} per call)",
    "consume": "consume (fetch + ack)",
}


def render(env: list[str], results: Results, profiles: Profiles | None = None) -> str:
    lines = [
        "## ems cost model per operation",
        "",
        *env,
        f"- rounds: {ROUNDS}, the systems' order alternating; {SINGLE_SENDS:,} single sends, "
        f"{BATCH_CALLS} batch calls of {BATCH} and {CONSUME:,} consumed messages per round and "
        "system, the producer suite's readings on a 16-partition topic; one process",
        "- statements: MySQL commands per message (BEGIN and COMMIT included), by kind; "
        "requests: socket sends per message (MySQL and Redis); client CPU: the "
        "process's; server CPU: the threads of the run's connections on the MariaDB server",
        "- consume: ems = one Consumer owning every partition, poll() + ack() of each batch; "
        f"raw = the consumer suite's raw statements (read of {RAW_BATCH}, the start rows as "
        "one INSERT ... SELECT, the log UPDATE and cursor UPDATE in one transaction)",
        "",
        "### Cost per message",
        "",
        "| operation | system | statements (send / fetch / ack / other) | requests | "
        "client CPU us | server CPU us | msg/s | msg/s vs raw |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for op, title in OPS.items():
        raw_rate = per_message(results[op]["raw"], lambda s: s.wall)
        for system in SYSTEMS:
            samples = results[op][system]
            if not samples:
                continue
            kinds = " / ".join(f"{per_message(samples, _statements(k)):.3g}" for k in KINDS)
            writes = per_message(samples, lambda s: float(s.writes))
            cpu = per_message(samples, lambda s: s.cpu)
            server = per_message(samples, lambda s: s.server)
            wall = per_message(samples, lambda s: s.wall)
            assert writes is not None and cpu is not None and wall is not None
            ratio = f"{raw_rate / wall:.2f}x" if raw_rate else "-"
            server_text = "-" if server is None else f"{server * 1e6:.1f}"
            lines.append(
                f"| {title} | {system} | {kinds} | {writes:.3g} | {cpu * 1e6:.1f} | "
                f"{server_text} | {1 / wall:,.0f} | {ratio} |"
            )
    lines += [
        "",
        "Statements and requests are counts (the same on any machine); CPU times and rates "
        "are medians of the rounds, on a machine shared with other work: compare the rows "
        "of one operation, not runs. Server CPU has a 10 ms clock tick per thread.",
        "",
    ]
    lines += render_work(results)
    lines += render_floors(results)
    if profiles:
        lines += render_layers(results, profiles)
        lines += render_calls(profiles)
    return "\n".join(lines)


def render_work(results: Results) -> list[str]:
    """What each operation and system made the server do per message (WORK)."""
    lines = heading("Server work per message", ["operation", "system"], list(WORK))
    for op, title in OPS.items():
        for system in SYSTEMS:
            samples = results[op].get(system, [])
            if not samples or any(not s.work for s in samples):
                continue
            cells = [per_message(samples, lambda s, f=figure: float(s.work[f])) for figure in WORK]
            text = " | ".join("-" if c is None else f"{c:,.3g}" for c in cells)
            lines.append(f"| {title} | {system} | {text} |")
    lines += [
        "",
        "Medians of the rounds' global server counters, per message: rows read and written "
        "are the storage engine's row calls (Handler_*: an index lookup, each next row of a "
        "range, each row inserted, updated or deleted, the server's own temporary tables "
        "included); page reads and writes are InnoDB's buffer pool requests; redo bytes "
        "what InnoDB wrote to its log; syncs its data and log file fsyncs (a durable commit "
        "costs one, shared by the commits it groups).",
        "",
    ]
    return lines


def render_floors(results: Results) -> list[str]:
    """Each publish row of ems against the design's floor without and with its guard: what
    ems's own layers cost (ems / raw+redis+guard) and what the guard costs (raw+redis+guard
    / raw+redis), in rate and in client and server CPU."""
    lines = [
        "### ems against the design's floor, and the guard's share",
        "",
        f"| operation | {FLOOR_HEAD} | server CPU us added |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for op in ("single", "batch"):
        server = {s: per_message(results[op][s], lambda x: x.server) for s in SYSTEMS}
        ratios = floor_ratios(
            {s: [x.messages / x.wall for x in results[op][s]] for s in SYSTEMS},
            {s: [x.cpu / x.messages for x in results[op][s]] for s in SYSTEMS},
        )
        if ratios["rate"] is None or ratios["layers rate"] is None:
            continue
        guard, floor = "raw+redis+guard", "raw+redis"
        added = (
            "-"
            if server[guard] is None or server[floor] is None
            else f"{(server[guard] - server[floor]) * 1e6:.1f}"  # type: ignore[operator]
        )
        lines.append(f"| {OPS[op]} | {' | '.join(floor_cells(ratios))} | {added} |")
    lines += [
        "",
        f"{FLOOR_COLUMNS} raw+redis+guard sends ems's own statement (its rows checked against "
        "the partitions' fences read once, each partition's first row carrying its fence, "
        "which message's foreign key checks; the write token) with raw+redis's Python: ems against "
        "it is the cost of ems's own layers; it against raw+redis is the cost of the guard, "
        "which the design keeps (a purge or a partition change and the inserts take turns "
        "on the fences).",
        "",
    ]
    return lines


def render_layers(results: Results, profiles: Profiles) -> list[str]:
    """The client CPU per message of each operation and system, split by layer."""
    lines = heading(
        "Client CPU per message by layer", ["operation", "system"], ["client CPU us", *LAYERS]
    )
    for op, title in OPS.items():
        for system in SYSTEMS:
            cpu = per_message(results[op].get(system, []), lambda s: s.cpu)
            if cpu is None or system not in profiles.get(op, {}):
                continue
            split = shares(profiles[op][system].seconds)
            cells = " | ".join(f"{cpu * share * 1e6:.2f} ({share:.0%})" for share in split.values())
            lines.append(f"| {title} | {system} | {cpu * 1e6:.1f} | {cells} |")
    lines += [
        "",
        "Each cell: microseconds per message (share of the client CPU). The shares come from "
        "one more round of each operation and system, not timed, profiled in every thread "
        "with each thread's CPU clock; self time goes to the layer of its module, a "
        "built-in's to its callers' layers. A deterministic profiler inflates code that "
        "makes many small calls (the drivers' packet parsing most), so read the shares "
        "as where the time goes, not as exact costs; the microseconds are those shares "
        "of the timed rounds' client CPU.",
        "",
    ]
    return lines


def render_calls(profiles: Profiles) -> list[str]:
    """The calls per message of each operation and system: Python functions by layer, and
    built-ins."""
    lines = heading(
        "Calls per message by layer",
        ["operation", "system"],
        ["Python calls", *CALL_COLUMNS],
    )
    for op, title in OPS.items():
        for system in SYSTEMS:
            found = profiles.get(op, {}).get(system)
            if found is None:
                continue
            python = sum(found.calls[layer] for layer in LAYERS)
            cells = " | ".join(f"{found.calls[column]:.3g}" for column in CALL_COLUMNS)
            lines.append(f"| {title} | {system} | {python:.3g} | {cells} |")
    lines += [
        "",
        "Each cell: calls per message in the profiled round (every thread of the process, "
        "the benchmark's own loop in stdlib+other): a Python function's to the layer of its "
        "module, a built-in's (a C function or method) in the last column. Counts, not "
        "times: they do not move with the machine's load, and say what ems's layers run "
        "per message beyond the floor's, layer by layer.",
        "",
    ]
    return lines


def run(cfg: BenchConfig, args: argparse.Namespace) -> int:
    ccfg = on_database(cfg, DATABASE)
    topic_id = prepare(ccfg)
    env = environment(ccfg)
    results = collect(ccfg, topic_id)
    profiles = profile_round(ccfg, topic_id)
    counted = {
        "interpreted": instructions.measure(ccfg),
        "compiled": instructions.measure(ccfg, compiled.shared()),
    }
    guard = guard_cost.measure(ccfg, topic_id)
    steps = batch_steps.render(batch_steps.measure())
    text = "\n".join(
        [
            render(env, results, profiles),
            *instructions.render(counted),
            *guard_cost.render(guard),
            *steps,
        ]
    )
    print(text)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text)
    return 0
