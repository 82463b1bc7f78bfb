"""The admin suite: the console's pages at scale, served by gunicorn as `ems admin serve`
serves them.

One run, in its own database (ems_bench_admin, recreated): seed 5,000 topics of 8
partitions, 2,000 consumer groups and a group of 1,000 partitions (members, assignments,
committed offsets, offset snapshots, finished lag reports, some messages), a topic of
20,000 messages with its consumption log, 20,000 dead letters, 5,000 alarms, autoscaling
policies and decisions, 100,000 audit rows, and a day of snapshots and watermark captures
for the charts (see benchmarks/admin_seed.py); start `ems admin serve --workers 2` on a
free port, and time every page of benchmarks.admin_seed.PAGES and its JSON twin (when it
has one): the server time each answer reports in its Server-Timing header (p50, p95, max
over --admin-requests requests, after one warm-up request) and the table rows the HTML
renders (`<tr` inside `<tbody>`; the JSON's: the items of its lists). Then 20 clients,
each a thread with a keep-alive connection, request the big group's detail API, and then
the groups list API, for --seconds each: requests per second. Last, the groups list API
again, without and then with 50 idle connections open (benchmarks/admin_idle.py).

Targets: every page served in under 300 ms of server time (p95; reported, not asserted),
at most 100 table rows per page (the suite fails when a page renders more).
"""

from __future__ import annotations

import argparse
import http.client
import os
import re
import secrets
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks import admin_idle
from benchmarks.admin_dead import DEAD_LETTERS, grow, time_dead_pages
from benchmarks.admin_seed import BIG_GROUP, Scale, paths, rows_of, seed
from benchmarks.harness import BenchConfig, BenchError, fresh_database, mysql_connect, on_database
from benchmarks.purge import percentile
from benchmarks.report import environment
from ems.ops.accounts import Accounts

RESULTS = Path(__file__).resolve().parent / "results" / "admin-latest.md"
DATABASE = "ems_bench_admin"
TARGET_MS = 300.0
MAX_ROWS = 100
CLIENTS = 20
WORKERS = 2
#: The API call the slow-client case browses.
IDLE_PATH = "/api/v1/groups"
_TIMING = re.compile(r"app;dur=([\d.]+)")


def log(message: str) -> None:
    print(f"[bench admin] {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True, kw_only=True)
class PageTimes:
    label: str
    path: str
    server_ms: list[float]
    rows: int

    @property
    def met(self) -> bool:
        return percentile(self.server_ms, 0.95) < TARGET_MS


@dataclass(frozen=True, kw_only=True)
class Throughput:
    path: str
    requests: int
    seconds: float
    errors: int
    server_ms: list[float]

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


def recreate(cfg: BenchConfig, scale: Scale) -> float:
    """A fresh database at Alembic head, seeded; the seconds the seeding took."""
    fresh_database(cfg.settings)
    started = time.perf_counter()
    conn = mysql_connect(cfg.settings.database_url)
    try:
        conn.autocommit(False)
        seed(conn, scale)
        with conn.cursor() as cursor:  # fresh statistics for the optimizer, as in production
            cursor.execute("SHOW TABLES")
            tables = [row[0] for row in cursor.fetchall()]
            cursor.execute("ANALYZE TABLE " + ", ".join(f"`{t}`" for t in tables))
            cursor.fetchall()
    finally:
        conn.close()
    return time.perf_counter() - started


def admin_token(cfg: BenchConfig) -> str:
    """An admin account (the console will not start without one) and an admin token."""
    with Accounts(cfg.settings) as accounts:
        accounts.add_user("bench-admin", "admin", secrets.token_urlsafe(24))
        return accounts.create_token("bench", "admin", "bench")[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """`ems admin serve` in a process of its own, stopped on exit."""

    def __init__(self, cfg: BenchConfig, port: int) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("EMS_")}
        env |= {
            "EMS_DATABASE_URL": cfg.settings.database_url,
            "EMS_REDIS_URL": cfg.settings.redis_url,
            "EMS_ADMIN_SECRET_KEY": secrets.token_urlsafe(48),
        }
        command = [sys.executable, "-m", "ems.cli", "admin", "serve", "--host", "127.0.0.1"]
        command += ["--port", str(port), "--workers", str(WORKERS)]
        self.port = port
        self.proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)

    def __enter__(self) -> Server:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BenchError(f"ems admin serve exited with {self.proc.returncode}")
            try:
                status, _, _ = get(connect(self.port), "/healthz", {})
                if status == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.2)
        raise BenchError("ems admin serve did not answer /healthz within 60 s")

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def connect(port: int) -> http.client.HTTPConnection:
    return http.client.HTTPConnection("127.0.0.1", port, timeout=120)


def get(
    conn: http.client.HTTPConnection, path: str, headers: dict[str, str]
) -> tuple[int, float | None, bytes]:
    """(status, Server-Timing milliseconds, body) of one GET on a kept-alive connection."""
    conn.request("GET", path, headers=headers)
    response = conn.getresponse()
    body = response.read()
    found = _TIMING.fullmatch(response.getheader("Server-Timing") or "")
    return response.status, float(found.group(1)) if found else None, body


def time_pages(port: int, token: str, scale: Scale, requests: int) -> list[PageTimes]:
    headers = {"Authorization": f"Bearer {token}"}
    conn = connect(port)
    out = []
    try:
        for label, path in paths(scale):
            samples: list[float] = []
            rows = 0
            for n in range(requests + 1):  # the first warms the worker's caches
                status, ms, body = get(conn, path, headers)
                if status != 200 or ms is None:
                    raise BenchError(f"GET {path} answered {status}: {body[:200]!r}")
                if n:
                    samples.append(ms)
                rows = rows_of(path, body)
            out.append(PageTimes(label=label, path=path, server_ms=samples, rows=rows))
            log(f"{label}: p50 {percentile(samples, 0.5):.1f} ms, {rows} rows")
    finally:
        conn.close()
    return out


def throughput(port: int, token: str, path: str, seconds: float) -> Throughput:
    """CLIENTS threads, each with one keep-alive connection, GET `path` for `seconds`."""
    headers = {"Authorization": f"Bearer {token}"}
    barrier = threading.Barrier(CLIENTS + 1)
    lock = threading.Lock()
    done: list[float] = []
    errors = [0]
    stop = threading.Event()

    def client() -> None:
        conn = connect(port)
        mine: list[float] = []
        failed = 0
        try:
            get(conn, path, headers)  # connected and warm before the clock starts
            barrier.wait()
            while not stop.is_set():
                status, ms, _ = get(conn, path, headers)
                if status == 200 and ms is not None:
                    mine.append(ms)
                else:
                    failed += 1
        finally:
            conn.close()
            with lock:
                done.extend(mine)
                errors[0] += failed

    threads = [threading.Thread(target=client, daemon=True) for _ in range(CLIENTS)]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join(timeout=120)
    elapsed = time.perf_counter() - started
    return Throughput(
        path=path, requests=len(done), seconds=elapsed, errors=errors[0], server_ms=done
    )


def render(
    env: list[str],
    scale: Scale,
    seeded: float,
    pages: list[PageTimes],
    load: list[Throughput],
    idle: list[admin_idle.Browse],
) -> str:
    def ms(values: list[float], q: float) -> str:
        return f"{percentile(values, q):.1f}"

    lines = [
        "# Admin console benchmark (latest run)",
        "",
        f"`python -m benchmarks admin`: {scale.topics:,} topics of {scale.partitions} "
        f"partitions, {scale.groups:,} consumer groups ({scale.members} members each) and "
        f"one group of {scale.big_partitions:,} partitions ({scale.big_members} members), "
        f"with cursors, offset snapshots and {scale.reports} finished lag reports; a topic "
        f"of {scale.deep_messages:,} messages with its consumption log, "
        f"{scale.dead_letters:,} dead letters, {scale.alarms:,} alarms, autoscaling "
        f"policies on every {scale.autoscale_every}th group with {scale.decisions} "
        f"decisions each, {scale.audit_rows:,} audit rows, and offset snapshots and "
        f"watermark captures every 15 minutes over {scale.chart_hours} h for the charts; "
        "seeded in "
        f"{seeded:.0f} s; the console served by `ems admin serve` with {WORKERS} workers "
        "of 8 threads. "
        "Server time is what each answer's Server-Timing header says (the app's work: "
        f"sign-in check, statements, rendering); {len(pages[0].server_ms)} requests per "
        "page after one warm-up, one at a time.",
        "",
        *env,
        "",
        "| page | path | server p50 ms | p95 ms | max ms | rows | target | met? |",
        "|---|---|---:|---:|---:|---:|---|---|",
    ]
    for p in pages:
        rows = f"{p.rows}" if p.rows <= MAX_ROWS else f"**{p.rows}**"
        met = "yes" if p.met and p.rows <= MAX_ROWS else "**NO**"
        lines.append(
            f"| {p.label} | `{p.path}` | {ms(p.server_ms, 0.5)} | {ms(p.server_ms, 0.95)} "
            f"| {max(p.server_ms):.1f} | {rows} | p95 < {TARGET_MS:.0f} ms, rows <= {MAX_ROWS} "
            f"| {met} |"
        )
    lines += [
        "",
        f"Requests per second with {CLIENTS} concurrent clients (threads with keep-alive "
        f"connections, all on the benchmark's host) against the {WORKERS} workers:",
        "",
        "| API call | requests | req/s | server p50 ms | server p95 ms | errors |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for t in load:
        lines.append(
            f"| `{t.path}` | {t.requests:,} | {t.rate:,.1f} | {ms(t.server_ms, 0.5)} "
            f"| {ms(t.server_ms, 0.95)} | {t.errors} |"
        )
    lines += admin_idle.render(IDLE_PATH, idle)
    return "\n".join([*lines, ""])


def run(cfg: BenchConfig, args: argparse.Namespace) -> int:
    own = on_database(cfg, DATABASE)
    scale = Scale()
    log(
        f"seeding {scale.topics:,} topics, {scale.groups:,} groups and a group of "
        f"{scale.big_partitions:,} partitions"
    )
    seeded = recreate(own, scale)
    token = admin_token(own)
    env = environment(own)
    with Server(own, free_port()) as server:
        log(f"serving on port {server.port}; timing {len(paths(scale))} pages")
        pages = time_pages(server.port, token, scale, args.admin_requests)
        load = []
        for path in (f"/api/v1/groups/{BIG_GROUP}", "/api/v1/groups"):
            log(f"{CLIENTS} clients on {path} for {cfg.seconds:g} s")
            load.append(throughput(server.port, token, path, cfg.seconds))
        log(f"{CLIENTS} clients on {IDLE_PATH}, then again with {admin_idle.IDLE} idle connections")
        idle = admin_idle.compare(server.port, token, IDLE_PATH, cfg.seconds)
        log(f"growing the dead letters to {DEAD_LETTERS:,}")
        conn = mysql_connect(own.settings.database_url)
        try:
            grow(conn, scale)
        finally:
            conn.close()
        for label, path, samples in time_dead_pages(server.port, token, scale, args.admin_requests):
            pages.append(PageTimes(label=label, path=path, server_ms=samples, rows=0))
            log(f"{label}: p50 {percentile(samples, 0.5):.1f} ms")
    text = render(env, scale, seeded, pages, load, idle)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(text)
    print(text)
    too_many = [p.label for p in pages if p.rows > MAX_ROWS]
    if too_many:
        log(f"more than {MAX_ROWS} rows: {', '.join(too_many)}")
    return 1 if too_many or any(t.errors for t in [*load, *idle]) else 0
