"""What a member reports with each lease renewal: its CPU and its load.

The consume loop counts the messages it handles; the membership thread samples the count
and the process CPU once per renewal and turns them into rates over the time in between
(monotonic clock: a duration measured here, not an expiry compared with another clock).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import psutil  # type: ignore[import-untyped]  # no stubs pinned


@dataclass(frozen=True, kw_only=True, slots=True)
class LoadReport:
    #: CPU of this process since the previous report, in percent of one core (psutil's
    #: Process.cpu_percent: a process busy on two cores reports 200).
    cpu_percent: float
    #: Messages handled per second since the previous report.
    load_rate: float


class LoadMeter:
    """A thread-safe count of handled messages, sampled into rates."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._handled = 0
        self._process = psutil.Process()
        self._process.cpu_percent(None)  # the first call only starts the measurement
        self._since = time.monotonic()

    def add(self, handled: int) -> None:
        """Count messages handled (called by the consume loop once per batch)."""
        if handled:
            with self._lock:
                self._handled += handled

    def sample(self) -> LoadReport:
        """CPU and load since the previous sample, and start the next interval."""
        now = time.monotonic()
        with self._lock:
            handled, self._handled = self._handled, 0
        elapsed, self._since = now - self._since, now
        cpu = self._process.cpu_percent(None)
        rate = handled / elapsed if elapsed > 0 else 0.0
        return LoadReport(cpu_percent=round(cpu, 2), load_rate=round(rate, 3))
