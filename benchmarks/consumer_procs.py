"""Long-lived benchmark processes the parent steers: start, wait for their events, sample
their memory, kill them. For runs that a single barrier and a result cannot describe
(drain then soak, rebalance, SIGKILL)."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
from collections.abc import Callable, Iterable
from queue import Empty
from typing import Any

import pymysql

from benchmarks.consumer_workers import child
from benchmarks.harness import BenchError, mysql_connect


class Fleet:
    """Processes started from a forkserver, each reporting (kind, index, payload) events."""

    def __init__(self) -> None:
        self.ctx = mp.get_context("forkserver")
        self.ctx.set_forkserver_preload(["benchmarks.consumer_workers"])
        self.events: Any = self.ctx.Queue()
        #: Lock-free stop flags (see consumer_workers.stop_when): consumers, producers.
        self.stop: Any = self.ctx.RawValue("b", 0)
        self.stop_producers: Any = self.ctx.RawValue("b", 0)
        self.procs: dict[int, Any] = {}
        self.killed: set[int] = set()
        self._inbox: dict[tuple[str, int], Any] = {}

    def spawn(self, index: int, target: Callable[..., None], *args: object) -> int:
        proc = self.ctx.Process(target=child, args=(target, self.events, index, *args), daemon=True)
        proc.start()
        self.procs[index] = proc
        return int(proc.pid or 0)

    def wait(self, kind: str, indices: Iterable[int], timeout: float) -> dict[int, Any]:
        """The payloads of event `kind` from each of these processes."""
        want = list(indices)
        deadline = time.monotonic() + timeout
        while any((kind, i) not in self._inbox for i in want):
            self.pump(min(0.5, max(0.0, deadline - time.monotonic())))
            if time.monotonic() > deadline:
                missing = [i for i in want if (kind, i) not in self._inbox]
                raise BenchError(f"no {kind!r} event from processes {missing} in {timeout:.0f} s")
        return {i: self._inbox.pop((kind, i)) for i in want}

    def pump(self, timeout: float) -> None:
        """Take the events that arrive within timeout; fail on an error or a dead process."""
        try:
            kind, index, payload = self.events.get(timeout=timeout)
        except Empty:
            pass
        else:
            if kind == "error":
                raise BenchError(payload.strip().splitlines()[-1] + "\n" + payload)
            self._inbox.setdefault((kind, index), payload)
        for index, proc in self.procs.items():
            if index not in self.killed and proc.exitcode not in (None, 0):
                raise BenchError(f"process {index} died (exit code {proc.exitcode}); see stderr")

    def kill(self, index: int) -> float:
        """SIGKILL a process; returns the wall time of the kill."""
        self.killed.add(index)
        os.kill(self.procs[index].pid, signal.SIGKILL)
        return time.time()

    def close(self) -> None:
        self.stop_producers.value = 1
        self.stop.value = 1
        for proc in self.procs.values():
            proc.join(timeout=30)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5)


def rss_mb(pid: int) -> float:
    """VmRSS of a process in MB (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except FileNotFoundError:
        pass
    return 0.0


def slope_per_minute(samples: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, MB) samples, in MB per minute."""
    if len(samples) < 2:
        return 0.0
    n = len(samples)
    mean_t = sum(t for t, _ in samples) / n
    mean_v = sum(v for _, v in samples) / n
    var = sum((t - mean_t) ** 2 for t, _ in samples)
    if var == 0:
        return 0.0
    cov = sum((t - mean_t) * (v - mean_v) for t, v in samples)
    return cov / var * 60


class Watcher:
    """One autocommit connection for tight polling of coordination rows."""

    def __init__(self, database_url: str) -> None:
        self.conn: pymysql.Connection = mysql_connect(database_url)

    def rows(self, sql: str, args: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
        with self.conn.cursor() as cursor:
            cursor.execute(sql, args)
            return list(cursor.fetchall())

    def owners(self, group_id: int) -> dict[int, tuple[str | None, str]]:
        """partition -> (client_id, state) of the group's assignment rows."""
        return {
            int(p): (c, s)
            for p, c, s in self.rows(
                "SELECT partition_no, client_id, state FROM partition_assignment "
                "WHERE group_id = %s",
                (group_id,),
            )
        }

    def until(self, check: Callable[[], bool], timeout: float, what: str) -> float:
        """Poll check every 10 ms; the wall time it first held."""
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                raise BenchError(f"{what}: not within {timeout:.0f} s")
            time.sleep(0.01)
        return time.time()

    def close(self) -> None:
        self.conn.close()
