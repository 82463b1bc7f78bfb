"""One contract for ems's background threads (the wake-up listener, the ack writer, the
membership's round and heartbeat, the run leases' renewer, the outbox relay), as River's
startstop gives its services one:

- start() runs the loop on a thread of its own, once: a second start() does nothing;
- stop() asks the loop to end and returns at once: it sets `stopping`, which the loop
  waits on between its turns, and calls the service's own wake-up (a loop blocked on
  something else, a queue or an event, is woken through it); stopping twice, or a
  service never started, is harmless;
- join(timeout) waits for the loop to end and says whether it did; stop_and_join() is
  both, the usual way to end a service.

The loop is a function of the service; what it does on a failure is its own business (each
of ems's loops logs and carries on: a background thread that dies would fail silently).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["Service"]


class Service:
    """A loop on a daemon thread named `name`, with start/stop/join. `run` is the loop; it
    returns once `stopping` is set (or when its work is done). `wake`, when given, is
    called by stop() to wake a loop that waits on something else than `stopping`.
    Services that stop together (a membership's round and heartbeat) may share one
    `stopping` event."""

    def __init__(
        self,
        name: str,
        run: Callable[[], None],
        *,
        wake: Callable[[], None] | None = None,
        stopping: threading.Event | None = None,
        daemon: bool = True,
    ) -> None:
        self.name = name
        #: Set by stop(): the loop ends at its next look at it.
        self.stopping = threading.Event() if stopping is None else stopping
        self._wake = wake
        self._thread = threading.Thread(target=run, name=name, daemon=daemon)
        self._lock = threading.Lock()

    @property
    def started(self) -> bool:
        return self._thread.ident is not None

    def start(self) -> None:
        """Run the loop on its thread; a service starts once (later calls do nothing)."""
        with self._lock:
            if not self.started:
                self._thread.start()

    def stop(self) -> None:
        """Ask the loop to end, without waiting for it."""
        self.stopping.set()
        if self._wake is not None:
            self._wake()

    def join(self, timeout: float | None = None) -> bool:
        """Wait up to `timeout` seconds (None: for as long as it takes) for the loop to
        end; whether it has ended (a service never started has)."""
        if self.started and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        return not self._thread.is_alive()

    def stop_and_join(self, timeout: float | None = None) -> bool:
        """stop(), then join(timeout)."""
        self.stop()
        return self.join(timeout)

    def is_alive(self) -> bool:
        return self._thread.is_alive()
