"""Shared benchmark plumbing: the bench databases, the rows, timed parallel runs.

Every timed run happens in fresh worker processes forked from a forkserver, so no worker
inherits a connection, a pool or a cached engine from the parent or from an earlier case.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing as mp
import random
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.synchronize import Barrier
from queue import Empty
from typing import Any

import pymysql
import redis
from sqlalchemy.engine import make_url

from ems import Settings, TopicAdmin
from ems.exceptions import TopicExists
from ems.producer.partitioner import partition_for_key
from ems.store import migrate
from ems.store.fences import FENCES_QUERY, Fences, fences_of

TOPIC = "bench.readings"
PARTITIONS = 16
PROJECTS = 50
ROWS = 10_000
#: Messages per batch call where the publishing suites measure "a batch of 100".
BATCH = 100
#: The kombu queue (its routing key on the default exchange).
KOMBU_QUEUE = "bench.readings"
#: Every system gets the same small header on every message.
HEADERS = {"type": "reading.v1"}
HEADERS_JSON = json.dumps(HEADERS, separators=(",", ":"))
BARRIER_TIMEOUT = 120.0


class BenchError(RuntimeError):
    """A benchmark run could not complete (a worker failed or timed out)."""


@dataclass(frozen=True, kw_only=True)
class BenchConfig:
    """Where the benchmark writes; picklable so workers can receive it."""

    settings: Settings
    kombu_url: str
    seconds: float
    topic: str = TOPIC


def bench_config(server_url: str, redis_url: str, seconds: float) -> BenchConfig:
    """`server_url` is a SQLAlchemy URL without a database, e.g. mysql+pymysql://root@host:3306."""
    server = server_url.rstrip("/")
    return BenchConfig(
        settings=Settings(database_url=f"{server}/ems_bench", redis_url=redis_url),
        kombu_url=f"sqla+{server}/ems_bench_kombu",
        seconds=seconds,
    )


def server_url(cfg: BenchConfig) -> str:
    """The MySQL server URL of cfg without its database."""
    url = make_url(cfg.settings.database_url)
    return cfg.settings.database_url.removesuffix(f"/{url.database}")


def on_database(cfg: BenchConfig, database: str, **changes: Any) -> BenchConfig:
    """The same server with a suite's own database (and other BenchConfig changes)."""
    url = f"{server_url(cfg)}/{database}"
    return dataclasses.replace(cfg, settings=cfg.settings.with_(database_url=url), **changes)


def bench_topic(settings: Settings, name: str, partitions: int = PARTITIONS) -> int:
    """The id of a topic of the bench database, made with `partitions` if missing."""
    admin = TopicAdmin(settings)
    try:
        try:
            return admin.create(name, partitions).id
        except TopicExists:
            return admin.get(name).id
    finally:
        admin.close()


def topic_fences(conn: pymysql.Connection, topic_id: int) -> Fences:
    """The topic's fences as a producer reads them (ems.store.fences): what a baseline
    that sends ems's own statement puts on its rows. No bench moves them while it runs."""
    with conn.cursor() as cursor:
        cursor.execute(FENCES_QUERY, (topic_id,))
        fences = fences_of(cursor.fetchall())
    if fences is None:
        raise BenchError(f"topic {topic_id} has no partitions")
    return fences


def mysql_connect(url: str, *, database: bool = True) -> pymysql.Connection:
    """A plain autocommit PyMySQL connection to the server (and database) of a URL."""
    u = make_url(url.removeprefix("sqla+"))
    return pymysql.connect(
        host=u.host or "127.0.0.1",
        port=u.port or 3306,
        user=u.username or "root",
        password=u.password or "",
        database=u.database if database else None,
        autocommit=True,
        # A bench that waits on someone's metadata lock should fail, not hang.
        init_command="SET time_zone = '+00:00', lock_wait_timeout = 30",
    )


def query(url: str, sql: str, args: Sequence[object] = ()) -> list[tuple[Any, ...]]:
    conn = mysql_connect(url)
    try:
        with conn.cursor() as cursor:
            cursor.execute(sql, args)
            return list(cursor.fetchall())
    finally:
        conn.close()


# -- databases -----------------------------------------------------------------------


def fresh_database(settings: Settings) -> None:
    """Drop the database of `settings` and its Redis keys (a fresh database must not meet
    the offset counters of the last run), then create it again at Alembic head."""
    conn = mysql_connect(settings.database_url, database=False)
    try:
        with conn.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS `{settings.database_name}`")
    finally:
        conn.close()
    clear_redis(settings)
    migrate.create_database(settings)
    migrate.upgrade(settings)


def prepare_databases(cfg: BenchConfig) -> None:
    """Create ems_bench at Alembic head with the bench topic, and the kombu database."""
    migrate.create_database(cfg.settings)
    migrate.upgrade(cfg.settings)
    admin = TopicAdmin(cfg.settings)
    try:
        try:
            admin.create(cfg.topic, PARTITIONS)
        except TopicExists:
            info = admin.get(cfg.topic)
            if info.partitions != PARTITIONS:
                raise BenchError(
                    f"{cfg.topic!r} in ems_bench has {info.partitions} partitions, "
                    f"not {PARTITIONS}; drop the ems_bench database"
                ) from None
    finally:
        admin.close()
    kombu_db = make_url(cfg.kombu_url.removeprefix("sqla+")).database
    conn = mysql_connect(cfg.kombu_url, database=False)
    try:
        with conn.cursor() as cursor:
            cursor.execute(f"CREATE DATABASE IF NOT EXISTS `{kombu_db}`")
    finally:
        conn.close()


def reset(cfg: BenchConfig) -> None:
    """Empty the message tables and drop this database's Redis counters before a case."""
    query(cfg.settings.database_url, "TRUNCATE TABLE message")
    query(cfg.kombu_url, "TRUNCATE TABLE kombu_message")
    clear_redis(cfg.settings)


def clear_redis(settings: Settings) -> None:
    """Delete this database's keys (offset counters) from Redis."""
    client = redis.Redis.from_url(settings.redis_url)
    try:
        keys = list(client.scan_iter(match=f"{settings.redis_prefix}*", count=1000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


# -- rows ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reading:
    """One IoT reading: key = project_id, partition precomputed for the raw writer."""

    key: str
    body: bytes
    partition: int


def readings(count: int = ROWS, seed: int = 20261121) -> list[Reading]:
    """The same rows for every system and every run: JSON bodies of ~100-150 bytes."""
    rng = random.Random(seed)
    projects = [f"prj-{i:03d}-{rng.randrange(16**8):08x}" for i in range(PROJECTS)]
    rows = []
    for seq in range(count):
        project = rng.choice(projects)
        reading: dict[str, object] = {
            "project_id": project,
            "device": f"gw{rng.randrange(400):03d}-s{rng.randrange(64):02d}",
            "ts": 1_763_700_000_000 + seq * 250 + rng.randrange(250),
            "temp": round(rng.uniform(-20.0, 45.0), 2),
            "rh": round(rng.uniform(5.0, 99.0), 1),
            "seq": seq,
        }
        # Optional fields, as gateways differ: bodies range over ~100-150 bytes.
        if rng.random() < 0.6:
            reading["battery"] = round(rng.uniform(2.9, 4.2), 3)
        if rng.random() < 0.5:
            reading["co2"] = rng.randrange(400, 2000)
        if rng.random() < 0.3:
            reading["status"] = rng.choice(("ok", "warn", "alarm"))
        body = json.dumps(reading, separators=(",", ":")).encode()
        rows.append(Reading(project, body, partition_for_key(project.encode(), PARTITIONS)))
    return rows


# -- timed parallel runs -------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class WorkerResult:
    sent: int  # messages acknowledged inside the timed window
    warm: int  # messages sent before it (warm-up), still stored
    elapsed: float
    cpu: float  # this process's CPU seconds inside the window


@dataclass(frozen=True, kw_only=True)
class Measurement:
    workers: int
    sent: int
    warm: int
    elapsed: float  # the longest worker window
    cpu: float  # client CPU seconds, all workers

    @property
    def rate(self) -> float:
        return self.sent / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def cpu_micros(self) -> float:
        """Client CPU per message: on a small host, what caps many producers."""
        return self.cpu / self.sent * 1e6 if self.sent else 0.0


#: (index, workers, spec, barrier) -> result; must be a module-level function.
Worker = Callable[[int, int, Any, Barrier], WorkerResult]


def turns(systems: Sequence[str], rounds: int) -> list[tuple[str, ...]]:
    """The order of the systems in each of `rounds` rounds of side-by-side runs, turned by
    one every round (with two: alternating), so that no system always runs first."""
    return [(*systems[r % len(systems) :], *systems[: r % len(systems)]) for r in range(rounds)]


def timed_loop(
    barrier: Barrier, seconds: float, step: Callable[[], int], warm: int
) -> WorkerResult:
    """Wait for every worker, then call step (which returns messages sent) for `seconds`."""
    barrier.wait(BARRIER_TIMEOUT)
    cpu = time.process_time()
    start = now = time.perf_counter()
    deadline = start + seconds
    sent = 0
    while now < deadline:
        sent += step()
        now = time.perf_counter()
    return WorkerResult(sent=sent, warm=warm, elapsed=now - start, cpu=time.process_time() - cpu)


def run_parallel(worker: Worker, spec: object, workers: int, seconds: float) -> Measurement:
    """Start `workers` processes together behind a barrier; sum what they sent."""
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["benchmarks.producer"])
    barrier = ctx.Barrier(workers)
    results: Any = ctx.Queue()
    procs = [
        ctx.Process(target=_child, args=(worker, spec, i, workers, barrier, results), daemon=True)
        for i in range(workers)
    ]
    for proc in procs:
        proc.start()
    try:
        outcomes = _collect(results, procs, time.monotonic() + BARRIER_TIMEOUT + seconds + 60)
    except BaseException:
        for proc in procs:
            if proc.is_alive():
                proc.terminate()
        raise
    finally:
        for proc in procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.terminate()
    errors = [o for o in outcomes if isinstance(o, str)]
    if errors:
        raise BenchError(_first_cause(errors))
    done = [o for o in outcomes if isinstance(o, WorkerResult)]
    return Measurement(
        workers=workers,
        sent=sum(r.sent for r in done),
        warm=sum(r.warm for r in done),
        elapsed=max(r.elapsed for r in done),
        cpu=sum(r.cpu for r in done),
    )


def _collect(results: Any, procs: list[Any], deadline: float) -> list[WorkerResult | str]:
    """One outcome per worker; fails fast when a worker died without reporting."""
    outcomes: list[WorkerResult | str] = []
    while len(outcomes) < len(procs):
        try:
            outcomes.append(results.get(timeout=1.0))
            continue
        except Empty:
            pass
        codes = [p.exitcode for p in procs]
        if None not in codes or any(code not in (0, None) for code in codes):
            try:  # a result may have landed just after the timeout
                outcomes.append(results.get(timeout=2.0))
                continue
            except Empty:
                raise BenchError(
                    f"a worker exited without reporting (exit codes {codes}); see stderr"
                ) from None
        if time.monotonic() > deadline:
            raise BenchError("workers did not report in time")
    return outcomes


def run_in_child(target: Callable[[Any], None], arg: object, timeout: float = 120) -> None:
    """Run target(arg) in a fresh process, so whatever it leaves open dies with it."""
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["benchmarks.producer"])
    proc = ctx.Process(target=target, args=(arg,), daemon=True)
    proc.start()
    proc.join(timeout)
    if proc.is_alive():
        proc.terminate()
        raise BenchError(f"{target.__name__} did not finish within {timeout:.0f} s")
    if proc.exitcode != 0:
        raise BenchError(f"{target.__name__} failed (exit code {proc.exitcode}); see stderr")


def _child(
    worker: Worker, spec: object, index: int, workers: int, barrier: Barrier, results: Any
) -> None:
    try:
        results.put(worker(index, workers, spec, barrier))
    except BaseException:
        barrier.abort()  # release the others at once instead of after the timeout
        results.put(traceback.format_exc())


def _first_cause(errors: list[str]) -> str:
    """The traceback of the worker that failed first, not of those the barrier broke."""
    real = [e for e in errors if "BrokenBarrierError" not in e] or errors
    return real[0].strip().splitlines()[-1] + "\n" + real[0]
