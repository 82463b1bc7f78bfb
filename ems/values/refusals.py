"""Which refusals of anonymous callers the audit trail writes: a bounded sample, with a
count of the rest, so that a flood of bad requests costs rows by the minute, not by the
request.

Per client address, the first refusal of each window is written, carrying how many of
that address's refusals it stands for (itself and those held back since the address's
last written one). Over all addresses at most GLOBAL_PER_WINDOW are written per window;
refusals past that are counted as "other" and reported by the next written one. At most
TRACKED addresses are remembered (least recently refused first out; what an evicted
address held back goes to "other"). Nothing is lost from the count: a held-back refusal
is reported by a later written one, or by flush() when the process ends.

The state is this process's (each console worker keeps its own); the clock is a caller's
monotonic one.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

#: Seconds of one window.
WINDOW = 60.0
#: Rows written per window over all addresses, per process.
GLOBAL_PER_WINDOW = 20
#: Addresses remembered.
TRACKED = 10_000


@dataclass(frozen=True, slots=True)
class Admitted:
    """A refusal to write: the refusals of its address it stands for (itself included),
    and those of other addresses held back since the last written one."""

    refusals: int
    other: int


@dataclass(slots=True)
class _Address:
    window_start: float
    held: int = 0


class RefusalSampler:
    def __init__(
        self, window: float = WINDOW, per_window: int = GLOBAL_PER_WINDOW, tracked: int = TRACKED
    ) -> None:
        self._window = window
        self._per_window = per_window
        self._tracked = tracked
        self._addresses: OrderedDict[str, _Address] = OrderedDict()
        self._global_start = float("-inf")
        self._written = 0
        self._other = 0
        self._lock = threading.Lock()

    def admit(self, address: str, now: float) -> Admitted | None:
        """The refusal to write for this one, or None when it is held back (counted)."""
        with self._lock:
            if now - self._global_start >= self._window:
                self._global_start, self._written = now, 0
            seen = self._addresses.get(address)
            if seen is not None:
                self._addresses.move_to_end(address)
                if now - seen.window_start < self._window:
                    seen.held += 1
                    return None
            if self._written >= self._per_window:
                self._other += 1
                return None
            held = seen.held if seen is not None else 0
            self._addresses[address] = _Address(window_start=now)
            self._addresses.move_to_end(address)
            self._evict()
            self._written += 1
            other, self._other = self._other, 0
            return Admitted(refusals=held + 1, other=other)

    def flush(self) -> list[tuple[str, int]]:
        """Everything held back, as (address, refusals) to write now ("*" for other
        addresses'), and forget it."""
        with self._lock:
            out = [(a, s.held) for a, s in self._addresses.items() if s.held]
            if self._other:
                out.append(("*", self._other))
            for state in self._addresses.values():
                state.held = 0
            self._other = 0
            return out

    def _evict(self) -> None:
        while len(self._addresses) > self._tracked:
            _, state = self._addresses.popitem(last=False)
            self._other += state.held
