"""CPU seconds used by local processes (Linux /proc): where a benchmark's time goes."""

from __future__ import annotations

import os
from pathlib import Path

#: Process names of a MySQL-compatible server.
SERVER_NAMES = ("mariadbd", "mysqld")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process has used so far."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    # Fields after the command name, which sits in parentheses and may hold spaces.
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def local_server_pid() -> int | None:
    """The database server's pid when it runs on this machine, else None."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            name = (entry / "comm").read_text().strip()
        except OSError:  # the process ended while we looked
            continue
        if name in SERVER_NAMES:
            return int(entry.name)
    return None
