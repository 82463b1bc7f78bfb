"""The admin suite's slow-client case: CLIENTS threads browse one API call for --seconds
with no other connection open, then again while IDLE connections sit open (half of them
silent, half stopped in the middle of a request head), side by side: requests per second
and the latency each client saw (wall time of a request, p50/p95/max)."""

from __future__ import annotations

import http.client
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

from benchmarks.purge import percentile

CLIENTS = 20
IDLE = 50
HALF_HEAD = b"GET /api/v1/groups HTTP/1.1\r\nHost: bench\r\nX-Slow: "


@dataclass(frozen=True, kw_only=True)
class Browse:
    idle: int
    requests: int
    seconds: float
    errors: int
    client_ms: list[float]

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


@contextmanager
def idle_connections(port: int, count: int) -> Iterator[None]:
    with ExitStack() as stack:
        for i in range(count):
            sock = stack.enter_context(socket.create_connection(("127.0.0.1", port)))
            if i % 2:
                sock.sendall(HALF_HEAD)
        yield


def browse(port: int, token: str, path: str, seconds: float, idle: int) -> Browse:
    """CLIENTS threads, each with a keep-alive connection, GET `path` for `seconds` while
    `idle` other connections stay open."""
    headers = {"Authorization": f"Bearer {token}"}
    barrier = threading.Barrier(CLIENTS + 1)
    lock = threading.Lock()
    done: list[float] = []
    errors = [0]
    stop = threading.Event()

    def one(conn: http.client.HTTPConnection) -> tuple[int, float]:
        started = time.perf_counter()
        conn.request("GET", path, headers=headers)
        answer = conn.getresponse()
        answer.read()
        return answer.status, (time.perf_counter() - started) * 1000

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        mine: list[float] = []
        failed = 0
        try:
            one(conn)
            barrier.wait()
            while not stop.is_set():
                status, ms = one(conn)
                if status == 200:
                    mine.append(ms)
                else:
                    failed += 1
        finally:
            conn.close()
            with lock:
                done.extend(mine)
                errors[0] += failed

    with idle_connections(port, idle):
        threads = [threading.Thread(target=client, daemon=True) for _ in range(CLIENTS)]
        for thread in threads:
            thread.start()
        barrier.wait()
        started = time.perf_counter()
        time.sleep(seconds)
        stop.set()
        for thread in threads:
            thread.join(timeout=180)
        elapsed = time.perf_counter() - started
    return Browse(idle=idle, requests=len(done), seconds=elapsed, errors=errors[0], client_ms=done)


def compare(port: int, token: str, path: str, seconds: float) -> list[Browse]:
    return [browse(port, token, path, seconds, idle) for idle in (0, IDLE)]


def render(path: str, results: list[Browse]) -> list[str]:
    def ms(values: list[float], q: float) -> str:
        return f"{percentile(values, q):.1f}" if values else "-"

    lines = [
        "",
        f"{CLIENTS} clients browsing `{path}` with and without {IDLE} idle connections "
        "open (half silent, half stopped in the middle of a request head); latency as "
        "each client saw it:",
        "",
        "| idle connections | requests | req/s | client p50 ms | p95 ms | max ms | errors |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        top = f"{max(r.client_ms):.1f}" if r.client_ms else "-"
        lines.append(
            f"| {r.idle} | {r.requests:,} | {r.rate:,.1f} | {ms(r.client_ms, 0.5)} "
            f"| {ms(r.client_ms, 0.95)} | {top} | {r.errors} |"
        )
    return lines
