"""Wake-ups a consumer received: which partitions have news, and the high watermarks they
announced (for the lag gauge), filled from the subscription's thread."""

from __future__ import annotations

import threading

from ems.wakeups import parse_messages


class Inbox:
    def __init__(self) -> None:
        #: Set on news, on an ownership change and on stop: the consume loop's wait ends.
        self.wake = threading.Event()
        #: Partition -> high watermark known from wake-ups.
        self.known_high: dict[int, int] = {}
        #: The partitions whose news ends the loop's wait (None: every one); the others'
        #: are kept for the next look, which they do not bring forward.
        self.interest: frozenset[int] | None = None
        self._pending: dict[int, int] = {}
        self._lock = threading.Lock()

    def on_messages(self, payload: str) -> None:
        news = parse_messages(payload)
        with self._lock:
            for p, last in news.items():
                self._pending[p] = max(last, self._pending.get(p, last))
                self.known_high[p] = max(last + 1, self.known_high.get(p, 0))
        interest = self.interest
        if interest is None or not interest.isdisjoint(news):
            self.wake.set()

    def take(self) -> dict[int, int]:
        """Partition -> last offset announced since the last take."""
        with self._lock:
            pending, self._pending = self._pending, {}
        return pending
