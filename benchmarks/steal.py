"""CPU steal: the time the host gave this machine's cores to other guests (/proc/stat).

On a shared virtual machine a suite can lose a fifth of its cores to neighbours, and its
rates and CPU figures then swing from run to run whatever the code does. `make bench`
reads the counters before and after each suite and writes the share into the header of
every results file the suite wrote, so that a reader can tell a slow run from a slow
change. The parsing and the stamping are pure; only read() and mark() touch files.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

STAT = Path("/proc/stat")
LINE = "- CPU steal: "
_ANCHORS = ("- at start:", "- date:")


def cpu_times(stat: str) -> tuple[int, int]:
    """(steal, all) clock ticks of /proc/stat's line for all cores. Its first eight
    columns are user, nice, system, idle, iowait, irq, softirq and steal (guest time is
    counted in user already)."""
    for line in stat.splitlines():
        if line.startswith("cpu "):
            ticks = [int(field) for field in line.split()[1:9]]
            return (ticks[7] if len(ticks) == 8 else 0), sum(ticks)
    raise ValueError("no 'cpu' line in /proc/stat")


def share(before: tuple[int, int], after: tuple[int, int]) -> float | None:
    """The stolen share of the cores' time between two readings (None: no time passed)."""
    elapsed = after[1] - before[1]
    return None if elapsed <= 0 else (after[0] - before[0]) / elapsed


def stamp(text: str, stolen: float) -> str:
    """The results text with its steal line, after its 'at start' line (else its date
    line; else first), in place of one it had."""
    line = (
        f"{LINE}{stolen:.1%} (the cores' time the host gave to other guests during this "
        "suite; above a few percent, rates and CPU figures swing from run to run)"
    )
    lines = [kept for kept in text.split("\n") if not kept.startswith(LINE)]
    for anchor in _ANCHORS:
        at = next((i for i, kept in enumerate(lines) if kept.startswith(anchor)), None)
        if at is not None:
            lines.insert(at + 1, line)
            return "\n".join(lines)
    return "\n".join([line, *lines])


def read() -> tuple[int, int] | None:
    """The counters now; None where the system keeps none."""
    try:
        return cpu_times(STAT.read_text())
    except (OSError, ValueError):
        return None


def mark(files: Iterable[Path], since: float, before: tuple[int, int] | None) -> None:
    """Stamp each file written at or after `since` (time.time()) with the steal since
    `before`."""
    after = read()
    stolen = None if before is None or after is None else share(before, after)
    if stolen is None:
        return
    for path in files:
        if path.stat().st_mtime >= since:
            path.write_text(stamp(path.read_text(), stolen))
