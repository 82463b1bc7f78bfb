"""A timeline of what a member did during a fault: each traced call's start, duration,
thread and outcome, and each connection its pools opened. A test prints it when it fails,
so that a failure seen once, under load, says where the time went."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from ems.store import driver


class Timeline:
    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self._lines: list[tuple[float, str]] = []
        self._lock = threading.Lock()

    def note(self, start: float, what: str) -> None:
        line = f"{start - self.t0:7.3f} s  {threading.current_thread().name:<15} {what}"
        with self._lock:
            self._lines.append((start, line))

    def mark(self, what: str) -> None:
        self.note(time.monotonic(), what)

    def trace(self, monkeypatch: pytest.MonkeyPatch, owner: type, name: str) -> None:
        """Note each call of method `name` of class `owner`: start, duration, outcome."""
        call: Callable[..., Any] = getattr(owner, name)
        label = f"{owner.__name__}.{name}"

        def traced(*args: Any, **kwargs: Any) -> Any:
            start = time.monotonic()
            try:
                result = call(*args, **kwargs)
            except BaseException as exc:
                self.note(start, f"{label} {_took(start)} raised {exc!r:.80}")
                raise
            self.note(start, f"{label} {_took(start)} -> {result!r:.60}")
            return result

        monkeypatch.setattr(owner, name, traced)

    def watch(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Note each MySQL connection the process opens (its pool's, the producer's, a
        lease renewal's own: all open through ems.store.driver.connect), from the start
        of the connect."""
        opened = driver.connect

        def connect(*args: Any, **kwargs: Any) -> Any:
            start = time.monotonic()
            try:
                return opened(*args, **kwargs)
            finally:
                self.note(start, f"new connection {_took(start)}")

        monkeypatch.setattr(driver, "connect", connect)

    def __str__(self) -> str:
        with self._lock:
            return "\n".join(line for _, line in sorted(self._lines))


def _took(start: float) -> str:
    return f"took {(time.monotonic() - start) * 1000:.0f} ms"
