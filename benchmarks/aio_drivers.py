"""The aio-drivers suite: asyncmy against aiomysql on the durable work ems.aio does.

Both drivers run exactly what the asyncio producer sends: ems's own guarded multi-row
INSERT (ems.store.inserts.insert_statements, hex literals, write token on the first row),
autocommit off, one COMMIT per batch, on a REPEATABLE READ session. Batches of 1 and 100
rows, from 1 and from 100 concurrent tasks sharing a pool of at most POOL connections, in
one fresh process per measurement.

The choice, asyncmy, and why (the measured table is in benchmarks/results and docs/aio.md):

- its protocol, packet reader and result parsing are compiled (Cython); measured here the
  two drivers are within about 10% of each other either way on throughput, asyncmy a
  little cheaper in client CPU per single-row commit (the latest figures are on the
  Benchmarks page);
- it is maintained (releases through 2026) and speaks the same DB-API error numbers as
  PyMySQL, so ems translates its errors with the table it already has;
- aiomysql is pinned only as this suite's comparison (a dev extra).
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

from benchmarks.harness import (
    BARRIER_TIMEOUT,
    BenchConfig,
    BenchError,
    WorkerResult,
    bench_topic,
    mysql_connect,
    on_database,
    query,
    readings,
    run_parallel,
    topic_fences,
)
from benchmarks.report import environment
from ems import Settings
from ems.store import migrate
from ems.store.inserts import insert_statements
from ems.types import NewMessage, placed_of

RESULTS = Path(__file__).resolve().parent / "results" / "aio-drivers-latest.md"
DATABASE = "ems_bench_aio"
DRIVERS = ("asyncmy", "aiomysql")
#: Most connections a measurement opens, as a producer's pool would hold.
POOL = 10
HEADERS_JSON = '{"type":"reading.v1"}'


@dataclass(frozen=True, kw_only=True)
class Case:
    tasks: int
    batch: int

    @property
    def title(self) -> str:
        return f"{self.tasks} task{'s' * (self.tasks > 1)}, {self.batch} row(s) per commit"


CASES = (
    Case(tasks=1, batch=1),
    Case(tasks=100, batch=1),
    Case(tasks=1, batch=100),
    Case(tasks=100, batch=100),
)


@dataclass(frozen=True, kw_only=True)
class Spec:
    cfg: BenchConfig
    driver: str
    case: Case
    topic_id: int
    #: The topic's fences (ems.store.fences), which the rows carry.
    fences: tuple[int, ...]


def prepare(cfg: BenchConfig) -> int:
    """The suite's database at Alembic head with the bench topic; returns its id."""
    migrate.create_database(cfg.settings)
    migrate.upgrade(cfg.settings)
    return bench_topic(cfg.settings, cfg.topic, 16)


def connect_args(settings: Settings) -> dict[str, Any]:
    from sqlalchemy.engine import make_url

    url = make_url(settings.database_url)
    return {
        "host": url.host or "127.0.0.1",
        "port": url.port or 3306,
        "user": url.username or "root",
        "password": url.password or "",
        "db": url.database,
        "autocommit": False,
        "init_command": "SET time_zone = '+00:00'",
    }


async def open_connection(driver: str, settings: Settings) -> Any:
    args = connect_args(settings)
    if driver == "asyncmy":
        import asyncmy

        args["database"] = args.pop("db")
        conn = await asyncmy.connect(**args)
    else:
        import aiomysql

        conn = await aiomysql.connect(**args)
    await conn.query("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    return conn


async def close_connection(conn: Any) -> None:
    await conn.ensure_closed()


#: Offsets of a partition each task may take (far more than a case sends).
TASK_OFFSETS = 10**9


def batches(topic_id: int, case: Case, task: int) -> Iterator[list[NewMessage]]:
    """Each task's rows with offsets of its own per partition, consecutive from
    task * TASK_OFFSETS as a producer's ranges are, so tasks never collide (the table is
    emptied per case)."""
    rows = readings()
    position = task * len(rows) // case.tasks
    nexts: dict[int, int] = {}
    while True:
        chunk = []
        for _ in range(case.batch):
            r = rows[position % len(rows)]
            position += 1
            offset = nexts.get(r.partition, task * TASK_OFFSETS)
            nexts[r.partition] = offset + 1
            chunk.append(
                NewMessage(topic_id, r.partition, offset, r.key.encode(), HEADERS_JSON, r.body)
            )
        yield chunk


async def drive(spec: Spec, barrier: Barrier) -> WorkerResult:
    case = spec.case
    pool: asyncio.Queue[Any] = asyncio.Queue()
    for _ in range(min(case.tasks, POOL)):
        pool.put_nowait(await open_connection(spec.driver, spec.cfg.settings))
    work = [batches(spec.topic_id, case, t) for t in range(case.tasks)]
    stop = False
    sent = [0] * case.tasks

    async def commit(chunk: list[NewMessage]) -> None:
        (statement,) = insert_statements(placed_of(chunk), secrets.randbits(63), spec.fences) or ()
        conn = await pool.get()
        try:
            await conn.query(statement)
            await conn.commit()
        finally:
            pool.put_nowait(conn)

    async def task(t: int) -> None:
        for chunk in work[t]:
            if stop:
                return
            await commit(chunk)
            sent[t] += len(chunk)

    for t in range(case.tasks):  # warm up every connection and code path
        await commit(next(work[t]))
    await asyncio.get_running_loop().run_in_executor(None, barrier.wait, BARRIER_TIMEOUT)
    cpu, start = time.process_time(), time.perf_counter()
    tasks = [asyncio.create_task(task(t)) for t in range(case.tasks)]
    await asyncio.sleep(spec.cfg.seconds)
    stop = True
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu
    while not pool.empty():
        await close_connection(pool.get_nowait())
    return WorkerResult(sent=sum(sent), warm=case.tasks * case.batch, elapsed=elapsed, cpu=cpu)


def driver_worker(index: int, workers: int, spec: Spec, barrier: Barrier) -> WorkerResult:
    return asyncio.run(drive(spec, barrier))


def measure(cfg: BenchConfig, topic_id: int) -> list[tuple[Case, dict[str, tuple[float, float]]]]:
    """Per case, per driver: (msg/s, client CPU us per message). The drivers alternate
    which goes first, so neither always meets a warmer server."""
    found = []
    conn = mysql_connect(cfg.settings.database_url)
    try:
        fences = topic_fences(conn, topic_id).fences
    finally:
        conn.close()
    for n, case in enumerate(CASES):
        rates: dict[str, tuple[float, float]] = {}
        for driver in DRIVERS if n % 2 == 0 else DRIVERS[::-1]:
            query(cfg.settings.database_url, "TRUNCATE TABLE message")
            spec = Spec(cfg=cfg, driver=driver, case=case, topic_id=topic_id, fences=fences)
            result = run_parallel(driver_worker, spec, 1, cfg.seconds)
            ((stored,),) = query(cfg.settings.database_url, "SELECT COUNT(*) FROM message")
            if stored != result.sent + result.warm:
                raise BenchError(
                    f"{driver}: {result.sent + result.warm} committed, {stored} stored"
                )
            rates[driver] = (result.rate, result.cpu_micros)
            print(f"[bench] {case.title} / {driver}: {result.rate:,.0f} msg/s", flush=True)
        found.append((case, rates))
    return found


def render(
    found: list[tuple[Case, dict[str, tuple[float, float]]]], cfg: BenchConfig, env: list[str]
) -> str:
    lines = [
        "## asyncio MySQL drivers: asyncmy vs aiomysql",
        "",
        *env,
        f"- work: ems's guarded multi-row INSERT with write token, autocommit off, one COMMIT "
        f"per batch; tasks share at most {POOL} connections; {cfg.seconds:g} s per measurement",
        "",
        "| case | asyncmy msg/s | aiomysql msg/s | asyncmy/aiomysql | asyncmy CPU us/msg "
        "| aiomysql CPU us/msg |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for case, rates in found:
        (a, a_cpu), (b, b_cpu) = rates["asyncmy"], rates["aiomysql"]
        ratio = f"{a / b:.2f}x" if b else "-"
        lines.append(
            f"| {case.title} | {a:,.0f} | {b:,.0f} | {ratio} | {a_cpu:,.1f} | {b_cpu:,.1f} |"
        )
    return "\n".join(lines) + "\n"


def run(cfg: BenchConfig, args: object = None) -> int:
    cfg = on_database(cfg, DATABASE)
    topic_id = prepare(cfg)
    env = environment(cfg)
    text = render(measure(cfg, topic_id), cfg, env)
    print(text)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text)
    return 0
