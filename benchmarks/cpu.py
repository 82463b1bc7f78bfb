"""CPU seconds used by local processes (Linux /proc): where a benchmark's time goes."""

from __future__ import annotations

import os
from pathlib import Path

#: Process names of a MySQL-compatible server.
SERVER_NAMES = ("mariadbd", "mysqld")


def stat_fields(path: str | Path) -> list[str]:
    """The fields of a /proc stat file (a process's or a thread's) after the command
    name, which sits in parentheses and may hold spaces and parentheses: state, ppid,
    ... (proc(5) numbers them from 3). OSError once the process or thread has ended."""
    return Path(path).read_text().rsplit(")", 1)[1].split()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process has used so far."""
    fields = stat_fields(f"/proc/{pid}/stat")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def local_server_pid() -> int | None:
    """The database server's pid when it runs on this machine, else None: the oldest
    (lowest pid) when several run, the machine's own rather than a test's."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            name = (entry / "comm").read_text().strip()
        except OSError:  # the process ended while we looked
            continue
        if name in SERVER_NAMES:
            found.append(int(entry.name))
    return min(found, default=None)


def pid_of_thread(tid: int) -> int | None:
    """The process a thread belongs to (the server whose connection it serves: a machine
    may run several), or None once it has ended."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (entry / "task" / str(tid)).exists():
            return int(entry.name)
    return None


def thread_cpu_seconds(pid: int, tid: int) -> float | None:
    """User + system CPU time one thread of a process has used so far (None once ended)."""
    try:
        fields = stat_fields(f"/proc/{pid}/task/{tid}/stat")
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_ticks() -> tuple[int, int]:
    """This machine's (idle, total) CPU ticks since boot, over all cores (/proc/stat)."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return values[3] + values[4], sum(values)  # idle and iowait count as idle


def busy_share(before: tuple[int, int], after: tuple[int, int]) -> float:
    """The share of the machine's CPU time that was busy between two machine_ticks()."""
    idle, total = after[0] - before[0], after[1] - before[1]
    return 1 - idle / total if total else 0.0
